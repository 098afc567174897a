"""What an attacker or a careless client tries: each test names the hole it keeps closed.

Every rejected request is also checked to leave what is stored (knowledge bases, threads)
exactly as it was.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from reflexrag.providers.knowledge_base import KnowledgeBaseError
from tests.server.conftest import running_server

QUESTION = {"question": "What is Corrective RAG?"}
ALICE, BOB = {"x-api-key": "key-a"}, {"x-api-key": "key-b"}


@pytest.fixture(scope="module")
async def keyed_url(tmp_path_factory) -> Iterator[str]:
    async with running_server(
        tmp_path_factory.mktemp("keyed"), api_key="key-a,key-b", max_upload_bytes=50_000
    ) as url:
        yield url


@pytest.fixture(scope="module")
def web_server() -> Iterator[str]:
    """A loopback web server: /page (text), /big (100 kB), /trickle (5 bytes a second),
    /slow-head (its status line and headers a byte a second)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/slow-head":
                for byte in b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n" * 3:
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(1)
                return
            if self.path == "/trickle":
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.end_headers()
                for _ in range(30):
                    try:
                        self.wfile.write(b"drip ")
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(1)
                return
            body = b"x" * 100_000 if self.path == "/big" else b"Herons eat fish."
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def kb_names(http: httpx.AsyncClient, **kwargs) -> list[str]:
    return (await http.get("/kb", **kwargs)).json()


# 1. No local file access through the API (critical).


@pytest.mark.parametrize(
    "url", ["/etc/passwd", "", ".", "/tmp", "file:///etc/passwd", "ftp://example.org/x"]
)
async def test_local_paths_are_never_read_over_http(base_url, url):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post("/kb/leak/documents", json={"urls": [url]})
        assert response.status_code == 422, response.text
        assert "only http(s) URLs" in response.json()["detail"]
        assert "leak" not in await kb_names(http)


# 2. No cross-key reads; who may write which knowledge base.


async def test_a_key_cannot_read_another_keys_checkpoints(keyed_url):
    alice, bob = (
        get_client(url=keyed_url, api_key="key-a"),
        get_client(url=keyed_url, api_key="key-b"),
    )
    secret = await alice.threads.create()
    await alice.runs.wait(secret["thread_id"], "naive", input=QUESTION)
    own = await bob.threads.create()
    async with httpx.AsyncClient(base_url=keyed_url, headers=BOB) as http:
        for path, body in (
            (
                f"/threads/{own['thread_id']}/history",
                {"checkpoint": {"thread_id": secret["thread_id"]}},
            ),
            (
                f"/threads/{own['thread_id']}/history",
                {"before": {"thread_id": secret["thread_id"]}},
            ),
            (
                f"/threads/{own['thread_id']}/state/checkpoint",
                {"checkpoint": {"thread_id": secret["thread_id"]}},
            ),
            (
                f"/threads/{own['thread_id']}/runs/wait",
                {
                    "assistant_id": "naive",
                    "input": QUESTION,
                    "config": {"configurable": {"thread_id": secret["thread_id"]}},
                },
            ),
        ):
            response = await http.post(path, json=body)
            assert response.status_code == 422, (path, response.text)
            assert "not the URL's thread" in response.json()["detail"]
    assert len(await alice.threads.get_history(secret["thread_id"])) > 3, "alice's is intact"


async def test_a_saved_assistant_belongs_to_its_key(keyed_url):
    alice, bob = (
        get_client(url=keyed_url, api_key="key-a"),
        get_client(url=keyed_url, api_key="key-b"),
    )
    saved = await alice.assistants.create("naive", context={"top_k": 1}, name="alice's")
    aid = saved["assistant_id"]
    assert saved["name"] == "alice's" and await alice.assistants.count(graph_id="naive") == 2
    assert await bob.assistants.count(graph_id="naive") == 1  # the built-in one only
    for attempt in (
        bob.assistants.get(aid),
        bob.assistants.update(aid, context={"top_k": 5}),
        bob.assistants.delete(aid),
        bob.runs.wait(None, aid, input=QUESTION),
    ):
        with pytest.raises((APIStatusError, httpx.HTTPStatusError)) as refused:
            await attempt
        assert refused.value.response.status_code == 404
    # Bob saving an assistant under the same id gets his own; alice's is untouched.
    mine = await bob.assistants.create("crag", assistant_id=aid)
    assert mine["graph_id"] == "crag"
    assert (await alice.assistants.get(aid))["context"] == {"top_k": 1}


