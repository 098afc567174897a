"""The LangGraph Server calls a Studio-style client makes, through ``langgraph_sdk``: counts,
thread updates and fields, state editing and forking, breakpoints, xray graphs, subgraph
schemas, the stream modes, the store and crons."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError, UnprocessableEntityError

QUESTION = {"question": "What is Corrective RAG?"}


async def test_counts_and_thread_updates(base_url):
    client = get_client(url=base_url)
    assert await client.assistants.count() == 6
    assert await client.assistants.count(graph_id="crag") == 1
    thread = await client.threads.create(metadata={"team": "parity"})
    assert await client.threads.count(metadata={"team": "parity"}) == 1
    updated = await client.threads.update(thread["thread_id"], metadata={"stage": "review"})
    assert updated["metadata"] == {"team": "parity", "stage": "review"}
    # The fields LangGraph Server's threads carry.
    assert {"config", "state_updated_at", "error", "interrupts", "values"} <= set(updated)
    assert await client.threads.count(metadata={"stage": "review"}) == 1


async def test_runs_and_checkpoints_carry_the_fields_langgraph_server_gives_them(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    assert thread["values"] is None  # no state yet
    tid = thread["thread_id"]
    await client.runs.wait(tid, "naive", input=QUESTION, context={"top_k": 2})
    assert (await client.threads.get(tid))["values"]["question"] == QUESTION["question"]
    (run,) = await client.runs.list(tid)
    assert {"config", "durability", "webhook", "temporary", "feedback_keys"} <= set(run["kwargs"])
    assert run["kwargs"]["config"]["configurable"]["thread_id"] == tid
    (latest,) = await client.threads.get_history(tid, limit=1)
    metadata = latest["metadata"]
    assert (metadata["graph_id"], metadata["run_id"]) == ("naive", run["run_id"])
    assert metadata["assistant_id"] == run["assistant_id"] and metadata["run_attempt"] == 1


async def test_metadata_filters_match_any_key_and_exact_json_types(base_url, request):
    client = get_client(url=base_url)
    odd_keys = {'say "hi"': 1, "nul\u0000byte": [True], "": {"b": 2, "a": 1}, "flag": True}
    if request.node.callspec.params["base_url"] == "postgres":
        # Postgres text cannot hold NUL: a clear 422 (nothing stored), not a 500.
        with pytest.raises(UnprocessableEntityError, match="NUL characters"):
            await client.threads.create(metadata=odd_keys)
        del odd_keys["nul\u0000byte"]
    await client.threads.create(metadata=odd_keys)
    for key, value in odd_keys.items():
        assert await client.threads.search(metadata={key: value}, limit=5)
        assert await client.threads.count(metadata={key: value}) == 1
    assert await client.threads.count(metadata={"": {"a": 1, "b": 2}}) == 1
    # JSON types are kept apart: true is not 1, and a key prefix before NUL is another key.
    assert await client.threads.count(metadata={"flag": 1}) == 0
    assert await client.threads.count(metadata={"nul": [True]}) == 0
    assert await client.threads.count(metadata={"flag": True, "absent": None}) == 0


async def test_graph_xray_and_subgraph_schemas(base_url):
    client = get_client(url=base_url)
    flat = await client.assistants.get_graph("adaptive")
    deep = await client.assistants.get_graph("adaptive", xray=True)
    assert len(deep["nodes"]) > len(flat["nodes"])
    assert any(node["id"].startswith("single_step:") for node in deep["nodes"])
    subgraphs = await client.assistants.get_subgraphs("adaptive")
    assert {"single_step", "multi_step"} <= set(subgraphs)
    assert "question" in subgraphs["single_step"]["input_schema"]["properties"]
    schemas = await client.assistants.get_schemas("self_rag")
    assert "top_k" in schemas["config_schema"]["properties"]
    assert schemas["config_schema"] == schemas["context_schema"]
    versions = await client.assistants.get_versions("self_rag")
    assert [v["version"] for v in versions] == [1]


async def test_a_breakpoint_pauses_before_generate_and_a_run_with_no_input_resumes(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    paused = await client.runs.wait(
        thread["thread_id"], "self_rag", input=QUESTION, interrupt_before=["generate"]
    )
    assert not paused.get("generation")
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["generate"]
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"
    done = await client.runs.wait(thread["thread_id"], "self_rag", input=None)
    assert done["generation"] and done["stop_reason"]


async def test_state_edited_at_a_breakpoint_routes_from_the_state_and_the_run_continues(
    base_url,
):
    """Studio's "edit state and continue": ``update_state`` without ``as_node`` re-runs the
    paused node's conditional edge outside any run (no run context), so a router that needs
    the run's limits must find them on the state."""
    client = get_client(url=base_url)
    thread = await client.threads.create()
    await client.runs.wait(
        thread["thread_id"],
        "self_rag",
        input=QUESTION,
        interrupt_before=["generate"],
        context={"max_query_rewrites": 1},
    )
    paused = await client.threads.get_state(thread["thread_id"])
    assert paused["values"]["limits"]["max_query_rewrites"] == 1
    await client.threads.update_state(thread["thread_id"], {"question": "What is Self-RAG?"})
    edited = await client.threads.get_state(thread["thread_id"])
    assert edited["next"] == ["generate"]
    assert edited["values"]["question"] == "What is Self-RAG?"
    done = await client.runs.wait(thread["thread_id"], "self_rag", input=None)
    assert done["stop_reason"] and done["generation"]


