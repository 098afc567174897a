"""The LLM backend: judges and generator on any LangChain chat model (``ChatOpenAI`` by default).

A verdict costs one call. It is asked for as a JSON-schema-constrained reply (llama.cpp, vLLM
and OpenAI honour ``response_format``); a server that refuses that shape gets a tool call, then
plain JSON described in the prompt, and the refusal is remembered per model. Whatever comes
back is parsed leniently (JSON anywhere, loose types, then keywords); a reply that still cannot
be read counts as the cautious answer and as ``llm.parse_failures`` in the run's usage, so a
badly behaved model degrades a run but never crashes it. Grader calls carry the ``nostream``
tag so their tokens never reach a ``messages`` stream; generator calls do not.

``mode`` (the run's ``llm_judging``) decides how many calls a question costs: ``per_call`` asks
what the LangGraph tutorials ask (one call per chunk, grounded and useful apart, a router call
every time); ``batched`` grades all chunks in one call, grounded and useful in one call, and
asks the router only when rules cannot tell; ``cascade`` is batched, and the local judge
decides the chunks its score was measured to decide (:mod:`nodes.judges.cascade`), so the
model reads only the uncertain ones; there a written answer is as sure as the local reader is
that the passages answer the question (``LLMGenerator.vouched``), so that ``min_confidence``
turns down what a model wrote where the passages hold no answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, Field, ValidationError, field_validator

from reflexrag.nodes import prompts
from reflexrag.nodes.judges.base import (
    Answer,
    AnswerGrade,
    ComplexityVerdict,
    Generator,
    GroundingGrade,
    Judge,
    RelevanceGrade,
    RetrievalDecision,
    RoundAssessment,
    UsefulnessGrade,
    grounded_then_useful,
)
from reflexrag.nodes.judges.cascade import cascade_band, clear_verdict
from reflexrag.nodes.judges.rules import (
    asks_about_facts,
    clarifying_question,
    complexity_features,
    no_retrieval_reason,
    unresolved_reference,
)
from reflexrag.nodes.judges.usage import metered, record, tally
from reflexrag.providers.models import UnsupportedRequestError, call_model
from reflexrag.providers.settings import get_settings
from reflexrag.providers.text import (
    cited_numbers,
    count_tokens,
    coverage,
    same_language,
    split_sentences,
    term_set,
    terms,
    without_citations,
)
from reflexrag.state import QueryKind

NOSTREAM = {"tags": ["nostream"]}
LLMJudging = Literal["per_call", "batched", "cascade"]
STRUCTURED_METHODS = ("json_schema", "function_calling", "prompt")
BATCH_PASSAGE_CHARS = 1500
"""Longest passage shown in a batched grading prompt."""
MAX_MISSING_TERMS = 5
MISSING_TERM_CHARS = 60
"""Bounds of an assessor's "missing" list: in the schema, so a constrained reply stays short."""
MAX_UNCITED_SOURCES = 2
NEAR_BEST_SOURCE = 0.75
"""An uncited answer names the passages holding nearly as many of its terms as the best."""

# Methods a model's server refused, by model object: asked once per process, not per call.
_refused: dict[int, set[str]] = {}
_REFUSAL_WORDS = {
    "json_schema": re.compile(r"response_format|json_schema|schema|grammar", re.I),
    "function_calling": re.compile(r"tool|function", re.I),
    "prompt": re.compile(r"(?!)"),  # plain prompts are never a feature to give up
}


