"""Reading a question for what it asks, and finding that thing in a sentence (local backend).

:func:`question_focus` names the kind of answer a question wants from its *main* question word
(the first one: "Who can enforce ... when member states ..." wants a person, not a date).
:func:`answer_span` then picks, inside a supporting sentence, the words that answer: a date, a
number, a name (every name of a list when several things are asked for), what the sentence
says a thing "is called", the noun phrase built on the noun a "what N" question names, or
the run of words next to the question's own words that the question does not already contain
(reading-comprehension questions reuse the passage's wording, so the answer sits in the gap).
Citations are never answers. Questions that want an explanation get the whole sentence, and
so do English phrases that are neither a name nor hold a number (a guess at where a phrase
ends).
Chinese "which N / what / who" questions are read with jieba's part-of-speech tags on the
Simplified form of the text (:func:`_chinese_phrase`).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from reflexrag.providers.text import (
    CHINESE_STOPWORDS,
    ENGLISH_STOPWORDS,
    blank_citations,
    is_chinese,
    segment,
    split_sentences,
    tagged_segment,
    terms,
)

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_SEASONS = r"[春夏秋冬](?:天|季)|\b(?:winter|spring|summer|autumn)s?\b"
DATE_RE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\.?,?\s+\d{{3,4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{3,4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{3,4}}"
    r"|(?:the\s+)?\d{3,4}s"
    r"|(?:1[0-9]|20)\d{2}(?:\s*(?:–|-|to)\s*(?:1[0-9]|20)?\d{2})?"
    r"|\d{1,2}(?:st|nd|rd|th)\s+century)\b"
    r"|(?:公元前?)?\d{1,4}\s*年(?:\s*\d{1,2}\s*月)?(?:\s*\d{1,2}\s*[日號号])?"
    r"|\d{1,2}\s*月\s*\d{1,2}\s*[日號号]"
    r"|[一二三四五六七八九十〇零百千]+年(?:[一二三四五六七八九十]+月)?"
    # Centuries and seasons answer "when" too, and a time of day, when something happens
    # daily ("opens at 10:00", "closes at 9 p.m.", 下午3点).
    rf"|\d{{1,2}}\s*世[纪紀]|{_SEASONS}"
    r"|\b\d{1,2}[:：]\d{2}\b|\b\d{1,2}\s*(?:[ap]\.m\.|[ap]m\b)|\b(?:noon|midnight)\b"
    r"|(?:上午|下午|晚上|早上|凌晨|中午)\s*(?:\d{1,2}|[一二三四五六七八九十]{1,3})\s*[点點时時]",
    re.IGNORECASE,
)
_SEASON_RE = re.compile(_SEASONS, re.IGNORECASE)
_MONTH_RE = re.compile(rf"\b(?:{_MONTHS})\b", re.IGNORECASE)
NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
    "fifty|hundred|thousand|million|billion|dozen|half"
)
NUMBER_RE = re.compile(
    rf"(?:about |around |over |nearly |more than |less than |approximately )?"
    rf"(?:[$€£¥]\s?)?(?:\d[\d,]*(?:\.\d+)?|(?:{NUMBER_WORDS})(?:[\s-](?:{NUMBER_WORDS}))*)"
    r"(?:\s?(?:%|percent|per cent|[a-z]+(?:\s(?:of|per)\s[a-z]+)?))?"
    r"|[\d一二三四五六七八九十百千万萬亿億两兩〇零.,]+\s*(?:%|％|[^\s\d，。、；：]{1,2})?",
    re.IGNORECASE,
)
# Words of a name stay on one line: a title's last word and the next line's first are two.
_NAME_RE = re.compile(
    r"\b[A-Z][\w'’.-]*"
    r"(?:[^\S\n]+(?:of|de|da|van|von|der|the|&|du|la|le|y)?[^\S\n]*[A-Z][\w'’.-]*)*"
)
_AUXILIARIES = (
    "is|are|was|were|do|does|did|can|could|will|would|has|have|had|should|shall|may|might|must"
)
_QUESTION_WORDS = "who|whom|whose|when|where|which|what|how|why"
_WH_RE = re.compile(
    rf"\b({_QUESTION_WORDS}|in what|what year|{_AUXILIARIES})\b",
    re.IGNORECASE,
)
# "Is it …?", or after a leading phrase: "After the report by The Age …, did TechCrunch …?"
_YES_NO_RE = re.compile(rf"(?:^\s*|[,;]\s+)(?:{_AUXILIARIES})\b", re.IGNORECASE)
# A question word anywhere in a text ("who", "which", …).
QUESTION_WORD_RE = re.compile(rf"\b(?:{_QUESTION_WORDS})\b", re.IGNORECASE)
_ZH_KINDS = (
    (
        "date",
        re.compile(
            r"哪一?年|何年|何時|何时|什麼時候|什么时候|哪一?天|幾月|几月|日期|年份|哪一?個朝代"
            r"|(?:西元|公元|民國|民国)[幾几]年|哪一?(?:個|个)?世[纪紀]|什[么麼]時間|什[么麼]时间"
            r"|哪一?(?:個|个)?季[节節]"
        ),
    ),
    ("number", re.compile(r"多少|幾|几|多大|多長|多长|多高|多遠|多远|多久")),
    ("person", re.compile(r"誰|谁|哪一?位|哪些人")),
    (
        "place",
        re.compile(
            r"哪裡|哪里|哪兒|哪儿|何處|何处|何地|哪一?個(?:地方|國家|城市)|哪个(?:地方|国家|城市)"
        ),
    ),
    (
        "description",
        re.compile(
            # 為 after 因/作/成/稱/認 belongs to that word: 因為什麼東西 is "because of what
            # thing", not "why".
            r"(?<![因作成稱称認认])(?:為什麼|为什么|為何|为何)|如何|怎樣|怎样|怎麼|怎么|原因"
            r"|^什[么麼]是|是什[么麼][？?]?$"
            r"|介[绍紹]|解[释釋]|做了什[么麼]|有什[么麼](?:特[点點]|作用|用[处處]|意[义義])"
            r"|什[么麼]意思"
        ),
    ),
    # 是否 asks yes or no unless its clause describes the thing asked for ("測量患者是否有
    # 高血壓的方法是？": the way to tell whether, asked by the copula that ends the question).
    (
        "yesno",
        re.compile(
            r"^(?!.*是否[^，,。；;]*的[^，,。；;]*[是為为]\s*[？?]?\s*$).*是否|[嗎吗]\s*[？?]?\s*$"
        ),
    ),
)
_EN_DESCRIPTION_RE = re.compile(
    r"^\s*(why|how (?!many|much|long|old|far|large|big|tall|often)|describe|explain"
    r"|what (is|are|was|were|(?:could|might|may|would) be) the (relationship|difference|role"
    r"|purpose|effect|impact"
    r"|implication|significance|reason|mechanism|function|meaning|definition|history"
    r"|(?:main |major |key )?(?:conclusions?|findings?|results?|focus|aim|goal|objective))\b"
    # What a text reports, claims or concludes is a statement, not a name in it.
    r"|what (?:does|do|did) .* (?:mean|do|report|claim|show|find|suggest|conclude|propose"
    r"|say|state|argue|reveal|demonstrate)\b|what happens"
    r"|what (?:could|might|may|would) (?:account for|explain))",
    re.IGNORECASE,
)
# "What is CRAG?": a definition, not a fact inside a sentence.
_DEFINITION_RE = re.compile(
    r"^\s*what(?:'s| is| are)\s+(?:an?\s+|the\s+)?(?P<term>[\w-]+(?:\s[\w-]+)?)\s*\??\s*$",
    re.I,
)
_ZH_DEFINITION_RE = re.compile(r"^\s*什[么麼]是(?P<term>[^？?，,。]{1,20})[？?]?\s*$")


def defined_term(question: str) -> str | None:
    """The term a definition question asks about: "CRAG" in "What is CRAG?", 什么是CRAG？."""
    match = _DEFINITION_RE.match(question) or _ZH_DEFINITION_RE.match(question)
    return match.group("term").strip() if match else None


_EN_KIND = {
    "who": "person",
    "whom": "person",
    "whose": "person",
    "when": "date",
    "where": "place",
    "what year": "date",
    "why": "description",
}
_DATE_NOUN_RE = re.compile(
    r"\b(?:what|which|in what|in which)\s+(year|date|month|day|century|decade|era|period)\b", re.I
)
_NUMBER_Q_RE = re.compile(
    r"\bhow (many|much|long|old|far|large|big|tall|often)\b"
    # "What is the (mortality) rate of …": a measure, answered by a number.
    r"|\bwhat (?:is|was|are|were) the (?:[\w-]+ )?(?:percentage|proportion|rate|ratio|number"
    r"|amount|incidence|prevalence|fraction) of\b|\bwhat (?:percent|percentage|proportion)\b",
    re.I,
)


@dataclass(frozen=True)
class Focus:
    """What a question asks for."""

    kind: str
    """date, number, person, place, yesno, description, or thing (a name or a phrase)."""
    terms: frozenset[str]
    """The question's content terms (what the answer sits next to)."""

    @property
    def short(self) -> bool:
        """Answered by a span rather than a whole sentence."""
        return self.kind not in ("description", "yesno")


