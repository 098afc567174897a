"""The same LangGraph SDK calls against any server, reduced to comparable shapes.

Each call gives (name, shape): a dict's sorted top-level keys, a list's length class and its
first item's shape, an SSE stream's event names, or the HTTP status of an error. Run against
LangGraph's own dev server and against ``reflexrag serve``, the shapes must agree."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

QUESTION = {"question": "What is CRAG?"}
UNKNOWN = "1ef00000-0000-6000-8000-000000000000"


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted(value))
    if isinstance(value, list):
        return ("list", shape(value[0]) if value else None)
    return type(value).__name__


async def run_script(url: str) -> list[tuple[str, Any]]:
    client = get_client(url=url)
    shapes: list[tuple[str, Any]] = []

    async def call(name: str, awaitable: Any) -> Any:
        try:
            result = await awaitable
        except APIStatusError as exc:
            shapes.append((name, ("error", exc.response.status_code)))
            return None
        shapes.append((name, shape(result)))
        return result

    async def stream(name: str, chunks: Any) -> None:
        events = []
        async for chunk in chunks:
            if chunk.event not in events:
                events.append(chunk.event)
        shapes.append((name, tuple(events)))

    found = await call("assistants.search", client.assistants.search(graph_id="self_rag"))
    assistant = found[0]["assistant_id"]
    await call("assistants.get", client.assistants.get(assistant))
    await call("assistants.count", client.assistants.count(graph_id="self_rag"))
    await call("assistants.get_graph", client.assistants.get_graph(assistant))
    await call("assistants.get_graph xray", client.assistants.get_graph(assistant, xray=True))
    await call("assistants.get_schemas", client.assistants.get_schemas(assistant))
    await call("assistants.get_subgraphs", client.assistants.get_subgraphs(assistant))
    await call("assistants.get_versions", client.assistants.get_versions(assistant))
    saved = await call(
        "assistants.create",
        client.assistants.create(
            "naive", context={"top_k": 2}, name="sdk", metadata={"script": "sdk"}
        ),
    )
    if saved:
        saved_id = saved["assistant_id"]
        await call("assistants.update", client.assistants.update(saved_id, context={"top_k": 3}))
        await call("assistants.get_versions saved", client.assistants.get_versions(saved_id))
        await call("assistants.set_latest", client.assistants.set_latest(saved_id, 1))
        await call("runs.wait saved assistant", client.runs.wait(None, saved_id, input=QUESTION))
        await call("assistants.delete", client.assistants.delete(saved_id))
        await call("assistants.get deleted", client.assistants.get(saved_id))
    notes, note = ["sdk", "notes"], {"text": "Herons eat fish.", "tag": "birds"}
    await call("store.put_item", client.store.put_item(notes, key="n1", value=note))
    await call("store.get_item", client.store.get_item(notes, key="n1"))
    await call("store.search_items", client.store.search_items(["sdk"], filter={"tag": "birds"}))
    await call("store.list_namespaces", client.store.list_namespaces(prefix=["sdk"]))
    await call("store.delete_item", client.store.delete_item(notes, key="n1"))
    await call("store.get_item deleted", client.store.get_item(notes, key="n1"))

    thread = await call("threads.create", client.threads.create(metadata={"script": "sdk"}))
    thread_id = thread["thread_id"]
    await call("threads.get", client.threads.get(thread_id))
    await call("threads.update", client.threads.update(thread_id, metadata={"step": 1}))
    await call("threads.search", client.threads.search(metadata={"script": "sdk"}))
    await call("threads.count", client.threads.count(metadata={"script": "sdk"}))
    await call("threads.get_state empty", client.threads.get_state(thread_id))

    await call("runs.wait", client.runs.wait(thread_id, assistant, input=QUESTION))
    await call("threads.get_state", client.threads.get_state(thread_id))
    history = await call("threads.get_history", client.threads.get_history(thread_id, limit=3))
    await call(
        "threads.update_state",
        client.threads.update_state(thread_id, {"question": "What is Self-RAG?"}),
    )
    checkpoint = history[-1]["checkpoint"] if history else None
    await call(
        "threads.get_state checkpoint",
        client.threads.get_state(thread_id, checkpoint=checkpoint),
    )
    run = await call("runs.create", client.runs.create(thread_id, assistant, input=QUESTION))
    await call("runs.join", client.runs.join(thread_id, run["run_id"]))
    await call("runs.get", client.runs.get(thread_id, run["run_id"]))
    await call("runs.list", client.runs.list(thread_id))
    await call(
        "runs.wait interrupt_before",
        client.runs.wait(thread_id, assistant, input=QUESTION, interrupt_before=["generate"]),
    )
    await call("threads.get_state interrupted", client.threads.get_state(thread_id))
    await call(
        "threads.update_state at breakpoint",
        client.threads.update_state(thread_id, {"question": "What is Self-RAG?"}),
    )
    await call("runs.wait resume", client.runs.wait(thread_id, assistant, input=None))
    copied = await call("threads.copy", client.threads.copy(thread_id))
    if copied:
        await call("threads.get_state copy", client.threads.get_state(copied["thread_id"]))
        await call(
            "threads.get_history copy", client.threads.get_history(copied["thread_id"], limit=3)
        )

    for mode in ("values", "updates", "debug", "tasks", "checkpoints", "custom", "events"):
        await stream(
            f"runs.stream {mode}",
            client.runs.stream(thread_id, assistant, input=QUESTION, stream_mode=mode),
        )
    await stream(
        "runs.stream events and updates",
        client.runs.stream(thread_id, assistant, input=QUESTION, stream_mode=["events", "updates"]),
    )
    await stream(
        "runs.stream stateless",
        client.runs.stream(None, assistant, input=QUESTION, stream_mode=["values", "updates"]),
    )
    await call("runs.wait stateless", client.runs.wait(None, assistant, input=QUESTION))
    await crons(client, call, assistant)
    await call("runs.get unknown", client.runs.get(thread_id, UNKNOWN))
    await call("threads.get unknown", client.threads.get(UNKNOWN))
    await call("threads.delete", client.threads.delete(thread_id))
    await call("threads.get deleted", client.threads.get(thread_id))
    return shapes


async def crons(client: Any, call: Any, assistant: str) -> None:
    """A cron on a thread that fires every second until it is deleted, and a stateless one
    changed and deleted before it fires."""
    thread = await client.threads.create()
    cron = await call(
        "crons.create_for_thread",
        client.crons.create_for_thread(
            thread["thread_id"], assistant, schedule="* * * * * *", input=QUESTION
        ),
    )
    for _ in range(180):  # a poll every 5 s on both servers; generous for a loaded machine
        runs = await client.runs.list(thread["thread_id"])
        if any(run["status"] == "success" for run in runs):
            break
        await asyncio.sleep(0.5)
    await call("crons fired: runs.list", client.runs.list(thread["thread_id"]))
    await call("crons.delete thread cron", client.crons.delete(cron["cron_id"]))
    daily = await call(
        "crons.create",
        client.crons.create(assistant, schedule="0 6 * * *", input=QUESTION, metadata={"k": 1}),
    )
    await call("crons.search", client.crons.search(assistant_id=assistant))
    await call("crons.count", client.crons.count(assistant_id=assistant))
    await call("crons.update", client.crons.update(daily["cron_id"], schedule="0 7 * * *"))
    await call("crons.delete", client.crons.delete(daily["cron_id"]))
    await call("crons.search deleted", client.crons.search(metadata={"k": 1}))
    await client.threads.delete(thread["thread_id"])
