"""A server killed mid-run (SIGKILL) loses no finished step; the thread resumes where it stopped.

Runs against SQLite, and against a private Postgres cluster when initdb/pg_ctl are installed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from tests.conftest import REPO, free_port
from tests.server.conftest import start_server

QUESTION = {"question": "What is Corrective RAG?"}


@pytest.fixture(params=["sqlite", "postgres"])
def checkpointer_env(request) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    return {"REFLEXRAG_CHECKPOINTER_URL": request.getfixturevalue("postgres_url")}


@pytest.fixture(scope="module")
def seeded_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir whose default knowledge base already holds the sample documents: each server
    under test starts from a copy, so no run waits on a cold embed while the test times it."""
    template = tmp_path_factory.mktemp("seeded")
    subprocess.run(
        [sys.executable, "-m", "reflexrag.server.cli", "ingest", "--sample", "--quiet"],
        cwd=REPO,
        env={**os.environ, "REFLEXRAG_DATA_DIR": str(template)},
        check=True,
        capture_output=True,
        timeout=1800,
    )
    return template


async def test_killed_server_resumes_without_redoing_finished_nodes(
    tmp_path, checkpointer_env, seeded_data_dir
):
    shutil.copytree(seeded_data_dir, tmp_path, dirs_exist_ok=True)
    port = free_port()
    server = start_server(tmp_path, port, REFLEXRAG_TEST_DELAY_S="0.7", **checkpointer_env)
    try:
        client = get_client(url=f"http://127.0.0.1:{port}")
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
        for _ in range(300):
            state = await client.threads.get_state(thread["thread_id"])
            if state["values"].get("last_retrieved_ids"):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the run never got past retrieve")
        history_before = await client.threads.get_history(thread["thread_id"], limit=100)
        assert state["next"], "killed mid-run"
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()

    server = start_server(tmp_path, port, **checkpointer_env)
    try:
        client = get_client(url=f"http://127.0.0.1:{port}")
        after_restart = await client.threads.get_state(thread["thread_id"])
        assert after_restart["next"], "the unfinished step is still pending"
        assert (
            after_restart["values"]["last_retrieved_ids"] == state["values"]["last_retrieved_ids"]
        )
        history_after = await client.threads.get_history(thread["thread_id"], limit=100)
        assert {h["checkpoint"]["checkpoint_id"] for h in history_before} <= {
            h["checkpoint"]["checkpoint_id"] for h in history_after
        }
        assert (await client.runs.get(thread["thread_id"], run["run_id"]))[
            "status"
        ] == "interrupted"
        assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"

        result = await client.runs.wait(thread["thread_id"], "self_rag", input=None)
        assert result["stop_reason"] == "answered"
        nodes = [step["node"] for step in result["steps"]]
        assert nodes.count("decide_retrieval") == 1 and nodes.count("retrieve") == 1
        assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"
    finally:
        server.terminate()
        server.wait(timeout=30)
