"""Two replicas on one Postgres database and one Chroma server behave as one service: a run made
on one is streamed from the other, a document ingested on one is found by a run on the other,
cancel and multitask strategies reach across, and a replica killed mid-run (SIGKILL) has its run
finished by the other, with no node run twice and the answer of an uninterrupted run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError

from reflexrag.benchmarks.services import (
    chroma_server,
    new_database,
    private_postgres,
    restart_postgres,
)
from tests.conftest import free_port
from tests.server.conftest import SELF_RAG_ANSWERED, running_server, start_server

QUESTION = {"question": "What is Corrective RAG?"}


@pytest.fixture(scope="module")
def chroma_url() -> Iterator[str]:
    with chroma_server() as url:
        yield url


@pytest.fixture(scope="module")
def replica_env(postgres_url, chroma_url) -> dict[str, str]:
    return {
        "REFLEXRAG_DATABASE_URL": new_database(postgres_url, "replicas"),
        "REFLEXRAG_CHROMA_URL": chroma_url,
    }


@pytest.fixture(scope="module")
def replicas(replica_env, tmp_path_factory) -> Iterator[dict[str, subprocess.Popen]]:
    """Two `reflexrag serve` processes, each with its own data dir, sharing the database and
    the vector store; every judge and KB call is stretched so runs are still going when the
    test acts on them."""
    env = {**replica_env, "REFLEXRAG_TEST_DELAY_S": "0.4", "REFLEXRAG_RUN_LEASE_S": "6"}
    servers: dict[str, subprocess.Popen] = {}
    try:
        for name in ("a", "b"):
            port = free_port()
            data_dir = tmp_path_factory.mktemp(f"replica-{name}")
            servers[f"http://127.0.0.1:{port}"] = start_server(data_dir, port, **env)
        yield servers
    finally:
        for server in servers.values():
            server.kill()
            server.wait()


async def test_a_run_made_on_one_replica_is_streamed_and_joined_from_the_other(replicas):
    url_a, url_b = replicas
    a, b = get_client(url=url_a), get_client(url=url_b)
    thread = await a.threads.create()
    run = await a.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
    chunks = [c async for c in b.runs.join_stream(thread["thread_id"], run["run_id"])]
    assert chunks[0].event == "metadata" and chunks[0].data["run_id"] == run["run_id"]
    assert chunks[-1].event == "values" and chunks[-1].data["stop_reason"] == "answered"
    joined = await a.runs.join(thread["thread_id"], run["run_id"])
    assert joined["generation"] == chunks[-1].data["generation"]
    assert (await b.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"
    assert (await b.threads.get(thread["thread_id"]))["status"] == "idle"
    # A stateless run waited for on B, streamed on A.
    waited = await b.runs.wait(None, "naive", input={"question": "What is CRAG?"})
    assert "retrieval evaluator" in waited["generation"]
    streamed = [c async for c in a.runs.stream(None, "naive", input=QUESTION)]
    assert streamed[-1].data["generation"]


async def test_a_document_ingested_on_one_replica_is_retrieved_by_a_run_on_the_other(
    replicas, replica_env, tmp_path
):
    url_a, url_b = replicas
    document = {
        "doc_id": "quill",
        "title": "Quill the heron",
        "text": "Quill is a grey heron who lives at Lake Myvatn and eats only sticklebacks.",
    }
    async with httpx.AsyncClient(base_url=url_b, timeout=120) as http:
        response = await http.post("/kb/herons/documents", json={"documents": [document]})
        assert response.status_code == 200, response.text
    # The CLI, pointed at the same stores, writes beside the running servers (no data-dir lock).
    notes = tmp_path / "walrus.md"
    notes.write_text("# Tusk the walrus\n\nTusk the walrus sleeps on the ice of Svalbard.\n")
    ingest = subprocess.run(
        [sys.executable, "-m", "reflexrag.server.cli", "ingest", str(notes), "--kb", "herons"],
        env={**os.environ, **replica_env, "REFLEXRAG_DATA_DIR": str(tmp_path / "cli")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ingest.returncode == 0, ingest.stderr
    a = get_client(url=url_a)
    found = await a.runs.wait(
        None,
        "naive",
        input={"question": "Where does Tusk sleep?"},
        context={"kb": "herons", "retrieval_mode": "bm25"},
    )
    # The short answer, or the sentence it would quote when the span is not trusted.
    assert "Svalbard" in f"{found['generation']} {found.get('quote', '')}"
    for mode in ("bm25", "vector"):  # the keyword index is shared as well as the vectors
        result = await a.runs.wait(
            None,
            "naive",
            input={"question": "What does Quill eat?"},
            context={"kb": "herons", "retrieval_mode": mode},
        )
        assert [s["doc_id"] for s in result["sources"]] == ["quill"], mode
        assert "sticklebacks" in f"{result['generation']} {result.get('quote', '')}"


async def test_cancel_and_multitask_strategies_reach_across_replicas(replicas):
    url_a, url_b = replicas
    a, b = get_client(url=url_a), get_client(url=url_b)
    thread = await a.threads.create()
    first = await a.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
    with pytest.raises(ConflictError):
        await b.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
    queued = await b.runs.create(
        thread["thread_id"], "naive", input=QUESTION, multitask_strategy="enqueue"
    )
    await b.runs.cancel(thread["thread_id"], first["run_id"], wait=True)
    assert (await a.runs.get(thread["thread_id"], first["run_id"]))["status"] == "interrupted"
    await a.runs.join(thread["thread_id"], queued["run_id"])
    assert (await b.runs.get(thread["thread_id"], queued["run_id"]))["status"] == "success"
    # interrupt: the running run stops, the new one runs.
    second = await a.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
    third = await b.runs.create(
        thread["thread_id"], "naive", input=QUESTION, multitask_strategy="interrupt"
    )
    await b.runs.join(thread["thread_id"], third["run_id"])
    statuses = {
        run["run_id"]: run["status"] for run in await a.runs.list(thread["thread_id"], limit=10)
    }
    assert statuses[second["run_id"]] == "interrupted"
    assert statuses[third["run_id"]] == "success"


async def test_a_worker_process_executes_the_runs_of_an_api_only_replica(fresh_database, tmp_path):
    """`reflexrag worker` takes runs from the queue that a replica without worker slots fills,
    and SIGTERM stops it cleanly."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "reflexrag.server.cli", "worker"],
        env={
            **os.environ,
            "REFLEXRAG_DATABASE_URL": fresh_database,
            "REFLEXRAG_DATA_DIR": str(tmp_path / "worker"),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        async with running_server(
            tmp_path / "api", database_url=fresh_database, worker_slots=0
        ) as url:
            result = await get_client(url=url).runs.wait(None, "naive", input=QUESTION)
        assert result["stop_reason"] == "answered"
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=120)
    assert worker.returncode == 0, errors
    assert "stopped; its runs went to the other workers" in errors