async def test_each_key_has_its_own_store(keyed_url):
    alice, bob = (
        get_client(url=keyed_url, api_key="key-a"),
        get_client(url=keyed_url, api_key="key-b"),
    )
    await alice.store.put_item(["notes"], key="secret", value={"text": "alice's"})
    assert await bob.store.get_item(["notes"], key="secret") is None
    assert (await bob.store.search_items([]))["items"] == []
    assert (await bob.store.list_namespaces())["namespaces"] == []
    await bob.store.delete_item(["notes"], key="secret")  # his own namespace: a no-op
    assert (await alice.store.get_item(["notes"], key="secret"))["value"] == {"text": "alice's"}
    assert (await alice.store.list_namespaces())["namespaces"] == [["notes"]]


async def test_thread_ids_are_per_key_and_reveal_nothing(keyed_url):
    alice, bob = (
        get_client(url=keyed_url, api_key="key-a"),
        get_client(url=keyed_url, api_key="key-b"),
    )
    thread = await alice.threads.create(metadata={"owner": "alice"})
    await alice.runs.wait(thread["thread_id"], "naive", input=QUESTION)
    # Bob asking for the same id gets a thread of his own: no 409 tells him alice has one.
    same = await bob.threads.create(thread_id=thread["thread_id"])
    assert same["thread_id"] == thread["thread_id"] and same["values"] is None
    assert (await bob.threads.get_state(thread["thread_id"]))["values"] == {}
    mine = await alice.threads.get(thread["thread_id"])
    assert mine["metadata"] == {"owner": "alice"} and mine["values"]["stop_reason"] == "answered"


async def test_knowledge_bases_under_several_keys(keyed_url):
    async with httpx.AsyncClient(base_url=keyed_url) as http:
        shared = await http.post(
            "/kb/default/documents", json={"documents": [{"text": "Bob was here."}]}, headers=BOB
        )
        assert shared.status_code == 403 and "read-only" in shared.json()["detail"]
        made = await http.post(
            "/kb/alice-notes/documents",
            json={"documents": [{"text": "The heron named Quill eats fish.", "title": "Quill"}]},
            headers=ALICE,
        )
        assert made.status_code == 200, made.text
        assert "alice-notes" in await kb_names(http, headers=ALICE)
        assert "alice-notes" not in await kb_names(http, headers=BOB)
        assert (await http.get("/kb/alice-notes", headers=BOB)).status_code == 404
        intrude = await http.post(
            "/kb/alice-notes/documents", json={"documents": [{"text": "x"}]}, headers=BOB
        )
        assert intrude.status_code == 404
        run = {"assistant_id": "naive", "input": {"question": "What does Quill eat?"}}
        other = await http.post(
            "/runs/wait", json={**run, "context": {"kb": "alice-notes"}}, headers=BOB
        )
        assert other.status_code == 404
        answer = await http.post(
            "/runs/wait", json={**run, "context": {"kb": "alice-notes"}}, headers=ALICE
        )
        assert answer.status_code == 200 and "fish" in answer.json()["generation"]
        unknown = await http.post(
            "/runs/wait", json={**run, "context": {"kb": "typo-kb"}}, headers=ALICE
        )
        assert unknown.status_code == 404 and "typo-kb" in unknown.json()["detail"]
        assert "typo-kb" not in await kb_names(http, headers=ALICE), "nothing was created"
        assert (await http.get("/kb/default", headers=BOB)).json()["documents"] >= 1


