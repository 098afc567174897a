"""Graph state shared by every strategy.

Loop limits are enforced by routing functions that read the counters kept here, so every run
ends in a terminal node with a ``stop_reason`` rather than hitting LangGraph's recursion limit.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from langchain_core.documents import Document
from typing_extensions import TypedDict

T = TypeVar("T")

StopReason = Literal[
    "answered",
    "no_retrieval_needed",
    "max_retrieval_attempts",
    "max_generation_attempts",
    "sources_disagree",
    "empty_knowledge_base",
    "no_relevant_knowledge",
    "no_matching_documents",
    "no_new_evidence",
    "needs_clarification",
]
CragAction = Literal["correct", "incorrect", "ambiguous"]
Grounding = Literal["fully", "partially", "none"]
Complexity = Literal["no_retrieval", "single_step", "multi_step"]
"""Adaptive-RAG's levels A, B and C."""
QueryKind = Literal["question", "alternative", "expanded"]


class DocGrade(TypedDict):
    """A judge's verdict on one retrieved chunk for one query."""

    score: float
    relevant: bool
    query: str


class Source(TypedDict):
    """A document an answer (or the best evidence) came from."""

    id: str
    doc_id: str
    title: str
    score: float
    origin: Literal["kb", "web"]


class Step(TypedDict):
    """One line of the run's trace: which node ran and what it decided."""

    node: str
    summary: str


class ComplexityInfo(TypedDict):
    """The complexity classifier's verdict, with the features it was based on."""

    level: Complexity
    ambiguous: bool
    clarifying_question: str
    features: dict[str, Any]
    reason: str


class Round(TypedDict):
    """One round of iterative retrieval: what was asked, found, drafted and how it scored."""

    round: int
    query: str
    query_kind: QueryKind
    retrieved_ids: list[str]
    relevant_ids: list[str]
    draft: str
    relevance: int
    """0-10: how relevant this round's documents are."""
    completeness: int
    """1-10: how completely the gathered context answers the question."""
    quality: int
    """0-10: how good the draft is as an answer."""
    missing: list[str]
    """Question terms the gathered context does not cover."""


class Limits(TypedDict):
    """The run's loop limits, copied from its :class:`Context` when a question starts, so the
    routers read everything they decide on from the state: they then route the same inside
    ``update_state`` (Studio's "edit state and continue"), where LangGraph gives a
    conditional edge no run context (LangGraph issue #6340)."""

    max_query_rewrites: int
    max_regenerations: int
    max_web_searches: int
    min_confidence: float
    max_rounds: int
    iterative_stop: Literal["completeness", "fixed"]
    completeness_threshold: int
    ask_back: bool


class Reading(TypedDict):
    """Skip reading for one retrieval: candidates read (kept) and skipped, with their scores."""

    query: str
    read: dict[str, float]
    skipped: dict[str, float]


RESET = "delete"
"""Returned by a node for a reducer-managed field, it clears the field (a new question)."""


def merge_documents(
    existing: list[Document] | None, new: list[Document] | Literal["delete"] | None
) -> list[Document]:
    """Accumulate documents across retrieval rounds, deduplicated by id (newer copy wins)."""
    if new == RESET:
        return []
    merged = {doc.id: doc for doc in existing or []}
    for doc in new or []:
        merged[doc.id] = doc
    return list(merged.values())


def merge_grades(
    existing: dict[str, DocGrade] | None, new: dict[str, DocGrade] | Literal["delete"] | None
) -> dict[str, DocGrade]:
    """Latest grade per document id: a rewritten query re-grades what it retrieves."""
    if new == RESET:
        return {}
    return {**(existing or {}), **(new or {})}


def sum_counts(
    existing: dict[str, int] | None, new: dict[str, int] | Literal["delete"] | None
) -> dict[str, int]:
    """Add counters key by key (calls per role, tokens)."""
    if new == RESET:
        return {}
    total = dict(existing or {})
    for key, value in (new or {}).items():
        total[key] = total.get(key, 0) + value
    return total