async def test_a_copied_thread_has_the_history_and_then_lives_on_its_own(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create(metadata={"user": "ana"})
    await client.runs.wait(thread["thread_id"], "naive", input=QUESTION)
    original = await client.threads.get_history(thread["thread_id"], limit=100)
    copy = await client.threads.copy(thread["thread_id"])
    assert copy["thread_id"] != thread["thread_id"] and copy["metadata"] == {"user": "ana"}
    copied = await client.threads.get_history(copy["thread_id"], limit=100)
    assert [c["values"] for c in copied] == [c["values"] for c in original]
    assert [c["next"] for c in copied] == [c["next"] for c in original]
    assert {c["checkpoint"]["thread_id"] for c in copied} == {copy["thread_id"]}
    # The copy continues a conversation the original never sees.
    await client.runs.wait(copy["thread_id"], "naive", input={"question": "What is Self-RAG?"})
    after = await client.threads.get_state(copy["thread_id"])
    assert after["values"]["history"] == ["What is Corrective RAG?"]
    still = await client.threads.get_state(thread["thread_id"])
    assert still["values"] == original[0]["values"]
    with pytest.raises(APIStatusError) as unknown:
        await client.threads.copy("1ef00000-0000-6000-8000-000000000000")
    assert unknown.value.response.status_code == 404


async def test_update_state_writes_a_checkpoint_the_next_run_continues_from(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    await client.runs.wait(
        thread["thread_id"], "naive", input=QUESTION, interrupt_before=["generate"]
    )
    written = await client.threads.update_state(
        thread["thread_id"], {"question": "What is Self-RAG?"}, as_node="retrieve"
    )
    assert written["checkpoint"]["thread_id"] == thread["thread_id"]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["question"] == "What is Self-RAG?"
    assert state["checkpoint"]["checkpoint_id"] == written["checkpoint"]["checkpoint_id"]
    with pytest.raises(APIStatusError) as bad_node:
        await client.threads.update_state(thread["thread_id"], {"question": "x"}, as_node="nope")
    assert bad_node.value.response.status_code == 422


async def test_tasks_and_checkpoints_stream_modes(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    events = [
        part.event
        async for part in client.runs.stream(
            thread["thread_id"], "naive", input=QUESTION, stream_mode=["tasks", "checkpoints"]
        )
    ]
    assert {"tasks", "checkpoints"} <= set(events)


async def test_a_saved_assistant_is_versioned_and_runs_with_its_context(base_url):
    """Studio's assistant workflow: save a configured graph, change it (a new version), go
    back to a version, run it (its context under the run's), delete it."""
    client = get_client(url=base_url)
    tuned = await client.assistants.create(
        "naive", context={"top_k": 1}, name="one source", metadata={"team": "parity-a"}
    )
    aid = tuned["assistant_id"]
    assert (tuned["version"], tuned["graph_id"], tuned["context"]) == (1, "naive", {"top_k": 1})
    assert [a["assistant_id"] for a in await client.assistants.search(
        metadata={"team": "parity-a"})] == [aid]  # fmt: skip
    assert await client.assistants.count(graph_id="naive") == 2
    one = await client.runs.wait(None, aid, input=QUESTION)
    assert len(one["documents"]) == 1
    overridden = await client.runs.wait(None, aid, input=QUESTION, context={"top_k": 3})
    assert len(overridden["documents"]) == 3
    two = await client.assistants.update(aid, context={"top_k": 2}, metadata={"stage": "b"})
    assert two["version"] == 2 and two["metadata"] == {"team": "parity-a", "stage": "b"}
    assert len((await client.runs.wait(None, aid, input=QUESTION))["documents"]) == 2
    versions = await client.assistants.get_versions(aid)
    assert [(v["version"], v["context"]) for v in versions] == [
        (2, {"top_k": 2}),
        (1, {"top_k": 1}),
    ]
    back = await client.assistants.set_latest(aid, 1)
    assert back["version"] == 1 and back["context"] == {"top_k": 1}
    assert len((await client.runs.wait(None, aid, input=QUESTION))["documents"]) == 1
    async with httpx.AsyncClient(base_url=base_url) as http:
        for method, path, body, status in (
            ("POST", "/assistants", {"graph_id": "nonexistent"}, 422),
            ("POST", "/assistants", {"graph_id": "naive", "context": {"top_k": 0}}, 422),
            ("POST", "/assistants", {"graph_id": "naive", "assistant_id": aid}, 409),
            ("PATCH", "/assistants/self_rag", {"context": {"top_k": 8}}, 409),
            ("PATCH", f"/assistants/{aid}", {"context": {"judge_backend": "oracle"}}, 422),
            ("POST", f"/assistants/{aid}/latest", {"version": 7}, 404),
            ("DELETE", "/assistants/naive", None, 409),
        ):
            reply = await http.request(method, path, json=body)
            assert reply.status_code == status, (method, path, reply.text)
            assert reply.json()["detail"]
    same = await client.assistants.create("naive", assistant_id=aid, if_exists="do_nothing")
    assert same["version"] == 1
    await client.assistants.delete(aid)
    with pytest.raises(APIStatusError) as missing:
        await client.assistants.get(aid)
    assert missing.value.response.status_code == 404
    assert await client.assistants.count() == 6


async def test_the_store_keeps_items_by_namespace_and_key(base_url):
    """Studio's memory view: put, get, search by prefix and value filter, list namespaces,
    delete; mistakes, and what this store is not configured for, are 422s that say so."""
    client = get_client(url=base_url)
    await client.store.put_item(["users", "u1", "prefs"], key="lang", value={"lang": "zh"})
    await client.store.put_item(["users", "u2", "prefs"], key="lang", value={"lang": "en"})
    await client.store.put_item(["users", "u1", "prefs"], key="lang", value={"lang": "de"})
    item = await client.store.get_item(["users", "u1", "prefs"], key="lang")
    assert (item["namespace"], item["key"], item["value"]) == (
        ["users", "u1", "prefs"], "lang", {"lang": "de"})  # fmt: skip
    found = await client.store.search_items(["users"], filter={"lang": "en"})
    assert [i["namespace"] for i in found["items"]] == [["users", "u2", "prefs"]]
    listed = await client.store.list_namespaces(prefix=["users"], max_depth=2)
    assert sorted(listed["namespaces"]) == [["users", "u1"], ["users", "u2"]]
    await client.store.delete_item(["users", "u1", "prefs"], key="lang")
    assert await client.store.get_item(["users", "u1", "prefs"], key="lang") is None
    async with httpx.AsyncClient(base_url=base_url) as http:
        for method, path, body, status in (
            ("PUT", "/store/items", {"namespace": ["a.b"], "key": "k", "value": {}}, 422),
            ("PUT", "/store/items", {"namespace": [], "key": "k", "value": {}}, 422),
            ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": 5}, 422),
            ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "ttl": 5}, 422),
            ("POST", "/store/items/search", {"namespace_prefix": ["a"], "query": "fish"}, 422),
            ("PUT", "/store/items", {"namespace": ["a\u0000b"], "key": "k", "value": {}}, 422),
            ("PUT", "/store/items", {"namespace": ["a"], "key": "k\u0000", "value": {}}, 422),
            ("POST", "/store/items/search", {"filter": {"": 1}}, 422),
            ("POST", "/store/items/search", {"filter": {"a b": 1}}, 422),
            ("POST", "/store/namespaces", {"prefix": ["a\u0000"]}, 422),
            # Past 64 bits: LangGraph's stores serialise with orjson, which cannot write it.
            ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": {"n": [2**70]}}, 422),
            ("POST", "/store/items/search", {"filter": {"n": [1, -(2**70)]}}, 422),
        ):
            reply = await http.request(method, path, json=body)
            assert reply.status_code == status, (body, reply.text)
            assert reply.json()["detail"]
        # Postgres text cannot hold NUL: refused there (422), kept by SQLite; never a 500.
        nul = await http.put(
            "/store/items", json={"namespace": ["a"], "key": "k", "value": {"t": "a\u0000"}}
        )
        assert nul.status_code in (204, 422), nul.text
    await client.store.delete_item(["users", "u2", "prefs"], key="lang")


async def test_a_stream_resumes_after_the_last_event_id_it_saw(base_url):
    """Every event carries its position as its SSE id, and the stream's Location, joined with
    Last-Event-ID, gives only what came after it (how the SDK reconnects a dropped stream)."""
    client = get_client(url=base_url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "naive", input=QUESTION, stream_mode=["updates"])
    await client.runs.join(tid, run["run_id"])
    async with httpx.AsyncClient(base_url=base_url) as http:
        path = f"/threads/{tid}/runs/{run['run_id']}/stream"
        whole = await http.get(path)
        ids = [line[4:] for line in whole.text.splitlines() if line.startswith("id: ")]
        events = [line[7:] for line in whole.text.splitlines() if line.startswith("event: ")]
        assert ids == [str(n) for n in range(len(events))] and len(events) >= 3
        rest = await http.get(path, headers={"Last-Event-ID": "1"})
        assert [line[7:] for line in rest.text.splitlines() if line.startswith("event: ")] == (
            events[2:]
        )
        assert (await http.get(path, headers={"Last-Event-ID": "x"})).status_code == 422
        streamed = await http.post(
            f"/threads/{tid}/runs/stream", json={"assistant_id": "naive", "input": QUESTION}
        )
        run_id = streamed.headers["content-location"].rsplit("/", 1)[1]
        assert streamed.headers["location"] == f"/threads/{tid}/runs/{run_id}/stream"
    parts = [p async for p in client.runs.join_stream(tid, run["run_id"], last_event_id="1")]
    assert [p.event for p in parts] == events[2:]


async def test_a_quiet_stream_sends_heartbeats(base_url, slow_nodes, monkeypatch):
    from reflexrag.server.routes import runs

    monkeypatch.setattr(runs, "HEARTBEAT_S", 0.1)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        streamed = await http.post(
            "/runs/stream",
            json={"assistant_id": "naive", "input": QUESTION, "stream_mode": ["values"]},
        )
    assert ": heartbeat" in streamed.text.splitlines()
    assert "event: values" in streamed.text  # and the events still arrive


async def test_the_events_mode_streams_callback_events_beside_the_other_modes(base_url):
    client = get_client(url=base_url)
    parts = [
        part
        async for part in client.runs.stream(
            None, "naive", input=QUESTION, stream_mode=["events", "updates"]
        )
    ]
    events = [part.data for part in parts if part.event == "events"]
    assert (events[0]["event"], events[0]["name"]) == ("on_chain_start", "naive")
    assert (events[-1]["event"], events[-1]["name"]) == ("on_chain_end", "naive")
    started = [e["name"] for e in events if e["event"] == "on_chain_start" and e["parent_ids"]]
    updated = [node for part in parts if part.event == "updates" for node in part.data]
    assert started == updated == ["prepare", "retrieve", "generate", "finish"]


async def wait_for(check, timeout_s: float = 90.0):
    """Poll ``check`` (async, returning a value or None) until it gives a value."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while (found := await check()) is None:
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.5)
    return found


async def test_a_thread_cron_fires_on_schedule_until_it_is_deleted(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        "naive",
        schedule="* * * * * *",  # every second (croniter's sixth field)
        input=QUESTION,
        metadata={"job": "nightly"},
        multitask_strategy="enqueue",
    )
    assert cron["thread_id"] == thread["thread_id"] and cron["on_run_completed"] is None
    assert cron["next_run_date"] and cron["enabled"] is True
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get(f"/runs/crons/{cron['cron_id']}")).json() == cron

    async def a_finished_run():
        done = [r for r in await client.runs.list(thread["thread_id"]) if r["status"] == "success"]
        return done[0] if done else None

    run = await wait_for(a_finished_run)
    assert run["metadata"]["job"] == "nightly"
    state = await client.threads.get_state(thread["thread_id"], checkpoint_id=None)
    assert state["values"]["question"] == QUESTION["question"]
    await client.crons.delete(cron["cron_id"])
    await asyncio.sleep(7)  # past a poll that could already have claimed a firing
    fired = len(await client.runs.list(thread["thread_id"], limit=1000))
    await asyncio.sleep(7)
    assert len(await client.runs.list(thread["thread_id"], limit=1000)) == fired
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get(f"/runs/crons/{cron['cron_id']}")).status_code == 404


async def test_crons_are_searched_counted_updated_and_go_with_their_thread(base_url):
    client = get_client(url=base_url)
    thread = await client.threads.create()
    daily = await client.crons.create(
        "naive", schedule="0 6 * * *", input=QUESTION, metadata={"team": "a"},
        timezone="Europe/Berlin", on_run_completed="keep",
    )  # fmt: skip
    # 06:00 in Berlin is 05:00 UTC in winter, 04:00 in summer.
    assert daily["next_run_date"][11:16] in ("04:00", "05:00")
    assert daily["thread_id"] is None and daily["on_run_completed"] == "keep"
    mine = await client.crons.create_for_thread(
        thread["thread_id"], "self_rag", schedule="*/5 * * * *", input=QUESTION
    )
    both = {daily["cron_id"], mine["cron_id"]}
    found = await client.crons.search(limit=1000)
    assert both <= {c["cron_id"] for c in found}
    on_thread = await client.crons.search(thread_id=thread["thread_id"])
    assert [c["cron_id"] for c in on_thread] == [mine["cron_id"]]
    assert await client.crons.count(metadata={"team": "a"}) >= 1
    assert [c["cron_id"] for c in await client.crons.search(metadata={"team": "a"})] == [
        daily["cron_id"]
    ]
    picked = await client.crons.search(thread_id=thread["thread_id"], select=["cron_id"])
    assert picked == [{"cron_id": mine["cron_id"]}]
    async with httpx.AsyncClient(base_url=base_url) as http:
        for change in ({"stream_mode": "bogus"}, {"context": {"top_k": -1}}, {"schedule": "x"}):
            reply = await http.patch(f"/runs/crons/{daily['cron_id']}", json=change)
            assert reply.status_code == 422 and reply.json()["detail"], (change, reply.text)
    paused = await client.crons.update(daily["cron_id"], schedule="30 7 * * *", enabled=False)
    assert (paused["schedule"], paused["enabled"]) == ("30 7 * * *", False)
    assert paused["next_run_date"][14:16] == "30" and paused["payload"]["input"] == QUESTION
    assert daily["cron_id"] in {c["cron_id"] for c in await client.crons.search(enabled=False)}
    await client.threads.delete(thread["thread_id"])
    assert await client.crons.search(thread_id=thread["thread_id"]) == []
    await client.crons.delete(daily["cron_id"])
    async with httpx.AsyncClient(base_url=base_url) as http:
        for path, body in (
            ("/runs/crons", {"assistant_id": "naive", "schedule": "bogus", "input": QUESTION}),
            ("/runs/crons", {"assistant_id": "naive", "schedule": "* * * * *"}),
            ("/runs/crons", {"assistant_id": "naive", "schedule": "* * * * *",
                             "input": QUESTION, "timezone": "Mars/Olympus"}),
            ("/runs/crons", {"assistant_id": "naive", "schedule": "* * * * *",
                             "input": QUESTION, "context": {"kb": "../x"}}),
            ("/runs/crons", {"assistant_id": "naive", "schedule": "0 0 31 2 *",
                             "input": QUESTION}),
            ("/runs/crons/search", {"sort_by": "schedule"}),
        ):  # fmt: skip
            reply = await http.post(path, json=body)
            assert reply.status_code == 422, (body, reply.text)
            assert reply.json()["detail"]
        for reply in (
            await http.post(
                "/runs/crons", json={"assistant_id": "nobody", "schedule": "* * * * *",
                                     "input": QUESTION},
            ),
            await http.post(
                f"/threads/{uuid.uuid4()}/runs/crons",
                json={"assistant_id": "naive", "schedule": "* * * * *", "input": QUESTION},
            ),
            await http.get(f"/runs/crons/{uuid.uuid4()}"),
            await http.delete(f"/runs/crons/{uuid.uuid4()}"),
        ):  # fmt: skip
            assert reply.status_code == 404, reply.text