@lru_cache(maxsize=2048)
def question_focus(question: str) -> Focus:
    """The kind of answer the question's main question word asks for."""
    question_terms = frozenset(terms(question, for_search=False))
    if is_chinese(question):
        for kind, pattern in _ZH_KINDS:
            if pattern.search(question):
                return Focus(kind, question_terms)
        return Focus("thing", question_terms)
    question = " ".join(question.split())  # "What  could …": the patterns read one space
    if _NUMBER_Q_RE.search(question):
        return Focus("number", question_terms)
    if _DATE_NOUN_RE.search(question):
        return Focus("date", question_terms)
    if (auxiliary := _YES_NO_RE.search(question)) and not QUESTION_WORD_RE.search(
        question, 0, auxiliary.start()
    ):
        return Focus("yesno", question_terms)
    if _EN_DESCRIPTION_RE.match(question) or _DEFINITION_RE.match(question):
        return Focus("description", question_terms)
    first = _WH_RE.search(question)
    if first is None:
        # "show me on a map where ecuador is", "gimme shelter history": a topic, not a fact.
        return Focus("description", question_terms)
    word = first.group(1).lower()
    if re.fullmatch(_AUXILIARIES, word) and (asked := QUESTION_WORD_RE.findall(question)):
        # A question put as a statement asks with its last question word ("The manuscript …
        # is in the hand of a musician whose godfather is whom?"): the verb before it is
        # the statement's, and a question word before it opens a relative clause.
        word = asked[-1].lower()
    return Focus(_EN_KIND.get(word, "thing"), question_terms)


