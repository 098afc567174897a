"""The service speaks the LangGraph Server API: driven here with ``langgraph_sdk``'s client."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from langgraph_sdk import get_client

from tests.server.conftest import SELF_RAG_ANSWERED, running_server

QUESTION = {"question": "What is Corrective RAG?"}


def nodes_of(chunks) -> list[str]:
    return [node for c in chunks if c.event == "updates" for node in c.data]


async def test_assistants_graph_and_schemas(base_url):
    client = get_client(url=base_url)
    found = await client.assistants.search()
    assert {a["graph_id"] for a in found} >= {"naive", "self_rag"}
    by_uuid = await client.assistants.get(found[0]["assistant_id"])
    assert by_uuid["graph_id"] == found[0]["graph_id"]
    graph = await client.assistants.get_graph("self_rag")
    assert {"retrieve", "grade_documents", "transform_query"} <= {n["id"] for n in graph["nodes"]}
    assert any(
        e["source"] == "transform_query" and e["target"] == "retrieve" for e in graph["edges"]
    )
    schemas = await client.assistants.get_schemas("self_rag")
    assert "question" in schemas["input_schema"]["properties"]
    assert "top_k" in schemas["context_schema"]["properties"]


async def test_streamed_run_state_and_history(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create(metadata={"user": "ada"})
    chunks = [
        c
        async for c in client.runs.stream(
            thread["thread_id"],
            "self_rag",
            input=QUESTION,
            stream_mode=["updates", "custom", "values"],
        )
    ]
    assert chunks[0].event == "metadata" and chunks[0].data["run_id"]
    # As on LangGraph Server: the stream closes when the run ends, with no event of its own
    # (the SDK would hand an "end" event to its callers).
    assert chunks[-1].event == "values" and "end" not in {c.event for c in chunks}
    assert nodes_of(chunks) == SELF_RAG_ANSWERED
    custom = [c.data for c in chunks if c.event == "custom"]
    assert {"node": "retrieve", "query": QUESTION["question"], "candidates": 4, "hits": 4} in custom
    assert sum(1 for c in custom if c["node"] == "grade_documents") == 4
    final = [c.data for c in chunks if c.event == "values"][-1]
    assert final["stop_reason"] == "answered" and final["sources"]

    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == [] and state["values"]["stop_reason"] == "answered"
    history = await client.threads.get_history(thread["thread_id"], limit=50)
    assert len(history) >= 8
    before_generate = next(h for h in history if h["next"] == ["generate"])
    past = await client.threads.get_state(
        thread["thread_id"], checkpoint_id=before_generate["checkpoint"]["checkpoint_id"]
    )
    assert not past["values"].get("generation") and past["next"] == ["generate"]
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "idle" and got["values"]["stop_reason"] == "answered"


async def test_wait_reuses_the_thread_for_a_second_question(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "self_rag", input=QUESTION)
    second = await client.runs.wait(
        thread["thread_id"], "self_rag", input={"question": "什么是自我反思检索增强？"}
    )
    assert second["original_question"] == "什么是自我反思检索增强？"
    assert second["steps"][0]["node"] == "decide_retrieval"
    runs = await client.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success", "success"]


async def test_stateless_run_leaves_no_thread(base_url):
    client = get_client(url=base_url)
    before = {t["thread_id"] for t in await client.threads.search(limit=100)}
    result = await client.runs.wait(None, "naive", input=QUESTION)
    assert result["stop_reason"] == "answered" and result["generation"]
    after = {t["thread_id"] for t in await client.threads.search(limit=100)}
    assert after == before


async def test_background_run_join_and_get(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "naive", input=QUESTION)
    joined = await client.runs.join(thread["thread_id"], run["run_id"])
    assert joined["stop_reason"] == "answered"
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"


async def test_run_error_is_an_error_event(base_url):
    client = get_client(url=base_url)
    chunks = [
        c
        async for c in client.runs.stream(
            None,
            "self_rag",
            input=QUESTION,
            context={"judge_backend": "llm"},
            stream_mode="updates",
        )
    ]
    errors = [c.data for c in chunks if c.event == "error"]
    assert errors and "REFLEXRAG_OPENAI" in errors[0]["message"]
    assert chunks[-1].event == "error"


async def test_busy_thread_is_rejected_then_cancelled_and_resumed(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
    with pytest.raises(httpx.HTTPStatusError) as rejected:
        await client.runs.create(thread["thread_id"], "self_rag", input=QUESTION)
    assert rejected.value.response.status_code == 409
    await asyncio.sleep(1.0)
    await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"], "a cancelled run stays resumable from its last checkpoint"
    resumed = await client.runs.wait(thread["thread_id"], "self_rag", input=None)
    assert resumed["stop_reason"] == "answered"


async def test_enqueued_run_waits_for_the_current_one(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    await client.runs.create(thread["thread_id"], "naive", input=QUESTION)
    second = await client.runs.wait(
        thread["thread_id"],
        "naive",
        input={"question": "What is Self-RAG?"},
        multitask_strategy="enqueue",
    )
    assert second["original_question"] == "What is Self-RAG?"
    assert [r["status"] for r in await client.runs.list(thread["thread_id"])] == [
        "success",
        "success",
    ]


async def test_disconnect_cancels_the_run(base_url, slow_nodes):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    run_id = None
    async for chunk in client.runs.stream(thread["thread_id"], "self_rag", input=QUESTION):
        run_id = chunk.data["run_id"]
        break  # the client goes away after the first event
    for _ in range(100):
        run = await client.runs.get(thread["thread_id"], run_id)
        if run["status"] not in ("pending", "running"):
            break
        await asyncio.sleep(0.1)
    assert run["status"] == "interrupted"


async def test_adaptive_asks_back_and_resume_continues_the_thread(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    chunks = [
        c
        async for c in client.runs.stream(
            thread["thread_id"],
            "adaptive",
            input={"question": "这个API有什么限制？"},
            stream_mode=["values", "updates"],
        )
    ]
    interrupted = [c.data for c in chunks if c.event == "updates" and "__interrupt__" in c.data]
    asked = interrupted[0]["__interrupt__"][0]["value"]
    assert "这个API" in asked["question"] and asked["original_question"] == "这个API有什么限制？"
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"
    resumed = [
        c
        async for c in client.runs.stream(
            thread["thread_id"],
            "adaptive",
            command={"resume": "Chroma"},
            stream_mode=["updates"],
            stream_subgraphs=True,
        )
    ]
    events = [c.event for c in resumed]
    assert any(e.startswith("updates|single_step:") for e in events), events
    outer = [node for c in resumed if c.event == "updates" for node in c.data]
    assert outer[:2] == ["clarify", "classify_complexity"] and outer[-1] == "single_step"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["original_question"] == "这个API有什么限制？ (Chroma)"
    assert state["next"] == [] and state["tasks"] == [] and state["values"]["stop_reason"]


async def test_knowledge_base_routes(base_url):
    # Knowledge bases are the process's, shared by both servers this module runs against.
    kb = f"notes-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=base_url) as http:
        added = await http.post(
            f"/kb/{kb}/documents",
            json={
                "documents": [
                    {
                        "text": "The reflexrag mascot is a heron named Quill.",
                        "doc_id": "mascot",
                        "title": "Mascot",
                    }
                ]
            },
        )
        assert added.status_code == 200 and added.json()["added_documents"] == 1
        again = await http.post(
            f"/kb/{kb}/documents",
            json={
                "documents": [
                    {"text": "The reflexrag mascot is a heron named Quill.", "doc_id": "mascot"}
                ]
            },
        )
        assert again.json()["added_documents"] == 0
        uploaded = await http.post(
            f"/kb/{kb}/documents", files={"file": ("faq.md", b"# FAQ\n\nQuill eats fish.")}
        )
        assert uploaded.status_code == 200, uploaded.text
        again = await http.post(
            f"/kb/{kb}/files", files={"file": ("faq.md", b"# FAQ\n\nQuill eats fish.")}
        )
        assert again.json()["unchanged_documents"] == 1, "re-uploading adds nothing"
        assert uploaded.status_code == 200 and uploaded.json()["added_documents"] == 1
        summary = (await http.get(f"/kb/{kb}")).json()
        assert summary == {"name": kb, "documents": 2, "chunks": 2}
        private = await http.post(f"/kb/{kb}/documents", json={"urls": ["http://127.0.0.1:9/x"]})
        assert private.status_code == 422 and "private address" in private.json()["detail"]
    client = get_client(url=base_url)
    answer = await client.runs.wait(
        None, "self_rag", input={"question": "What is the mascot?"}, context={"kb": kb}
    )
    assert "heron" in answer["generation"]


async def test_one_document_is_listed_and_deleted_over_http(base_url):
    kb = f"docs-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=base_url) as http:
        documents = [
            {"text": "The mascot is a heron named Quill.", "doc_id": "notes/mascot"},
            {"text": "The office is in Lisbon.", "doc_id": "office", "title": "Office"},
        ]
        await http.post(f"/kb/{kb}/documents", json={"documents": documents})
        listed = (await http.get(f"/kb/{kb}/documents")).json()
        assert [(d["doc_id"], d["chunks"]) for d in listed] == [("notes/mascot", 1), ("office", 1)]
        assert (await http.delete(f"/kb/{kb}/documents/notes/mascot")).status_code == 204
        missing = await http.delete(f"/kb/{kb}/documents/notes/mascot")
        assert (
            missing.status_code == 404 and "no document 'notes/mascot'" in missing.json()["detail"]
        )
        assert [d["doc_id"] for d in (await http.get(f"/kb/{kb}/documents")).json()] == ["office"]
        assert (await http.get(f"/kb/{kb}")).json()["documents"] == 1
        assert (await http.get("/kb/never-made/documents")).status_code == 404
    client = get_client(url=base_url)
    answer = await client.runs.wait(
        None, "naive", input={"question": "What is the mascot?"}, context={"kb": kb}
    )
    assert "heron" not in answer["generation"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("post", "/runs/stream", {"input": QUESTION}, 422, "assistant_id"),
        ("post", "/runs/wait", {"assistant_id": "nope", "input": QUESTION}, 404, "not found"),
        (
            "post",
            "/runs/wait",
            {"assistant_id": "naive", "input": {"question": " "}},
            422,
            "the question is empty",
        ),
        ("post", "/runs/wait", {"assistant_id": "naive", "input": {"q": 1}}, 422, "question"),
        (
            "post",
            "/runs/wait",
            {"assistant_id": "naive", "input": QUESTION, "stream_mode": ["bogus"]},
            422,
            "stream_mode",
        ),
        (
            "post",
            "/runs/wait",
            {"assistant_id": "naive", "input": QUESTION, "context": {"top_k": 0}},
            422,
            "top_k",
        ),
        (
            "post",
            "/runs/wait",
            {"assistant_id": "naive", "input": QUESTION, "context": {"bogus": 1}},
            422,
            "unknown context field",
        ),
        (
            "post",
            "/runs/wait",
            {
                "assistant_id": "naive",
                "input": QUESTION,
                "context": {"filters": {"lang": {"like": "zh"}}},
            },
            422,
            "unknown filter operator",
        ),
        (
            "post",
            "/threads/00000000-0000-0000-0000-000000000000/runs/wait",
            {"assistant_id": "naive", "input": QUESTION},
            404,
            "not found",
        ),
        ("get", "/threads/00000000-0000-0000-0000-000000000000/state", None, 404, "not found"),
        ("post", "/threads", {"thread_id": "not-a-uuid"}, 422, "UUID"),
        ("post", "/kb/bad name!/documents", {"documents": [{"text": "x"}]}, 422, "invalid"),
        ("post", "/threads", {"metadata": {"blob": "x" * 30_000}}, 413, "bytes"),
        ("get", "/kb/never-made", None, 404, "not found"),
    ],
)
async def test_bad_requests_get_a_clear_4xx(base_url, method, path, body, status, message):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.request(method, path, json=body)
    assert response.status_code == status, response.text
    assert message in response.text


async def test_uploads_over_the_upload_limit_are_refused(base_url):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post("/kb/big/files", files={"file": ("big.txt", b"x" * 60_000)})
    assert response.status_code == 413 and "bytes" in response.json()["detail"]
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get("/kb/big")).status_code == 404, "nothing was stored"


async def test_malformed_json_is_a_422(base_url):
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/threads", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 422


async def test_api_keys_guard_and_scope_threads(tmp_path):
    async with running_server(tmp_path, api_key="key-a,key-b") as url:
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/ok")).status_code == 200
            denied = await http.post("/assistants/search", json={})
            assert denied.status_code == 401 and "API key" in denied.json()["detail"]
            wrong = await http.post("/assistants/search", json={}, headers={"x-api-key": "x"})
            assert wrong.status_code == 401
        alice, bob = get_client(url=url, api_key="key-a"), get_client(url=url, api_key="key-b")
        thread = await alice.threads.create()
        assert (await alice.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
        with pytest.raises(httpx.HTTPStatusError) as hidden:
            await bob.threads.get(thread["thread_id"])
        assert hidden.value.response.status_code == 404
        assert thread["thread_id"] not in {t["thread_id"] for t in await bob.threads.search()}


@pytest.fixture
def fake_llm(monkeypatch) -> dict[str, str]:
    """Judge and generator backends named "fake": chat models that answer self_rag's verdicts
    yes and write one sentence, streamed token by token; the context that selects them."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS
    from reflexrag.nodes.judges.llm import LLMGenerator, LLMJudge

    yes = '{"binary_score": "yes"}'
    grader = GenericFakeChatModel(
        messages=iter(
            [AIMessage(r) for r in ['{"retrieve": "yes"}', *[yes] * 4, '{"level": "fully"}', yes]]
        )
    )
    writer = GenericFakeChatModel(messages=iter([AIMessage("CRAG falls back to web search [1].")]))
    monkeypatch.setitem(JUDGE_BACKENDS, "fake", lambda context: LLMJudge(grader))
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda context: LLMGenerator(writer))
    return {"judge_backend": "fake", "generator_backend": "fake"}