# 3. Every per-run knob is bounded; cancellation reaches a running loop.


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"context": {"max_query_rewrites": 1_000_000}}, "max_query_rewrites"),
        ({"context": {"top_k": 10_000}}, "top_k"),
        ({"context": {"initial_k": 100_000}}, "initial_k"),
        ({"context": {"max_rounds": 50}}, "max_rounds"),
        ({"context": {"max_regenerations": 99}}, "max_regenerations"),
        ({"context": {"max_web_searches": 99}}, "max_web_searches"),
        ({"config": {"recursion_limit": 10**9}}, "recursion_limit"),
        ({"config": {"recursion_limit": -1}}, "recursion_limit"),
    ],
)
async def test_run_knobs_have_upper_and_lower_bounds(base_url, change, message):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/runs/wait", json={"assistant_id": "self_rag", "input": QUESTION, **change}
        )
    assert response.status_code == 422 and message in response.text


async def test_cancel_stops_a_run_inside_its_longest_loop(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    # An unanswerable question with every loop at its bound: minutes of work if not stopped.
    run = await client.runs.create(
        thread["thread_id"],
        "self_rag",
        input={"question": "What colour is the walrus named Tusk?"},
        context={"max_query_rewrites": 10, "max_regenerations": 10},
    )
    await asyncio.sleep(2)
    started = time.monotonic()
    await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    took = time.monotonic() - started
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"
    assert took < 30, f"cancel took {took:.1f} s"


# 4. No head-of-line blocking: the question is capped; embedding takes turns.


async def test_an_overlong_question_is_refused(base_url):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/runs/wait", json={"assistant_id": "naive", "input": {"question": "why " * 600}}
        )
    assert response.status_code == 422 and "at most 2000" in response.json()["detail"]


def test_a_large_ingest_takes_turns_with_queries():
    from reflexrag.providers.embeddings import E5Embeddings

    calls: list[int] = []

    class Recorder:
        def passage(self, texts):
            calls.append(len(texts))
            return [[0.0] * 3 for _ in texts]

    embeddings = E5Embeddings()
    embeddings._loaded = Recorder()
    assert len(embeddings.embed_documents(["text"] * 40)) == 40
    assert calls == [16, 16, 8], "the engine's lock is released between batches"


# 5. Busy-thread semantics are atomic.