def updated_nodes(chunks) -> list[str]:
    return [node for c in chunks if c.event == "updates" for node in c.data]


async def test_a_killed_replica_s_run_is_finished_by_the_other(replicas, replica_env):
    url_a = next(iter(replicas))
    clients = {url: get_client(url=url) for url in replicas}
    # The answer of an uninterrupted run, for comparison.
    reference_thread = await clients[url_a].threads.create()
    reference = await clients[url_a].runs.wait(
        reference_thread["thread_id"], "self_rag", input=QUESTION
    )

    thread = await clients[url_a].threads.create()
    run = await clients[url_a].runs.create(
        thread["thread_id"], "self_rag", input=QUESTION, stream_mode=["updates"]
    )
    database = replica_env["REFLEXRAG_DATABASE_URL"]
    for _ in range(600):
        state = await clients[url_a].threads.get_state(thread["thread_id"])
        if state["values"].get("last_retrieved_ids"):
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the run never got past retrieve")
    with psycopg.connect(database) as connection:
        worker, attempt = connection.execute(
            "SELECT worker, attempt FROM run_queue WHERE run_id=%s", (run["run_id"],)
        ).fetchone()
    assert attempt == 1
    executing = next(url for url, p in replicas.items() if f":{p.pid}:" in worker)
    survivor = next(url for url in replicas if url != executing)
    replicas[executing].send_signal(signal.SIGKILL)
    replicas[executing].wait()

    # The client reconnects to the survivor and gets the whole stream and the result.
    chunks = [
        c async for c in clients[survivor].runs.join_stream(thread["thread_id"], run["run_id"])
    ]
    attempts = [c.data["attempt"] for c in chunks if c.event == "metadata"]
    assert attempts == [1, 2], "the survivor took the run over"
    assert updated_nodes(chunks) == SELF_RAG_ANSWERED, "every node ran exactly once"
    result = await clients[survivor].runs.join(thread["thread_id"], run["run_id"])
    assert result["generation"] == reference["generation"]
    assert result["stop_reason"] == "answered"
    finished = await clients[survivor].runs.get(thread["thread_id"], run["run_id"])
    assert finished["status"] == "success"


