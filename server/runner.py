"""Running a strategy on one question, shared by the CLI, the evaluation harness and the service.

:func:`run_question` streams node updates (so callers can print or forward them as they happen)
and returns a :class:`RunResult`: the answer, its sources, the stop reason and the run's cost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from reflexrag.graphs import compile_strategy
from reflexrag.providers.knowledge_base import StoreUnavailableError
from reflexrag.providers.models import ModelServerError
from reflexrag.server.results import RunResult, pause, result_from_state
from reflexrag.state import Context

NodeUpdateHandler = Callable[[str, dict[str, Any]], Awaitable[None] | None]
TokenHandler = Callable[[str], None]


class NothingToResumeError(ValueError):
    """A reply was given for a thread with no run waiting for one."""


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
    result = result_from_state(values, strategy, time.perf_counter() - started, thread_id)
    result.error = failure
    if paused:
        pause(result, paused[0].value)
    return result
