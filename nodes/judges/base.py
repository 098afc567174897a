"""The small interfaces every reflection decision goes through, and their verdict types.

Two backends implement them: :mod:`nodes.judges.llm` (a chat model) and
:mod:`nodes.judges.local` (embeddings, lexical overlap and rules; no language model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from langchain_core.documents import Document

from reflexrag.state import Complexity, Grounding, QueryKind


class JudgeConfigurationError(ValueError):
    """An unknown backend name was asked for."""


@dataclass(frozen=True)
class RetrievalDecision:
    needed: bool
    reason: str


@dataclass(frozen=True)
class RelevanceGrade:
    score: float
    """0-1; comparable with the judge's own ``relevance_threshold``."""
    relevant: bool


@dataclass(frozen=True)
class GroundingGrade:
    level: Grounding
    score: float


@dataclass(frozen=True)
class UsefulnessGrade:
    useful: bool
    score: float
    reason: str = ""


@dataclass(frozen=True)
class ComplexityVerdict:
    level: Complexity
    reason: str
    features: dict[str, Any] = field(default_factory=dict)
    ambiguous: bool = False
    clarifying_question: str = ""
    """Asked back when ``ambiguous``: what the user has to name."""


@dataclass(frozen=True)
class RoundAssessment:
    """Iterative retrieval's scores for one round."""

    relevance: int
    """0-10: this round's documents against the question."""
    completeness: int
    """1-10: does everything gathered so far answer the question?"""
    quality: int
    """0-10: the draft answer."""
    missing: list[str] = field(default_factory=list)
    """What the context still lacks, as search terms."""


@dataclass(frozen=True)
class AnswerGrade:
    """Is the answer grounded, and (when it is) does it answer the question."""

    grounding: GroundingGrade
    usefulness: UsefulnessGrade | None
    """None when the answer was not grounded: usefulness was not asked."""


@dataclass(frozen=True)
class Answer:
    text: str
    """The answer itself: a short span (local) or the written answer (LLM)."""
    kind: Literal["extractive", "generative", "no_retrieval"]
    used_ids: list[str] = field(default_factory=list)
    quote: str = ""
    """The sentence(s) that support a short answer, as they stand in the source."""
    confidence: float | None = None
    """0-1, how likely the answer is right; None when the backend cannot say."""
    features: dict[str, float] = field(default_factory=dict)
    """What the confidence was read from (local reader): see :mod:`nodes.judges.answer_model`."""
    part_confidences: dict[str, float] = field(default_factory=dict)
    """For a question asking several things at once, how sure the answer to each part is,
    keyed by the part as asked; empty for a one-part answer."""
    disputed: list[str] = field(default_factory=list)
    """Two sentences of different documents making one statement with two values where the
    answer stands, the answer's first (local reader): the knowledge base disagrees with
    itself. Empty when nothing disputes the answer."""
    unmentioned: list[str] = field(default_factory=list)
    """What the question names (a name, a figure) that nothing the answer was read from
    mentions (local reader): the answer is about something else. Empty when all is named."""
    unasked: list[str] = field(default_factory=list)
    """The question's own words (those no title of the documents read says), as it writes
    them, when the sentences the answer quotes hold none of them (local reader): the answer
    is about the question's subject, not about what it asks. Empty otherwise."""
    stands_on: list[str] = field(default_factory=list)
    """What the answer stands on, which a rejected answer's successor must not stand on again:
    for the local reader the sentence it is read from, or one a part (empty for a verdict or
    a name counted across documents, which no one sentence gives); for a model that writes the
    same answer to the same prompt, that prompt's digest. Empty for a sampling model."""


class Judge(Protocol):
    """Reflection decisions: retrieve? relevant? grounded? useful? and query rewriting.

    ``grade_documents`` doubles as CRAG's retrieval evaluator: its 0-1 scores are compared
    with ``crag_thresholds[aggregation]`` = (upper, lower), calibrated per backend.
    """

    backend: str
    relevance_threshold: float
    crag_thresholds: dict[str, tuple[float, float]]

    async def needs_retrieval(
        self, question: str, closest: Sequence[Document] = ()
    ) -> RetrievalDecision:
        """``closest`` are the knowledge base's nearest chunks, a tie-breaker."""
        ...

    async def grade_documents(
        self, question: str, documents: Sequence[Document]
    ) -> list[RelevanceGrade]: ...

    async def grade_grounding(
        self, answer: str, documents: Sequence[Document]
    ) -> GroundingGrade: ...

    async def grade_usefulness(self, question: str, answer: str) -> UsefulnessGrade: ...

    async def grade_answer(
        self, question: str, answer: str, documents: Sequence[Document], quote: str = ""
    ) -> AnswerGrade:
        """Grounding, then usefulness if the answer is grounded (a backend may ask both at
        once). A short answer stands on its ``quote``: the quote must be grounded, and the
        answer with its quote must answer the question ("1943" alone shares no word with
        "When did…")."""
        ...

    async def rewrite_query(
        self, question: str, attempt: int, documents: Sequence[Document]
    ) -> str: ...

    async def search_query(self, question: str) -> str:
        """At most three keywords for a web search."""
        ...

    async def classify_complexity(
        self, question: str, history: Sequence[str] = ()
    ) -> ComplexityVerdict:
        """Adaptive-RAG's level; ``history`` (earlier questions) can resolve "this"/"it"."""
        ...

    async def assess_round(
        self,
        question: str,
        draft: str,
        round_documents: Sequence[Document],
        context: Sequence[Document],
    ) -> RoundAssessment:
        """Score a round: its documents, all gathered ``context``, and the draft."""
        ...

    async def next_query(
        self,
        question: str,
        draft: str,
        kind: QueryKind,
        missing: Sequence[str],
        asked: Sequence[str] = (),
    ) -> str:
        """The next round's query: ``alternative`` rephrases, ``expanded`` follows the draft;
        never one of the queries already ``asked`` (it would fetch the same chunks again)."""
        ...


class Generator(Protocol):
    """Writes the answer from the question and the selected documents."""

    backend: str
    reports_confidence: bool
    """Whether its answers carry their own confidence (else the sources' grades stand in)."""
    reads_first_retrieval: bool
    """Whether it is shown what the first retrieval found beside the documents the judges
    accepted. The extractive reader weighs every sentence itself, so a chunk graded just under
    the bar must not be hidden from it; a model writing an answer reads the accepted evidence
    only, as in the Self-RAG tutorial (the rest costs prompt tokens and distracts it). A
    backend without the attribute is shown both."""

    async def generate(
        self,
        question: str,
        documents: Sequence[Document],
        rejected: Sequence[str] = (),
        background: Sequence[Document] = (),
    ) -> Answer:
        """Answer from ``documents``. ``rejected``: what answers the judges turned down stood
        on (their ``stands_on``); the answer must stand on something else, or be empty.
        ``background`` holds documents the answer is not quoted from but whose facts may count
        (every chunk the run retrieved)."""
        ...


async def grounded_then_useful(
    judge: Judge, question: str, answer: str, documents: Sequence[Document], quote: str = ""
) -> AnswerGrade:
    """``grade_answer`` as two verdicts: grounding (of the quote, when there is one), then,
    only for a grounded answer, usefulness of the answer with its quote."""
    grounding = await judge.grade_grounding(quote or answer, documents)
    if grounding.level == "none":
        return AnswerGrade(grounding, None)
    usefulness = await judge.grade_usefulness(question, f"{answer} {quote}".strip())
    return AnswerGrade(grounding, usefulness)