async def test_an_attempt_that_lost_its_lease_stops_only_itself():
    """A replica paused past its lease may claim the same run again (attempt 2) before the
    paused attempt 1 notices; attempt 1's loss must cancel attempt 1, never attempt 2."""
    from reflexrag.server.run_queue import RunQueue

    queue = RunQueue.__new__(RunQueue)  # only its bookkeeping of the runs it executes
    newer = asyncio.create_task(asyncio.sleep(60))
    queue.executing = {"run": (2, newer)}
    queue._lost("run", 1)
    await asyncio.sleep(0)
    assert not newer.cancelled() and queue.executing["run"][0] == 2
    queue._cancel_here("run")  # a cancel request for the run reaches whichever attempt
    with pytest.raises(asyncio.CancelledError):
        await newer


class _EventsTable:
    """The ``runs`` status and ``run_events`` rows a stream reads, and how often it reads."""

    def __init__(self) -> None:
        self.status, self.rows, self.reads = "running", [], 0

    async def fetchall(self, sql: str, params: tuple) -> list[dict]:
        self.reads += 1
        after = params[2]
        new = [row for row in self.rows if row["seq"] > after]
        return [{"status": self.status, **row} for row in new] or [
            {"status": self.status, "seq": None, "event": None, "data": None}
        ]

    def store(self, seq: int) -> tuple[int, str, str]:
        self.rows.append({"seq": seq, "event": "updates", "data": json.dumps({"node": seq})})
        return seq, "updates", json.dumps({"node": seq})


def _queue_reading(table: _EventsTable):
    from types import SimpleNamespace

    from reflexrag.server.run_queue import RunQueue

    queue = RunQueue.__new__(RunQueue)  # only its streams' bookkeeping
    queue.store = SimpleNamespace(db=table)
    queue._changed, queue._feeds, queue._held = {}, {}, set()
    queue._work_available = asyncio.Event()
    return queue


async def _streamed(queue, run_id: str, into: list) -> None:
    async for _, data in queue.events(run_id):
        into.append(data["node"])


async def _stream_open(stored: int = 0, held: bool = False):
    """A queue (its worker holding the run, if ``held``) with a stream of the run open, past
    its first read of the ``stored`` events already there."""
    table = _EventsTable()
    queue = _queue_reading(table)
    if held:
        queue._held.add("run")
    for seq in range(stored):
        table.store(seq)
    seen: list[int] = []
    stream = asyncio.create_task(_streamed(queue, "run", seen))
    await asyncio.sleep(0.05)
    return table, queue, seen, stream


def _carried(table: _EventsTable, seq: int) -> dict:
    """The notification of an event that carries it."""
    seq, event, data = table.store(seq)
    return {"kind": "event", "run_id": "run", "seq": seq, "event": event, "data": data}


