"""Runs of the HTTP service: each is an asyncio task whose stream events are buffered.

Every run publishes LangGraph Server's events (``metadata``, one per requested stream mode,
``error``, ``end``) into its own buffer, so a streaming client, a ``join`` and a late
``join_stream`` all see the same sequence. A thread runs one thing at a time; what a second
run does depends on its ``multitask_strategy``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.types import Command

from graphs import compile_strategy
from providers.checkpointer import Checkpointers
from server.serialize import jsonable
from server.store import ServiceStore
from state import Context

log = logging.getLogger("reflexrag.server")

# API stream mode → LangGraph stream mode. "messages" is served in the tuple form.
STREAM_MODES = {
    "values": "values",
    "updates": "updates",
    "custom": "custom",
    "messages": "messages",
    "messages-tuple": "messages",
    "debug": "debug",
}
MultitaskStrategy = Literal["reject", "interrupt", "enqueue"]


class RunConflictError(Exception):
    """The thread is busy and the run asked to be rejected in that case."""


@dataclass
class RunSpec:
    """Everything needed to execute one run, already validated."""

    thread_id: str
    graph_id: str
    owner: str
    input: dict[str, Any] | None
    command: dict[str, Any] | None
    context: Context
    stream_modes: list[str]
    checkpoint_id: str | None = None
    recursion_limit: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    multitask_strategy: MultitaskStrategy = "reject"
    delete_thread_after: bool = False
    stream_subgraphs: bool = False


@dataclass
class ActiveRun:
    run: dict[str, Any]
    spec: RunSpec
    events: list[tuple[str, Any]] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    final_values: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    def publish(self, event: str, data: Any) -> None:
        self.events.append((event, data))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def subscribe(self) -> AsyncIterator[tuple[str, Any]]:
        """Every event from the first, then new ones as they come, until the run ends."""
        position = 0
        while True:
            changed = self._changed
            while position < len(self.events):
                yield self.events[position]
                position += 1
            if self.finished.is_set():
                return
            await changed.wait()


class RunManager:
    def __init__(self, store: ServiceStore, checkpointers: Checkpointers) -> None:
        self.store = store
        self.checkpointers = checkpointers
        self.active: dict[str, ActiveRun] = {}
        self.by_thread: dict[str, ActiveRun] = {}

    def _forget_old_runs(self, keep: int = 200) -> None:
        """Finished runs stay joinable for a while; the oldest beyond ``keep`` are dropped."""
        finished = [rid for rid, run in self.active.items() if run.finished.is_set()]
        for run_id in finished[: max(0, len(finished) - keep)]:
            del self.active[run_id]

    def busy(self, thread_id: str) -> ActiveRun | None:
        current = self.by_thread.get(thread_id)
        return current if current and not current.finished.is_set() else None

    async def start(self, spec: RunSpec) -> ActiveRun:
        """Create the run record and start it (or queue it behind the thread's current run)."""
        previous = self.busy(spec.thread_id)
        if previous and spec.multitask_strategy == "reject":
            raise RunConflictError(
                f"thread {spec.thread_id} already has run {previous.run_id} in progress; "
                "wait for it, cancel it, or use multitask_strategy 'enqueue' or 'interrupt'"
            )
        run = await self.store.create_run(
            spec.thread_id, spec.graph_id, spec.owner, spec.metadata, spec.multitask_strategy
        )
        active = ActiveRun(run=run, spec=spec)
        self.active[active.run_id] = active
        self.by_thread[spec.thread_id] = active
        active.task = asyncio.create_task(self._execute(active, previous))
        return active

    async def cancel(self, active: ActiveRun, wait: bool) -> None:
        if active.task is not None and not active.finished.is_set():
            active.task.cancel()
        if wait:
            await active.finished.wait()

    def _graph_input(self, spec: RunSpec) -> Any:
        if spec.command:
            return Command(**spec.command)
        return spec.input

    async def _execute(self, active: ActiveRun, previous: ActiveRun | None) -> None:
        spec = active.spec
        status, thread_status = "success", "idle"
        graph = compile_strategy(spec.graph_id, self.checkpointers.for_run())
        try:
            if previous is not None:
                if spec.multitask_strategy == "interrupt":
                    await self.cancel(previous, wait=True)
                else:
                    await previous.finished.wait()
            await self.store.update_thread(spec.thread_id, status="busy", graph_id=spec.graph_id)
            await self.store.set_run_status(active.run_id, "running")
            active.publish("metadata", {"run_id": active.run_id, "attempt": 1})
            async for item in graph.astream(
                self._graph_input(spec),
                self._config(spec),
                context=spec.context,
                stream_mode=sorted({STREAM_MODES[mode] for mode in spec.stream_modes}),
                subgraphs=spec.stream_subgraphs,
                durability="sync",
            ):
                namespace, mode, chunk = item if spec.stream_subgraphs else ((), *item)
                # LangGraph Server names a subgraph's events "<mode>|<node>:<task id>".
                event = "|".join([mode, *namespace])
                active.publish(event, jsonable(chunk))
        except asyncio.CancelledError:
            status = "interrupted"
        except Exception as exc:  # a failing run is reported to the client, never re-raised
            log.exception("run %s failed", active.run_id)
            status, thread_status = "error", "error"
            active.error = {"error": type(exc).__name__, "message": str(exc)}
            active.publish("error", active.error)
        finally:
            thread_status = await asyncio.shield(
                self._final_state(active, graph, status, thread_status)
            )
            active.publish("end", None)
            await asyncio.shield(self._settle(active, status, thread_status))

    @staticmethod
    def _config(spec: RunSpec) -> dict[str, Any]:
        configurable: dict[str, Any] = {"thread_id": spec.thread_id}
        if spec.checkpoint_id:
            configurable["checkpoint_id"] = spec.checkpoint_id
        config: dict[str, Any] = {"configurable": configurable}
        if spec.recursion_limit:
            config["recursion_limit"] = spec.recursion_limit
        return config

    async def _final_state(
        self, active: ActiveRun, graph: Any, status: str, thread_status: str
    ) -> str:
        """Record the thread's final values; a thread with a next step or pending task is
        interrupted (resumable), not idle."""
        try:
            snapshot = await graph.aget_state(
                {"configurable": {"thread_id": active.spec.thread_id}}
            )
        except Exception:
            log.exception("reading the final state of run %s failed", active.run_id)
            return thread_status
        values = jsonable(snapshot.values)
        if snapshot.interrupts:
            values["__interrupt__"] = jsonable(snapshot.interrupts)
        active.final_values = values
        if status != "error" and (snapshot.next or snapshot.tasks):
            return "interrupted"
        return thread_status

    async def _settle(self, active: ActiveRun, status: str, thread_status: str) -> None:
        spec = active.spec
        await self.store.set_run_status(
            active.run_id, status, active.error["message"] if active.error else None
        )
        if spec.delete_thread_after:
            await self.checkpointers.shared.adelete_thread(spec.thread_id)
            await self.store.delete_thread(spec.thread_id)
        elif self.by_thread.get(spec.thread_id) is active:
            await self.store.update_thread(spec.thread_id, status=thread_status)
        active.finished.set()
        active._changed.set()
        self._forget_old_runs()
        if self.by_thread.get(spec.thread_id) is active:
            del self.by_thread[spec.thread_id]
