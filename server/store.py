"""Thread and run records of the HTTP service (the graph state itself lives in the checkpointer).

A small SQLite database beside the checkpoints keeps who owns a thread, its metadata and
status, and every run's status, so threads and runs survive a restart. With
``REFLEXRAG_DATABASE_URL`` on Postgres the same tables live there, shared by every replica, next
to the run queue of :mod:`server.run_queue`. The queries are written once, in SQLite's
placeholder style; :class:`_PostgresDatabase` translates them.

Thread ids are scoped to their owner (the API key): two keys may hold threads with the same
id without either learning of the other. Each thread row names the key of its checkpoints
(``graph_thread``), which is the owner-qualified id for threads made under an API key.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import aiosqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    thread_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL,
    status TEXT NOT NULL,
    graph_id TEXT,
    graph_thread TEXT NOT NULL UNIQUE,
    PRIMARY KEY (owner, thread_id)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    status TEXT NOT NULL,
    metadata TEXT NOT NULL,
    multitask_strategy TEXT NOT NULL,
    error TEXT,
    kwargs TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_by_thread ON runs (thread_id, created_at);
CREATE TABLE IF NOT EXISTS assistant_versions (
    assistant_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    graph_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    config TEXT NOT NULL,
    context TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (owner, assistant_id, version)
);
CREATE TABLE IF NOT EXISTS crons (
    cron_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    thread_id TEXT,
    schedule TEXT NOT NULL,
    timezone TEXT,
    end_time TEXT,
    on_run_completed TEXT,
    enabled BOOLEAN NOT NULL,
    next_run_date TEXT,
    payload TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (owner, cron_id)
);
CREATE INDEX IF NOT EXISTS crons_due ON crons (next_run_date);
CREATE TABLE IF NOT EXISTS assistants (
    assistant_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (owner, assistant_id)
);
"""


def now() -> str:
    return datetime.now(UTC).isoformat()


# Postgres has no user functions in Python: the same containment test, in SQL. A stored value
# must equal the wanted one as JSON (``true`` is not ``1``).
_POSTGRES_FUNCTIONS = """
CREATE OR REPLACE FUNCTION metadata_contains(stored TEXT, wanted TEXT) RETURNS BOOLEAN
LANGUAGE SQL IMMUTABLE AS $$
    SELECT NOT EXISTS (
        SELECT 1 FROM jsonb_each(wanted::jsonb) AS w
        WHERE (stored::jsonb -> w.key) IS DISTINCT FROM w.value
    )
$$
"""


class StoredTextError(ValueError):
    """Text the database cannot hold (Postgres refuses NUL characters)."""


class Database(Protocol):
    """The few calls the service makes of its database; rows come back as dicts."""

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> int: ...

    async def fetchone(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None: ...

    async def fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]: ...

    async def close(self) -> None: ...


class _SqliteDatabase:
    def __init__(self, db: aiosqlite.Connection) -> None:
        self.db = db

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        cursor = await self.db.execute(sql, params)
        await self.db.commit()
        return cursor.rowcount

    async def fetchone(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        row = await (await self.db.execute(sql, params)).fetchone()
        return dict(row) if row else None

    async def fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in await (await self.db.execute(sql, params)).fetchall()]

    async def close(self) -> None:
        await self.db.close()


_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
"""NUL as JSON escapes it (``\\u0000``; an escaped backslash before ``u0000`` is plain text):
Postgres's JSON operators, which filter metadata, refuse it, so it is refused on the way in."""


def postgres_sql(sql: str, params: tuple[Any, ...]) -> str:
    """``sql`` with psycopg's placeholders; NUL in a parameter is refused with a clear error."""
    for value in params:
        if isinstance(value, str) and ("\x00" in value or _JSON_NUL.search(value)):
            raise StoredTextError("text with NUL characters cannot be stored or searched for")
    return sql.replace("?", "%s")