# "What year …", "in which century …": the noun names the kind of answer asked for, and a
# sentence that answers says the year ("Tesla died on 7 January 1943."), not the word; a
# sentence that does say it ("In the years after …") is no nearer the answer. Chinese
# question words hold their noun already (哪一年 is one word, and a stopword).
_CALENDAR_NOUNS = frozenset({"year", "date", "month", "day", "century", "decade"})
_WH_NOUN_RE = re.compile(r"\b(?:what|which)\s+(\w+)", re.IGNORECASE)


def matched_terms(question: str) -> list[str]:
    """The terms of ``question`` a text answering it is matched on: :func:`terms`, less the
    noun of a calendar question word ("year" of "What year did Tesla die?")."""
    found = terms(question)
    nouns = {lemma for m in _WH_NOUN_RE.finditer(question) for lemma in terms(m.group(1))}
    asked = nouns & _CALENDAR_NOUNS
    return [term for term in found if term not in asked] if asked else found


def has_kind(kind: str, text: str) -> bool:
    """Whether ``text`` holds something of the kind asked for (names for people and places)."""
    if kind == "date":
        return bool(DATE_RE.search(text))
    if kind == "number":
        return bool(re.search(r"\d|[一二三四五六七八九十百千万萬亿億两兩]", text)) or bool(
            re.search(rf"\b(?:{NUMBER_WORDS})\b", text, re.IGNORECASE)
        )
    if kind in ("person", "place") and not is_chinese(text):
        return bool(_NAME_RE.search(text[1:]))  # not the sentence's capital first letter
    return True


def asked_kind(question: str) -> str:
    """The kind of thing ``question`` asks for: its focus's kind, or "year" for a date
    question asking which year."""
    kind = question_focus(question).kind
    return "year" if kind == "date" and _YEAR_Q_RE.search(question) else kind


def holds_kind(question: str, text: str) -> bool:
    """Whether ``text`` holds the kind of thing ``question`` asks for, as :func:`has_kind`
    tells; a question asking which year wants a year, and a day and month are not one
    ("9月2日" for 在哪一年, "on 2 September" for "in what year")."""
    kind = asked_kind(question)
    return bool(_YEAR_RE.search(text)) if kind == "year" else has_kind(kind, text)


POSSESSIVE_RE = re.compile(r"['’]s?$")
"""The possessive ending of a name ("Altman’s", "Jones'")."""


def names_in(text: str) -> list[str]:
    """Capitalised names in English text, sentence starts included ("Sam Bankman-Fried
    said…"), without a leading common word ("The", "In") or a possessive ("Altman’s").
    A name never runs across sentences ("Battle of Dalan Balzhut. Jamukha"): the text is split
    by :func:`split_sentences`, which knows initials and titles ("Michael E. Mann", "U.S.
    Army", "Dr. Ruth")."""
    return [
        name
        for sentence in split_sentences(text)
        for match in _NAME_RE.finditer(sentence)
        for name in _as_name(match.group(0).split())
    ]


def _as_name(words: list[str]) -> list[str]:
    """The name these capitalised words make, if any (none, or one, in a list)."""
    while words and words[0].lower() in ENGLISH_STOPWORDS:
        words = words[1:]
    if not words:
        return []
    words = [*words[:-1], POSSESSIVE_RE.sub("", words[-1].rstrip("."))]
    if len(words) == 1 and len(words[0]) < 3:
        return []
    return [" ".join(words)]