def _lower_word(value: Any) -> Any:
    """Loose verdict words: True/"Yes"/"yes." → "yes", False → "no"."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value.strip().strip(".!\"'").lower()
    return value


def _clamp(low: int, high: int):
    def clamp(value: Any) -> Any:
        if isinstance(value, str) and (match := re.search(r"-?\d+(\.\d+)?", value)):
            value = float(match.group(0))
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(min(high, max(low, round(value))))
        return value

    return clamp


class BinaryVerdict(BaseModel):
    """A yes/no verdict."""

    binary_score: Literal["yes", "no"] = Field(description="'yes' or 'no'")

    _loose = field_validator("binary_score", mode="before")(_lower_word)


class ScoredVerdict(BinaryVerdict):
    """A yes/no verdict with a 0-1 score."""

    score: float | None = Field(default=None, ge=0, le=1, description="relevance from 0 to 1")

    @field_validator("score", mode="before")
    @classmethod
    def _score_or_none(cls, value: Any) -> Any:
        # A score out of range or unreadable loses the score, not the yes/no.
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if 0 <= number <= 1 else None


class GroundingVerdict(BaseModel):
    """How much of the answer the facts support."""

    level: Literal["fully", "partially", "no"] = Field(description="'fully', 'partially' or 'no'")

    @field_validator("level", mode="before")
    @classmethod
    def _loose(cls, value: Any) -> Any:
        word = _lower_word(value)
        return {"yes": "fully", "full": "fully", "partial": "partially", "none": "no"}.get(
            word, word
        )


class AnswerVerdict(GroundingVerdict):
    """Grounded and useful, in one reply."""

    answers_question: Literal["yes", "no"] = Field(
        description="'yes' if the answer resolves the question"
    )

    _loose_answer = field_validator("answers_question", mode="before")(_lower_word)


class RetrievalVerdict(BaseModel):
    """Whether documents are needed."""

    retrieve: Literal["yes", "no"] = Field(description="'yes' or 'no'")
    reason: str = Field(default="", description="one short sentence")

    _loose = field_validator("retrieve", mode="before")(_lower_word)


class PassageScores(BaseModel):
    """How well each numbered passage helps answer the question, 0-10, in order."""

    scores: list[int] = Field(description="one integer from 0 to 10 per passage, in order")

    @field_validator("scores", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        # "8, 2", ["8/10", 2.5] or a lone 7: every score written anyhow, clamped to 0-10.
        if not isinstance(value, list):
            value = re.findall(r"\d+(?:\.\d+)?", str(value))
        clamp = _clamp(0, 10)
        return [clamp(item) for item in value if clamp(item) is not None]


class ComplexityReply(BaseModel):
    """Adaptive-RAG's classification of a question."""

    level: Literal["no_retrieval", "single_step", "multi_step"] = Field(
        description="'no_retrieval', 'single_step' or 'multi_step'"
    )
    ambiguous: bool = Field(default=False, description="it points at something never named")
    clarifying_question: str = Field(default="", description="asked back when ambiguous")
    reason: str = Field(default="", description="one short sentence")

    @field_validator("level", mode="before")
    @classmethod
    def _loose(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _lower_word(value).replace("-", "_").replace(" ", "_")
        return value


class RoundReply(BaseModel):
    """Scores of one iterative-retrieval round."""

    completeness: int = Field(ge=1, le=10, description="1-10")
    relevance: int = Field(default=5, ge=0, le=10, description="0-10")
    quality: int = Field(default=5, ge=0, le=10, description="0-10")
    missing: list[Annotated[str, Field(max_length=MISSING_TERM_CHARS)]] = Field(
        default_factory=list, max_length=MAX_MISSING_TERMS, description="search terms missing"
    )

    _completeness = field_validator("completeness", mode="before")(_clamp(1, 10))
    _scores = field_validator("relevance", "quality", mode="before")(_clamp(0, 10))

    @field_validator("missing", mode="before")
    @classmethod
    def _terms(cls, value: Any) -> Any:
        # Small models write 0, null, "none" or "a, b" where a list of terms belongs.
        if isinstance(value, str):
            value = [part for part in re.split(r"[,;\n]", value)]
        if not isinstance(value, list):
            return []
        cleaned = [str(item).strip()[:MISSING_TERM_CHARS] for item in value if str(item).strip()]
        kept = [item for item in cleaned if item.lower() not in ("none", "nothing", "n/a")]
        return kept[:MAX_MISSING_TERMS]


VerdictT = TypeVar("VerdictT", bound=BaseModel)


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


def _json_objects(text: str) -> list[Any]:
    """Every JSON object embedded in ``text``, nested braces and code fences included."""
    decoder = json.JSONDecoder()
    found = []
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def parse_verdict(text: str, schema: type[VerdictT]) -> VerdictT | None:
    """JSON object anywhere in the reply, else the first yes/no-style keyword; else None."""
    for candidate in _json_objects(text):
        try:
            return schema.model_validate(candidate)
        except ValidationError:
            continue
    field_name, field = next(iter(schema.model_fields.items()))
    allowed = getattr(field.annotation, "__args__", ())  # a Literal's values
    if not allowed or not all(isinstance(value, str) for value in allowed):
        return None
    lowered = text.lower()
    positions = {
        value: m.start()
        for value in allowed
        if (m := re.search(rf"\b{re.escape(value)}\b", lowered))
    }
    if positions:
        return schema.model_validate({field_name: min(positions, key=positions.get)})
    return None


def _usage(message: BaseMessage, prompt: str) -> tuple[int, int]:
    meta = getattr(message, "usage_metadata", None)
    if meta:
        return meta.get("input_tokens", 0), meta.get("output_tokens", 0)
    return count_tokens(prompt), count_tokens(_text(message))


def _numbered(documents: Sequence[Document], limit: int | None = None) -> str:
    return "\n\n".join(
        f"[{n}] {doc.page_content[:limit] if limit else doc.page_content}"
        for n, doc in enumerate(documents, start=1)
    )


def _json_schema_format(
    schema: type[BaseModel], refine: dict[str, Any] | None = None
) -> dict[str, Any]:
    json_schema = schema.model_json_schema()
    for name, extra in (refine or {}).items():
        json_schema["properties"][name] = {**json_schema["properties"][name], **extra}
    return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema}}


