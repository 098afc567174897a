"""The small interfaces every reflection decision goes through, and their verdict types.

Two backends implement them: :mod:`nodes.judges.llm` (a chat model) and
:mod:`nodes.judges.local` (embeddings, lexical overlap and rules; no language model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from langchain_core.documents import Document

from state import Grounding


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
class Answer:
    text: str
    kind: Literal["extractive", "generative", "no_retrieval"]
    used_ids: list[str] = field(default_factory=list)


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

    async def rewrite_query(
        self, question: str, attempt: int, documents: Sequence[Document]
    ) -> str: ...

    async def search_query(self, question: str) -> str:
        """At most three keywords for a web search."""
        ...


class Generator(Protocol):
    """Writes the answer from the question and the selected documents."""

    backend: str

    async def generate(
        self, question: str, documents: Sequence[Document], attempt: int
    ) -> Answer: ...
