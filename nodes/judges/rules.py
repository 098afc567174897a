"""Transparent question rules for the local backend: does a question need documents, how many
hops does it take, and does it point at something ("this API", "它") nothing has named yet.

Every rule is a regular expression or a count, returned as a feature so a caller can see why a
question was classified the way it was. The multi-step threshold was checked on the rag-eval
fixture (HotpotQA questions are multi-hop, the rest single-hop); see the README.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reflexrag.providers.text import is_chinese, keywords

_CHITCHAT_RE = re.compile(
    r"^\s*(hi|hello|hey|thanks|thank you|good (morning|afternoon|evening|night)|bye|goodbye|"
    r"how are you|你好|您好|谢谢|多谢|再见|早上好|晚上好)[\s!.?,！。？，]*$",
    re.IGNORECASE,
)
_ARITHMETIC_RE = re.compile(
    r"^\s*(what is|what's|calculate|compute|计算)?\s*[\d\s+\-*/().^%=]+[?？]?\s*$", re.I
)
_CODE_TASK_RE = re.compile(
    r"\b(write|implement|refactor|debug|fix)\b.*\b(function|code|script|class|program|regex|query|sql)\b"
    r"|(写|编写|实现).{0,6}(函数|代码|脚本|程序|正则)",
    re.IGNORECASE,
)

_COMPARISON_RE = re.compile(
    r"\b(compare[sd]?|comparison|versus|vs\.?|difference between|differ|both|either|neither|"
    r"same|older|younger|earlier|later|longer|shorter|larger|smaller)\b"
    r"|对比|比较|区别|差异|异同|哪个更|哪一个更|相同|一样|都是",
    re.IGNORECASE,
)
_EXPLANATION_RE = re.compile(
    r"\bwhy\b|\bhow (?!many|much|long|old|far)|为什么|为何|如何|怎么|怎样", re.IGNORECASE
)
# A relative clause or possessive chain hides an intermediate entity (a "bridge"):
# "the film that was shot in ...", "a musician whose godfather ...", "X的作者的出生地".
_BRIDGE_RE = re.compile(
    r"\b(the|a|an)\s+([\w-]+\s+){0,3}[\w-]+\s+(that|which|who|whose|where)\b|\bwhose\b"
    r"|\bby what\b|\bof the \w+ (that|which|who)\b|的[^的，。？?]{1,8}的",
    re.IGNORECASE,
)
_MULTI_PART_RE = re.compile(
    r"[?？].+[?？]|[;；]|\band (what|how|why|who|when|where|which)\b|以及|并且|分别|同时", re.I
)
_CAPITALIZED_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
_LATIN_IN_CHINESE_RE = re.compile(r"[A-Za-z][\w.+-]*")
_QUOTED_RE = re.compile(r"[\"“《「『'][^\"”》」』']{2,}[\"”》」』']")
_NUMBER_RE = re.compile(r"\d")
# A demonstrative or pronoun pointing at something the question itself never names.
_QUESTION_RE = re.compile(
    r"[?？]\s*$|^\s*(who|whom|whose|what|when|where|which|why|how|is|are|was|were|do|does|"
    r"did|can|could|has|have|had|name|list|tell me)\b"
    r"|什么|谁|哪|何|几|多少|怎么|如何|为什么|是否|吗|呢",
    re.IGNORECASE,
)
_DEMONSTRATIVE_RE = re.compile(
    r"\b(this|that|these|those)\s+(?!is\b|was\b|are\b|were\b|has\b|had\b|the\b|a\b)[A-Za-z][\w-]*"
    r"|(这个|那个|这些|那些|这种|那种|这款|那款|该)([A-Za-z]+|[\u4e00-\u9fff]{1,2})",
    re.IGNORECASE,
)
_PRONOUN_RE = re.compile(r"\b(it|its|they|them|their|he|him|his|she|her)\b|它们|它", re.IGNORECASE)
_CONJUNCTION_RE = re.compile(r"\S\s*(\band\b|\bor\b|\bvs\.?|和|与|跟|及|还是)\s*\S", re.I)
MULTI_STEP_SCORE = 3
LONG_QUESTION_WORDS = 18
LONG_QUESTION_CHARS = 35


def no_retrieval_reason(question: str) -> str | None:
    """Why the question needs no documents at all, or None when it might."""
    if _CHITCHAT_RE.match(question):
        return "small talk"
    if _ARITHMETIC_RE.match(question) and re.search(r"\d", question):
        return "arithmetic"
    if _CODE_TASK_RE.search(question):
        return "a coding task, not a question about documents"
    return None


def is_question(text: str) -> bool:
    """A request for information (a wh-word, an inverted verb, a question mark), not a
    command or a task."""
    return bool(_QUESTION_RE.search(text))


# Requests to make new text, which no document holds: "write a haiku", "tell me a joke", 写一首诗.
_WRITING_TASK_RE = re.compile(
    r"^\s*(?:please\s+)?(?:write|compose|draft|translate|rewrite|paraphrase|invent|make up"
    r"|tell me a (?:joke|story|poem))\b|^\s*请?(?:写|翻译|创作|编一)",
    re.IGNORECASE,
)


def asks_about_facts(question: str) -> bool:
    """A question, or a query typed as keywords ("statue coming out of the ground in
    washington dc"), that no rule excuses (small talk, arithmetic, a coding or writing task):
    the knowledge base, not a model's guess at what it holds, decides whether it has the
    answer."""
    if no_retrieval_reason(question) is not None:
        return False
    return is_question(question) or not _WRITING_TASK_RE.search(question)


def entities(question: str) -> list[str]:
    """Names a question mentions: capitalized phrases (not the first word), quotes, titles."""
    if is_chinese(question):
        found = [m.group(0) for m in _LATIN_IN_CHINESE_RE.finditer(question)]
    else:
        found = [m.group(0) for m in _CAPITALIZED_RE.finditer(question.strip())]
    found += [m.group(0).strip("\"“”《》「」『』'") for m in _QUOTED_RE.finditer(question)]
    return list(dict.fromkeys(found))


def unresolved_reference(question: str, history: Sequence[str] = ()) -> str | None:
    """The phrase ("this API", "它") the question points with, when nothing can resolve it:
    no earlier question in the thread, and no name, number or subject in the question itself."""
    if history:
        return None
    demonstrative = _DEMONSTRATIVE_RE.search(question)
    pronoun = _PRONOUN_RE.search(question)
    if pronoun and not demonstrative:
        # "what did the dadaists do and why did they ..." names its subject before the pronoun;
        # "what does it mean for a knot to be ..." after it ("it" only fills a slot).
        before, after = question[: pronoun.start()], question[pronoun.end() :]
        if keywords(before) or entities(before) or len(keywords(after)) > 2:
            return None
        return pronoun.group(0)
    if demonstrative is None:
        return None
    phrase = demonstrative.group(0)
    if re.search(r"\s[A-Z][a-z]", phrase):
        return None  # "that Cydippids" names what it points at ("this API" does not)
    rest = question.replace(phrase, " ")
    names = [name for name in entities(rest) if name.lower() not in phrase.lower()]
    if names or _NUMBER_RE.search(rest):
        return None
    # Relation words ("the author of", "的参数") do not say which thing is meant; a question
    # with three or more other content words usually does.
    referent = set(keywords(phrase))
    content = [term for term in keywords(rest) if term not in referent]
    return phrase.strip() if len(content) <= 2 else None


def clarifying_question(question: str, phrase: str) -> str:
    if is_chinese(question):
        return f"您说的“{phrase}”具体指什么？请告诉我名称。"
    return f'Which one do you mean by "{phrase}"? Please name it.'


def complexity_features(question: str) -> dict[str, Any]:
    """The measurable features the level is scored from."""
    chinese = is_chinese(question)
    length = len(re.sub(r"\s", "", question)) if chinese else len(question.split())
    return {
        "length": length,
        "long": length > (LONG_QUESTION_CHARS if chinese else LONG_QUESTION_WORDS),
        "entities": len(entities(question)),
        "numbers": len(re.findall(r"\d+", question)),
        "comparison": bool(_COMPARISON_RE.search(question)),
        "two_subjects": len(entities(question)) >= 2 or bool(_CONJUNCTION_RE.search(question)),
        "explanation": bool(_EXPLANATION_RE.search(question)),
        "bridge": bool(_BRIDGE_RE.search(question)),
        "multi_part": bool(_MULTI_PART_RE.search(question)),
    }


def complexity_score(features: dict[str, Any]) -> tuple[int, list[str]]:
    """Points towards multi-step retrieval and the features that earned them."""
    points = {
        # Comparing two things or following a bridge entity takes one lookup per hop.
        "comparison": 3 if features["comparison"] and features["two_subjects"] else 0,
        "bridge": 2 if features["bridge"] else 0,
        "multi_part": 2 if features["multi_part"] else 0,
        "entities": 1 if features["entities"] >= 2 else 0,
        "long": 1 if features["long"] else 0,
        "explanation": 1 if features["explanation"] else 0,
    }
    return sum(points.values()), [name for name, value in points.items() if value]