class LLMJudge:
    """Reflection judges backed by a chat model; calls are counted as ``llm.<role>``."""

    backend = "llm"
    crag_thresholds: ClassVar[dict[str, tuple[float, float]]] = {
        "any": (0.7, 0.3),
        "mean_top3": (0.7, 0.3),
    }

    def __init__(
        self,
        grader: BaseChatModel,
        relevance_threshold: float | None = None,
        mode: LLMJudging = "per_call",
        local: Judge | None = None,
    ) -> None:
        if mode == "cascade" and local is None:
            raise ValueError("the cascade needs a local judge for the clear cases")
        self.grader = grader
        self.relevance_threshold = 0.5 if relevance_threshold is None else relevance_threshold
        self.mode = mode
        self.local = local

    def _methods(self) -> list[str]:
        preferred = get_settings().structured_output
        order = [preferred, *(m for m in STRUCTURED_METHODS if m != preferred)]
        refused = _refused.get(id(self.grader), set())
        return [method for method in order if method not in refused]

    def _shaped(
        self, method: str, schema: type[BaseModel], refine: dict[str, Any] | None = None
    ) -> Any:
        if method == "json_schema":
            return self.grader.bind(response_format=_json_schema_format(schema, refine))
        if method == "function_calling":
            # A tool name as a string: some servers ignore tool_choice given as an object.
            return self.grader.bind_tools([schema], tool_choice=schema.__name__)
        return self.grader

    async def _ask(self, prompt: str, role: str) -> str:
        """A free-text reply (a rewritten query, say)."""
        reply = await call_model(self.grader, [HumanMessage(prompt)], NOSTREAM)
        record(self.backend, role, *_usage(reply, prompt))
        return _text(reply)

    async def _verdict(
        self,
        prompt: str,
        schema: type[VerdictT],
        role: str,
        refine: dict[str, Any] | None = None,
    ) -> VerdictT | None:
        """One call shaped by the first structured-output method the server accepts; its reply
        is parsed whatever came back (no second call to ask again). ``refine`` tightens the
        JSON schema's properties for this call (say, how many items a list must hold)."""
        fields = ", ".join(schema.model_fields)
        prompt += prompts.JSON_REPLY_SUFFIX.format(fields=fields)
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        for method in self._methods():
            try:
                shaped = self._shaped(method, schema, refine)
                reply = await call_model(shaped, messages, NOSTREAM)
            except NotImplementedError:  # the client cannot shape calls this way
                _refused.setdefault(id(self.grader), set()).add(method)
                continue
            except UnsupportedRequestError as exc:
                # Only a refusal that names the feature is remembered: a prompt too long for
                # the server's context is also a 400, and says nothing about response_format.
                if not _REFUSAL_WORDS[method].search(str(exc)):
                    raise
                _refused.setdefault(id(self.grader), set()).add(method)
                continue
            record(self.backend, role, *_usage(reply, prompt))
            verdict = self._parsed(reply, schema)
            if verdict is None:
                tally("llm_parse_failures")
            return verdict
        return None

    @staticmethod
    def _parsed(reply: AIMessage, schema: type[VerdictT]) -> VerdictT | None:
        for call in reply.tool_calls or []:
            try:
                return schema.model_validate(call["args"])
            except ValidationError:
                continue
        return parse_verdict(_text(reply), schema)

    async def needs_retrieval(
        self, question: str, closest: Sequence[Document] = ()
    ) -> RetrievalDecision:
        if self.mode != "per_call":
            # Rules settle most questions without a call, and a question about facts goes to
            # the knowledge base: a model guessing what the KB holds hallucinates answers.
            if reason := no_retrieval_reason(question):
                return RetrievalDecision(False, reason)
            if closest and asks_about_facts(question):
                return RetrievalDecision(True, "a question, and the knowledge base is not empty")
        excerpt = closest[0].page_content[:400] if closest else "(empty)"
        prompt = prompts.RETRIEVAL_DECISION_PROMPT.format(question=question, best_match=excerpt)
        verdict = await self._verdict(prompt, RetrievalVerdict, "router")
        if verdict is None:
            # Retrieving is the safe default when the router's answer is unreadable.
            return RetrievalDecision(True, "unparseable router verdict; retrieving")
        return RetrievalDecision(verdict.retrieve == "yes", verdict.reason or "llm router")

    async def grade_documents(
        self, question: str, documents: Sequence[Document]
    ) -> list[RelevanceGrade]:
        if not documents:
            return []
        if self.mode == "per_call":
            return list(
                await asyncio.gather(*(self._grade_one(question, doc) for doc in documents))
            )
        if self.mode == "batched":
            return await self._grade_batch(question, documents, fallback=None)
        return await self._grade_cascade(question, documents)

    async def _grade_one(self, question: str, doc: Document) -> RelevanceGrade:
        prompt = prompts.DOCUMENT_GRADER_PROMPT.format(document=doc.page_content, question=question)
        verdict = await self._verdict(prompt, ScoredVerdict, "grader")
        if verdict is None:
            return RelevanceGrade(0.0, False)
        relevant = verdict.binary_score == "yes"
        score = verdict.score if verdict.score is not None else float(relevant)
        return RelevanceGrade(round(score, 4), relevant)

    async def _grade_batch(
        self,
        question: str,
        documents: Sequence[Document],
        fallback: Sequence[RelevanceGrade] | None,
    ) -> list[RelevanceGrade]:
        """One call for all ``documents``; an unreadable reply keeps ``fallback`` (or rejects
        them all, the cautious answer)."""
        prompt = prompts.BATCH_GRADER_PROMPT.format(
            passages=_numbered(documents, BATCH_PASSAGE_CHARS), question=question
        )
        # The schema asks for exactly one score per passage, so a constrained reply has them.
        count = {"minItems": len(documents), "maxItems": len(documents)}
        items = {"type": "integer", "minimum": 0, "maximum": 10}
        verdict = await self._verdict(
            prompt, PassageScores, "grader", {"scores": {**count, "items": items}}
        )
        if verdict is None or len(verdict.scores) < len(documents):
            if verdict is not None:
                tally("llm_parse_failures")
            return list(fallback) if fallback else [RelevanceGrade(0.0, False)] * len(documents)
        return [
            RelevanceGrade(score / 10, score / 10 >= self.relevance_threshold)
            for score in verdict.scores[: len(documents)]
        ]

    async def _grade_cascade(
        self, question: str, documents: Sequence[Document]
    ) -> list[RelevanceGrade]:
        """The local judge grades every chunk; the model reads those its score does not
        decide (:mod:`nodes.judges.cascade`: the band measured leave-one-set-out). Clear
        cases keep the local verdict and score (both scales run from unrelated at 0 to
        answering at 1)."""
        assert self.local is not None
        local = await self.local.grade_documents(question, documents)
        band = cascade_band()
        grades = [_clear_case(grade.score, band) for grade in local]
        unsure = [n for n, grade in enumerate(grades) if grade is None]
        tally("cascade.decided_locally", len(documents) - len(unsure))
        if unsure:
            asked = await self._grade_batch(
                question,
                [documents[n] for n in unsure],
                fallback=[local[n] for n in unsure],
            )
            for n, grade in zip(unsure, asked, strict=True):
                grades[n] = grade
        return [grade for grade in grades if grade is not None]

    async def grade_grounding(self, answer: str, documents: Sequence[Document]) -> GroundingGrade:
        prompt = prompts.GROUNDING_GRADER_PROMPT.format(
            documents=_numbered(documents), answer=answer
        )
        verdict = await self._verdict(prompt, GroundingVerdict, "grader")
        return _grounding(verdict)

    async def grade_usefulness(self, question: str, answer: str) -> UsefulnessGrade:
        prompt = prompts.USEFULNESS_GRADER_PROMPT.format(question=question, answer=answer)
        verdict = await self._verdict(prompt, BinaryVerdict, "grader")
        useful = verdict is not None and verdict.binary_score == "yes"
        return UsefulnessGrade(useful, float(useful), "llm grader" if verdict else "unparseable")

    async def grade_answer(
        self, question: str, answer: str, documents: Sequence[Document], quote: str = ""
    ) -> AnswerGrade:
        if self.mode == "per_call":
            return await grounded_then_useful(self, question, answer, documents, quote)
        said = f"{answer} {quote}".strip()
        if stands_on_nothing(said, documents):
            # A clear case, decided without the model (which may call it grounded anyway).
            tally("grounding.decided_locally")
            return AnswerGrade(GroundingGrade("none", 0.0), None)
        # The facts shown are the sentences the answer's words come from, not whole passages:
        # what the check needs, in fewer tokens.
        facts = [supporting_window(said, doc) for doc in documents]
        prompt = prompts.ANSWER_GRADER_PROMPT.format(
            documents=_numbered(facts), question=question, answer=said
        )
        verdict = await self._verdict(prompt, AnswerVerdict, "grader")
        grounding = _grounding(verdict)
        if grounding.level == "none" or verdict is None:
            return AnswerGrade(grounding, None)
        useful = verdict.answers_question == "yes"
        return AnswerGrade(grounding, UsefulnessGrade(useful, float(useful), "llm grader"))

    async def rewrite_query(
        self, question: str, attempt: int, documents: Sequence[Document]
    ) -> str:
        prompt = prompts.REWRITE_PROMPT.format(question=question, attempt=attempt)
        return _first_line(await self._ask(prompt, "rewriter")) or question

    async def search_query(self, question: str) -> str:
        prompt = prompts.SEARCH_QUERY_PROMPT.format(question=question)
        words = _first_line(await self._ask(prompt, "rewriter")).split()
        return " ".join(words[:3]) or question

    async def classify_complexity(
        self, question: str, history: Sequence[str] = ()
    ) -> ComplexityVerdict:
        prompt = prompts.COMPLEXITY_PROMPT.format(
            question=question, history=" | ".join(history) or "(none)"
        )
        reply = await self._verdict(prompt, ComplexityReply, "classifier")
        features = complexity_features(question)
        if reply is None:
            # Single-step retrieval is the safe middle when the verdict is unreadable.
            return ComplexityVerdict("single_step", "unparseable classifier verdict", features)
        # Asking back interrupts the user: only when the question really points at something
        # it never names (the rules find the phrase), not because a model says so.
        phrase = unresolved_reference(question, history) if reply.ambiguous else None
        asked = reply.clarifying_question.strip()
        if phrase and (not asked or asked.lower() == question.strip().lower()):
            asked = clarifying_question(question, phrase)
        level, reason = reply.level, reply.reason or "llm classifier"
        if self.mode != "per_call" and level == "no_retrieval" and asks_about_facts(question):
            # As for the router: a question about facts goes to the knowledge base.
            level, reason = "single_step", "a question the rules send to the knowledge base"
        return ComplexityVerdict(
            level,
            reason,
            features,
            phrase is not None,
            asked if phrase else "",
        )

    async def assess_round(
        self,
        question: str,
        draft: str,
        round_documents: Sequence[Document],
        context: Sequence[Document],
    ) -> RoundAssessment:
        prompt = prompts.ROUND_ASSESSMENT_PROMPT.format(
            round_documents=_numbered(round_documents) or "(none)",
            context=_numbered(context) or "(none)",
            draft=draft or "(none)",
            question=question,
        )
        reply = await self._verdict(prompt, RoundReply, "assessor")
        if reply is None:
            # Unreadable: neither stop early nor claim the round failed; the round limit ends it.
            return RoundAssessment(5, 5, 5)
        completeness, quality = reply.completeness, reply.quality
        if not draft.strip():
            # No draft answers nothing, whatever the model scores it (a 1.5B model gave an
            # empty draft 10/10/10 and stopped the loop after round 1): as the local judge.
            completeness, quality = min(completeness, 1), min(quality, 1)
        return RoundAssessment(reply.relevance, completeness, quality, reply.missing)

    async def next_query(
        self,
        question: str,
        draft: str,
        kind: QueryKind,
        missing: Sequence[str],
        asked: Sequence[str] = (),
    ) -> str:
        prompt = prompts.NEXT_QUERY_PROMPTS[kind].format(
            question=question,
            draft=draft,
            missing=", ".join(missing) or "(unknown)",
            asked="; ".join(f'"{query}"' for query in asked) or "(none)",
        )
        return _first_line(await self._ask(prompt, "rewriter")) or question


