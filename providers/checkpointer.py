"""Checkpointers for our CLI and server: SQLite under the data dir unless configured otherwise.

SQLite (default) runs in WAL mode with ``synchronous=NORMAL``; runs use ``durability="sync"`` so
a killed process loses no finished step. Postgres (``REFLEXRAG_CHECKPOINTER_URL=postgresql://…``)
shares one connection pool, but every run gets its own ``AsyncPostgresSaver``: a single saver
takes a lock around every call, which would serialise all concurrent runs.

Beside the checkpoints, the same database holds LangGraph's long-term store (``BaseStore``:
items by namespace and key, what Studio's memory view and ``client.store`` read and write),
``store.sqlite`` under the data dir or the Postgres store; runs get it as ``runtime.store``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from reflexrag.providers.database import (
    async_postgres_pool,
    is_postgres,
    take_session_lock_async,
)
from reflexrag.providers.settings import Settings, get_settings


class Checkpointers:
    """A shared saver for reads, a saver for each run, and the long-term store."""

    def __init__(
        self,
        shared: BaseCheckpointSaver,
        per_run: Callable[[], BaseCheckpointSaver] | None = None,
        store: BaseStore | None = None,
    ) -> None:
        self.shared = shared
        self._per_run = per_run
        self.store = store

    def for_run(self) -> BaseCheckpointSaver:
        return self._per_run() if self._per_run else self.shared


@asynccontextmanager
async def open_checkpointers(settings: Settings | None = None) -> AsyncIterator[Checkpointers]:
    """Open the configured checkpoint store; closes its connections on exit."""
    settings = settings or get_settings()
    url = settings.checkpointer_url or (
        settings.database_url if settings.distributed else f"sqlite:///{settings.checkpoint_path}"
    )
    if is_postgres(url):
        async with _postgres(url) as checkpointers:
            yield checkpointers
    elif url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        async with (
            AsyncSqliteSaver.from_conn_string(url.removeprefix("sqlite:///")) as saver,
            AsyncSqliteStore.from_conn_string(str(settings.data_dir / "store.sqlite")) as store,
        ):
            for connection in (saver.conn, store.conn):
                await connection.execute("PRAGMA journal_mode=WAL")
                await connection.execute("PRAGMA synchronous=NORMAL")
            await saver.setup()
            await store.setup()
            yield Checkpointers(saver, store=store)
    else:
        raise ValueError(
            f"unsupported checkpointer URL {url!r}: use sqlite:///PATH or postgresql://…"
        )


@asynccontextmanager
async def _postgres(url: str) -> AsyncIterator[Checkpointers]:
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        raise ValueError("Postgres checkpoints need: pip install 'reflexrag[postgres]'") from None
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with async_postgres_pool(url) as pool:
        shared, store = AsyncPostgresSaver(pool), AsyncPostgresStore(pool)
        # Replicas starting together would race on the migrations: one at a time (both run
        # CREATE INDEX CONCURRENTLY, so the lock is waited for by polling, see database.py).
        async with pool.connection() as connection:
            await take_session_lock_async(connection, "checkpoints:setup")
            try:
                await shared.setup()
                await store.setup()
            finally:
                await connection.execute("SELECT pg_advisory_unlock(hashtext('checkpoints:setup'))")
        yield Checkpointers(shared, lambda: AsyncPostgresSaver(pool), store)


@asynccontextmanager
async def open_checkpointer(settings: Settings | None = None) -> AsyncIterator[BaseCheckpointSaver]:
    """One saver, for single-run callers such as the CLI."""
    async with open_checkpointers(settings) as checkpointers:
        yield checkpointers.shared


async def copy_checkpoints(saver: BaseCheckpointSaver, source: str, target: str) -> None:
    """Every checkpoint of ``source`` (each namespace, oldest first, so each one's parent is
    already there) and its pending writes, written again under ``target``. Through the saver's
    own interface, since the SQLite and Postgres savers implement no ``acopy_thread``."""
    tuples = [item async for item in saver.alist({"configurable": {"thread_id": source}})]
    for item in reversed(tuples):  # alist gives newest first
        stored = item.config["configurable"]
        parent = item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None
        config = {
            "configurable": {
                "thread_id": target,
                "checkpoint_ns": stored.get("checkpoint_ns", ""),
                **({"checkpoint_id": parent} if parent else {}),
            }
        }
        written = await saver.aput(
            config, item.checkpoint, item.metadata, item.checkpoint["channel_versions"]
        )
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in item.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            await saver.aput_writes(written, writes, task_id)