async def _five_at_once(base_url: str, thread_id: str, strategy: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
        return await asyncio.gather(
            *(
                http.post(
                    f"/threads/{thread_id}/runs",
                    json={
                        "assistant_id": "naive",
                        "input": QUESTION,
                        "multitask_strategy": strategy,
                    },
                )
                for _ in range(5)
            )
        )


async def _settle(client, thread_id: str) -> list[dict]:
    for _ in range(600):
        listed = await client.runs.list(thread_id)
        if all(run["status"] not in ("pending", "running") for run in listed):
            return listed
        await asyncio.sleep(0.2)
    raise AssertionError("runs did not finish")


async def test_reject_accepts_exactly_one_of_five_simultaneous_runs(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    responses = await _five_at_once(base_url, thread["thread_id"], "reject")
    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409, 409]
    listed = await _settle(client, thread["thread_id"])
    assert [run["status"] for run in listed] == ["success"]
    history = await client.threads.get_history(thread["thread_id"], limit=100)
    assert sum(1 for h in history if h["metadata"].get("source") == "input") == 1, "no fork"


async def test_interrupt_cancels_each_earlier_run(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    responses = await _five_at_once(base_url, thread["thread_id"], "interrupt")
    assert all(r.status_code == 200 for r in responses)
    statuses = [run["status"] for run in await _settle(client, thread["thread_id"])]
    assert sorted(statuses) == ["interrupted"] * 4 + ["success"]


async def test_enqueue_runs_all_five_one_after_another(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    responses = await _five_at_once(base_url, thread["thread_id"], "enqueue")
    assert all(r.status_code == 200 for r in responses)
    listed = await _settle(client, thread["thread_id"])
    assert [run["status"] for run in listed] == ["success"] * 5


async def test_rollback_discards_the_interrupted_run(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    first = await client.runs.create(thread["thread_id"], "naive", input=QUESTION)
    await asyncio.sleep(0.5)
    second = await client.runs.create(
        thread["thread_id"],
        "naive",
        input={"question": "What is CRAG?"},
        multitask_strategy="rollback",
    )
    await client.runs.join(thread["thread_id"], second["run_id"])
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await client.runs.get(thread["thread_id"], first["run_id"])
    assert gone.value.response.status_code == 404
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["question"] == "What is CRAG?"


# 7. Client mistakes are 4xx JSON, never 500, never 200-with-error.


def bad_run(assistant: str = "naive", **fields: object) -> tuple:
    """A run request whose ``fields`` are wrong."""
    body = {"assistant_id": assistant, "input": QUESTION, **fields}
    return ("post", "/runs/wait", {"json": body}, 422)


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("post", "/kb/x/documents", {"content": b"", "headers": JSON}, 422),
        ("post", "/kb/x/documents", {"content": b"{bad", "headers": JSON}, 422),
        ("post", "/kb/x/documents", {"json": {"urls": ["http://example.org:notaport/"]}}, 422),
        ("post", "/kb/x/documents", {"json": {"urls": ["http://example.org:99999/"]}}, 422),
        ("post", "/kb/x/documents", {"json": {"urls": [f"http://{'a' * 64}.org/"]}}, 422),
        (
            "post",
            "/kb/x/documents",
            {"json": {"documents": [{"text": "t", "metadata": {"": 1}}]}},
            422,
        ),
        bad_run(context={"filters": "lang=zh"}),
        bad_run(context={"filters": ["x"]}),
        bad_run(config={"configurable": []}),
        bad_run(context={"top_k": 2.5}),
        bad_run(context={"kb": 123}),
        bad_run(context={"kb": "../../etc"}),
        bad_run(context={"judge_backend": "oracle"}),
        bad_run("crag", context={"crag_aggregation": "max"}),
        bad_run("crag", context={"refine_mode": "all"}),
        bad_run("crag", context={"search_provider": "bing"}),
        (
            "post",
            "/runs/wait",
            {
                "content": b'{"assistant_id": "naive", "input": {"question": "why \\ud800?"}}',
                "headers": JSON,
            },
            422,
        ),
        ("post", "/threads/search", {"json": {"metadata": []}}, 422),
        ("post", "/threads/search", {"json": {"offset": 10**30}}, 422),
        ("post", "/assistants/search", {"json": {"offset": 10**30}}, 422),
    ],
)
async def test_client_mistakes_are_4xx_json(base_url, method, path, kwargs, status):
    async with httpx.AsyncClient(base_url=base_url) as http:
        before = await kb_names(http)
        response = await http.request(method, path, **kwargs)
        assert response.status_code == status, response.text
        assert isinstance(response.json()["detail"], str | list)
        assert await kb_names(http) == before


async def test_thread_mistakes_are_4xx(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "naive", input=QUESTION)
    before = await client.threads.get_history(thread["thread_id"], limit=100)
    tid = thread["thread_id"]
    async with httpx.AsyncClient(base_url=base_url) as http:
        cases = [
            ("post", f"/threads/{tid}/history", {"checkpoint": {"checkpoint_ns": 5}}, 422),
            ("get", f"/threads/{tid}/state/1ef00000-0000-0000-0000-000000000000", None, 404),
            (
                "post",
                f"/threads/{tid}/runs/wait",
                {"assistant_id": "naive", "input": QUESTION, "checkpoint_id": "bogus"},
                404,
            ),
            (
                "post",
                f"/threads/{tid}/runs/wait",
                {"assistant_id": "naive", "command": {"resume": "x"}},
                409,
            ),
            *(
                ("post", f"/threads/{tid}/runs/wait", {"assistant_id": "naive", "command": c}, 422)
                for c in ({}, {"goto": "nonexistent"}, {"goto": ["generate", "x"]}, {"update": 5})
            ),
            # A checkpoint cannot hold an integer past 64 bits: refused before the run starts.
            *(
                ("post", path, {"assistant_id": "naive", "input": {**QUESTION, "n": 2**70}}, 422)
                for path in (f"/threads/{tid}/runs/wait", "/runs/wait")
            ),
            ("post", f"/threads/{tid}/state", {"values": {"question": [2**64]}}, 422),
        ]
        for method, path, body, status in cases:
            response = await http.request(method, path, json=body)
            assert response.status_code == status, (path, response.text)
            assert response.json()["detail"], (path, response.text)
        # A run needs an input until its thread has state to continue.
        fresh = await client.threads.create()
        for path in (f"/threads/{fresh['thread_id']}/runs/wait", "/runs/wait"):
            response = await http.post(path, json={"assistant_id": "naive"})
            assert response.status_code == 422 and "input" in response.json()["detail"], path
        assert (await client.threads.get_state(fresh["thread_id"]))["values"] == {}
        assert await client.threads.get_history(tid, limit=100) == before
        # With state, no input continues it (LangGraph's resume from a breakpoint).
        resumed = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "naive"})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json() == before[0]["values"]  # finished: nothing left to run


