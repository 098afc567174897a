"""What a run answered, as the CLI, the evaluation harness and the service report it.

Built from a run's final state, as the graph holds it (documents as ``Document``) or as the
HTTP API sends it (documents as JSON objects), so ``reflexrag ask --url`` reports a run on a
server the way a run in the process is reported, without importing LangGraph.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


def _doc_id(doc: Any) -> str | None:
    return doc.get("id") if isinstance(doc, dict) else doc.id


def _doc_source(doc: Any) -> str:
    """The id of the document a chunk (or its JSON form) comes from."""
    metadata = (doc.get("metadata") if isinstance(doc, dict) else doc.metadata) or {}
    return str(metadata.get("doc_id", _doc_id(doc)))


@dataclass
class RunResult:
    answer: str
    """The answer first: a short span (local backend) or the written answer (LLM)."""
    answer_kind: str | None
    sources: list[dict[str, Any]]
    stop_reason: str | None
    strategy: str
    crag_action: str | None
    counters: dict[str, int]
    steps: list[dict[str, str]]
    usage: dict[str, int]
    llm_calls: int
    elapsed_s: float
    thread_id: str | None = None
    route: str | None = None
    """Adaptive: no_retrieval, single_step or multi_step."""
    complexity: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    """Iterative: one entry per round (query, its kind, retrieved ids, scores)."""
    skip_rate: float | None = None
    """Skip reading: share of candidates not read."""
    clarifying_question: str | None = None
    interrupted: bool = False
    """The run is paused on a question for the user; resume its thread with the reply."""
    retrieved_doc_ids: list[str] = field(default_factory=list)
    context_doc_ids: list[str] = field(default_factory=list)
    quote: str = ""
    """The source sentence(s) supporting a short answer."""
    missing_parts: list[str] = field(default_factory=list)
    """A question asking several things: the parts the answer was not sure of (a give-up
    names them), when it was sure of another."""
    disputed: list[str] = field(default_factory=list)
    """Two sentences of different documents stating the answer's fact with two values (the
    answer's first): the knowledge base disagrees with itself."""
    unmentioned: list[str] = field(default_factory=list)
    """What the question names that nothing the answer was read from mentions (a give-up
    names it)."""
    unasked: list[str] = field(default_factory=list)
    """The question's own words that the passages the answer quotes do not say (a give-up
    names them)."""
    confidence: float | None = None
    """0-1: how likely the answer is right."""
    error: str | None = None
    """Why the run failed (a model server down, say); the answer is then empty."""

    @classmethod
    def failed(cls, strategy: str, error: str) -> RunResult:
        """A run that raised: an error result, so a batch (the eval) records it and goes on."""
        return cls(
            answer="",
            answer_kind="error",
            sources=[],
            stop_reason="error",
            strategy=strategy,
            crag_action=None,
            counters={},
            steps=[],
            usage={},
            llm_calls=0,
            elapsed_s=0.0,
            error=error,
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("retrieved_doc_ids")
        data.pop("context_doc_ids")
        # Strategy-specific fields appear only where they apply.
        for key, empty in (
            ("route", None),
            ("complexity", None),
            ("rounds", []),
            ("skip_rate", None),
            ("clarifying_question", None),
            ("quote", ""),
            ("missing_parts", []),
            ("disputed", []),
            ("unmentioned", []),
            ("unasked", []),
            ("error", None),
        ):
            if data[key] == empty:
                data.pop(key)
        return data


def result_from_state(
    values: dict[str, Any], strategy: str, elapsed: float, thread_id: str | None
) -> RunResult:
    """What a run whose final state is ``values`` answered, at what cost."""
    usage = dict(values.get("usage") or {})
    grades = values.get("doc_grades") or {}
    documents = values.get("documents") or []
    retrieved = [_doc_source(doc) for doc in documents]
    relevant = [doc for doc in documents if grades.get(_doc_id(doc), {}).get("relevant")]
    context_docs = (
        list(values.get("knowledge_strips") or [])
        or relevant
        or [d for d in documents if _doc_id(d) in set(values.get("last_retrieved_ids") or [])]
    )
    return RunResult(
        answer=values.get("generation") or "",
        quote=values.get("quote") or "",
        missing_parts=list(values.get("missing_parts") or []),
        disputed=list(values.get("disputed") or []),
        unmentioned=list(values.get("unmentioned") or []),
        unasked=list(values.get("unasked") or []),
        confidence=values.get("confidence"),
        answer_kind=values.get("answer_kind"),
        sources=list(values.get("sources") or []),
        stop_reason=values.get("stop_reason"),
        strategy=strategy,
        crag_action=values.get("crag_action"),
        counters={
            "retrieval_attempts": values.get("retrieval_attempts", 0),
            "query_rewrites": values.get("query_rewrites", 0),
            "generation_attempts": values.get("generation_attempts", 0),
            "web_searches": values.get("web_searches", 0),
        },
        steps=list(values.get("steps") or []),
        usage=usage,
        llm_calls=sum(v for k, v in usage.items() if k.startswith("llm.")),
        elapsed_s=round(elapsed, 3),
        thread_id=thread_id,
        route=(values.get("complexity") or {}).get("level"),
        complexity=values.get("complexity"),
        rounds=[
            {key: value for key, value in r.items() if key != "draft"}
            for r in values.get("rounds") or []
        ],
        skip_rate=values.get("skip_rate"),
        clarifying_question=(
            values.get("generation") if values.get("stop_reason") == "needs_clarification" else None
        ),
        retrieved_doc_ids=list(dict.fromkeys(retrieved)),
        context_doc_ids=list(dict.fromkeys(_doc_source(d) for d in context_docs)),
    )


def pause(result: RunResult, payload: Any) -> None:
    """Mark ``result`` as a run paused by ``interrupt(payload)`` on a question for the user."""
    asked = payload.get("question") if isinstance(payload, dict) else str(payload)
    result.interrupted = True
    result.clarifying_question = asked
    result.stop_reason = "needs_clarification"
    result.answer, result.answer_kind = asked or "", "clarification"
