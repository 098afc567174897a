"""Per-run configuration, passed to every graph as its ``context_schema``.

Callers override any field per run (``graph.ainvoke(..., context={"top_k": 6})``, the CLI's
flags, or the ``context`` of an HTTP run); unset backends fall back to the process settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from providers.filters import Condition, parse_filters
from providers.settings import get_settings


@dataclass(kw_only=True)
class Context:
    """Knobs of one run: which knowledge base, how much to retrieve, how long to loop."""

    kb: str = field(
        default="", metadata={"description": "Knowledge base name (default: settings)."}
    )
    top_k: int = field(default=4, metadata={"description": "Chunks retrieved per query."})
    retrieval_mode: Literal["vector", "bm25", "hybrid"] = field(
        default="hybrid",
        metadata={"description": "vector, BM25, or both fused (hybrid)."},
    )
    fusion: Literal["score", "rrf"] = field(
        default="score",
        metadata={"description": "Hybrid: weighted scores, or reciprocal rank fusion."},
    )
    filters: dict[str, Any] | None = field(
        default=None,
        metadata={
            "description": "Metadata filters, ANDed: {'lang': 'zh'}, {'source': ['a', 'b']}, "
            "{'year': {'>=': 2020}}; operators = > >= < <= in not_in contains."
        },
    )
    max_query_rewrites: int = field(
        default=3, metadata={"description": "Query rewrites before giving up on retrieval."}
    )
    max_regenerations: int = field(
        default=2, metadata={"description": "Extra generations when an answer is not grounded."}
    )
    max_context_docs: int = field(
        default=4, metadata={"description": "Relevant chunks handed to the generator."}
    )
    judge_backend: Literal["local", "llm", ""] = field(
        default="",
        metadata={"description": "Backend of the reflection judges (default: settings)."},
    )
    generator_backend: Literal["local", "llm", ""] = field(
        default="", metadata={"description": "Backend that writes answers (default: settings)."}
    )
    crag_upper: float | None = field(
        default=None,
        metadata={"description": "CRAG: a score at or above this makes retrieval correct."},
    )
    crag_lower: float | None = field(
        default=None,
        metadata={"description": "CRAG: all scores below this make retrieval incorrect."},
    )
    crag_aggregation: Literal["any", "mean_top3"] = field(
        default="any",
        metadata={"description": "any document per the paper, or the mean of the top 3."},
    )
    refine_mode: Literal["window", "sentences", "passage"] = field(
        default="sentences",
        metadata={"description": "Strips: ~50-word windows, 3-sentence groups, or passages."},
    )
    max_web_searches: int = field(
        default=1, metadata={"description": "Web searches per question (CRAG)."}
    )
    web_kb: str = field(
        default="web",
        metadata={"description": "Collection searched by the offline 'local' web provider."},
    )
    search_provider: Literal["local", "tavily", "duckduckgo", "searxng", ""] = field(
        default="", metadata={"description": "Web search backend (default: settings)."}
    )
    initial_k: int = field(
        default=0,
        metadata={
            "description": "Skip reading: fetch this many candidates, rerank them with the "
            "relevance judge and read up to top_k above read_threshold (0: off)."
        },
    )
    read_threshold: float | None = field(
        default=None,
        metadata={"description": "Skip reading's bar (default: the relevance threshold)."},
    )
    max_rounds: int = field(
        default=3, metadata={"description": "Iterative: retrieval rounds at most."}
    )
    iterative_stop: Literal["completeness", "fixed"] = field(
        default="completeness",
        metadata={
            "description": "Iterative: stop when completeness reaches the threshold, or "
            "always run max_rounds."
        },
    )
    completeness_threshold: int = field(
        default=8, metadata={"description": "Iterative: completeness (1-10) that ends the loop."}
    )
    ask_back: bool = field(
        default=True,
        metadata={
            "description": "Adaptive: ask the user (interrupt) when a question is ambiguous; "
            "off, the run ends with stop_reason needs_clarification."
        },
    )
    relevance_threshold: float | None = field(
        default=None,
        metadata={"description": "Override the judge's calibrated relevance threshold (0-1)."},
    )

    def __post_init__(self) -> None:
        settings = get_settings()
        self.kb = self.kb or settings.default_kb
        self.judge_backend = self.judge_backend or settings.judge_backend
        self.generator_backend = self.generator_backend or settings.generator_backend
        self.search_provider = self.search_provider or settings.search_provider
        parse_filters(self.filters)  # raises FilterError (a ValueError) with the reason
        if self.retrieval_mode not in ("vector", "bm25", "hybrid"):
            raise ValueError("retrieval_mode must be vector, bm25 or hybrid")
        if self.fusion not in ("score", "rrf"):
            raise ValueError("fusion must be score or rrf")
        if self.iterative_stop not in ("completeness", "fixed"):
            raise ValueError("iterative_stop must be completeness or fixed")
        if not 1 <= self.completeness_threshold <= 10:
            raise ValueError("completeness_threshold must be between 1 and 10")
        if self.initial_k and self.initial_k < self.top_k:
            raise ValueError("initial_k must be 0 (off) or at least top_k")
        for name in ("top_k", "max_context_docs", "max_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("max_query_rewrites", "max_regenerations", "max_web_searches"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("relevance_threshold", "read_threshold", "crag_upper", "crag_lower"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
        if None not in (self.crag_upper, self.crag_lower) and self.crag_lower > self.crag_upper:
            raise ValueError("crag_lower must not exceed crag_upper")

    @property
    def conditions(self) -> list[Condition]:
        return parse_filters(self.filters)

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any] | None) -> Context:
        """Build from a dict, rejecting unknown keys with a clear message."""
        overrides = dict(overrides or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown context field(s): {', '.join(unknown)}")
        return cls(**overrides)
