"""Runs of the HTTP service: each is an asyncio task whose stream events are buffered.

Every run publishes LangGraph Server's events (``metadata``, one per requested stream mode,
``error``; the stream closes when the run ends) into its own buffer, so a streaming client, a
``join`` and a late ``join_stream`` all see the same sequence. A thread runs one thing at a
time; what a second run does depends on its ``multitask_strategy``. Runs execute in this
process, so the busy-check and the registration of a new run happen with no ``await``
between them: two simultaneous requests can never both find the thread idle.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.types import Command

from reflexrag.graphs import compile_strategy
from reflexrag.providers.checkpointer import Checkpointers
from reflexrag.providers.models import ModelServerError
from reflexrag.server.serialize import jsonable
from reflexrag.server.store import ServiceStore
from reflexrag.state import Context

log = logging.getLogger("reflexrag.server")

# API stream mode → LangGraph stream mode. "messages" is served in the tuple form.
STREAM_MODES = {
    "values": "values",
    "updates": "updates",
    "custom": "custom",
    "messages": "messages",
    "messages-tuple": "messages",
    "debug": "debug",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
}
UNSUPPORTED_STREAM_MODES = {
    "events": "stream_mode 'events' (LangChain callback events) is not supported; "
    "use updates, messages, tasks or debug",
}
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]


class RunConflictError(Exception):
    """The thread is busy and the run asked to be rejected in that case."""


@dataclass
class RunSpec:
    """Everything needed to execute one run, already validated."""

    thread_id: str
    graph_thread: str
    """The thread's key in the checkpointer (owner-qualified under API keys)."""
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
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None
    """Breakpoints: the run pauses before / after these nodes and resumes with no input."""

    def kwargs(self) -> dict[str, Any]:
        """What the run was asked to do, as LangGraph Server reports it on a run."""
        return {
            "input": self.input,
            "command": self.command,
            "context": {
                name: getattr(self.context, name) for name in self.context.__dataclass_fields__
            },
            "stream_mode": self.stream_modes,
            "checkpoint_id": self.checkpoint_id,
            "interrupt_before": self.interrupt_before,
            "interrupt_after": self.interrupt_after,
            "subgraphs": self.stream_subgraphs,
        }


@dataclass
class ActiveRun:
    run: dict[str, Any]
    spec: RunSpec
    events: list[tuple[str, Any]] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    final_values: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    start_checkpoint_id: str | None = None
    """The thread's checkpoint when this run began: where a rollback returns to."""
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

    def busy(self, graph_thread: str) -> ActiveRun | None:
        current = self.by_thread.get(graph_thread)
        return current if current and not current.finished.is_set() else None

    async def start(self, spec: RunSpec) -> ActiveRun:
        """Create the run record and start it (or queue it behind the thread's current run)."""
        # Check and claim the thread in one step (no await in between).
        previous = self.busy(spec.graph_thread)
        if previous and spec.multitask_strategy == "reject":
            raise RunConflictError(
                f"thread {spec.thread_id} already has run {previous.run_id} in progress; "
                "wait for it, cancel it, or use multitask_strategy 'enqueue' or 'interrupt'"
            )
        run_id = str(uuid.uuid4())
        active = ActiveRun(run={"run_id": run_id}, spec=spec)
        self.active[run_id] = active
        self.by_thread[spec.graph_thread] = active
        try:
            active.run = await self.store.create_run(
                run_id,
                spec.thread_id,
                spec.graph_id,
                spec.owner,
                spec.metadata,
                spec.multitask_strategy,
                spec.kwargs(),
            )
        except BaseException:
            del self.active[run_id]
            if previous is not None:
                self.by_thread[spec.graph_thread] = previous
            else:
                self.by_thread.pop(spec.graph_thread, None)
            raise
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
                if spec.multitask_strategy in ("interrupt", "rollback"):
                    await self.cancel(previous, wait=True)
                else:
                    await previous.finished.wait()
                if spec.multitask_strategy == "rollback":
                    await self._roll_back(previous, spec)
            active.start_checkpoint_id = await self._latest_checkpoint_id(spec.graph_thread)
            await self.store.update_thread(
                spec.thread_id, spec.owner, status="busy", graph_id=spec.graph_id
            )
            await self.store.set_run_status(active.run_id, "running")
            active.publish("metadata", {"run_id": active.run_id, "attempt": 1})
            async for item in graph.astream(
                self._graph_input(spec),
                self._config(spec),
                context=spec.context,
                stream_mode=sorted({STREAM_MODES[mode] for mode in spec.stream_modes}),
                subgraphs=spec.stream_subgraphs,
                interrupt_before=spec.interrupt_before,
                interrupt_after=spec.interrupt_after,
                durability="sync",
            ):
                namespace, mode, chunk = item if spec.stream_subgraphs else ((), *item)
                # LangGraph Server names a subgraph's events "<mode>|<node>:<task id>".
                event = "|".join([mode, *namespace])
                active.publish(event, jsonable(chunk))
        except asyncio.CancelledError:
            status = "interrupted"
        except Exception as exc:  # a failing run is reported to the client, never re-raised
            if isinstance(exc, ModelServerError):
                log.warning("run %s failed: %s", active.run_id, exc)
            else:
                log.exception("run %s failed", active.run_id)
            status, thread_status = "error", "error"
            active.error = {"error": type(exc).__name__, "message": str(exc)}
            active.publish("error", active.error)
        finally:
            thread_status = await asyncio.shield(
                self._final_state(active, graph, status, thread_status)
            )
            await asyncio.shield(self._settle(active, status, thread_status))

    async def _latest_checkpoint_id(self, graph_thread: str) -> str | None:
        latest = await self.checkpointers.shared.aget_tuple(
            {"configurable": {"thread_id": graph_thread}}
        )
        return latest.config["configurable"]["checkpoint_id"] if latest else None

    async def _roll_back(self, previous: ActiveRun, spec: RunSpec) -> None:
        """Undo an interrupted run: the thread continues (``spec``) from the checkpoint before
        it, a new branch of its history, and the run's record is deleted."""
        if previous.start_checkpoint_id is None:
            await self.checkpointers.shared.adelete_thread(spec.graph_thread)
        elif not spec.checkpoint_id:
            spec.checkpoint_id = previous.start_checkpoint_id
        await self.store.delete_run(previous.run_id, previous.spec.owner)
        self.active.pop(previous.run_id, None)

    @staticmethod
    def _config(spec: RunSpec) -> dict[str, Any]:
        configurable: dict[str, Any] = {"thread_id": spec.graph_thread}
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
                {"configurable": {"thread_id": active.spec.graph_thread}}
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
            await self.checkpointers.shared.adelete_thread(spec.graph_thread)
            await self.store.delete_thread(spec.thread_id, spec.owner)
        elif self.by_thread.get(spec.graph_thread) is active:
            await self.store.update_thread(spec.thread_id, spec.owner, status=thread_status)
        active.finished.set()
        active._changed.set()
        self._forget_old_runs()
        if self.by_thread.get(spec.graph_thread) is active:
            del self.by_thread[spec.graph_thread]
