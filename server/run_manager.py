"""Runs of the HTTP service in one process: each is an asyncio task whose events are buffered.

(:mod:`server.run_queue` answers the same calls when replicas share a Postgres database; the
graph is executed by the same :func:`execute_graph` there.)

Every run publishes LangGraph Server's events (``metadata``, one per requested stream mode,
``error``; the stream closes when the run ends) into its own buffer, so a streaming client, a
``join`` and a late ``join_stream`` all see the same sequence. A thread runs one thing at a
time; what a second run does depends on its ``multitask_strategy``. Runs execute in this
process, so the busy-check and the registration of a new run happen with no ``await``
between them: two simultaneous requests can never both find the thread idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage, BaseMessageChunk
from langgraph.types import Command

from reflexrag.graphs import compile_strategy
from reflexrag.providers.checkpointer import Checkpointers
from reflexrag.providers.database import database_errors
from reflexrag.providers.models import ModelServerError
from reflexrag.server.serialize import jsonable
from reflexrag.server.store import ServiceStore, run_row, user_id_of
from reflexrag.state import Context

log = logging.getLogger("reflexrag.server")

# API stream mode → LangGraph stream mode. "messages-tuple" sends LangGraph's (chunk,
# metadata) tuples; "messages" alone sends LangGraph Server's messages/metadata, then
# messages/partial (the message so far) events (:func:`message_events`).
STREAM_MODES = {
    "values": "values",
    "updates": "updates",
    "custom": "custom",
    "messages": "messages",
    "messages-tuple": "messages",
    "debug": "debug",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
    "events": "events",
}
UNSUPPORTED_STREAM_MODES: dict[str, str] = {}
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
    assistant_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Everything, as JSON: a run queued for another process."""
        return asdict(self)  # the context, a dataclass too, becomes a dict

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSpec:
        return cls(**{**data, "context": Context(**data["context"])})

    def run_row(self, run_id: str) -> tuple[Any, ...]:
        """The new, pending run's row in the runs table."""
        return run_row(
            run_id,
            self.thread_id,
            self.assistant_id or self.graph_id,
            self.owner,
            self.metadata,
            self.multitask_strategy,
            self.kwargs(),
        )

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
            "config": {
                "configurable": {"thread_id": self.thread_id},
                **({"recursion_limit": self.recursion_limit} if self.recursion_limit else {}),
            },
            "durability": "sync",
            "temporary": self.delete_thread_after,
            "webhook": None,
            "feedback_keys": None,
        }


@dataclass
class RunOutcome:
    """How a run's execution ended."""

    status: str = "success"
    """success, error or interrupted; or retry, when the database went away under it."""
    thread_status: str = "idle"
    final_values: dict[str, Any] | None = None
    error: dict[str, str] | None = None

    def result(self) -> dict[str, Any]:
        """What ``wait`` and ``join`` answer: the final values, or the error."""
        return {"__error__": self.error} if self.error else (self.final_values or {})


Publish = Callable[[str, Any], Awaitable[None]]


def graph_config(
    spec: RunSpec, checkpoint_id: str | None, run_id: str | None = None, attempt: int = 1
) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": spec.graph_thread}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    # Recorded in every checkpoint's metadata, as LangGraph Server records them.
    metadata = {
        **spec.metadata,
        "graph_id": spec.graph_id,
        "assistant_id": spec.assistant_id or spec.graph_id,
        "run_id": run_id,
        "run_attempt": attempt,
        "user_id": user_id_of(spec.owner),
    }
    config: dict[str, Any] = {"configurable": configurable, "metadata": metadata}
    if spec.recursion_limit:
        config["recursion_limit"] = spec.recursion_limit
    return config


async def latest_checkpoint_id(checkpointers: Checkpointers, graph_thread: str) -> str | None:
    latest = await checkpointers.shared.aget_tuple({"configurable": {"thread_id": graph_thread}})
    return latest.config["configurable"]["checkpoint_id"] if latest else None