def _clear_case(score: float, band: dict[str, Any]) -> RelevanceGrade | None:
    """The cascade's local verdict on a chunk, or None when the model should read it."""
    verdict = clear_verdict(score, band)
    return None if verdict is None else RelevanceGrade(score, verdict)


def _grounding(verdict: GroundingVerdict | None) -> GroundingGrade:
    level = {"fully": "fully", "partially": "partially"}.get(
        verdict.level if verdict else "", "none"
    )
    return GroundingGrade(level, {"fully": 1.0, "partially": 0.5}.get(level, 0.0))


def _first_line(reply: str) -> str:
    lines = [line.strip().strip('"').strip() for line in reply.strip().splitlines()]
    return next((line for line in lines if line), "")


def stands_on_nothing(text: str, documents: Sequence[Document]) -> bool:
    """Whether a written answer cites none of the passages it was given and shares no word
    with any of them in its own language (across languages shared words mean nothing, so
    those do not count): it is then grounded in none of them, whatever a model says of it
    (SmolLM2-135M called "The answer to this question is: 2019" grounded in Tesla's
    passage). A cited passage is the judges' to check."""
    if cited_numbers(text):
        return False
    said = term_set(text)
    mine = [doc for doc in documents if same_language(text, doc.page_content)]
    return bool(said and mine) and not any(said & term_set(doc.page_content) for doc in mine)


