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
from langgraph.types import Command

from reflexrag.graphs import compile_strategy
from reflexrag.providers.knowledge_base import StoreUnavailableError
from reflexrag.providers.models import ModelServerError
from reflexrag.state import Context

NodeUpdateHandler = Callable[[str, dict[str, Any]], Awaitable[None] | None]
TokenHandler = Callable[[str], None]


class NothingToResumeError(ValueError):
    """A reply was given for a thread with no run waiting for one."""


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
            ("error", None),
        ):
            if data[key] == empty:
                data.pop(key)
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
        quote=values.get("quote") or "",
        missing_parts=list(values.get("missing_parts") or []),
        disputed=list(values.get("disputed") or []),
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
        context_doc_ids=list(
            dict.fromkeys(str(d.metadata.get("doc_id", d.id)) for d in context_docs)
        ),
    )


async def run_question(
    strategy: str,
    question: str | None,
    context: Context,
    *,
    checkpointer: BaseCheckpointSaver | None = None,
    thread_id: str | None = None,
    resume: Any = None,
    on_update: NodeUpdateHandler | None = None,
    recursion_limit: int | None = None,
    graph: CompiledStateGraph | None = None,
    on_token: TokenHandler | None = None,
) -> RunResult:
    """Run ``strategy`` on ``question`` (or, with ``resume``, continue the thread's paused run
    with that reply) and return its result; ``on_update(node, update)`` sees every node's
    update as it finishes, subgraph nodes included, and ``on_token(text)`` every token an LLM
    generator writes (judges' tokens never). ``graph`` runs a graph outside the registry. A
    run paused by ``interrupt()`` ends with stop_reason ``needs_clarification``; a model
    server or a vector store server that fails ends it with stop_reason ``error`` and the
    reason in ``error``."""
    if resume is None and not (question or "").strip():
        raise ValueError("the question is empty")
    if resume is not None and (checkpointer is None or not thread_id):
        raise ValueError("resuming needs a checkpointer and the paused run's thread id")
    graph = graph or compile_strategy(strategy, checkpointer)
    config: dict[str, Any] = {}
    if checkpointer is not None:
        thread_id = thread_id or str(uuid.uuid4())
        config["configurable"] = {"thread_id": thread_id}
    if recursion_limit:
        config["recursion_limit"] = recursion_limit
    if resume is not None and not (await graph.aget_state(config)).interrupts:
        raise NothingToResumeError(f"thread {thread_id} has no run waiting for a reply")
    started = time.perf_counter()
    values: dict[str, Any] = {}
    paused: list[Any] = []
    inside: set[str] = set()
    modes = ["updates", "values", *(["messages"] if on_token is not None else [])]
    failure: str | None = None
    try:
        async for namespace, mode, chunk in graph.astream(
            Command(resume=resume) if resume is not None else {"question": question},
            config=config,
            context=context,
            stream_mode=modes,
            subgraphs=True,
            durability="sync" if checkpointer is not None else None,
        ):
            if mode == "messages":
                message, _ = chunk
                if on_token is not None and isinstance(message.content, str) and message.content:
                    on_token(message.content)
                continue
            if mode == "values":
                if not namespace:
                    values = chunk
                continue
            if namespace:
                inside.add(namespace[0].split(":")[0])
            for node, update in chunk.items():
                if node == "__interrupt__":
                    paused.extend(update)
                    continue
                if not namespace and node in inside:
                    continue  # a subgraph's summary of updates already reported one by one
                if on_update is not None:
                    maybe = on_update(node, update or {})
                    if maybe is not None:
                        await maybe
    except GraphRecursionError:
        # Only graphs bounded by recursion_limit alone (the tutorial baseline) get here; keep
        # what they did so their cost is counted, and say why they stopped. Such a run gave
        # no answer and failed: an error, never an abstention.
        failure = f"recursion limit of {recursion_limit} reached without an answer"
        values = {
            **values,
            "stop_reason": "recursion_error",
            "answer_kind": "error",
            "generation": "",
        }
    except (ModelServerError, StoreUnavailableError) as exc:
        # Keep what the run did before the model or vector store server failed (its steps
        # and calls; the store was retried for about 15 s), and say why.
        failure = str(exc)
        values = {**values, "stop_reason": "error", "answer_kind": "error", "generation": ""}
        values["sources"] = []
    result = _result_from_state(values, strategy, time.perf_counter() - started, thread_id)
    result.error = failure
    if paused:
        payload = paused[0].value
        asked = payload.get("question") if isinstance(payload, dict) else str(payload)
        result.interrupted = True
        result.clarifying_question = asked
        result.stop_reason = "needs_clarification"
        result.answer, result.answer_kind = asked or "", "clarification"
    return result
