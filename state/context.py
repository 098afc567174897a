"""Per-run configuration, passed to every graph as its ``context_schema``.

Callers override any field per run (``graph.ainvoke(..., context={"top_k": 6})``, the CLI's
flags, or the ``context`` of an HTTP run); unset backends fall back to the process settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import Field, TypeAdapter, ValidationError

from reflexrag.providers.filters import Condition, parse_filters
from reflexrag.providers.settings import KB_NAME_RE, get_settings
from reflexrag.state.schema import Limits

MAX_QUESTION_CHARS = 2000
"""Longest question accepted (characters); the CLI, the HTTP API and the graphs enforce it."""
DEFAULT_MIN_CONFIDENCE = 0.5
"""Abstention level of the self-correcting strategies (see ``min_confidence``). A confidence
is a probability of being right (the local reader's is fitted leave-one-set-out, see
``nodes.judges.answer_model``); a right answer scores +1 and a wrong one -1 against 0 for
saying not found, so answering pays exactly when it is more likely right than wrong."""
MAX_RECURSION_LIMIT = 1000
"""Largest ``recursion_limit`` a caller may set; the bounded loops need far fewer steps."""


def described(default: Any, description: str) -> Any:
    return field(default=default, metadata={"description": description})


def between(low: float, high: float) -> Any:
    """An inclusive range, enforced in ``__post_init__`` and shown in the JSON schema."""
    return Field(ge=low, le=high)


def check_question(question: Any) -> str:
    """The question, stripped; a ``ValueError`` says why it cannot be asked."""
    if not isinstance(question, str):
        raise ValueError("the question must be a string")
    if not question.strip():
        raise ValueError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(
            f"the question has {len(question)} characters; "
            f"at most {MAX_QUESTION_CHARS} are accepted"
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the question is not valid Unicode text (lone surrogate)") from None
    return question.strip()


@dataclass(kw_only=True)
class Context:
    """Knobs of one run: which knowledge base, how much to retrieve, how long to loop."""

    kb: str = field(
        default="", metadata={"description": "Knowledge base name (default: settings)."}
    )
    top_k: Annotated[int, between(1, 50)] = described(4, "Chunks retrieved per query.")
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
    max_query_rewrites: Annotated[int, between(0, 10)] = described(
        3, "Query rewrites before giving up on retrieval."
    )
    max_regenerations: Annotated[int, between(0, 10)] = described(
        2, "Extra generations when an answer is not grounded."
    )
    max_context_docs: Annotated[int, between(1, 20)] = described(
        4, "Relevant chunks handed to the generator."
    )
    judge_backend: Literal["local", "llm", ""] = field(
        default="",
        metadata={"description": "Backend of the reflection judges (default: settings)."},
    )
    generator_backend: Literal["local", "llm", ""] = field(
        default="", metadata={"description": "Backend that writes answers (default: settings)."}
    )
    llm_judging: Literal["per_call", "batched", "cascade", ""] = described(
        "",
        "How LLM judges spend calls (default: settings, cascade): per_call asks the model "
        "every question the tutorial asks (one call per chunk); batched grades all chunks in "
        "one call, grounded and useful in one call, and asks the router only when rules "
        "cannot tell; cascade is batched, with the local judge deciding the chunks it scores "
        "far from its bar, and a written answer as sure as the local reader is that the "
        "passages answer the question.",
    )
    crag_upper: Annotated[float | None, between(0, 1)] = described(
        None, "CRAG: a score at or above this makes retrieval correct."
    )
    crag_lower: Annotated[float | None, between(0, 1)] = described(
        None, "CRAG: all scores below this make retrieval incorrect."
    )
    crag_aggregation: Literal["any", "mean_top3"] = field(
        default="any",
        metadata={"description": "any document per the paper, or the mean of the top 3."},
    )
    refine_mode: Literal["window", "sentences", "passage"] = field(
        default="sentences",
        metadata={"description": "Strips: ~50-word windows, 3-sentence groups, or passages."},
    )
    max_web_searches: Annotated[int, between(0, 5)] = described(
        1, "Web searches per question (CRAG)."
    )
    web_kb: str = field(
        default="web",
        metadata={"description": "Collection searched by the offline 'local' web provider."},
    )
    search_provider: Literal["local", "tavily", "duckduckgo", "searxng", ""] = field(
        default="", metadata={"description": "Web search backend (default: settings)."}
    )
    initial_k: Annotated[int, between(0, 200)] = described(
        0,
        "Skip reading: fetch this many candidates, rerank them with the relevance judge and "
        "read up to top_k above read_threshold (0: off).",
    )
    read_threshold: Annotated[float | None, between(0, 1)] = described(
        None, "Skip reading's bar (default: the relevance threshold)."
    )
    max_rounds: Annotated[int, between(1, 10)] = described(
        3, "Iterative: retrieval rounds at most."
    )
    iterative_stop: Literal["completeness", "fixed"] = field(
        default="completeness",
        metadata={
            "description": "Iterative: stop when completeness reaches the threshold, or "
            "always run max_rounds."
        },
    )
    completeness_threshold: Annotated[int, between(1, 10)] = described(
        8, "Iterative: completeness (1-10) that ends the loop."
    )
    ask_back: bool = field(
        default=True,
        metadata={
            "description": "Adaptive: ask the user (interrupt) when a question is ambiguous; "
            "off, the run ends with stop_reason needs_clarification."
        },
    )
    min_confidence: Annotated[float, between(0, 1)] = described(
        DEFAULT_MIN_CONFIDENCE,
        "Lowest confidence a self-correcting strategy answers with: a judged-useful answer "
        "under it sends the loop looking further, and a loop that ends without an accepted "
        "answer says not found.",
    )
    best_effort: bool = described(
        False,
        "When a self-correcting loop gives up, answer from the best evidence seen (answer_kind "
        "best_effort) if the grounding and usefulness judges accept that answer at "
        "min_confidence; off, the run says not found.",
    )
    relevance_threshold: Annotated[float | None, between(0, 1)] = described(
        None, "Override the judge's calibrated relevance threshold (0-1)."
    )

    def __post_init__(self) -> None:
        for item in fields(self):
            if item.name in _REGISTERED_BACKENDS:
                continue  # backends may be registered beyond the two built in (tests do)
            setattr(self, item.name, _validate_type(item.name, getattr(self, item.name)))
        _check_backends(self)
        settings = get_settings()
        self.kb = self.kb or settings.default_kb
        self.judge_backend = self.judge_backend or settings.judge_backend
        self.generator_backend = self.generator_backend or settings.generator_backend
        self.search_provider = self.search_provider or settings.search_provider
        self.llm_judging = self.llm_judging or settings.llm_judging
        for name in ("kb", "web_kb"):
            if not KB_NAME_RE.match(getattr(self, name)):
                raise ValueError(
                    f"{name} {getattr(self, name)!r} is not a knowledge base name: "
                    "use 1-63 letters, digits, '-' or '_'"
                )
        parse_filters(self.filters)  # raises FilterError (a ValueError) with the reason
        if self.initial_k and self.initial_k < self.top_k:
            raise ValueError("initial_k must be 0 (off) or at least top_k")
        if None not in (self.crag_upper, self.crag_lower) and self.crag_lower > self.crag_upper:
            raise ValueError("crag_lower must not exceed crag_upper")

    @property
    def limits(self) -> Limits:
        """The loop limits the routers enforce, as the state carries them."""
        return Limits(**{key: getattr(self, key) for key in Limits.__annotations__})

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


@cache
def _field_adapter(name: str) -> TypeAdapter:
    return TypeAdapter(get_type_hints(Context, include_extras=True)[name])


def _validate_type(name: str, value: Any) -> Any:
    """``value`` checked against the field's type: ``top_k=2.5``, ``kb=123`` or an unknown
    ``judge_backend`` are refused with the field's name, whoever builds the Context (the CLI,
    the HTTP API, or ``langgraph dev``)."""
    try:
        return _field_adapter(name).validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise ValueError(f"{name}: {reason} (got {value!r})") from None


_REGISTERED_BACKENDS = ("judge_backend", "generator_backend")


def _check_backends(context: Context) -> None:
    from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS

    for name, registry in zip(
        _REGISTERED_BACKENDS, (JUDGE_BACKENDS, GENERATOR_BACKENDS), strict=True
    ):
        value = getattr(context, name)
        if not isinstance(value, str) or (value and value not in registry):
            raise ValueError(f"{name} must be one of {', '.join(registry)}, not {value!r}")