async def execute_graph(
    spec: RunSpec,
    checkpointers: Checkpointers,
    publish: Publish,
    *,
    resume: bool = False,
    run_id: str | None = None,
    attempt: int = 1,
) -> RunOutcome:
    """Stream the run's graph, publishing LangGraph Server's events, and read the thread's
    final state. ``resume`` continues the thread from its latest checkpoint (a run taken over
    after its worker died) instead of starting from the run's input. A failure is reported,
    never raised; cancellation ends the run as interrupted, resumable from its last step."""
    outcome = RunOutcome()
    graph = compile_strategy(spec.graph_id, checkpointers.for_run(), checkpointers.store)
    if resume:
        graph_input, config = None, graph_config(spec, None, run_id, attempt)
    else:
        graph_input = Command(**spec.command) if spec.command else spec.input
        config = graph_config(spec, spec.checkpoint_id, run_id, attempt)
    modes = sorted({STREAM_MODES[mode] for mode in spec.stream_modes if mode != "events"})
    options = {
        "context": spec.context,
        "stream_mode": modes or ["values"],
        "subgraphs": spec.stream_subgraphs,
        "interrupt_before": spec.interrupt_before,
        "interrupt_after": spec.interrupt_after,
        "durability": "sync",
    }

    whole_messages = "messages" in spec.stream_modes and "messages-tuple" not in spec.stream_modes
    seen: dict[str, BaseMessage] = {}

    async def publish_chunk(item: Any) -> None:
        namespace, mode, chunk = item if spec.stream_subgraphs else ((), *item)
        if mode == "messages" and whole_messages:
            for event, data in message_events(seen, *chunk):
                await publish(event, data)
            return
        # LangGraph Server names a subgraph's events "<mode>|<node>:<task id>".
        await publish("|".join([mode, *namespace]), jsonable(chunk))

    try:
        if "events" not in spec.stream_modes:
            async for item in graph.astream(graph_input, config, **options):
                await publish_chunk(item)
        else:
            # LangChain's callback events, as LangGraph Server sends them: every one but the
            # graph's own stream events, which carry the other modes' chunks.
            async for event in graph.astream_events(graph_input, config, version="v2", **options):
                if event["event"] == "on_chain_stream" and not event.get("parent_ids"):
                    if modes:
                        await publish_chunk(event["data"]["chunk"])
                else:
                    await publish("events", jsonable(event))
    except asyncio.CancelledError:
        outcome.status = "interrupted"
    except database_errors() as exc:
        # The database went away under the run (a restart, a failover): not the run's fault.
        # It is left to be taken up again from its last checkpoint (RunQueue._settle).
        log.warning("run on thread %s lost the database: %s", spec.thread_id, exc)
        outcome.status = "retry"
        outcome.error = {"error": type(exc).__name__, "message": str(exc)}
        return outcome
    except Exception as exc:  # a failing run is reported to the client, never re-raised
        if isinstance(exc, ModelServerError):
            log.warning("run on thread %s failed: %s", spec.thread_id, exc)
        else:
            log.exception("run on thread %s failed", spec.thread_id)
        outcome.status = outcome.thread_status = "error"
        outcome.error = {"error": type(exc).__name__, "message": str(exc)}
        await asyncio.shield(publish("error", outcome.error))
    await asyncio.shield(_read_final_state(graph, spec, outcome))
    return outcome


def message_events(
    seen: dict[str, BaseMessage], message: BaseMessage, metadata: dict[str, Any]
) -> list[tuple[str, Any]]:
    """LangGraph Server's ``messages`` mode for one streamed message piece: the message's
    metadata the first time its id is seen, then the message so far (``seen`` accumulates the
    pieces by id) as ``messages/partial`` while it is streamed in chunks, ``messages/complete``
    when it arrives whole."""
    key = message.id or ""
    events = []
    if key in seen:
        seen[key] = seen[key] + message
    else:
        seen[key] = message
        events.append(("messages/metadata", {key: {"metadata": jsonable(metadata)}}))
    kind = "messages/partial" if isinstance(message, BaseMessageChunk) else "messages/complete"
    events.append((kind, [jsonable(seen[key])]))
    return events


async def _read_final_state(graph: Any, spec: RunSpec, outcome: RunOutcome) -> None:
    """Record the thread's final values; a thread with a next step or pending task is
    interrupted (resumable), not idle."""
    try:
        snapshot = await graph.aget_state({"configurable": {"thread_id": spec.graph_thread}})
    except Exception:
        log.exception("reading the final state of thread %s failed", spec.thread_id)
        return
    values = jsonable(snapshot.values)
    if snapshot.interrupts:
        values["__interrupt__"] = jsonable(snapshot.interrupts)
    outcome.final_values = values
    if outcome.status != "error" and (snapshot.next or snapshot.tasks):
        outcome.thread_status = "interrupted"


