"""Postgres connections survive what production does to them: a server that closed them (a
restart) and a client paused inside a transaction that holds a lock every replica needs."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from reflexrag.providers import database
from reflexrag.providers.settings import get_settings


def _terminate_other_sessions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return row[0]


async def test_connections_the_server_closed_are_replaced_not_handed_out(fresh_database):
    async with database.async_postgres_pool(fresh_database) as pool:
        await pool.open(wait=True)
        async with pool.connection() as connection:
            await connection.execute("SELECT 1")
        keyword_pool = database.postgres_pool(fresh_database, "SELECT 1", "test:schema")
        with keyword_pool.connection() as connection:
            connection.execute("SELECT 1")
        assert await asyncio.to_thread(_terminate_other_sessions, fresh_database) >= 2
        # The next request of each pool gets a live connection, as after a Postgres restart.
        async with pool.connection() as connection:
            assert (await (await connection.execute("SELECT 2 AS n")).fetchone())["n"] == 2
        with keyword_pool.connection() as connection:
            assert connection.execute("SELECT 3").fetchone()[0] == 3


async def test_a_transaction_left_idle_releases_its_locks_after_the_lease(
    fresh_database, monkeypatch
):
    monkeypatch.setattr(get_settings(), "run_lease_s", 5.0)
    async with database.async_postgres_pool(fresh_database) as pool:
        await pool.open(wait=True)
        async with pool.connection() as paused, pool.connection() as healthy:
            await paused.execute("BEGIN")
            await paused.execute("SELECT pg_advisory_xact_lock(hashtext('queue:claim'))")
            # ``paused`` now sends nothing, as a SIGSTOPped replica inside its claim.
            started = time.monotonic()
            await healthy.execute("BEGIN")
            await healthy.execute("SELECT pg_advisory_xact_lock(hashtext('queue:claim'))")
            waited = time.monotonic() - started
            await healthy.execute("COMMIT")
            assert waited >= 4.0, "the lock was held while the transaction was within its lease"
            with pytest.raises(psycopg.Error, match="idle-in-transaction timeout"):
                await paused.execute("SELECT 1")


async def test_replicas_starting_together_on_a_fresh_database_both_set_up(fresh_database, tmp_path):
    """Each replica takes the setup lock, then runs the checkpointer's migrations, one of
    which is a CREATE INDEX CONCURRENTLY; a replica waiting for the lock inside a statement
    would be a transaction that index waits for, while its builder holds the lock."""
    from reflexrag.providers.checkpointer import open_checkpointers
    from reflexrag.providers.settings import Settings

    settings = Settings(data_dir=tmp_path, database_url=fresh_database)

    async def start_replica() -> str:
        async with open_checkpointers(settings) as checkpointers:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            return str(await checkpointers.shared.aget_tuple(config))

    # Generous: the two setups take a second or two; the cycle used to hang for ever.
    started = await asyncio.wait_for(asyncio.gather(start_replica(), start_replica()), 120)
    assert started == ["None", "None"]


async def test_only_a_connection_idle_for_a_while_or_broken_is_checked_again(
    fresh_database, monkeypatch
):
    recent = database.RecentUse()
    async with await psycopg.AsyncConnection.connect(fresh_database) as connection:
        assert not recent.fresh(connection)  # never handed back: checked
        recent.returned(connection)
        assert recent.fresh(connection)
        later = time.monotonic() + database.RECENTLY_RETURNED_S + 0.1
        monkeypatch.setattr(database.time, "monotonic", lambda: later)
        assert not recent.fresh(connection)
        monkeypatch.undo()
        recent.returned(connection)
        await connection.close()  # as a connection the server dropped is, once noticed
        assert not recent.fresh(connection)