async def test_messages_stream_carries_generator_tokens_only(base_url, fake_llm):
    client = get_client(url=base_url)
    chunks = [
        c
        async for c in client.runs.stream(
            None,
            "self_rag",
            input=QUESTION,
            stream_mode="messages-tuple",
            context=fake_llm,
        )
    ]
    tokens = [c.data for c in chunks if c.event == "messages"]
    assert tokens, "the generator's tokens are streamed"
    assert {meta["langgraph_node"] for _, meta in tokens} == {"generate"}
    assert "".join(message["content"] for message, _ in tokens) == (
        "CRAG falls back to web search [1]."
    )


async def test_the_messages_mode_sends_the_message_so_far_as_langgraph_server_does(
    base_url, fake_llm
):
    """``messages`` alone (the SDK's default form): the message's metadata once, then
    ``messages/partial`` events, each the whole message so far."""
    chunks = [
        c
        async for c in get_client(url=base_url).runs.stream(
            None,
            "self_rag",
            input=QUESTION,
            stream_mode="messages",
            context=fake_llm,
        )
    ]
    events = [c.event for c in chunks if c.event.startswith("messages")]
    assert events[0] == "messages/metadata" and events.count("messages/metadata") == 1
    assert set(events[1:]) == {"messages/partial"} and len(events) > 3
    (described_once,) = [c.data for c in chunks if c.event == "messages/metadata"]
    ((message_id, described),) = described_once.items()
    assert described["metadata"]["langgraph_node"] == "generate"
    so_far = [c.data[0]["content"] for c in chunks if c.event == "messages/partial"]
    assert so_far == sorted(so_far, key=len) and so_far[-1] == "CRAG falls back to web search [1]."
    assert {c.data[0]["id"] for c in chunks if c.event == "messages/partial"} == {message_id}


async def test_the_server_warms_up_in_the_background_and_records_nothing(tmp_path, caplog):
    """At start-up one local run answers on the default knowledge base, so the first request
    finds everything loaded; it leaves no thread, run or checkpoint behind."""
    import logging
    import sqlite3

    caplog.set_level(logging.INFO, logger="reflexrag.server")
    async with running_server(tmp_path) as url:
        for _ in range(1200):
            if any("warmed up" in record.getMessage() for record in caplog.records):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("no warm-up within 120 s")
        assert await get_client(url=url).threads.count() == 0
    with sqlite3.connect(tmp_path / "checkpoints.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM checkpoints").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM writes").fetchone() == (0,)
