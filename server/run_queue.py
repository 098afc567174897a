"""Runs as leased work in Postgres: any replica creates a run, any replica's worker runs it.

Beside the thread and run tables (:mod:`server.store`), two tables hold the queue: ``run_queue``
(a run's full request, the worker holding it, its lease, attempt, cancel flag, the thread's
checkpoint when it began, its result) and ``run_events`` (its stream, in order).

- **Create.** Under a transaction-level advisory lock on the thread, the run's multitask
  strategy meets the thread's queued and running runs: ``reject`` answers 409; ``interrupt`` and
  ``rollback`` end queued ones and ask the running one to stop; ``enqueue`` waits its turn. The
  run is inserted pending and a notification wakes the workers.
- **Claim.** Every replica runs up to ``worker_slots`` runs. A worker claims the oldest pending
  run whose thread has nothing running and no older pending run, or a running run whose lease
  has expired (``FOR UPDATE SKIP LOCKED``); claims take one advisory lock in turn so that the
  per-thread order check cannot race. The database's clock times every lease.
- **Lease.** The worker renews its leases every third of ``run_lease_s``. A replica that dies
  stops renewing; another claims the run as the next attempt and continues the thread from its
  latest checkpoint (runs write every step before the next starts, ``durability="sync"``, so no
  finished node runs again). A replica that shuts down cleanly hands its runs over at once.
- **Database lost.** A run whose database connection fails under it (a restart, a
  failover) is not an error: its attempt ends, and the run is claimed again (``RETRY_DELAY_S``
  times its attempt later, or when the lease runs out if the database is still down) and
  continues from its latest checkpoint; after ``MAX_ATTEMPTS`` it is an error.
- **Fencing.** Each write of a worker (events, result) names its attempt; a worker that lost
  its lease writes nothing more and stops.
- **Events.** Inserted in ``run_events``; the notification of its commit carries the event
  itself when it fits (Postgres takes 8000 bytes), and the notice that a run ended carries the
  seq of its last event. A stream on any replica reads the run once from the first event, then
  takes the events it is handed in order, from its own replica's worker or from their
  notifications, and reads again only when one is missing (too large to carry, a notification
  lost: a one-second poll covers that too). Postgres pub/sub rather than Redis: the events and
  the run's state then live in one store, with one service fewer to run.
- **Cancel.** A flag on the run and a notification: the worker holding it cancels it; a queued
  run ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from reflexrag.providers.checkpointer import Checkpointers
from reflexrag.providers.database import database_errors
from reflexrag.server.run_manager import (
    RunConflictError,
    RunOutcome,
    RunSpec,
    execute_graph,
    latest_checkpoint_id,
)
from reflexrag.server.serialize import dumps
from reflexrag.server.store import INSERT_RUN, ServiceStore, now, postgres_sql, run_record

log = logging.getLogger("reflexrag.server")

CHANNEL = "reflexrag_runs"
ACTIVE = ("pending", "running")
POLL_S = 1.0
"""How often waiting code looks again without a notification."""
NOTIFY_MAX_BYTES = 7900
"""An event whose notification would be larger is not carried in it (Postgres takes 8000)."""
MAX_ATTEMPTS = 6
"""Attempts a run gets when the database keeps going away under it (then it is an error)."""
RETRY_DELAY_S = 1.0
"""Pause before a run the database dropped is taken up again, times its attempt number."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS run_queue (
    run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
    graph_thread TEXT NOT NULL,
    queued_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    spec TEXT NOT NULL,
    worker TEXT,
    lease_until TIMESTAMPTZ,
    attempt INTEGER NOT NULL DEFAULT 0,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    rollback_of TEXT,
    started BOOLEAN NOT NULL DEFAULT FALSE,
    start_checkpoint TEXT,
    result TEXT
);
CREATE INDEX IF NOT EXISTS run_queue_by_thread ON run_queue (graph_thread, queued_at);
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

