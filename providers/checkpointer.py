"""Checkpointers for our CLI and server: SQLite under the data dir unless configured otherwise."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver

from providers.settings import get_settings


@asynccontextmanager
async def open_checkpointer() -> AsyncIterator[BaseCheckpointSaver]:
    """Yield a ready checkpointer; closes its connection on exit."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    settings = get_settings()
    url = settings.checkpointer_url
    if url and not url.startswith("sqlite:"):
        raise ValueError(f"unsupported checkpointer URL {url!r} (sqlite:///PATH)")
    path = url.removeprefix("sqlite:///") if url else str(settings.checkpoint_path)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.conn.execute("PRAGMA journal_mode=WAL")
        await saver.conn.execute("PRAGMA synchronous=NORMAL")
        await saver.setup()
        yield saver