async def test_a_stream_beside_the_worker_takes_its_events_without_reading_them_back():
    table, queue, seen, stream = await _stream_open(stored=1, held=True)
    assert seen == [0] and table.reads == 1, "the first read catches up"
    for seq in range(1, 6):
        queue._hand_over("run", table.store(seq))
        await asyncio.sleep(0.01)
        # Its notification, later, did not carry it (too large): no read, it was handed over.
        queue._dispatch({"kind": "event", "run_id": "run"})
        await asyncio.sleep(0.01)
    table.status = "success"
    queue._hand_over_end("run", 5)
    await asyncio.wait_for(stream, 5)
    assert seen == [0, 1, 2, 3, 4, 5]
    assert table.reads == 1, "nothing handed over is read back, nor is the end"
    assert queue._feeds == {} and queue._changed == {}, "nothing of the run is left here"


async def test_a_stream_on_another_replica_takes_the_events_its_notifications_carry():
    table, queue, seen, stream = await _stream_open()
    for seq in range(3):
        queue._dispatch(_carried(table, seq))
        await asyncio.sleep(0.01)
    assert seen == [0, 1, 2] and table.reads == 1
    table.store(3)  # too large to carry: its notification names the run only
    queue._dispatch({"kind": "event", "run_id": "run"})
    await asyncio.sleep(0.01)
    assert seen == [0, 1, 2, 3] and table.reads == 2
    queue._dispatch(_carried(table, 4))
    table.status = "success"
    queue._dispatch({"kind": "done", "run_id": "run", "last": 4})
    await asyncio.wait_for(stream, 5)
    assert seen == [0, 1, 2, 3, 4] and table.reads == 2


async def test_a_stream_reads_what_it_was_not_handed():
    """Attempt 1 here, attempt 2 on another replica whose notifications were lost, attempt 3
    here again, and an end whose last event never arrived: each missing event is read from
    the database, in order, once."""
    table, queue, seen, stream = await _stream_open(held=True)
    queue._hand_over("run", table.store(0))
    await asyncio.sleep(0.01)
    queue._held.discard("run")  # the lease lost; another replica's worker goes on
    table.store(1)
    table.store(2)
    queue._held.add("run")  # claimed here again
    queue._hand_over("run", table.store(3))
    await asyncio.sleep(0.05)
    assert seen == [0, 1, 2, 3] and table.reads == 2, "the gap was read"
    table.store(4)
    table.status = "success"
    queue._hand_over_end("run", 4)
    await asyncio.wait_for(stream, 5)
    assert seen == [0, 1, 2, 3, 4] and table.reads == 3


async def test_a_stream_told_nothing_reads_on_each_notification_and_when_it_hears_none():
    table, queue, seen, stream = await _stream_open()
    for seq in range(3):
        table.store(seq)
        queue._dispatch({"kind": "event", "run_id": "run"})
        await asyncio.sleep(0.01)
    assert seen == [0, 1, 2] and table.reads == 4
    table.store(3)  # its notification lost; the run ended by a queue (no last event said)
    await asyncio.sleep(1.2)
    assert seen == [0, 1, 2, 3], "the poll read it"
    table.status = "interrupted"
    queue._dispatch({"kind": "done", "run_id": "run"})
    await asyncio.wait_for(stream, 5)
    assert seen == [0, 1, 2, 3] and table.reads == 6


async def test_runs_in_flight_survive_a_database_restart(chroma_url, tmp_path):
    """N4: Postgres stops (every connection closed) and comes back 3 s later while a run is
    going; the run ends as an uninterrupted run does. Its own cluster, so the session's is
    never restarted."""
    with private_postgres() as cluster:
        env = {
            "REFLEXRAG_DATABASE_URL": new_database(cluster, "restarted"),
            "REFLEXRAG_CHROMA_URL": chroma_url,
            "REFLEXRAG_TEST_DELAY_S": "0.4",
            "REFLEXRAG_RUN_LEASE_S": "6",
        }
        port = free_port()
        server = start_server(tmp_path, port, **env)
        try:
            client = get_client(url=f"http://127.0.0.1:{port}")
            reference_thread = await client.threads.create()
            reference = await client.runs.wait(
                reference_thread["thread_id"], "self_rag", input=QUESTION
            )
            thread = await client.threads.create()
            run = await client.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
            for _ in range(600):
                state = await client.threads.get_state(thread["thread_id"])
                if state["values"].get("last_retrieved_ids"):
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the run never got past retrieve")
            await asyncio.to_thread(restart_postgres, cluster, 3.0)
            for _ in range(240):  # the API answers 503 until its pool reconnects
                try:
                    finished = await client.runs.get(thread["thread_id"], run["run_id"])
                except httpx.HTTPError:
                    finished = {"status": "unknown"}
                if finished["status"] not in ("pending", "running", "unknown"):
                    break
                await asyncio.sleep(0.5)
            assert finished["status"] == "success", finished
            result = await client.runs.join(thread["thread_id"], run["run_id"])
            assert result["generation"] == reference["generation"]
            assert result["stop_reason"] == "answered"
            # (Whether it needed a second attempt depends on what was in flight when the
            # connections closed: the pools wait out a short outage. The next test makes the
            # database fail under a run for certain.)
        finally:
            server.kill()
            server.wait()