_CLAIM = """
WITH candidate AS (
    SELECT q.run_id FROM run_queue q JOIN runs r USING (run_id)
    WHERE (
        r.status = 'pending' AND NOT EXISTS (
            SELECT 1 FROM run_queue q2 JOIN runs r2 USING (run_id)
            WHERE q2.graph_thread = q.graph_thread AND q2.run_id <> q.run_id
              AND (r2.status = 'running'
                   OR (r2.status = 'pending' AND q2.queued_at < q.queued_at))
        )
    ) OR (r.status = 'running' AND q.lease_until < clock_timestamp())
    ORDER BY q.queued_at
    LIMIT 1
    FOR UPDATE OF q SKIP LOCKED
)
UPDATE run_queue SET worker = %s, attempt = attempt + 1,
    lease_until = clock_timestamp() + make_interval(secs => %s)
FROM candidate WHERE run_queue.run_id = candidate.run_id
RETURNING run_queue.*
"""


class LeaseLostError(Exception):
    """Another worker holds the run now."""


def _note(kind: str, run_id: str, **extra: Any) -> str:
    """A notification's payload on ``CHANNEL``, as :meth:`RunQueue._dispatch` reads it."""
    return json.dumps({"kind": kind, "run_id": run_id, **extra})


@dataclass
class _Feed:
    """What a stream open here is handed without reading it: the run's events (seq, event,
    serialized data) once committed, from this replica's worker or from the notification
    that carries them; and, once the run's final status is committed, the seq of its last
    event (-1: none; None: not said)."""

    events: deque[tuple[int, str, str]] = field(default_factory=deque)
    ended: bool = False
    last: int | None = None