@pytest.mark.parametrize("name", [".", "..", "n" * 300 + ".txt"])
async def test_odd_upload_names_are_refused(base_url, name):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post("/kb/uploads/files", files={"file": (name, b"Herons eat fish.")})
        assert response.status_code == 422, response.text
        assert "uploads" not in await kb_names(http)


async def test_a_non_ascii_api_key_is_a_401(keyed_url):
    async with httpx.AsyncClient(base_url=keyed_url) as http:
        response = await http.post(
            "/assistants/search", json={}, headers={"x-api-key": "clé".encode("latin-1")}
        )
    assert response.status_code == 401


# 8. Cross-site request forgery.


async def test_cross_site_writes_are_refused(base_url):
    async with httpx.AsyncClient(base_url=base_url) as http:
        planted = await http.post(
            "/kb/planted/documents",
            content=b'{"documents": [{"text": "evil"}]}',
            headers={"content-type": "text/plain"},
        )
        assert planted.status_code == 415
        foreign = await http.post(
            "/kb/planted/documents",
            json={"documents": [{"text": "evil"}]},
            headers={"origin": "http://evil.example"},
        )
        assert foreign.status_code == 403 and "cross-origin" in foreign.json()["detail"]
        assert "planted" not in await kb_names(http)
        own_page = await http.post("/threads", json={}, headers={"origin": base_url})
        assert own_page.status_code == 200