def append_items(existing: list[T] | None, new: list[T] | Literal["delete"] | None) -> list[T]:
    """Logs that grow by each node's entries (steps, rounds, readings)."""
    if new == RESET:
        return []
    return [*(existing or []), *(new or [])]


class InputState(TypedDict):
    """What a caller provides."""

    question: str


class RAGState(TypedDict, total=False):
    """Everything a run knows; nodes return partial updates of it."""

    question: str
    """The current search query (rewrites replace it)."""
    original_question: str
    """The user's question, unchanged; answers are judged against it."""
    needs_retrieval: bool
    documents: Annotated[list[Document], merge_documents]
    """Every chunk retrieved so far, deduplicated by id."""
    last_retrieved_ids: list[str]
    """Chunk ids returned by the most recent retrieval."""
    new_chunk_ids: list[str]
    """Those of them the run had not retrieved before (none: a rewritten query found only
    what was already read)."""
    doc_grades: Annotated[dict[str, DocGrade], merge_grades]
    generation: str
    """The answer: a short span (local backend) or a written answer (LLM)."""
    quote: str
    """The source sentence(s) supporting a short answer."""
    confidence: float
    """0-1: how likely the answer is right (for ranking answers and for abstaining)."""
    answer_kind: Literal[
        "extractive", "generative", "best_effort", "not_found", "no_retrieval", "clarification"
    ]
    """``best_effort``: given after the loop gave up, from the best evidence seen (only with
    the run's ``best_effort`` on)."""
    sources: list[Source]
    missing_parts: list[str]
    """The parts of a question asking several things that the latest answer is not sure of
    (under the run's ``min_confidence``): what a give-up names as not found."""
    disputed: list[str]
    """Two sentences of different documents that make the latest answer's statement with two
    values (the answer's first): the knowledge base disagrees with itself, and a give-up
    quotes both."""
    unmentioned: list[str]
    """What the question names (a name, a figure) that nothing the latest answer was read from
    mentions: that answer is about something else, and a give-up says so."""
    unasked: list[str]
    """The question's own words (those no title says) when the sentences the latest answer
    quotes hold none of them: that answer is about the subject, not about what is asked, and
    a give-up says which words no passage said."""
    stood_on: Annotated[list[str], append_items]
    """What this question's answers stood on, in order (``Answer.stands_on``: sentences for
    the local reader, a prompt's digest for a temperature-0 model). Every answer but the
    latest was rejected (else the run would have ended), so a new one stands on none of
    them: the loop never gives, nor pays for, an answer its judges turned down again."""
    grounding: Grounding
    useful: bool
    retrieval_attempts: int
    query_rewrites: int
    generation_attempts: int
    crag_action: CragAction
    """The retrieval evaluator's verdict (CRAG strategies)."""
    web_query: str
    web_searches: int
    knowledge_strips: list[Document]
    """Refined context: the best strips of the kept documents, each tagged with its source."""
    stop_reason: StopReason
    limits: Limits
    """The run's loop limits (written by ``prepare``); routers read them here."""
    history: list[str]
    """Earlier questions of this thread, newest last: what "this" or "it" can refer to."""
    complexity: ComplexityInfo
    """Adaptive: the classifier's verdict; its level is the route taken."""
    clarifications: int
    query_kind: QueryKind
    """Iterative: how the current query was made."""
    rounds: Annotated[list[Round], append_items]
    """Iterative retrieval's rounds, in order."""
    reading: Annotated[list[Reading], append_items]
    """Skip reading's decisions, one entry per retrieval."""
    skip_rate: float
    """Share of all candidates so far that skip reading did not read."""
    steps: Annotated[list[Step], append_items]
    usage: Annotated[dict[str, int], sum_counts]
    """Calls per backend and role (``llm.grader``, ``local.generator``) and token counts."""