class RunQueue:
    """Runs of every replica sharing one Postgres database; the same calls as
    :class:`server.run_manager.RunManager`, so the routes do not know which one they use."""

    def __init__(
        self,
        store: ServiceStore,
        checkpointers: Checkpointers,
        url: str,
        lease_s: float,
        slots: int,
    ) -> None:
        self.store = store
        self.pool = store.db.pool  # type: ignore[attr-defined]
        self.checkpointers = checkpointers
        self.url = url
        self.lease_s = lease_s
        self.slots = slots
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.executing: dict[str, tuple[int, asyncio.Task[None]]] = {}
        """Run id → (attempt, task) of the runs this replica executes."""
        self._changed: dict[str, asyncio.Event] = {}
        self._feeds: dict[str, list[_Feed]] = {}
        """Run id → the streams open here, each handed the run's events as their commits
        are known here."""
        self._held: set[str] = set()
        """The runs a worker here holds, from its claim until their end is recorded."""
        self._work_available = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._closing = False

    @classmethod
    async def open(
        cls, store: ServiceStore, checkpointers: Checkpointers, url: str, lease_s: float, slots: int
    ) -> RunQueue:
        queue = cls(store, checkpointers, url, lease_s, slots)
        async with queue.pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext('queue:schema'))")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    await connection.execute(statement)
        queue._loops = [asyncio.create_task(queue._listen())]
        if slots:
            queue._loops += [asyncio.create_task(loop()) for loop in (queue._work, queue._renew)]
        return queue

    # -- what the routes call ------------------------------------------------------------

    async def start(self, spec: RunSpec) -> dict[str, Any]:
        """Queue the run, applying its multitask strategy to the thread's other runs."""
        run_id = str(uuid.uuid4())
        async with self.pool.connection() as connection, connection.transaction():
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"thread:{spec.graph_thread}",)
            )
            current = await self._active_runs(connection, spec.graph_thread)
            rollback_of = None
            if current and spec.multitask_strategy == "reject":
                raise RunConflictError(
                    f"thread {spec.thread_id} already has run {current[0]['run_id']} in "
                    "progress; wait for it, cancel it, or use multitask_strategy 'enqueue' or "
                    "'interrupt'"
                )
            if current and spec.multitask_strategy in ("interrupt", "rollback"):
                rollback = spec.multitask_strategy == "rollback"
                for run in current:
                    # A run never claimed ends (rollback: vanishes) at once; one that a
                    # worker holds is asked to stop, and this run queues behind it.
                    if not await self._end_queued(connection, run["run_id"], delete=rollback):
                        await self._request_cancel(connection, run["run_id"])
                        rollback_of = run["run_id"]
            row = spec.run_row(run_id)
            cursor = await connection.execute(f"{postgres_sql(INSERT_RUN, row)} RETURNING *", row)
            record = run_record(await cursor.fetchone())
            await connection.execute(
                "INSERT INTO run_queue (run_id, graph_thread, spec, rollback_of) "
                "VALUES (%s, %s, %s, %s)",
                (
                    run_id,
                    spec.graph_thread,
                    json.dumps(spec.to_json(), default=str),
                    rollback_of if spec.multitask_strategy == "rollback" else None,
                ),
            )
            await self._notify(connection, "pending", run_id)
        return record

    async def busy(self, graph_thread: str) -> bool:
        async with self.pool.connection() as connection:
            return bool(await self._active_runs(connection, graph_thread))

    async def tracks(self, run_id: str) -> bool:
        row = await self.store.db.fetchone("SELECT 1 FROM run_queue WHERE run_id=?", (run_id,))
        return row is not None

    async def events(self, run_id: str) -> AsyncIterator[tuple[str, Any]]:
        """Every event of the run from the first, then new ones as any worker stores them,
        until the run ends."""
        feed = _Feed()
        self._feeds.setdefault(run_id, []).append(feed)
        try:
            position, read = -1, True
            while True:
                changed = self._changed.setdefault(run_id, asyncio.Event())
                if read:
                    # The status and the new events in one statement, which reads one
                    # snapshot: when the status is final there, every event is in it too. (One
                    # row when there are no new events, its event empty; no status when the
                    # run is gone.)
                    rows = await self.store.db.fetchall(
                        "SELECT r.status, e.seq, e.event, e.data FROM (SELECT 1) AS one "
                        "LEFT JOIN runs r ON r.run_id=? "
                        "LEFT JOIN run_events e ON e.run_id=? AND e.seq>? ORDER BY e.seq",
                        (run_id, run_id, position),
                    )
                    ended = rows[0]["status"] not in ACTIVE
                    for row in rows:
                        if row["seq"] is not None:
                            position = row["seq"]
                            yield row["event"], json.loads(row["data"])
                    if ended:
                        self._changed.pop(run_id, None)
                        return
                read = False
                # What was handed over since, in order, without reading it back; a gap (an
                # event too large for its notification, a lost notification) is read.
                while feed.events and not read:
                    seq, event, data = feed.events.popleft()
                    if seq == position + 1:
                        position = seq
                        yield event, json.loads(data)
                    elif seq > position + 1:
                        feed.events.clear()
                        read = True
                if read:
                    continue
                if feed.ended:
                    if feed.last is not None and position >= feed.last:
                        self._changed.pop(run_id, None)
                        return
                    read = True  # its final status is there, and what came before it
                    continue
                try:
                    await asyncio.wait_for(changed.wait(), POLL_S)
                except TimeoutError:
                    read = True  # a lost notification
                else:
                    # Woken with nothing handed over: a notification that did not carry its
                    # event, unless a worker here holds the run and handed it over already.
                    read = not feed.events and not feed.ended and run_id not in self._held
        finally:
            self._feeds[run_id].remove(feed)
            if not self._feeds[run_id]:
                del self._feeds[run_id]

    async def wait(self, run_id: str, timeout: float) -> bool:
        changed = self._changed.setdefault(run_id, asyncio.Event())
        if not await self._ended(run_id):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(timeout, POLL_S))
            if not await self._ended(run_id):
                return False
        self._changed.pop(run_id, None)  # waiters still holding it look again within POLL_S
        return True

    async def result(self, run_id: str) -> dict[str, Any]:
        row = await self.store.db.fetchone("SELECT result FROM run_queue WHERE run_id=?", (run_id,))
        return json.loads(row["result"]) if row and row["result"] else {}

    def cancel_soon(self, run_id: str) -> None:
        self._in_background(self.cancel(run_id))

    async def cancel(self, run_id: str, wait: bool = False) -> None:
        async with self.pool.connection() as connection, connection.transaction():
            if not await self._end_queued(connection, run_id):
                await self._request_cancel(connection, run_id)
        while wait and not await self.wait(run_id, POLL_S):
            pass

    async def cancel_thread(self, graph_thread: str) -> None:
        async with self.pool.connection() as connection:
            current = await self._active_runs(connection, graph_thread)
        for run in current:
            await self.cancel(run["run_id"], wait=True)

    async def close(self) -> None:
        """Stop claiming, and hand the runs executing here to the other replicas: their
        leases end now, so another worker continues them from their last checkpoint."""
        self._closing = True
        for loop in self._loops:
            loop.cancel()
        for _, task in list(self.executing.values()):
            task.cancel()
        await asyncio.gather(
            *(task for _, task in self.executing.values()), *self._loops, return_exceptions=True
        )
        await asyncio.gather(*self._background, return_exceptions=True)

    # -- the worker ------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            row = None
            self._work_available.clear()  # before looking: a notice from now on wakes us
            if len(self.executing) < self.slots:
                try:
                    row = await self._claim()
                except Exception:
                    log.exception("claiming a run failed")
            if row is not None:
                task = asyncio.create_task(self._execute(row))
                self.executing[row["run_id"]] = (row["attempt"], task)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._work_available.wait(), POLL_S)

    async def _claim(self) -> dict[str, Any] | None:
        async with self.pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext('queue:claim'))")
            cursor = await connection.execute(_CLAIM, (self.worker_id, self.lease_s))
            row = await cursor.fetchone()
            if row is not None:
                await connection.execute(
                    "UPDATE runs SET status='running', updated_at=%s WHERE run_id=%s",
                    (now(), row["run_id"]),
                )
        return row

    async def _execute(self, row: dict[str, Any]) -> None:
        run_id, attempt = row["run_id"], row["attempt"]
        spec = RunSpec.from_json(json.loads(row["spec"]))
        outcome = RunOutcome(status="interrupted")
        self._held.add(run_id)
        try:
            if row["cancel_requested"]:  # cancelled while its last worker was gone
                return
            resume = False
            if row["started"]:  # taken over: go on from the thread's latest checkpoint
                latest = await latest_checkpoint_id(self.checkpointers, spec.graph_thread)
                resume = latest is not None and latest != row["start_checkpoint"]
            else:
                if row["rollback_of"]:
                    await self._roll_back(row["rollback_of"], spec)
                await self._mark_started(run_id, attempt, spec)
            await self.store.update_thread(
                spec.thread_id, spec.owner, status="busy", graph_id=spec.graph_id
            )
            # A run that had not started has no events yet.
            sequence = await self._next_sequence(run_id) if row["started"] else 0

            async def publish(event: str, data: Any) -> None:
                nonlocal sequence
                await self._publish(run_id, attempt, sequence, event, data)
                sequence += 1

            await publish("metadata", {"run_id": run_id, "attempt": attempt})
            outcome = await execute_graph(
                spec, self.checkpointers, publish, resume=resume, run_id=run_id, attempt=attempt
            )
        except asyncio.CancelledError:
            pass
        except LeaseLostError:
            return
        except database_errors() as exc:
            log.warning("run %s lost the database before its graph started: %s", run_id, exc)
            outcome = RunOutcome(status="retry")
        except Exception:
            log.exception("run %s failed before its graph started", run_id)
            outcome = RunOutcome(status="error", thread_status="error")
        finally:
            # Only this attempt's entry: after a pause this replica may have claimed the run
            # again, and the next attempt's entry must stay.
            if self.executing.get(run_id, (None,))[0] == attempt:
                del self.executing[run_id]
            self._work_available.set()
            try:
                await asyncio.shield(self._settle(run_id, attempt, spec, outcome))
            finally:
                self._held.discard(run_id)

    async def _mark_started(self, run_id: str, attempt: int, spec: RunSpec) -> None:
        start = await latest_checkpoint_id(self.checkpointers, spec.graph_thread)
        changed = await self.store.db.execute(
            "UPDATE run_queue SET started=TRUE, start_checkpoint=?, spec=? "
            "WHERE run_id=? AND worker=? AND attempt=?",
            (start, json.dumps(spec.to_json(), default=str), run_id, self.worker_id, attempt),
        )
        if not changed:
            raise LeaseLostError(run_id)

    async def _roll_back(self, previous_id: str, spec: RunSpec) -> None:
        """Undo the interrupted run: this one continues from the checkpoint before it (a new
        branch of the thread's history), and the interrupted run's record is deleted."""
        row = await self.store.db.fetchone(
            "SELECT started, start_checkpoint FROM run_queue WHERE run_id=?", (previous_id,)
        )
        if row and row["started"]:
            if row["start_checkpoint"] is None:
                await self.checkpointers.shared.adelete_thread(spec.graph_thread)
            elif not spec.checkpoint_id:
                spec.checkpoint_id = row["start_checkpoint"]
        await self.store.db.execute("DELETE FROM run_queue WHERE run_id=?", (previous_id,))
        await self.store.db.execute("DELETE FROM runs WHERE run_id=?", (previous_id,))

    async def _next_sequence(self, run_id: str) -> int:
        row = await self.store.db.fetchone(
            "SELECT COALESCE(MAX(seq), -1) + 1 AS next FROM run_events WHERE run_id=?", (run_id,)
        )
        return row["next"] if row else 0

    async def _publish(self, run_id: str, attempt: int, seq: int, event: str, data: Any) -> None:
        # One statement, so one round trip and its own transaction (the connection is in
        # autocommit): the event is stored, fenced by the lease, and notified at its commit.
        # A run sends an event per node; BEGIN, INSERT, NOTIFY, COMMIT were four trips each.
        text = dumps(data)
        note = _note("event", run_id, seq=seq, event=event, data=text)
        if len(note.encode()) > NOTIFY_MAX_BYTES:
            note = _note("event", run_id)  # streams read it
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "WITH stored AS (INSERT INTO run_events (run_id, seq, event, data) "
                "SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM run_queue "
                "WHERE run_id=%s AND worker=%s AND attempt=%s) RETURNING 1) "
                "SELECT pg_notify(%s, %s) FROM stored",
                (run_id, seq, event, text, run_id, self.worker_id, attempt, CHANNEL, note),
            )
            if not cursor.rowcount:
                self._lost(run_id, attempt)
                raise LeaseLostError(run_id)
        self._hand_over(run_id, (seq, event, text))

    async def _settle(self, run_id: str, attempt: int, spec: RunSpec, outcome: RunOutcome) -> None:
        """Record how the run ended (unless its lease was lost), or hand it over when this
        replica is shutting down."""
        ended, last = False, None
        try:
            async with self.pool.connection() as connection, connection.transaction():
                cursor = await connection.execute(
                    "SELECT cancel_requested FROM run_queue "
                    "WHERE run_id=%s AND worker=%s AND attempt=%s FOR UPDATE",
                    (run_id, self.worker_id, attempt),
                )
                held = await cursor.fetchone()
                if held is None:
                    return  # another worker has it now, or the run was deleted
                if outcome.status == "retry" and not held["cancel_requested"]:
                    if attempt < MAX_ATTEMPTS:
                        # The database came back: take the run up again, from its last
                        # checkpoint, after a pause that grows with each attempt.
                        await connection.execute(
                            "UPDATE run_queue SET lease_until=clock_timestamp() "
                            "+ make_interval(secs => %s) WHERE run_id=%s",
                            (RETRY_DELAY_S * attempt, run_id),
                        )
                        await self._notify(connection, "pending", run_id)
                        return
                    outcome = RunOutcome(
                        status="error",
                        thread_status="error",
                        error={
                            "error": "DatabaseUnavailable",
                            "message": f"the database was lost {attempt} times during this run",
                        },
                    )
                if (
                    self._closing
                    and outcome.status == "interrupted"
                    and not held["cancel_requested"]
                ):
                    await connection.execute(
                        "UPDATE run_queue SET lease_until=clock_timestamp() WHERE run_id=%s",
                        (run_id,),
                    )
                    await self._notify(connection, "pending", run_id)
                    return
                # The thread first, in the same transaction: a client woken by the end of the
                # run finds the thread idle (or, after a stateless run, gone).
                if spec.delete_thread_after:
                    # The run's record stays a while for the client waiting on it (_purge).
                    await self.checkpointers.shared.adelete_thread(spec.graph_thread)
                    await connection.execute(
                        "DELETE FROM threads WHERE thread_id=%s AND owner=%s",
                        (spec.thread_id, spec.owner),
                    )
                elif not await self._active_runs(connection, spec.graph_thread, besides=run_id):
                    await connection.execute(
                        "UPDATE threads SET status=%s, updated_at=%s "
                        "WHERE thread_id=%s AND owner=%s",
                        (outcome.thread_status, now(), spec.thread_id, spec.owner),
                    )
                await connection.execute(
                    "UPDATE run_queue SET result=%s, lease_until=NULL WHERE run_id=%s",
                    (dumps(outcome.result()), run_id),
                )
                # The seq of the run's last event: a stream that has it has the whole run.
                cursor = await connection.execute(
                    "UPDATE runs SET status=%s, error=%s, updated_at=%s WHERE run_id=%s "
                    "RETURNING (SELECT COALESCE(MAX(seq), -1) FROM run_events "
                    "WHERE run_id=%s) AS last",
                    (
                        outcome.status,
                        outcome.error["message"] if outcome.error else None,
                        now(),
                        run_id,
                        run_id,
                    ),
                )
                updated = await cursor.fetchone()
                last = updated["last"] if updated else None
                await self._notify(connection, "done", run_id, last=last)
                ended = True
            if ended:
                self._hand_over_end(run_id, last)
        except Exception:
            log.exception("recording the end of run %s failed", run_id)

    async def _renew(self) -> None:
        """Heartbeat: extend this replica's leases; stop runs cancelled elsewhere or lost."""
        beats = 0
        while True:
            await asyncio.sleep(self.lease_s / 3)
            beats += 1
            if beats % 20 == 0:
                await self._purge()
            held = {run_id: attempt for run_id, (attempt, _) in self.executing.items()}
            if not held:
                continue
            try:
                rows = await self.store.db.fetchall(
                    "UPDATE run_queue SET lease_until = clock_timestamp() + "
                    "make_interval(secs => ?) WHERE worker=? AND run_id = ANY(?) "
                    "RETURNING run_id, attempt, cancel_requested",
                    (self.lease_s, self.worker_id, list(held)),
                )
            except Exception:
                log.exception("renewing run leases failed")
                continue
            renewed = {row["run_id"]: row for row in rows if row["attempt"] == held[row["run_id"]]}
            for run_id, attempt in held.items():
                if run_id not in renewed:
                    self._lost(run_id, attempt)
                elif renewed[run_id]["cancel_requested"]:
                    self._cancel_here(run_id)

    async def _purge(self, keep_s: float = 600) -> None:
        """Delete finished runs of deleted threads (stateless runs) once their waiting
        clients have had time to read the result."""
        cutoff = (datetime.now(UTC) - timedelta(seconds=keep_s)).isoformat()
        with contextlib.suppress(Exception):
            await self.store.db.execute(
                "DELETE FROM runs r WHERE r.status NOT IN ('pending', 'running') "
                "AND r.updated_at < ? AND NOT EXISTS (SELECT 1 FROM threads t "
                "WHERE t.thread_id = r.thread_id AND t.owner = r.owner)",
                (cutoff,),
            )

    def _lost(self, run_id: str, attempt: int) -> None:
        log.warning("run %s: attempt %s lost its lease; stopping it here", run_id, attempt)
        self._cancel_here(run_id, attempt)

    def _cancel_here(self, run_id: str, attempt: int | None = None) -> None:
        """Cancel the run's task on this replica: only ``attempt``'s when one is named (the
        run may have been claimed again, here, as a newer attempt that must go on)."""
        held = self.executing.get(run_id)
        if held is not None and attempt in (None, held[0]):
            held[1].cancel()

    # -- notifications ---------------------------------------------------------------------

    async def _listen(self) -> None:
        """One LISTEN connection per replica; reconnects when the database comes back."""
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    async for note in connection.notifies():
                        self._dispatch(json.loads(note.payload))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listening for run notifications failed (%s); retrying", exc)
                await asyncio.sleep(POLL_S)

    def _dispatch(self, note: dict[str, Any]) -> None:
        kind, run_id = note["kind"], note["run_id"]
        if kind in ("pending", "done"):
            self._work_available.set()  # a run to claim, or a thread free for the next one
        if kind == "cancel":
            self._cancel_here(run_id)
        if kind == "event":  # only streams wait for events
            if "data" in note:
                self._hand_over(run_id, (note["seq"], note["event"], note["data"]))
            elif run_id in self._feeds:
                self._wake(run_id)
        elif kind == "done" and "last" in note:
            self._hand_over_end(run_id, note["last"])
        else:
            self._wake(run_id)

    def _hand_over(self, run_id: str, event: tuple[int, str, str]) -> None:
        """Give the streams open here an event known to be committed."""
        if feeds := self._feeds.get(run_id):
            for feed in feeds:
                feed.events.append(event)
            self._wake(run_id)

    def _hand_over_end(self, run_id: str, last: int | None) -> None:
        """Tell the streams open here that the run's final status is committed, after its
        event ``last``."""
        for feed in self._feeds.get(run_id, ()):
            feed.ended, feed.last = True, last
        self._wake(run_id)

    def _wake(self, run_id: str) -> None:
        """Wake whatever waits on the run here (streams, joins)."""
        if (changed := self._changed.pop(run_id, None)) is not None:
            changed.set()

    @staticmethod
    async def _notify(connection: Any, kind: str, run_id: str, **extra: Any) -> None:
        await connection.execute(
            "SELECT pg_notify(%s, %s)", (CHANNEL, _note(kind, run_id, **extra))
        )

    async def _active_runs(
        self, connection: Any, graph_thread: str, besides: str = ""
    ) -> list[dict[str, Any]]:
        """The thread's queued and running runs (other than ``besides``), oldest first."""
        cursor = await connection.execute(
            "SELECT q.run_id, r.status FROM run_queue q JOIN runs r USING (run_id) "
            "WHERE q.graph_thread=%s AND q.run_id<>%s AND r.status IN ('pending', 'running') "
            "ORDER BY q.queued_at",
            (graph_thread, besides),
        )
        return await cursor.fetchall()

    async def _end_queued(self, connection: Any, run_id: str, delete: bool = False) -> bool:
        """End a run that no worker has claimed yet (attempt 0): interrupted, or deleted.
        Whether it was one. Every transaction here locks a ``run_queue`` row before its
        ``runs`` row, so that none waits on another in the opposite order."""
        if delete:
            cursor = await connection.execute(
                "DELETE FROM run_queue WHERE run_id=%s AND attempt=0 RETURNING run_id", (run_id,)
            )
            if await cursor.fetchone() is None:
                return False
            await connection.execute("DELETE FROM runs WHERE run_id=%s", (run_id,))
        else:
            cursor = await connection.execute(
                "UPDATE run_queue SET result='{}' WHERE run_id=%s AND attempt=0 "
                "AND result IS NULL RETURNING run_id",
                (run_id,),
            )
            if await cursor.fetchone() is None:
                return False
            await connection.execute(
                "UPDATE runs SET status='interrupted', updated_at=%s WHERE run_id=%s",
                (now(), run_id),
            )
        await self._notify(connection, "done", run_id)
        return True

    async def _request_cancel(self, connection: Any, run_id: str) -> None:
        await connection.execute(
            "UPDATE run_queue SET cancel_requested=TRUE WHERE run_id=%s", (run_id,)
        )
        await self._notify(connection, "cancel", run_id)

    async def _ended(self, run_id: str) -> bool:
        row = await self.store.db.fetchone("SELECT status FROM runs WHERE run_id=?", (run_id,))
        return row is None or row["status"] not in ACTIVE

    def _in_background(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
