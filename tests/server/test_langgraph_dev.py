"""LangGraph's own dev server (what Studio talks to) serves every strategy offline, runs the
LLM backends against a real model server, and the same SDK script gets the same response
shapes from it and from ``reflexrag serve``."""

from __future__ import annotations

import importlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from reflexrag.benchmarks import model_server
from reflexrag.benchmarks.services import start_langgraph_dev
from reflexrag.graphs import STRATEGIES
from tests.conftest import REPO
from tests.server.conftest import free_port
from tests.server.sdk_script import run_script


def test_langgraph_json_lists_every_strategy():
    listed = json.loads((REPO / "langgraph.json").read_text())["graphs"]
    assert set(listed) >= set(STRATEGIES)
    for name, target in listed.items():
        module, attribute = target.split(":")
        assert getattr(importlib.import_module(module), attribute).name == name


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[model_server.RunningServer]:
    """llama-server with the pinned test model, for the dev server's LLM runs."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with model_server.running(log=log) as server:
        yield server


@pytest.fixture(scope="module")
def langgraph_dev(
    tmp_path_factory: pytest.TempPathFactory, llm_server: model_server.RunningServer
) -> Iterator[tuple[str, Path]]:
    """LangGraph's dev server on the repository's langgraph.json: (url, working dir). Its
    backends stay local unless a run's context asks for the LLM, served by ``llm_server``."""
    tmp_path = tmp_path_factory.mktemp("langgraph-dev")
    port = free_port()
    # Run from a scratch folder: the dev server keeps its state (.langgraph_api/) in the
    # working directory, and the repository must stay clean.
    workdir = tmp_path / "dev"
    workdir.mkdir()
    process = start_langgraph_dev(
        REPO / "langgraph.json",
        tmp_path,
        port,
        workdir,
        REFLEXRAG_OPENAI_BASE_URL=llm_server.base_url,
        REFLEXRAG_GRADER_MODEL=llm_server.model,
        REFLEXRAG_GENERATOR_MODEL=llm_server.model,
        REFLEXRAG_LLM_TIMEOUT_S="120",
    )
    try:
        yield f"http://127.0.0.1:{port}", workdir
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


async def test_langgraph_dev_serves_a_strategy_offline(langgraph_dev):
    url, workdir = langgraph_dev
    client = get_client(url=url)
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


async def test_the_llm_generator_streams_a_run_under_langgraph_dev(langgraph_dev):
    """``langgraph dev`` refuses a blocking call on the event loop (BlockingError): the LLM
    generator, selected by the run's context, must do its file loading (jieba's dictionary,
    the tokenizer) off it. The answer's tokens stream from the model. (The judges stay local,
    so that the sample notes reach the generator whatever the small model would grade.)"""
    url, _ = langgraph_dev
    client = get_client(url=url)
    context = {"generator_backend": "llm"}
    chunks = [
        c
        async for c in client.runs.stream(
            None,
            "self_rag",
            input={"question": "Who wrote the Self-RAG paper?"},
            context=context,
            stream_mode=["updates", "messages-tuple"],
        )
    ]
    assert not [c for c in chunks if c.event == "error"], chunks
    nodes = [node for c in chunks if c.event == "updates" for node in c.data]
    assert "generate" in nodes and nodes[-1] in ("finish", "give_up"), nodes
    tokens = [c.data[0] for c in chunks if c.event == "messages"]
    assert tokens and any(token.get("content") for token in tokens)


# Fields reflexrag adds: why a run or thread failed, and a thread's pending interrupts (in the
# SDK's Thread type). Fields it leaves out: the LangSmith project of a run (no LangSmith).
EXTRA_FIELDS = {"error", "interrupts"}
MISSING_FIELDS = {"langsmith_session_name"}


def _fields(shape: object) -> set[str] | None:
    if isinstance(shape, tuple) and shape[:1] == ("list",):
        shape = shape[1]
    if isinstance(shape, tuple) and all(isinstance(item, str) for item in shape):
        return set(shape)
    return None


@pytest.fixture(scope="module")
async def official_shapes(langgraph_dev) -> list[tuple[str, object]]:
    """What the SDK script gets from LangGraph's own server, once per module."""
    return await run_script(langgraph_dev[0])


async def test_the_same_sdk_script_gets_the_same_shapes_from_both_servers(
    official_shapes, base_url
):
    """Assistants, threads, state and history, update_state, background runs and joins,
    breakpoints and resuming, every stream mode, stateless runs, 404s: the calls a Studio-style
    client makes, through langgraph_sdk, against LangGraph's server and reflexrag's (on
    SQLite and on Postgres)."""
    official = official_shapes
    ours = await run_script(base_url)
    assert [name for name, _ in ours] == [name for name, _ in official]
    for (name, theirs), (_, mine) in zip(official, ours, strict=True):
        their_fields, my_fields = _fields(theirs), _fields(mine)
        if their_fields is None or my_fields is None or theirs[:1] == ("error",):
            assert mine == theirs, name
            continue
        assert their_fields - MISSING_FIELDS <= my_fields, (name, their_fields - my_fields)
        assert my_fields - their_fields <= EXTRA_FIELDS, (name, my_fields - their_fields)
