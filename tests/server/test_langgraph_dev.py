"""LangGraph's own dev server (what Studio talks to) serves every strategy offline."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from langgraph_sdk import get_client

from reflexrag.graphs import STRATEGIES
from tests.conftest import REPO
from tests.server.conftest import free_port


def test_langgraph_json_lists_every_strategy():
    listed = json.loads((REPO / "langgraph.json").read_text())["graphs"]
    assert set(listed) >= set(STRATEGIES)
    for name, target in listed.items():
        module, attribute = target.split(":")
        assert getattr(importlib.import_module(module), attribute).name == name


async def test_langgraph_dev_serves_a_strategy_offline(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "REFLEXRAG_DATA_DIR": str(tmp_path),
    }
    cli = Path(sys.executable).parent / "langgraph"
    # Run from a scratch folder: the dev server keeps its state (.langgraph_api/) in the
    # working directory, and the repository must stay clean.
    workdir = tmp_path / "dev"
    workdir.mkdir()
    process = subprocess.Popen(
        [
            str(cli),
            "dev",
            "--config",
            str(REPO / "langgraph.json"),
            "--no-browser",
            "--no-reload",
            "--port",
            str(port),
        ],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stdout.read().decode()[-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        client = get_client(url=f"http://127.0.0.1:{port}")
        chunks = [
            c
            async for c in client.runs.stream(
                None, "self_rag", input={"question": "What is CRAG?"}, stream_mode="updates"
            )
        ]
        nodes = [node for c in chunks if c.event == "updates" for node in c.data]
        assert not [c for c in chunks if c.event == "error"], chunks
        assert nodes[:3] == ["prepare", "decide_retrieval", "retrieve"] and nodes[-1] == "finish"
        assert (workdir / ".langgraph_api").exists() and not (REPO / ".langgraph_api").exists()
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