@dataclass
class ActiveRun:
    run: dict[str, Any]
    spec: RunSpec
    events: list[tuple[str, Any]] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    outcome: RunOutcome | None = None
    start_checkpoint_id: str | None = None
    """The thread's checkpoint when this run began: where a rollback returns to."""
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    async def publish(self, event: str, data: Any) -> None:
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
    """Runs of one process: each an asyncio task, its events buffered in memory."""

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

    def _busy(self, graph_thread: str) -> ActiveRun | None:
        current = self.by_thread.get(graph_thread)
        return current if current and not current.finished.is_set() else None

    def running(self) -> bool:
        """Whether any run of this process is in progress (or queued)."""
        return any(not run.finished.is_set() for run in self.active.values())

    async def busy(self, graph_thread: str) -> bool:
        """Whether the thread has a run in progress (or queued)."""
        return self._busy(graph_thread) is not None

    async def start(self, spec: RunSpec) -> dict[str, Any]:
        """Create the run record and start it (or queue it behind the thread's current run)."""
        # Check and claim the thread in one step (no await in between).
        previous = self._busy(spec.graph_thread)
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
            active.run = await self.store.create_run(spec.run_row(run_id))
        except BaseException:
            del self.active[run_id]
            if previous is not None:
                self.by_thread[spec.graph_thread] = previous
            else:
                self.by_thread.pop(spec.graph_thread, None)
            raise
        active.task = asyncio.create_task(self._execute(active, previous))
        return active.run

    async def tracks(self, run_id: str) -> bool:
        """Whether this manager can still stream or wait for the run."""
        return run_id in self.active

    def events(self, run_id: str) -> AsyncIterator[tuple[str, Any]]:
        return self.active[run_id].subscribe()

    async def wait(self, run_id: str, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the run to end; whether it has."""
        finished = self.active[run_id].finished
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished.wait(), timeout)
        return finished.is_set()

    async def result(self, run_id: str) -> dict[str, Any]:
        return (self.active[run_id].outcome or RunOutcome()).result()

    def cancel_soon(self, run_id: str) -> None:
        """Ask the run to stop, without waiting (a client hung up)."""
        active = self.active.get(run_id)
        if active is not None and active.task is not None and not active.finished.is_set():
            active.task.cancel()

    async def cancel(self, run_id: str, wait: bool = False) -> None:
        active = self.active.get(run_id)
        if active is None:
            return
        self.cancel_soon(run_id)
        if wait:
            await active.finished.wait()

    async def cancel_thread(self, graph_thread: str) -> None:
        """Stop the thread's current run and wait until it has."""
        if (active := self._busy(graph_thread)) is not None:
            await self.cancel(active.run_id, wait=True)

    async def close(self) -> None:
        for run_id in list(self.active):
            await self.cancel(run_id, wait=True)

    async def _execute(self, active: ActiveRun, previous: ActiveRun | None) -> None:
        spec = active.spec
        outcome = RunOutcome(status="interrupted")
        try:
            if previous is not None:
                if spec.multitask_strategy in ("interrupt", "rollback"):
                    await self.cancel(previous.run_id, wait=True)
                else:
                    await previous.finished.wait()
                if spec.multitask_strategy == "rollback":
                    await self._roll_back(previous, spec)
            active.start_checkpoint_id = await latest_checkpoint_id(
                self.checkpointers, spec.graph_thread
            )
            await self.store.update_thread(
                spec.thread_id, spec.owner, status="busy", graph_id=spec.graph_id
            )
            await self.store.set_run_status(active.run_id, "running")
            await active.publish("metadata", {"run_id": active.run_id, "attempt": 1})
            outcome = await execute_graph(
                spec, self.checkpointers, active.publish, run_id=active.run_id
            )
            if outcome.status == "retry":  # one process has no queue to hand the run to
                outcome.status = outcome.thread_status = "error"
                await active.publish("error", outcome.error)
        except asyncio.CancelledError:
            pass  # cancelled while queued behind another run
        finally:
            active.outcome = outcome
            await asyncio.shield(self._settle(active, outcome))

    async def _roll_back(self, previous: ActiveRun, spec: RunSpec) -> None:
        """Undo an interrupted run: the thread continues (``spec``) from the checkpoint before
        it, a new branch of its history, and the run's record is deleted."""
        if previous.start_checkpoint_id is None:
            await self.checkpointers.shared.adelete_thread(spec.graph_thread)
        elif not spec.checkpoint_id:
            spec.checkpoint_id = previous.start_checkpoint_id
        await self.store.delete_run(previous.run_id, previous.spec.owner)
        self.active.pop(previous.run_id, None)

    async def _settle(self, active: ActiveRun, outcome: RunOutcome) -> None:
        spec = active.spec
        await self.store.set_run_status(
            active.run_id, outcome.status, outcome.error["message"] if outcome.error else None
        )
        if spec.delete_thread_after:
            await self.checkpointers.shared.adelete_thread(spec.graph_thread)
            await self.store.delete_thread(spec.thread_id, spec.owner)
        elif self.by_thread.get(spec.graph_thread) is active:
            await self.store.update_thread(spec.thread_id, spec.owner, status=outcome.thread_status)
        active.finished.set()
        active._changed.set()
        self._forget_old_runs()
        if self.by_thread.get(spec.graph_thread) is active:
            del self.by_thread[spec.graph_thread]