def cited_documents(text: str, documents: Sequence[Document]) -> list[Document]:
    """The passages an answer cites (``[n]``, ``[n, m]``, ``[n-m]``); for an answer citing none,
    the (at most two) passages that hold the most of its terms, not every passage it was
    shown, and none when it shares no term with any."""
    cited = cited_numbers(text)
    if cited:
        return [doc for n, doc in enumerate(documents, start=1) if n in cited]
    answer_terms = terms(text)
    held = [(coverage(answer_terms, term_set(doc.page_content)), doc) for doc in documents]
    best = max((share for share, _ in held), default=0.0)
    if best == 0:
        return []
    ranked = sorted(held, key=lambda pair: -pair[0])
    return [doc for share, doc in ranked if share >= best * NEAR_BEST_SOURCE][:MAX_UNCITED_SOURCES]


def supporting_window(text: str, document: Document) -> Document:
    """The sentences of ``document`` that ``text``'s words come from, in the passage's order
    and joined by " … ": a greedy cover of the text's terms, each time the sentence holding
    most of those not yet held, until no sentence adds one. The whole passage when the text
    shares no term with it or the cover takes every sentence."""
    wanted = set(terms(without_citations(text)))
    sentences = split_sentences(document.page_content)
    held = [term_set(sentence) for sentence in sentences]
    chosen: set[int] = set()
    while wanted and held:
        best = max(range(len(held)), key=lambda n: len(wanted & held[n]))
        if not wanted & held[best]:
            break
        chosen.add(best)
        wanted -= held[best]
    if not chosen or len(chosen) == len(sentences):
        return document
    window = " … ".join(sentences[n] for n in sorted(chosen))
    return Document(window, id=document.id, metadata=document.metadata)