async def test_an_allowed_origin_may_write(tmp_path):
    async with (
        running_server(tmp_path, cors_origins="http://app.example") as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        allowed = await http.post("/threads", json={}, headers={"origin": "http://app.example"})
        assert allowed.status_code == 200
        other = await http.post("/threads", json={}, headers={"origin": "http://evil.example"})
        assert other.status_code == 403


# 9. Large inputs: URL size cap and deadline, the private-address guard.


async def test_hostile_or_oversized_uploads_are_4xx_and_store_nothing(tmp_path):
    from reflexrag.benchmarks.services import minimal_pdf
    from tests.test_documents import BILLION_LAUGHS, rewritten_docx, stream_bomb

    laughs = rewritten_docx(tmp_path / "laughs.docx", b"&l9;", BILLION_LAUGHS).read_bytes()
    bomb = minimal_pdf([], stream=stream_bomb(80 << 20))
    many = {"documents": [{"doc_id": f"d{n}", "text": f"Fact number {n}."} for n in range(3)]}
    async with (
        running_server(tmp_path / "data", max_ingest_chunks=2) as url,
        httpx.AsyncClient(base_url=url, timeout=120) as http,
    ):
        for name, body in (("laughs.docx", laughs), ("bomb.pdf", bomb)):
            response = await http.post("/kb/hostile/files", files={"file": (name, body)})
            assert response.status_code == 422, response.text
            assert f"{name} is not a readable" in response.json()["detail"]
        over = await http.post("/kb/hostile/documents", json=many)
        assert over.status_code == 413, over.text
        assert "over the cap of 2 per request" in over.json()["detail"]
        stored = await http.get("/kb/hostile")  # the first write may have created it, empty
        assert stored.status_code == 404 or stored.json()["chunks"] == 0
        many["documents"] = many["documents"][:2]
        assert (await http.post("/kb/hostile/documents", json=many)).status_code == 200


async def test_half_sent_requests_are_closed_and_connections_capped(tmp_path):
    """Slow loris: a socket that trickles its request head, or never speaks, is closed once
    the header deadline passes; a complete request is served; past the connection cap, 503."""
    async with running_server(tmp_path, header_timeout_s=1.5, max_connections=3) as url:
        host, port = url.removeprefix("http://").split(":")

        async def closed_by_server(trickle: bool) -> float:
            reader, writer = await asyncio.open_connection(host, int(port))
            started = time.monotonic()
            if trickle:
                writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n")
            for _ in range(40):  # a byte every 0.25 s, for at most 10 s
                if trickle and not writer.is_closing():
                    writer.write(b"X")
                try:
                    if await asyncio.wait_for(reader.read(1024), 0.25) == b"":
                        break
                except TimeoutError:
                    continue
                except ConnectionError:
                    break
            writer.close()
            return time.monotonic() - started

        trickled, silent = await asyncio.gather(closed_by_server(True), closed_by_server(False))
        assert 1.4 < trickled < 8 and 1.4 < silent < 8, (trickled, silent)
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/ok")).status_code == 200
        held = [await asyncio.open_connection(host, int(port)) for _ in range(3)]
        try:
            async with httpx.AsyncClient(base_url=url) as http:
                assert (await http.get("/ok")).status_code == 503
        finally:
            for _, writer in held:
                writer.close()


async def test_an_ingest_past_its_deadline_is_stopped_with_nothing_half_stored(tmp_path):
    many = {"documents": [{"doc_id": f"d{n}", "text": f"Heron fact {n}: herons eat fish."}
                          for n in range(600)]}  # fmt: skip
    async with (
        running_server(tmp_path, ingest_deadline_s=0.3) as url,
        httpx.AsyncClient(base_url=url, timeout=120) as http,
    ):
        late = await http.post("/kb/slow/documents", json=many)
        assert late.status_code == 504, late.text
        assert "REFLEXRAG_INGEST_DEADLINE_S" in late.json()["detail"]
        assert "0 documents were stored" in late.json()["detail"]  # one batch: all or none
        stored = await http.get("/kb/slow")
        assert stored.status_code == 404 or stored.json()["chunks"] == 0
        one = {"documents": many["documents"][:1]}
        assert (await http.post("/kb/slow/documents", json=one)).status_code == 200


async def test_url_fetches_are_capped_in_size_and_time(tmp_path, web_server, monkeypatch):
    from reflexrag.providers.settings import get_settings

    monkeypatch.setattr(get_settings(), "url_fetch_deadline_s", 3.0)
    async with (
        running_server(tmp_path, allow_private_urls=True, max_upload_bytes=50_000) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        fine = await http.post("/kb/web/documents", json={"urls": [f"{web_server}/page"]})
        assert fine.status_code == 200 and fine.json()["added_documents"] == 1
        big = await http.post("/kb/web/documents", json={"urls": [f"{web_server}/big"]})
        assert big.status_code == 422 and "larger than" in big.json()["detail"]
        started = time.monotonic()
        for path in ("/trickle", "/slow-head"):
            slow = await http.post("/kb/web/documents", json={"urls": [f"{web_server}{path}"]})
            assert slow.status_code == 422 and "longer than allowed" in slow.json()["detail"]
        assert time.monotonic() - started < 30
        assert (await http.get("/kb/web")).json()["documents"] == 1


async def test_private_addresses_are_refused_by_default(base_url, web_server):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post("/kb/web/documents", json={"urls": [f"{web_server}/page"]})
    assert response.status_code == 422 and "private address" in response.json()["detail"]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "::1",
        "64:ff9b::7f00:1",
        "64:ff9b::a00:1",
        "64:ff9b:1::808:808",
        "2002:7f00:1::",
        "::ffff:127.0.0.1",
    ],
)
def test_private_forms_of_addresses_are_private(address):
    from reflexrag.providers.loaders import is_public_address

    assert not is_public_address(ipaddress.ip_address(address))


def test_the_fetch_connects_to_the_address_that_was_checked(monkeypatch):
    """DNS rebinding: the name resolves to a public address when checked and to a private
    one a moment later; the fetch must use the first answer, not ask again."""
    from reflexrag.providers import loaders

    answers = iter(["93.184.216.34", "127.0.0.1", "127.0.0.1"])

    def resolve(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="public page", headers={"content-type": "text/plain"})

    monkeypatch.setattr(loaders.socket, "getaddrinfo", resolve)
    _, body, charset = loaders.fetch_url(
        "https://rebind.example/page", transport=httpx.MockTransport(handler)
    )
    assert body.decode(charset) == "public page"
    [request] = seen
    assert request.url.host == "93.184.216.34"
    assert request.headers["host"] == "rebind.example"
    assert request.extensions["sni_hostname"] == "rebind.example"
    with pytest.raises(KnowledgeBaseError, match="private address"):
        loaders.fetch_url("https://rebind.example/page", transport=httpx.MockTransport(handler))


