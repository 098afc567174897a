"""Running a strategy on one question, shared by the CLI, the evaluation harness and the service.

:func:`run_question` streams node updates (so callers can print or forward them as they happen)
and returns a :class:`RunResult`: the answer, its sources, the stop reason and the run's cost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph

from graphs import compile_strategy
from state import Context

NodeUpdateHandler = Callable[[str, dict[str, Any]], Awaitable[None] | None]


@dataclass
class RunResult:
    answer: str
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
    retrieved_doc_ids: list[str] = field(default_factory=list)
    context_doc_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("retrieved_doc_ids")
        data.pop("context_doc_ids")
        return data


def _result_from_state(
    values: dict[str, Any], strategy: str, elapsed: float, thread_id: str | None
) -> RunResult:
    usage = dict(values.get("usage") or {})
    grades = values.get("doc_grades") or {}
    documents = values.get("documents") or []
    retrieved = [str(doc.metadata.get("doc_id", doc.id)) for doc in documents]
    relevant = [doc for doc in documents if grades.get(doc.id, {}).get("relevant")]
    context_docs = (
        list(values.get("knowledge_strips") or [])
        or relevant
        or [d for d in documents if d.id in set(values.get("last_retrieved_ids") or [])]
    )
    return RunResult(
        answer=values.get("generation") or "",
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
        retrieved_doc_ids=list(dict.fromkeys(retrieved)),
        context_doc_ids=list(
            dict.fromkeys(str(d.metadata.get("doc_id", d.id)) for d in context_docs)
        ),
    )


async def run_question(
    strategy: str,
    question: str,
    context: Context,
    *,
    checkpointer: BaseCheckpointSaver | None = None,
    thread_id: str | None = None,
    on_update: NodeUpdateHandler | None = None,
    recursion_limit: int | None = None,
    graph: CompiledStateGraph | None = None,
) -> RunResult:
    """Run ``strategy`` on ``question`` and return its result; ``on_update(node, update)`` sees
    every node's update as it finishes. ``graph`` runs a graph outside the registry."""
    if not question.strip():
        raise ValueError("the question is empty")
    graph = graph or compile_strategy(strategy, checkpointer)
    config: dict[str, Any] = {}
    if checkpointer is not None:
        thread_id = thread_id or str(uuid.uuid4())
        config["configurable"] = {"thread_id": thread_id}
    if recursion_limit:
        config["recursion_limit"] = recursion_limit
    started = time.perf_counter()
    values: dict[str, Any] = {}
    try:
        async for mode, chunk in graph.astream(
            {"question": question},
            config=config,
            context=context,
            stream_mode=["updates", "values"],
            durability="sync" if checkpointer is not None else None,
        ):
            if mode == "values":
                values = chunk
            elif on_update is not None:
                for node, update in chunk.items():
                    maybe = on_update(node, update or {})
                    if maybe is not None:
                        await maybe
    except GraphRecursionError:
        # Only graphs bounded by recursion_limit alone (the tutorial baseline) get here; keep
        # what they did so their cost is counted, and say why they stopped.
        values = {**values, "stop_reason": "recursion_error", "answer_kind": None, "generation": ""}
    return _result_from_state(values, strategy, time.perf_counter() - started, thread_id)