class LLMGenerator:
    """Writes a cited answer with a chat model; its tokens stream to ``messages`` listeners.

    A model that writes the same answer to the same prompt (temperature 0) stands on its
    prompt: asked again with a prompt a rejected answer was written from, it returns no answer
    instead of paying for the rejected one again, word for word. The loop then rewrites the
    query or gives up, as when the local reader has no sentence left. A model sampling at a
    higher temperature, or one whose temperature is unknown, is asked again."""

    backend = "llm"
    reads_first_retrieval = False

    def __init__(
        self,
        model: BaseChatModel,
        deterministic: bool | None = None,
        reader: Generator | None = None,
    ) -> None:
        self.model = model
        self.deterministic = (
            getattr(model, "temperature", None) == 0 if deterministic is None else deterministic
        )
        self.reader = reader

    @property
    def reports_confidence(self) -> bool:
        return self.reader is not None

    async def generate(
        self,
        question: str,
        documents: Sequence[Document],
        rejected: Sequence[str] = (),
        background: Sequence[Document] = (),
    ) -> Answer:
        # The model reads only ``documents``: the chunks the judges kept (CRAG's refined
        # knowledge, Yan et al. 2024); the background would bring back what they left out.
        if documents:
            prompt = prompts.GENERATE_PROMPT.format(context=_numbered(documents), question=question)
        else:
            prompt = prompts.DIRECT_ANSWER_PROMPT.format(question=question)
        kind = "generative" if documents else "no_retrieval"
        written_from = [prompt_fingerprint(prompt)] if self.deterministic else []
        if written_from and written_from[0] in rejected:
            return Answer("", kind)
        reply = await call_model(self.model, [HumanMessage(prompt)], {})
        record(self.backend, "generator", *_usage(reply, prompt))
        text = _text(reply).strip()
        used = [str(doc.id) for doc in cited_documents(text, documents)]
        # An answer that cites no passage and says no word of one stands on none of them:
        # sure of nothing, not unknown (a loop that gates on confidence then does not keep it).
        if documents and stands_on_nothing(text, documents):
            confidence: float | None = 0.0
        else:
            confidence = await self.vouched(question, documents, background)
        return Answer(text, kind, used, confidence=confidence, stands_on=written_from)

    async def vouched(
        self, question: str, documents: Sequence[Document], background: Sequence[Document]
    ) -> float | None:
        """How sure the local ``reader`` is that a sentence of the passages answers the
        question (0 when it finds none). A model writes fluently whether or not the passages
        hold the answer, and the passages it cites were graded on topic, not on answering;
        the reader's sureness is the answers model's, whose calibration was checked on sets
        it was not fitted on. None (the cited passages' grades stand in) without a reader or
        passages, and where the reader's own answer stands on no one sentence: a yes/no
        verdict or a name counted across documents, whose sureness says how much of a claim
        the passages cover, not whether they hold what the model wrote."""
        if self.reader is None or not documents:
            return None
        # One local read, counted as such: its estimate of what it read is no model's tokens.
        with metered():
            read = await self.reader.generate(question, documents, (), background)
        record(self.reader.backend, "reader")
        if not read.text or read.confidence is None:
            return 0.0
        return read.confidence if read.stands_on else None


def prompt_fingerprint(prompt: str) -> str:
    """What a written answer stands on: the prompt it was written from, as a digest (the
    state keeps what every rejected answer stood on; a prompt is thousands of characters)."""
    return "prompt sha256:" + hashlib.sha256(prompt.encode()).hexdigest()[:16]