# 11. runs/wait honours on_disconnect; the schema declares auth and errors.


async def test_a_waiting_client_that_hangs_up_cancels_the_run(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    async with httpx.AsyncClient(base_url=base_url, timeout=1.5) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(
                f"/threads/{thread['thread_id']}/runs/wait",
                json={"assistant_id": "self_rag", "input": QUESTION},
            )
    listed = await _settle(client, thread["thread_id"])
    assert [run["status"] for run in listed] == ["interrupted"]


async def test_openapi_declares_the_api_key_and_error_responses(base_url):
    async with httpx.AsyncClient(base_url=base_url) as http:
        schema = (await http.get("/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["APIKeyHeader"]["name"] == "x-api-key"
    wait = schema["paths"]["/threads/{thread_id}/runs/wait"]["post"]
    assert {"401", "404", "409", "422"} <= set(wait["responses"])
    assert wait["security"] == [{"APIKeyHeader": []}]
    assert "security" not in schema["paths"]["/ok"]["get"]


async def test_the_vector_store_dying_mid_ingest_is_a_503_not_a_hang(tmp_path, monkeypatch):
    """The Chroma server killed while an ingest embeds: the ingest answers 503 (its batch is
    not written), and a run on that knowledge base afterwards a 503 or an error; nothing
    hangs or answers 500."""
    from reflexrag.benchmarks.services import chroma_server, kill_chroma
    from reflexrag.providers.settings import get_settings

    many = {"documents": [{"doc_id": f"d{n}", "text": f"Heron fact {n}: herons eat fish."}
                          for n in range(400)]}  # fmt: skip
    with chroma_server() as chroma:
        monkeypatch.setattr(get_settings(), "chroma_url", chroma)
        async with (
            running_server(tmp_path) as url,
            httpx.AsyncClient(base_url=url, timeout=120) as http,
        ):
            first = {"documents": many["documents"][:1]}
            assert (await http.post("/kb/notes/documents", json=first)).status_code == 200
            ingest = asyncio.create_task(http.post("/kb/notes/documents", json=many))
            await asyncio.sleep(1.0)  # embedding: nothing of the batch written yet
            await asyncio.to_thread(kill_chroma, chroma)
            reply = await ingest
            assert reply.status_code == 503, reply.text
            run = await http.post(
                "/runs/wait",
                json={"assistant_id": "naive", "input": QUESTION, "context": {"kb": "notes"}},
            )
            assert run.status_code == 503 or "__error__" in run.json(), run.text


async def test_a_vector_store_server_that_is_down_is_a_503_and_the_service_recovers(
    tmp_path, monkeypatch
):
    """The Chroma server unreachable: reading or writing knowledge bases, and starting a run
    on one, answer 503 with the reason (retryable), never a 500; once it is back to the
    embedded store the same requests succeed on the same server."""
    from reflexrag.providers.settings import get_settings
    from tests.server.conftest import free_port

    async with running_server(tmp_path) as url, httpx.AsyncClient(base_url=url) as http:
        monkeypatch.setattr(get_settings(), "chroma_url", f"http://127.0.0.1:{free_port()}")
        for method, path, body in (
            ("get", "/kb", None),
            ("get", "/kb/default", None),
            ("post", "/kb/notes/documents", {"documents": [{"text": "Quill is a heron."}]}),
            ("post", "/runs/wait", {"assistant_id": "naive", "input": {"question": "Who?"}}),
        ):
            reply = await http.request(method, path, json=body)
            assert reply.status_code == 503, (path, reply.status_code, reply.text)
            assert "unavailable" in reply.json()["detail"] and "Chroma" in reply.json()["detail"]
        monkeypatch.setattr(get_settings(), "chroma_url", None)
        assert (await http.get("/kb")).status_code == 200
