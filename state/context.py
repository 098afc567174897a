"""Per-run configuration, passed to every graph as its ``context_schema``.

Callers override any field per run (``graph.ainvoke(..., context={"top_k": 6})``, the CLI's
flags, or the ``context`` of an HTTP run); unset backends fall back to the process settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from providers.settings import get_settings


@dataclass(kw_only=True)
class Context:
    """Knobs of one run: which knowledge base, how much to retrieve, how long to loop."""

    kb: str = field(
        default="", metadata={"description": "Knowledge base name (default: settings)."}
    )
    top_k: int = field(default=4, metadata={"description": "Chunks retrieved per query."})
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
    relevance_threshold: float | None = field(
        default=None,
        metadata={"description": "Override the judge's calibrated relevance threshold (0-1)."},
    )

    def __post_init__(self) -> None:
        settings = get_settings()
        self.kb = self.kb or settings.default_kb
        self.judge_backend = self.judge_backend or settings.judge_backend
        self.generator_backend = self.generator_backend or settings.generator_backend
        for name in ("top_k", "max_context_docs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("max_query_rewrites", "max_regenerations"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.relevance_threshold is not None and not 0 <= self.relevance_threshold <= 1:
            raise ValueError("relevance_threshold must be between 0 and 1")

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any] | None) -> Context:
        """Build from a dict, rejecting unknown keys with a clear message."""
        overrides = dict(overrides or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown context field(s): {', '.join(unknown)}")
        return cls(**overrides)
