"""Postgres connections: the asyncio pool of the checkpointer and the service's tables, and for
the providers' shared, derived data (the keyword index, the embedding cache) one synchronous
pool per URL and process, with queries written once in SQLite's ``?`` placeholder style."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

POSTGRES_SCHEMES = ("postgres://", "postgresql://")

_pools: dict[str, Any] = {}
_schemas: set[tuple[str, str]] = set()
"""(URL, schema name) pairs whose tables this process has made sure of."""
_pools_lock = threading.Lock()

RECENTLY_RETURNED_S = 1.0
"""A pooled connection handed back less than this long ago is handed out again unchecked."""


class RecentUse:
    """When each pooled connection was last handed back, so the pool's check (an empty query,
    one round trip) is spent only on connections that sat idle: one back for under a second
    worked a moment ago, and one that failed since is ``closed``. Checking every
    checkout was 13 % of a replica's samples under 50 concurrent runs."""

    def __init__(self) -> None:
        self._returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def returned(self, connection: Any) -> None:
        self._returned[connection] = time.monotonic()

    def fresh(self, connection: Any) -> bool:
        returned = self._returned.get(connection)
        return (
            returned is not None
            and time.monotonic() - returned < RECENTLY_RETURNED_S
            and not connection.closed
        )


def is_postgres(location: object) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def session_options() -> str:
    """Options of every connection: a transaction left idle (its client paused by SIGSTOP, a
    GC pause, a frozen VM, a half-open connection) is ended by the server after the run
    lease, since by then the replica has lost its runs anyway; otherwise the advisory locks
    it holds (the run queue's claim lock) would stall every replica until it woke."""
    from reflexrag.providers.settings import get_settings

    idle_ms = int(max(get_settings().run_lease_s, 5.0) * 1000)
    return f"-c idle_in_transaction_session_timeout={idle_ms}"


def database_errors() -> tuple[type[Exception], ...]:
    """What Postgres being down or restarting raises (a closed connection, a pool with none
    to give); nothing without the driver installed."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        return ()
    return (psycopg.OperationalError, psycopg_pool.PoolTimeout)


def integrity_errors() -> tuple[type[Exception], ...]:
    """What SQLite and Postgres raise for a unique key already taken (someone made the same
    row first)."""
    import sqlite3

    try:
        import psycopg
    except ImportError:
        return (sqlite3.IntegrityError,)
    return (sqlite3.IntegrityError, psycopg.IntegrityError)


def data_errors() -> tuple[type[Exception], ...]:
    """What Postgres raises for a value it cannot hold (NUL in text, an invalid escape)."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.DataError,)


def _missing_driver() -> ValueError:
    return ValueError("a Postgres database needs: pip install 'reflexrag[postgres]'")


@asynccontextmanager
async def async_postgres_pool(url: str) -> AsyncIterator[Any]:
    """An asyncio pool of autocommit connections whose rows are dicts (what LangGraph's
    Postgres saver and the service's tables both expect), closed on exit."""
    try:
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError:
        raise _missing_driver() from None
    kwargs = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": session_options(),
    }
    # ``check``: a connection idle for a while is tested as it is handed out, so one the server
    # closed (a Postgres restart) is replaced instead of failing the request that drew it.
    recent = RecentUse()

    async def check(connection: Any) -> None:
        if not recent.fresh(connection):
            await AsyncConnectionPool.check_connection(connection)

    async def returned(connection: Any) -> None:
        recent.returned(connection)

    async with AsyncConnectionPool(
        url, kwargs=kwargs, max_size=20, open=False, check=check, reset=returned
    ) as pool:
        yield pool


def postgres_pool(url: str, schema: str, name: str) -> Any:
    """The process's pool for ``url`` (autocommit connections), with ``schema``'s tables
    created once: under an advisory lock named ``name``, as replicas starting together would
    otherwise race on CREATE TABLE."""
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise _missing_driver() from None
    with _pools_lock:
        if url not in _pools:
            recent = RecentUse()

            def check(connection: Any) -> None:
                if not recent.fresh(connection):
                    ConnectionPool.check_connection(connection)

            _pools[url] = ConnectionPool(
                url,
                kwargs={"autocommit": True, "options": session_options()},
                min_size=1,
                max_size=8,
                open=True,
                check=check,
                reset=recent.returned,
            )
        pool = _pools[url]
        if (url, name) not in _schemas:
            with pool.connection() as connection, connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
                for statement in schema.split(";"):
                    if statement.strip():
                        connection.execute(statement)
            _schemas.add((url, name))
        return pool


LOCK_POLL_S = 0.1
"""How often a session waiting for an advisory lock asks again."""

_TRY_LOCK = "SELECT pg_try_advisory_lock(hashtext(%s)) AS taken"


def take_session_lock(connection: Any, name: str) -> None:
    """Take the session-level advisory lock ``name``, asking again until it is free, not
    waiting inside one statement: a statement waiting on a lock is an open transaction,
    which a ``CREATE INDEX CONCURRENTLY`` on another connection (the checkpointer's
    migrations) waits for, and if the holder of the lock is the one building that index,
    the two wait for each other through the client, where Postgres sees no deadlock."""
    while not _taken(connection.execute(_TRY_LOCK, (name,)).fetchone()):
        time.sleep(LOCK_POLL_S)


async def take_session_lock_async(connection: Any, name: str) -> None:
    """:func:`take_session_lock` on an asyncio connection."""
    while not _taken(await (await connection.execute(_TRY_LOCK, (name,))).fetchone()):
        await asyncio.sleep(LOCK_POLL_S)


def _taken(row: Any) -> bool:
    return bool(row["taken"] if isinstance(row, dict) else row[0])


class PostgresConnection:
    """A psycopg connection behind the SQLite placeholder style the queries are written in."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._connection.execute(sql.replace("?", "%s"), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._connection.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), list(rows))
