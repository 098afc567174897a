"""Postgres connections: the asyncio pool of the checkpointer and the service's tables, and for
the providers' shared, derived data (the keyword index, the embedding cache) one synchronous
pool per URL and process, with queries written once in SQLite's ``?`` placeholder style."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

POSTGRES_SCHEMES = ("postgres://", "postgresql://")

_pools: dict[str, Any] = {}
_schemas: set[tuple[str, str]] = set()
"""(URL, schema name) pairs whose tables this process has made sure of."""
_pools_lock = threading.Lock()


def is_postgres(location: object) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


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
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, kwargs=kwargs, max_size=20, open=False) as pool:
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
            _pools[url] = ConnectionPool(
                url, kwargs={"autocommit": True}, min_size=1, max_size=8, open=True
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


class PostgresConnection:
    """A psycopg connection behind the SQLite placeholder style the queries are written in."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._connection.execute(sql.replace("?", "%s"), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._connection.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), list(rows))