def full_name(name: str, names: Iterable[str]) -> str:
    """The fuller form of ``name`` among the ``names`` documents use (:func:`names_in`):
    "Altman" → "Sam Altman", the shortest longer name holding it word for word, provided every
    longer form holds that one too. "OpenAI CEO Sam Altman" and "Sam Altman" make "Sam Altman";
    "Google Search" and "Google Play" say nothing certain about "Google", which stays."""
    words = tuple(name.split())
    longer = {
        found
        for found in (tuple(other.split()) for other in names)
        if len(found) > len(words) and holds_words(found, words)
    }
    if not longer:
        return name
    shortest = min(longer, key=len)
    return " ".join(shortest) if all(holds_words(form, shortest) for form in longer) else name


def holds_words(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    """Whether ``part`` occurs in ``words`` as consecutive words."""
    return any(words[i : i + len(part)] == part for i in range(len(words) - len(part) + 1))


def _opens_clause(sentence: str, start: int) -> bool:
    """Whether ``start`` begins the sentence or a clause after a colon ("Text: Without …"),
    where any word is capitalised."""
    return not sentence[:start].strip() or sentence[:start].rstrip()[-1] in ':;"“'


# Words that open a clause and link it to the last one: capitalised there, never names.
_CONNECTIVES = frozenset(
    "however hence thus therefore moreover furthermore although though without within since "
    "meanwhile instead overall nevertheless nonetheless otherwise yet still again besides "
    "unlike despite whereas".split()
)


def _connective(sentence: str, start: int, text: str) -> bool:
    """Whether ``text``, at ``start`` in ``sentence``, is one word opening a clause that
    links it to the last ("However, …", "Importantly, …", "Text: Without …"), not a name."""
    if " " in text or not _opens_clause(sentence, start):
        return False
    word = text.lower().rstrip(",")
    followed_by_comma = sentence[start + len(text) :].lstrip().startswith(",")
    return word in _CONNECTIVES or word.endswith("ly") or followed_by_comma


@dataclass(frozen=True)
class Span:
    text: str
    score: float
    """0-1: how surely this is the answer (its kind matches, it sits by the question's words)."""


def _tokens(sentence: str) -> list[tuple[str, int, int]]:
    """(token, start, end): jieba words (Simplified) for Chinese, words and punctuation for
    English."""
    if is_chinese(sentence):
        return segment(sentence)
    return [
        (m.group(0), m.start(), m.end()) for m in re.finditer(r"[\w'’%$€£.-]+|[^\w\s]", sentence)
    ]


def _in_question(token: str, question_terms: frozenset[str], chinese: bool) -> bool:
    lowered = token.lower()
    if chinese:
        # Part of a longer word counts, but a single character does not: 手 of 南山手 is not
        # in 東山手.
        return lowered in question_terms or (
            len(lowered) > 1
            and any(
                lowered in term or (len(term) > 1 and term in lowered) for term in question_terms
            )
        )
    folded = terms(lowered, keep_stopwords=True, for_search=False)
    return bool(folded) and all(word in question_terms for word in folded)


def _is_filler(token: str, chinese: bool) -> bool:
    if not re.search(r"\w", token):
        return True
    if chinese:
        return token in {
            "的",
            "是",
            "了",
            "在",
            "而",
            "和",
            "與",
            "与",
            "及",
            "被",
            "為",
            "为",
            "於",
            "于",
        }
    return token.lower() in ENGLISH_STOPWORDS


# Part-of-speech tags (jieba's ICTCLAS set) that cannot begin or end a Chinese noun phrase
# answer: verbs, adverbs, prepositions, conjunctions, particles, pronouns, directions.
_NOT_NOMINAL = re.compile(r"^(?:v|d|p|c|u|r|y|e|o|f|z)")
_WH_TOKEN_RE = re.compile(r"^(?:什么|哪|谁|何|几|多少)")
_CLASSIFIER_TAGS = ("m", "q", "r")
# Tags of words that can head an answer (nouns, names, places, times, abbreviations, idioms,
# foreign words); a phrase without one ("一部", "平均") names nothing.
_NOUN_TAGS = ("n", "t", "s", "j", "l", "i", "eng", "vn", "an")
_MODIFIER_TAGS = ("m", "q", "a", "b")
_PUNCTUATION_RE = re.compile(r"[\W_]+")
_ZH_KIND_TAGS = {"person": ("nr",), "place": ("ns",)}


@dataclass(frozen=True)
class _ChineseQuestion:
    words: frozenset[str]
    """Content words of the question (Simplified)."""
    head: str | None
    """The noun the question word asks about: 博物馆 in 哪一个博物馆."""
    before: str | None
    """The content word right before the question word (具有 in 具有什么特色)."""
    after: str | None
    """The content word right after the question phrase."""


def _content(word: str, flag: str) -> bool:
    return (
        not _PUNCTUATION_RE.fullmatch(word)
        and word not in CHINESE_STOPWORDS
        and not flag.startswith(("u", "p", "c", "y", "x"))
    )


@lru_cache(maxsize=1024)
def _chinese_question(question: str) -> _ChineseQuestion:
    tokens = tagged_segment(question)
    words = frozenset(w for w, f, _, _ in tokens if _content(w, f) and not _WH_TOKEN_RE.match(w))
    wh = next((i for i, (w, _, _, _) in enumerate(tokens) if _WH_TOKEN_RE.match(w)), None)
    if wh is None:
        return _ChineseQuestion(words, None, None, None)
    after_wh = wh + 1
    while after_wh < len(tokens) and tokens[after_wh][1].startswith(_CLASSIFIER_TAGS):
        after_wh += 1  # 哪/一个/博物馆: skip the classifier
    head = None
    if after_wh < len(tokens) and tokens[after_wh][1].startswith("n"):
        head = tokens[after_wh][0]
        after_wh += 1
    before = next(
        (w for w, f, _, _ in reversed(tokens[:wh]) if _content(w, f) and w in words), None
    )
    after = next((w for w, f, _, _ in tokens[after_wh:] if _content(w, f) and w in words), None)
    return _ChineseQuestion(words, head, before, after)


def _chinese_phrase(question: str, sentence: str, kind: str) -> Span | None:
    """The noun phrase of a Chinese sentence that answers "which/what N" or "who": a run of
    nominal words the question does not contain, scored by how many of the question's words
    sit close around it (the sliding window of reading-comprehension baselines), whether the
    noun asked about follows it (哪一个博物馆 → 圣母院[博物馆]), whether it stands where the
    question word stands (具有[什么特色]的机车 → 具有[大型整流罩]的机车), and whether it is a
    name of the kind asked for."""
    asked = _chinese_question(question)
    tokens = tagged_segment(sentence)
    if not tokens or not asked.words:
        return None

    def in_question(word: str) -> bool:
        return word in asked.words or (
            len(word) > 1 and any(word in term for term in asked.words if len(term) > 1)
        )

    inside = [in_question(w) for w, _, _, _ in tokens]
    positions: dict[str, list[int]] = {}
    for i, (word, _, _, _) in enumerate(tokens):
        if inside[i]:
            positions.setdefault(word, []).append(i)
    if not positions:
        return None
    weight = {word: min(len(word), 4) for word in positions}
    total = sum(min(len(word), 4) for word in asked.words)

    def support(first: int, last: int) -> float:
        """Question words within eight tokens of the phrase, nearer ones counting more."""
        near = 0.0
        for word, places in positions.items():
            gap = min(min(abs(p - first), abs(p - last)) for p in places)
            near += weight[word] * max(0.0, 1 - (gap - 1) / 8)
        return near / total

    def neighbour(index: int, step: int) -> str | None:
        while 0 <= index < len(tokens):
            word, flag, _, _ = tokens[index]
            if _PUNCTUATION_RE.fullmatch(word):
                return None
            if _content(word, flag):
                return word
            index += step
        return None

    best: Span | None = None
    i = 0
    while i < len(tokens):
        if inside[i] or _NOT_NOMINAL.match(tokens[i][1]) or _PUNCTUATION_RE.fullmatch(tokens[i][0]):
            i += 1
            continue
        first = i
        while (
            i + 1 < len(tokens)
            and not inside[i + 1]
            and (not _PUNCTUATION_RE.fullmatch(tokens[i + 1][0]) or tokens[i + 1][0] == "·")
            and tokens[i + 1][0] not in CHINESE_STOPWORDS
        ):
            i += 1
        last = i
        i += 1
        while last > first and (
            _NOT_NOMINAL.match(tokens[last][1]) or tokens[last][1].startswith(_MODIFIER_TAGS)
        ):
            last -= 1
        headed = bool(asked.head) and (
            tokens[last][0].endswith(asked.head)
            or (last + 1 < len(tokens) and tokens[last + 1][0] == asked.head)
        )
        # Followed by the noun asked about, a number names it too (二二八[事件]).
        if not headed and not any(
            tokens[k][1].startswith(_NOUN_TAGS) for k in range(first, last + 1)
        ):
            continue
        end = last
        score = 0.35 + 0.4 * support(first, last)
        if headed:
            score += 0.2
            if not tokens[last][0].endswith(asked.head):
                end = last + 1  # the phrase names the thing with the noun asked about
        if asked.before and neighbour(first - 1, -1) == asked.before:
            score += 0.1
        if asked.after and neighbour(end + 1, 1) == asked.after:
            score += 0.1
        tags = _ZH_KIND_TAGS.get(kind)
        if tags:
            named = any(tokens[k][1].startswith(tags) for k in range(first, last + 1))
            score += 0.15 if named else -0.2
        score -= 0.03 * max(0, tokens[end][3] - tokens[first][2] - 8)
        if best is None or score > best.score:
            best = Span(sentence[tokens[first][2] : tokens[end][3]], round(min(1.0, score), 4))
    return best


_HEAD_NOUN_RE = re.compile(
    r"^\s*(?:in\s+)?(?:what|which)\s+(?:(?:kind|type|sort|form)s?\s+of\s+)?(?P<head>[a-z][a-z-]+)\b",
    re.IGNORECASE,
)


def _head_noun(question: str) -> str | None:
    """The noun a "what/which N …" question names its answer by ("theorem" in "What theorem
    defines …"); None when the word after it is a verb or a function word."""
    match = _HEAD_NOUN_RE.match(question)
    if match is None:
        return None
    head = match.group("head").lower()
    if head in ENGLISH_STOPWORDS or re.fullmatch(rf"{_AUXILIARIES}", head) or head.endswith("ed"):
        return None
    return head.removesuffix("s") if head.endswith("s") and not head.endswith("ss") else head


def _modifier(token: str) -> bool:
    """A word that can stand inside a noun phrase (not a function word, not punctuation)."""
    return bool(re.fullmatch(r"[A-Za-z][\w'’-]*", token)) and token.lower() not in ENGLISH_STOPWORDS


# A question for what something is called, and the words a sentence names it with.
_ZH_NAMING_Q_RE = re.compile(
    r"叫做?什[么麼]|[称稱][为為作]什[么麼]|[简簡全][称稱]|名[称稱]是什[么麼]"
)
_ZH_NAMED_AS_RE = re.compile(
    r"(?:叫做|[称稱][为為作]|[简簡全][称稱]|又[称稱]|名[为為])[:：\s]*(?P<name>[^，。；、（）()「」“”,;]{1,20})"
)
_NAMING_Q_RE = re.compile(r"\b(?:called|named|known as|termed|the name of|name for)\b", re.I)
_NAMED_AS_RE = re.compile(
    r"\b(?:is|are|was|were|be|been)\s+(?:also\s+|commonly\s+|often\s+)?"
    r"(?:called|named|known as|termed|referred to as)\s+"
    r"(?P<name>[^\s,.;:()]+(?:\s+[^\s,.;:()]+){0,4}?)(?=\s*(?:[,.;:()]|$|\s(?:and|or|which|that|"
    r"because|in|by|for|after|since)\b))",
    re.IGNORECASE,
)


class _Offsets:
    """Which tokens a character range covers, found by bisection (tokens are in order)."""

    def __init__(self, tokens: list[tuple[str, int, int]]) -> None:
        self.starts = [start for _, start, _ in tokens]
        self.ends = [end for _, _, end in tokens]

    def _pair(self, first: int, last: int) -> tuple[int, int] | None:
        return (first, last) if first < len(self.starts) and last >= 0 else None

    def within(self, start: int, end: int) -> tuple[int, int] | None:
        """The first token starting at or after ``start``, the last ending by ``end``."""
        return self._pair(bisect_left(self.starts, start), bisect_right(self.ends, end) - 1)

    def touching(self, start: int, end: int) -> tuple[int, int] | None:
        """The first token ending after ``start``, the last starting before ``end``."""
        return self._pair(bisect_right(self.ends, start), bisect_left(self.starts, end) - 1)

    def starting(self, start: int, end: int) -> tuple[int, int] | None:
        """The first token starting at or after ``start``, the last starting before ``end``."""
        return self._pair(bisect_left(self.starts, start), bisect_left(self.starts, end) - 1)


# "What are …", "Who were …": the answer may be several things.
_PLURAL_RE = re.compile(r"\b(?:are|were)\b", re.IGNORECASE)
_COORDINATORS = frozenset({",", "and", "or"})


def _coordination(
    sentence: str, tokens: list[tuple[str, int, int]], offsets: _Offsets, first: int, last: int
) -> tuple[int, int]:
    """The tokens of the list of names the name at ``first..last`` stands in ("IL-25, IL-33
    and TSLP"), or the name alone: a question asking for several things names them all."""
    names = []
    for match in _NAME_RE.finditer(sentence):
        covered = offsets.within(match.start(), match.end())
        if covered is not None and covered[0] <= covered[1]:
            names.append(covered)

    def linked(left_end: int, right_start: int) -> bool:
        between = [tokens[i][0].lower() for i in range(left_end + 1, right_start)]
        return 1 <= len(between) <= 2 and all(word in _COORDINATORS for word in between)

    if not any(start <= first and last <= end for start, end in names):
        return first, last
    for start, end in reversed(names):
        if end < first and linked(end, first):
            first = start
    for start, end in names:
        if start > last and linked(last, start):
            last = end
    return first, last


_YEAR_Q_RE = re.compile(
    r"哪一?年|何年|[幾几]年|年份|\b(?:what|which|in what|in which) year\b", re.IGNORECASE
)
_YEAR_RE = re.compile(
    r"(?:公元前?|西元前?)?\d{3,4}\s*年|\b(?:1[0-9]|20)\d{2}\b"
    # A year in Chinese numerals (一九七二年), or of the Republic of China's era (民國61年).
    r"|[一二三四五六七八九〇零○]{4}\s*年|民[國国]\s*[\d一二三四五六七八九十百]+\s*年"
)


def answer_span(question: str, sentence: str) -> Span:
    """The words of ``sentence`` that answer ``question`` (the sentence itself when the
    question wants an explanation or nothing shorter fits)."""
    focus = question_focus(question)
    if not focus.short:
        return Span(sentence, 0.5)
    span = _short_span(question, sentence, focus)
    # "Which year": the year of a full date.
    if asked_kind(question) == "year" and (year := _YEAR_RE.search(span.text)):
        return Span(year.group(0), span.score)
    return span


# A reference inside a sentence, "(Jartti and Gern, 2017)", "(Britto et al., 2017; …)",
# "[10, 12]": its names and years cite a paper, they never answer the question. (A bracket is
# found first and then read, so no pattern can backtrack through a long sentence.)
_PARENTHESIS_RE = re.compile(r"\([^()\n]{1,300}\)")
_CITED_YEAR_RE = re.compile(r"(?:\bet al\.?|\b[A-Z][\w'’-]*),? (?:1[89]|20)\d{2}[a-z]?\b")


def _without_citations(sentence: str) -> str:
    """``sentence`` with its citations blanked out, the same length (offsets still point into
    the sentence)."""

    def blank(match: re.Match[str]) -> str:
        return " " * len(match.group(0))

    cited = _PARENTHESIS_RE.sub(
        lambda m: blank(m) if _CITED_YEAR_RE.search(m.group(0)) else m.group(0), sentence
    )
    return blank_citations(cited)


def _named_as(question: str, sentence: str, offsets: _Offsets) -> list[tuple[float, int, int]]:
    """For "what is … called?": the words after "is known as" / "is called" name it, even
    when they share a stem with the question ("prime" → "primality")."""
    if not _NAMING_Q_RE.search(question):
        return []
    found = []
    for match in _NAMED_AS_RE.finditer(sentence):
        covered = offsets.starting(match.start("name"), match.end())
        if covered is None or covered[0] > covered[1]:
            continue
        if match.group("name").lower() not in question.lower():
            found.append((0.95, *covered))
    return found


def _head_phrases(
    question: str, tokens: list[tuple[str, int, int]], inside: list[bool]
) -> list[tuple[int, int]]:
    """For "what theorem …?": the noun phrases the sentence builds on that noun ("the
    fundamental theorem of arithmetic"), up to four words before it and one "of" word after,
    holding a word the question does not."""
    head = _head_noun(question)
    if head is None:
        return []
    phrases = []
    for i, (token, _, _) in enumerate(tokens):
        if token.lower().rstrip(".") not in (head, f"{head}s"):
            continue
        first = i
        while first > 0 and i - first < 4 and _modifier(tokens[first - 1][0]):
            first -= 1
        last = i
        if (
            last + 2 < len(tokens)
            and tokens[last + 1][0].lower() == "of"
            and _modifier(tokens[last + 2][0])
        ):
            last += 2
        if not all(inside[first : last + 1]):
            phrases.append((first, last))
    return phrases


def _short_span(question: str, sentence: str, focus: Focus) -> Span:
    chinese = is_chinese(sentence)
    if chinese and focus.kind == "thing" and _ZH_NAMING_Q_RE.search(question):
        # 叫做什么 / 简称什么: the words after 称为, 叫做, 简称 name it.
        called = _ZH_NAMED_AS_RE.search(sentence)
        if called and called.group("name").strip() not in question:
            return Span(called.group("name").strip(), 0.95)
    if chinese and focus.kind in ("person", "place", "thing") and is_chinese(question):
        phrase = _chinese_phrase(question, sentence, focus.kind)
        if phrase is not None:
            return phrase
    readable = _without_citations(sentence)
    tokens = _tokens(readable)
    inside = [_in_question(token, focus.terms, chinese) for token, _, _ in tokens]
    anchors = [i for i, hit in enumerate(inside) if hit]
    if not anchors:
        return Span(sentence, 0.0)

    def distance(start: int, end: int) -> int:
        return min(min(abs(a - start), abs(a - end)) for a in anchors)

    candidates: list[tuple[float, int, int]] = []
    named_phrases: set[tuple[int, int]] = set()
    offsets = _Offsets(tokens)
    typed = DATE_RE if focus.kind == "date" else NUMBER_RE if focus.kind == "number" else None
    if typed is not None:
        # The 10 of "as of February 10, 2020" is a day, not a count.
        days = [m.span() for m in DATE_RE.finditer(readable) if _MONTH_RE.search(m.group(0))]
        for match in typed.finditer(readable):
            if re.match(r"[A-Za-z0-9-]", readable[match.start() - 1 : match.start()]):
                continue  # the 1 of "HIV-1", the 19 of "COVID-19": part of a name
            if not re.search(r"\w", match.group(0)):
                continue  # a stray "." or ","
            if typed is NUMBER_RE and any(a <= match.start() < b for a, b in days):
                continue
            covered = offsets.touching(match.start(), match.end())
            if covered is None or all(inside[covered[0] : covered[1] + 1]):
                continue
            first, last = covered
            score = 1.0 - 0.05 * min(distance(first, last), 10)
            if _SEASON_RE.fullmatch(match.group(0)):
                score -= 0.3  # a season when the sentence also gives a date ("2008年夏季")
            if typed is NUMBER_RE:
                # "How many people …": "677,243", not "677,243 people"; the unit after a
                # number the question names ("1915 and") leaves nothing.
                while last > first and (inside[last] or _is_filler(tokens[last][0], chinese)):
                    last -= 1
                if inside[last] or not re.search(r"\w", tokens[first][0] + tokens[last][0]):
                    continue
            candidates.append((score, first, last))
    elif focus.kind in ("person", "place", "thing") and not chinese:
        for match in _NAME_RE.finditer(readable):
            if match.start() == 0 and " " not in match.group(0):
                continue  # a single capitalised first word is just the start of the sentence
            covered = offsets.within(match.start(), match.end())
            if covered is None or covered[1] < covered[0]:
                continue
            first, last = covered
            if all(inside[first : last + 1]):
                continue
            overlap = sum(inside[first : last + 1]) / (last - first + 1)
            score = 0.9 - 0.05 * min(distance(first, last), 10) - 0.5 * overlap
            candidates.append((score, first, last))
    if focus.kind == "thing" and not chinese:
        # Phrases the sentence itself marks as the answer: trusted although lower-case.
        phrases = _named_as(question, readable, offsets) + [
            (0.85 - 0.05 * min(distance(first, last), 4), first, last)
            for first, last in _head_phrases(question, tokens, inside)
        ]
        candidates += phrases
        named_phrases.update((first, last) for _, first, last in phrases)
    # The gap: a run of words the question does not contain, right by the words it does.
    run_start = None
    for i in range(len(tokens) + 1):
        outside = (
            i < len(tokens)
            and not inside[i]
            and not re.fullmatch(r"[,;:.!?，。；：！？、()（）]", tokens[i][0])
        )
        if outside and run_start is None:
            run_start = i
        elif not outside and run_start is not None:
            first, last = run_start, i - 1
            while first <= last and _is_filler(tokens[first][0], chinese):
                first += 1
            while last >= first and _is_filler(tokens[last][0], chinese):
                last -= 1
            if first <= last:
                words = last - first + 1
                near = distance(first - 1, last + 1)
                text = sentence[tokens[first][1] : tokens[last][2]]
                kind_ok = holds_kind(question, text) if focus.kind != "thing" else True
                score = (0.75 if kind_ok else 0.45) - 0.08 * near - 0.03 * max(0, words - 4)
                candidates.append((score, first, last))
            run_start = None
    if not candidates:
        return Span(sentence, 0.0)
    score, first, last = max(candidates, key=lambda c: (c[0], -(c[2] - c[1])))
    if focus.kind in ("person", "place", "thing") and not chinese and _PLURAL_RE.search(question):
        first, last = _coordination(readable, tokens, offsets, first, last)
    text = sentence[tokens[first][1] : tokens[last][2]].strip(" ,;:")
    if tokens[last][2] >= len(sentence.rstrip()):
        text = text.removesuffix(".")  # the sentence's full stop
    score = max(0.0, min(1.0, score))
    named = [] if _connective(sentence, tokens[first][1], text) else names_in(text)
    if (
        (first, last) not in named_phrases
        and not chinese
        and focus.kind in ("person", "place", "thing")
        and not (named or re.search(r"\d", text))
    ):
        # English words by the question's words, with no name or number among them, are a
        # guess at where a phrase ends: the sentence answers better ("What could account
        # for…" wants a clause, not its first word; "However" opening it is no name).
        return Span(sentence, score)
    return Span(text or sentence, score)