class _PostgresDatabase:
    """A shared connection pool (autocommit: each statement is its own transaction)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(postgres_sql(sql, params), params)
            return cursor.rowcount

    async def fetchone(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(postgres_sql(sql, params), params)
            return await cursor.fetchone()

    async def fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(postgres_sql(sql, params), params)
            return await cursor.fetchall()

    async def close(self) -> None:
        await self.pool.close()


def _thread(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "thread_id": row["thread_id"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "metadata": json.loads(row["metadata"]),
        "status": row["status"],
        "graph_id": row["graph_id"],
        "graph_thread": row["graph_thread"],
        "owner": row["owner"],
    }


def _with_metadata(
    where: str, params: list[Any], metadata: dict[str, Any] | None, column: str = "metadata"
) -> tuple[str, list[Any]]:
    """``where`` narrowed to rows whose ``column`` holds every pair of ``metadata``. A Python
    function, not JSON paths: SQLite's paths cannot name every key (quotes, NUL) and its
    json_each cuts keys at NUL, so any key a row can hold is matched."""
    if not metadata:
        return where, params
    return f"{where} AND metadata_contains({column}, ?)", [*params, json.dumps(metadata)]


def _thread_filter(
    owner: str, metadata: dict[str, Any] | None, status: str | None
) -> tuple[str, list[Any]]:
    where, params = "owner=?", [owner]
    if status:
        where += " AND status=?"
        params.append(status)
    return _with_metadata(where, params, metadata)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@lru_cache(maxsize=64)
def _wanted(filter_json: str) -> tuple[tuple[str, str], ...]:
    """A metadata filter as (key, canonical JSON value) pairs: parsed once per query, not once
    per row the query reads."""
    return tuple((key, _canonical(value)) for key, value in json.loads(filter_json).items())


def metadata_contains(stored: str, wanted: str) -> bool:
    """Whether every key of ``wanted`` is in ``stored`` with an equal JSON value (``true``
    is not ``1``, as it would be to Python's ``==``)."""
    stored_items = json.loads(stored)
    return all(
        key in stored_items and _canonical(stored_items[key]) == value
        for key, value in _wanted(wanted)
    )


def user_id_of(owner: str) -> str:
    """Who an owner (an API key) is where it is shown: a digest, never the key itself."""
    return "key-" + hashlib.sha256(owner.encode()).hexdigest()[:16] if owner else "public"


def graph_thread_of(owner: str, thread_id: str) -> str:
    """The checkpointer's key for a new thread: the id itself without API keys, else
    qualified by the owner so that owners cannot reach each other's checkpoints."""
    return f"{owner}:{thread_id}" if owner else thread_id


INSERT_RUN = (
    "INSERT INTO runs (run_id, thread_id, assistant_id, owner, created_at, updated_at, "
    "status, metadata, multitask_strategy, kwargs) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)"
)


def run_row(
    run_id: str,
    thread_id: str,
    assistant_id: str,
    owner: str,
    metadata: dict[str, Any],
    multitask_strategy: str,
    kwargs: dict[str, Any] | None,
) -> tuple[Any, ...]:
    """The parameters of :data:`INSERT_RUN` for a new, pending run."""
    stamp = now()
    return (
        run_id,
        thread_id,
        assistant_id,
        owner,
        stamp,
        stamp,
        json.dumps(metadata),
        multitask_strategy,
        json.dumps(kwargs or {}, default=str),
    )


def run_record(row: dict[str, Any]) -> dict[str, Any]:
    """A ``runs`` row as the API shows it."""
    return {
        "run_id": row["run_id"],
        "thread_id": row["thread_id"],
        "assistant_id": row["assistant_id"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "status": row["status"],
        "metadata": json.loads(row["metadata"]),
        "multitask_strategy": row["multitask_strategy"],
        "error": row["error"],
        "kwargs": json.loads(row["kwargs"]),
    }


_ASSISTANT_FIELDS = ("graph_id", "name", "description", "config", "context", "metadata")
_ASSISTANT = (
    "SELECT a.assistant_id, a.created_at, a.updated_at, v.version, v.graph_id, v.name, "
    "v.description, v.config, v.context, v.metadata FROM assistants a "
    "JOIN assistant_versions v ON v.owner=a.owner AND v.assistant_id=a.assistant_id "
    "AND v.version=a.version"
)


def _assistant(row: dict[str, Any], with_updated: bool = True) -> dict[str, Any]:
    found = {
        "assistant_id": row["assistant_id"],
        "graph_id": row["graph_id"],
        "name": row["name"],
        "description": row["description"],
        "config": json.loads(row["config"]),
        "context": json.loads(row["context"]),
        "metadata": json.loads(row["metadata"]),
        "version": row["version"],
        "created_at": row["created_at"],
    }
    if with_updated:
        found["updated_at"] = row["updated_at"]
    return found


CRON_FIELDS = (
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "payload",
    "user_id",
    "next_run_date",
    "metadata",
    "enabled",
)
"""A cron as LangGraph Server shows it, in its order."""
CRON_SORT_KEYS = (
    "cron_id",
    "assistant_id",
    "thread_id",
    "next_run_date",
    "end_time",
    "created_at",
    "updated_at",
)


def timestamp(moment: datetime) -> str:
    """A stored time: UTC (a time given without a zone is read as UTC), always with
    microseconds, so stored times order as strings."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _cron(row: dict[str, Any]) -> dict[str, Any]:
    """A cron row with its JSON columns read, ``enabled`` a boolean (SQLite stores 1 or 0)
    and who owns it shown as :func:`user_id_of` (the row's ``owner`` stays, for the routes)."""
    return {
        **row,
        "payload": json.loads(row["payload"]),
        "metadata": json.loads(row["metadata"]),
        "enabled": bool(row["enabled"]),
        "user_id": user_id_of(row["owner"]),
    }


class ServiceStore:
    """Async access to the thread, run, assistant and cron tables."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open(cls, path: Path) -> ServiceStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path)
        db.row_factory = aiosqlite.Row
        await db.create_function("metadata_contains", 2, metadata_contains, deterministic=True)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await _migrate_unscoped_threads(db)
        await db.executescript(_SCHEMA)
        await _add_run_kwargs(db)
        await db.commit()
        return cls(_SqliteDatabase(db))

    @classmethod
    async def open_postgres(cls, pool: Any) -> ServiceStore:
        """The tables in a Postgres database (``pool`` yields autocommit, dict-row
        connections); replicas starting together create them once."""
        async with pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext('service:schema'))")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    await connection.execute(statement)
            await connection.execute(_POSTGRES_FUNCTIONS)
        return cls(_PostgresDatabase(pool))

    async def close(self) -> None:
        await self.db.close()

    async def recover_after_restart(self) -> int:
        """Runs that were in flight when the process died are marked as interrupted."""
        changed = await self.db.execute(
            "UPDATE runs SET status='interrupted', error='server restarted', updated_at=? "
            "WHERE status IN ('pending', 'running')",
            (now(),),
        )
        await self.db.execute("UPDATE threads SET status='interrupted' WHERE status='busy'")
        return changed

    async def create_thread(
        self, owner: str, metadata: dict[str, Any], thread_id: str | None = None
    ) -> dict[str, Any]:
        thread_id = thread_id or str(uuid.uuid4())
        stamp = now()
        await self.db.execute(
            "INSERT INTO threads VALUES (?, ?, ?, ?, ?, 'idle', NULL, ?)",
            (
                thread_id,
                owner,
                stamp,
                stamp,
                json.dumps(metadata),
                graph_thread_of(owner, thread_id),
            ),
        )
        return await self.get_thread(thread_id, owner)  # type: ignore[return-value]

    async def get_thread(self, thread_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT * FROM threads WHERE thread_id=? AND owner=?", (thread_id, owner)
        )
        return _thread(row) if row else None

    async def update_thread(self, thread_id: str, owner: str, **fields: Any) -> None:
        if "metadata" in fields:
            fields["metadata"] = json.dumps(fields["metadata"])
        fields["updated_at"] = now()
        assignments = ", ".join(f"{name}=?" for name in fields)
        await self.db.execute(
            f"UPDATE threads SET {assignments} WHERE thread_id=? AND owner=?",
            (*fields.values(), thread_id, owner),
        )

    async def delete_thread(self, thread_id: str, owner: str) -> None:
        """The thread with its runs and crons (as LangGraph Server deletes them)."""
        await self.db.execute("DELETE FROM runs WHERE thread_id=? AND owner=?", (thread_id, owner))
        await self.db.execute("DELETE FROM crons WHERE thread_id=? AND owner=?", (thread_id, owner))
        await self.db.execute(
            "DELETE FROM threads WHERE thread_id=? AND owner=?", (thread_id, owner)
        )

    async def search_threads(
        self,
        owner: str,
        metadata: dict[str, Any] | None,
        status: str | None,
        limit: int,
        offset: int,
    ) -> list[dict[str, Any]]:
        where, params = _thread_filter(owner, metadata, status)
        query = f"SELECT * FROM threads WHERE {where} ORDER BY created_at DESC LIMIT ? OFFSET ?"
        return [_thread(row) for row in await self.db.fetchall(query, (*params, limit, offset))]

    async def count_threads(
        self, owner: str, metadata: dict[str, Any] | None, status: str | None
    ) -> int:
        where, params = _thread_filter(owner, metadata, status)
        row = await self.db.fetchone(f"SELECT count(*) AS n FROM threads WHERE {where}", params)
        return row["n"] if row else 0

    async def create_run(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """Insert a pending run from its :func:`run_row`; the record as the API shows it."""
        await self.db.execute(INSERT_RUN, row)
        run_id, owner = row[0], row[3]  # run_row's order
        return await self.get_run(run_id, owner)  # type: ignore[return-value]

    async def get_run(self, run_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT * FROM runs WHERE run_id=? AND owner=?", (run_id, owner)
        )
        return run_record(row) if row else None

    async def list_runs(self, thread_id: str, owner: str, limit: int) -> list[dict[str, Any]]:
        rows = await self.db.fetchall(
            "SELECT * FROM runs WHERE thread_id=? AND owner=? ORDER BY created_at DESC LIMIT ?",
            (thread_id, owner, limit),
        )
        return [run_record(row) for row in rows]

    async def delete_run(self, run_id: str, owner: str) -> None:
        await self.db.execute("DELETE FROM runs WHERE run_id=? AND owner=?", (run_id, owner))

    async def set_run_status(self, run_id: str, status: str, error: str | None = None) -> None:
        await self.db.execute(
            "UPDATE runs SET status=?, error=?, updated_at=? WHERE run_id=?",
            (status, error, now(), run_id),
        )

    # Assistants: saved configurations of the built-in graphs, owned like threads. Each change
    # is a new version; the assistant row points at the one in use.

    async def create_assistant(self, owner: str, assistant_id: str, **fields: Any) -> None:
        """Version 1 of a new assistant (``fields``: graph_id, name, description, config,
        context, metadata); an existing id raises the database's integrity error."""
        stamp = now()
        await self.db.execute(
            "INSERT INTO assistants VALUES (?, ?, 1, ?, ?)", (assistant_id, owner, stamp, stamp)
        )
        await self._insert_version(owner, assistant_id, 1, stamp, fields)

    async def _insert_version(
        self, owner: str, assistant_id: str, version: int, stamp: str, fields: dict[str, Any]
    ) -> None:
        values = [fields[name] for name in _ASSISTANT_FIELDS]
        values[3:] = [json.dumps(value) for value in values[3:]]
        await self.db.execute(
            "INSERT INTO assistant_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (assistant_id, owner, version, *values, stamp),
        )

    async def get_assistant(self, assistant_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            f"{_ASSISTANT} WHERE a.assistant_id=? AND a.owner=?", (assistant_id, owner)
        )
        return _assistant(row) if row else None

    async def add_assistant_version(
        self, assistant_id: str, owner: str, fields: dict[str, Any]
    ) -> None:
        """A new version with ``fields`` (all of them), made the one in use. Two at once on
        one assistant: the second raises the database's integrity error."""
        row = await self.db.fetchone(
            "SELECT max(version) AS latest FROM assistant_versions "
            "WHERE assistant_id=? AND owner=?",
            (assistant_id, owner),
        )
        version = (row["latest"] if row else 0) + 1
        stamp = now()
        await self._insert_version(owner, assistant_id, version, stamp, fields)
        await self.set_assistant_version(assistant_id, owner, version, stamp)

    async def set_assistant_version(
        self, assistant_id: str, owner: str, version: int, stamp: str | None = None
    ) -> bool:
        """Make ``version`` the one in use; False when the assistant has no such version."""
        exists = await self.db.fetchone(
            "SELECT 1 AS found FROM assistant_versions WHERE assistant_id=? AND owner=? "
            "AND version=?",
            (assistant_id, owner, version),
        )
        if not exists:
            return False
        await self.db.execute(
            "UPDATE assistants SET version=?, updated_at=? WHERE assistant_id=? AND owner=?",
            (version, stamp or now(), assistant_id, owner),
        )
        return True

    async def assistant_versions(
        self,
        assistant_id: str,
        owner: str,
        metadata: dict[str, Any] | None,
        limit: int,
        offset: int,
    ) -> list[dict[str, Any]]:
        where, params = _with_metadata(
            "assistant_id=? AND owner=?", [assistant_id, owner], metadata
        )
        rows = await self.db.fetchall(
            f"SELECT * FROM assistant_versions WHERE {where} "
            "ORDER BY version DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [_assistant(row, with_updated=False) for row in rows]

    async def delete_assistant(self, assistant_id: str, owner: str) -> bool:
        deleted = await self.db.execute(
            "DELETE FROM assistants WHERE assistant_id=? AND owner=?", (assistant_id, owner)
        )
        await self.db.execute(
            "DELETE FROM assistant_versions WHERE assistant_id=? AND owner=?",
            (assistant_id, owner),
        )
        return deleted > 0

    async def search_assistants(
        self, owner: str, graph_id: str | None, name: str | None, metadata: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """Every assistant of ``owner`` that matches, newest first."""
        where, params = "a.owner=?", [owner]
        if graph_id:
            where += " AND v.graph_id=?"
            params.append(graph_id)
        if name:
            where += " AND v.name=?"
            params.append(name)
        where, params = _with_metadata(where, params, metadata, "v.metadata")
        rows = await self.db.fetchall(
            f"{_ASSISTANT} WHERE {where} ORDER BY a.created_at DESC", tuple(params)
        )
        return [_assistant(row) for row in rows]

    # Crons: run requests stored with a schedule; every serving replica's scheduler fires the
    # due ones, and moving a cron's next date is how one replica claims a firing.

    async def create_cron(self, cron: dict[str, Any]) -> dict[str, Any]:
        """Store ``cron`` (its row's columns; ``payload`` and ``metadata`` as objects)."""
        stamp = timestamp(datetime.now(UTC))
        values = {**cron, "created_at": stamp, "updated_at": stamp}
        values["payload"] = json.dumps(values["payload"])
        values["metadata"] = json.dumps(values["metadata"])
        columns = ", ".join(values)
        await self.db.execute(
            f"INSERT INTO crons ({columns}) VALUES ({', '.join('?' * len(values))})",
            tuple(values.values()),
        )
        return await self.get_cron(cron["cron_id"], cron["owner"])  # type: ignore[return-value]

    async def get_cron(self, cron_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT * FROM crons WHERE cron_id=? AND owner=?", (cron_id, owner)
        )
        return _cron(row) if row else None

    async def update_cron(self, cron_id: str, owner: str, **fields: Any) -> None:
        """Set the given columns (``payload`` and ``metadata`` as objects)."""
        for name in ("payload", "metadata"):
            if name in fields:
                fields[name] = json.dumps(fields[name])
        fields["updated_at"] = timestamp(datetime.now(UTC))
        assignments = ", ".join(f"{name}=?" for name in fields)
        await self.db.execute(
            f"UPDATE crons SET {assignments} WHERE cron_id=? AND owner=?",
            (*fields.values(), cron_id, owner),
        )

    async def delete_cron(self, cron_id: str, owner: str) -> bool:
        deleted = await self.db.execute(
            "DELETE FROM crons WHERE cron_id=? AND owner=?", (cron_id, owner)
        )
        return deleted > 0

    def _cron_filter(
        self,
        owner: str,
        assistant_id: str | None,
        thread_id: str | None,
        enabled: bool | None,
        metadata: dict[str, Any] | None,
    ) -> tuple[str, list[Any]]:
        where, params = "owner=?", [owner]
        for column, value in (
            ("assistant_id", assistant_id),
            ("thread_id", thread_id),
            ("enabled", enabled),
        ):
            if value is not None:
                where += f" AND {column}=?"
                params.append(value)
        return _with_metadata(where, params, metadata)

    async def search_crons(
        self,
        owner: str,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        metadata: dict[str, Any] | None = None,
        sort_by: str = "created_at",
        descending: bool = True,
        limit: int = 10,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """``owner``'s crons that match; ``sort_by`` is one of :data:`CRON_SORT_KEYS`."""
        if sort_by not in CRON_SORT_KEYS:
            raise ValueError(f"cannot sort crons by {sort_by!r}")
        where, params = self._cron_filter(owner, assistant_id, thread_id, enabled, metadata)
        order = "DESC" if descending else "ASC"
        rows = await self.db.fetchall(
            f"SELECT * FROM crons WHERE {where} ORDER BY {sort_by} {order}, cron_id "
            "LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [_cron(row) for row in rows]

    async def count_crons(
        self,
        owner: str,
        assistant_id: str | None,
        thread_id: str | None,
        metadata: dict[str, Any] | None,
    ) -> int:
        where, params = self._cron_filter(owner, assistant_id, thread_id, None, metadata)
        row = await self.db.fetchone(
            f"SELECT count(*) AS n FROM crons WHERE {where}", tuple(params)
        )
        return row["n"] if row else 0

    async def due_crons(self, moment: datetime, limit: int) -> list[dict[str, Any]]:
        """Enabled crons, of every owner, whose next run is at or before ``moment`` and
        before their end, soonest first."""
        at = timestamp(moment)
        rows = await self.db.fetchall(
            "SELECT * FROM crons WHERE enabled AND next_run_date IS NOT NULL "
            "AND next_run_date<=? AND (end_time IS NULL OR end_time>=?) "
            "ORDER BY next_run_date LIMIT ?",
            (at, at, limit),
        )
        return [_cron(row) for row in rows]

    async def claim_cron(self, cron: dict[str, Any], next_run_date: str | None) -> bool:
        """Move a due cron to its next date; True for the one replica whose move changed the
        row (the others read the date it had and match nothing)."""
        claimed = await self.db.execute(
            "UPDATE crons SET next_run_date=? WHERE cron_id=? AND owner=? AND next_run_date=?",
            (next_run_date, cron["cron_id"], cron["owner"], cron["next_run_date"]),
        )
        return claimed == 1


async def _add_run_kwargs(db: aiosqlite.Connection) -> None:
    """Runs recorded before runs kept their request (``kwargs``) get an empty one."""
    cursor = await db.execute("PRAGMA table_info(runs)")
    if "kwargs" not in {row[1] for row in await cursor.fetchall()}:
        await db.execute("ALTER TABLE runs ADD COLUMN kwargs TEXT NOT NULL DEFAULT '{}'")


async def _migrate_unscoped_threads(db: aiosqlite.Connection) -> None:
    """Databases from before owner-scoped thread ids keep their threads and checkpoints."""
    cursor = await db.execute("PRAGMA table_info(threads)")
    columns = {row["name"] for row in await cursor.fetchall()}
    if not columns or "graph_thread" in columns:
        return
    await db.executescript(
        """
        ALTER TABLE threads RENAME TO threads_unscoped;
        """
        + _SCHEMA
        + """
        INSERT INTO threads SELECT thread_id, owner, created_at, updated_at, metadata, status,
            graph_id, thread_id FROM threads_unscoped;
        DROP TABLE threads_unscoped;
        """
    )
    await db.commit()