async def test_a_run_the_database_failed_under_is_taken_up_again_from_its_checkpoint(
    fresh_database, tmp_path, monkeypatch
):
    """The first attempt's graph loses its connection after it has started (as a restart
    does to a query in flight): the attempt ends without an error, the run is claimed again
    and continues from the thread's latest checkpoint, and succeeds."""
    from reflexrag.server import run_queue

    real = run_queue.execute_graph
    calls: list[bool] = []

    async def flaky(spec, checkpointers, publish, **options):
        calls.append(options.get("resume"))
        if len(calls) == 1:
            await publish("updates", {"prepare": {}})
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return await real(spec, checkpointers, publish, **options)

    monkeypatch.setattr(run_queue, "execute_graph", flaky)
    monkeypatch.setattr(run_queue, "RETRY_DELAY_S", 0.2)
    async with running_server(tmp_path, database_url=fresh_database, run_lease_s=6) as url:
        client = get_client(url=url)
        thread = await client.threads.create()
        result = await client.runs.wait(thread["thread_id"], "naive", input=QUESTION)
        assert result["stop_reason"] == "answered", result
        (run,) = await client.runs.list(thread["thread_id"])
        assert run["status"] == "success"
    assert len(calls) == 2


async def test_a_run_searches_a_shared_store_without_asking_first_and_sees_it_made_again(
    chroma_url, isolated_data_dir, monkeypatch
):
    """A retrieval trusts the knowledge base this process holds (no round trip to ask the
    store whether it is current); one another process deleted and made again under the same
    name is noticed by the search itself and read afresh, never served stale."""
    from reflexrag.nodes.rag import search_chunks
    from reflexrag.providers import knowledge_base as kb_module
    from reflexrag.providers.knowledge_base import SourceDocument
    from reflexrag.providers.settings import get_settings
    from reflexrag.state import Context

    monkeypatch.setattr(get_settings(), "chroma_url", chroma_url)
    checks = []
    real_is_current = kb_module.KnowledgeBase.is_current
    monkeypatch.setattr(
        kb_module.KnowledgeBase, "is_current", lambda kb: checks.append(kb) or real_is_current(kb)
    )
    kb_module.get_knowledge_base("swapped").add(
        [SourceDocument("old", "Herons eat fish, say the old notes.")]
    )
    context = Context(kb="swapped", top_k=1)
    found = await search_chunks(context, "What do herons eat?", 1)
    assert [doc.metadata["doc_id"] for doc in found] == ["old"]
    checks.clear()
    await search_chunks(context, "What do herons eat?", 1)
    assert checks == [], "a retrieval asked the store whether its knowledge base is current"

    # Another process deletes it and makes it again; this one still holds the old copy.
    key = next(key for key in kb_module._kb_cache if key[1] == "swapped")
    stale = kb_module._kb_cache.pop(key)
    kb_module.delete_knowledge_base("swapped")
    kb_module.get_knowledge_base("swapped").add(
        [SourceDocument("new", "Herons eat frogs, say the new notes.")]
    )
    kb_module._kb_cache[key] = stale
    found = await search_chunks(context, "What do herons eat?", 1)
    assert [doc.metadata["doc_id"] for doc in found] == ["new"]
    assert kb_module._kb_cache[key] is not stale
