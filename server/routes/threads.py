"""Threads: their records, state, history and time travel, scoped to the caller's key."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from langgraph.errors import InvalidUpdateError

from reflexrag.graphs import compile_strategy
from reflexrag.providers.checkpointer import copy_checkpoints
from reflexrag.server.deps import Owner, errors, owned_thread, runs, same_thread, snapshot_of, store
from reflexrag.server.schemas import (
    CheckpointRef,
    CheckpointRequest,
    HistoryRequest,
    StateUpdate,
    ThreadCount,
    ThreadCreate,
    ThreadSearch,
    ThreadUpdate,
)
from reflexrag.server.serialize import jsonable, thread_state

router = APIRouter(prefix="/threads", tags=["threads"], responses=errors(401, 422))

_EMPTY_STATE = {
    "values": {},
    "next": [],
    "checkpoint": None,
    "checkpoint_id": None,
    "metadata": {},
    "created_at": None,
    "parent_checkpoint": None,
    "parent_checkpoint_id": None,
    "tasks": [],
    "interrupts": [],
}


async def thread_json(request: Request, thread: dict[str, Any]) -> dict[str, Any]:
    snapshot = await snapshot_of(request, thread)
    interrupts: dict[str, list[Any]] = {}
    values: dict[str, Any] | None = None  # null until the thread has state, as on LangGraph
    if snapshot is not None and snapshot.created_at is not None:
        values = jsonable(snapshot.values)
        for task in snapshot.tasks:
            if task.interrupts:
                interrupts[task.id] = jsonable(task.interrupts)
    error = None
    if thread["status"] == "error":
        latest = await store(request).list_runs(thread["thread_id"], thread["owner"], 1)
        error = latest[0]["error"] if latest else None
    return {
        **{k: v for k, v in thread.items() if k not in ("graph_id", "graph_thread", "owner")},
        "state_updated_at": snapshot.created_at if snapshot else thread["updated_at"],
        "config": {},
        "values": values,
        "interrupts": interrupts,
        "error": error,
    }


@router.post("", responses=errors(409))
async def create_thread(request: Request, body: ThreadCreate, owner: Owner) -> dict[str, Any]:
    if body.thread_id:
        existing = await store(request).get_thread(body.thread_id, owner)
        if existing is not None:
            if body.if_exists == "do_nothing":
                return await thread_json(request, existing)
            raise HTTPException(409, f"thread {body.thread_id} already exists")
    thread = await store(request).create_thread(owner, body.metadata, body.thread_id)
    return await thread_json(request, thread)


@router.post("/search")
async def search_threads(request: Request, body: ThreadSearch, owner: Owner) -> list[Any]:
    found = await store(request).search_threads(
        owner, body.metadata, body.status, body.limit, body.offset
    )
    return [await thread_json(request, thread) for thread in found]


@router.post("/count")
async def count_threads(request: Request, body: ThreadCount, owner: Owner) -> int:
    return await store(request).count_threads(owner, body.metadata, body.status)


@router.get("/{thread_id}", responses=errors(404))
async def get_thread(request: Request, thread_id: str, owner: Owner) -> dict[str, Any]:
    return await thread_json(request, await owned_thread(request, thread_id, owner))


@router.patch("/{thread_id}", responses=errors(404))
async def update_thread(
    request: Request, thread_id: str, body: ThreadUpdate, owner: Owner
) -> dict[str, Any]:
    """Merge ``metadata`` into the thread's (LangGraph Server's ``threads.update``)."""
    thread = await owned_thread(request, thread_id, owner)
    merged = {**thread["metadata"], **body.metadata}
    await store(request).update_thread(thread_id, owner, metadata=merged)
    return await thread_json(request, await owned_thread(request, thread_id, owner))


@router.post("/{thread_id}/copy", responses=errors(404, 409))
async def copy_thread(request: Request, thread_id: str, owner: Owner) -> dict[str, Any]:
    """A new thread with the same metadata and the whole checkpoint history (every checkpoint
    and its pending writes), which then lives on independently (LangGraph's ``threads.copy``)."""
    thread = await owned_thread(request, thread_id, owner)
    if await runs(request).busy(thread["graph_thread"]):
        raise HTTPException(409, f"thread {thread_id} is busy; copy it after the run")
    copy = await store(request).create_thread(owner, thread["metadata"])
    await copy_checkpoints(
        request.app.state.checkpointer, thread["graph_thread"], copy["graph_thread"]
    )
    status = "idle" if thread["status"] == "busy" else thread["status"]
    await store(request).update_thread(
        copy["thread_id"], owner, graph_id=thread["graph_id"], status=status
    )
    copied = await thread_json(request, await owned_thread(request, copy["thread_id"], owner))
    copied.pop("values")  # as LangGraph Server's reply: the copy's state is one GET away
    return copied


@router.delete("/{thread_id}", status_code=204, responses=errors(404))
async def delete_thread(request: Request, thread_id: str, owner: Owner) -> Response:
    thread = await owned_thread(request, thread_id, owner)
    await runs(request).cancel_thread(thread["graph_thread"])
    await request.app.state.checkpointer.adelete_thread(thread["graph_thread"])
    await store(request).delete_thread(thread_id, owner)
    return Response(status_code=204)


async def state_json(
    request: Request, thread_id: str, owner: str, checkpoint_id: str | None
) -> dict[str, Any]:
    thread = await owned_thread(request, thread_id, owner)
    snapshot = await snapshot_of(request, thread, checkpoint_id)
    if snapshot is None:
        return dict(_EMPTY_STATE)
    return thread_state(snapshot, thread_id)


@router.get("/{thread_id}/state", responses=errors(404))
async def get_state(request: Request, thread_id: str, owner: Owner) -> dict[str, Any]:
    return await state_json(request, thread_id, owner, None)


@router.get("/{thread_id}/state/{checkpoint_id}", responses=errors(404))
async def get_state_at(
    request: Request, thread_id: str, checkpoint_id: str, owner: Owner
) -> dict[str, Any]:
    return await state_json(request, thread_id, owner, checkpoint_id)


@router.post("/{thread_id}/state", responses=errors(404, 409, 415))
async def update_state(
    request: Request, thread_id: str, body: StateUpdate, owner: Owner
) -> dict[str, Any]:
    """Write ``values`` as if ``as_node`` had returned them: a new checkpoint that the next
    run (with no input) continues from, as in LangGraph Studio's state editing."""
    thread = await owned_thread(request, thread_id, owner)
    checkpoint = body.checkpoint or CheckpointRef(checkpoint_id=body.checkpoint_id)
    same_thread(thread_id, checkpoint.thread_id)
    if not thread["graph_id"]:
        raise HTTPException(409, f"thread {thread_id} has no state yet: run it first")
    if await runs(request).busy(thread["graph_thread"]):
        raise HTTPException(409, f"thread {thread_id} is busy; update its state after the run")
    configurable = {"thread_id": thread["graph_thread"]}
    if checkpoint.checkpoint_id:
        await snapshot_of(request, thread, checkpoint.checkpoint_id)  # 404 when unknown
        configurable["checkpoint_id"] = checkpoint.checkpoint_id
    graph = compile_strategy(thread["graph_id"], request.app.state.checkpointer)
    try:
        written = await graph.aupdate_state(
            {"configurable": configurable}, body.values, as_node=body.as_node
        )
    except (InvalidUpdateError, ValueError, KeyError) as exc:
        raise HTTPException(422, f"cannot update the state: {exc}") from None
    await store(request).update_thread(thread_id, owner, status="idle")
    stored = written["configurable"]
    checkpoint = {
        "thread_id": thread_id,
        "checkpoint_ns": stored.get("checkpoint_ns", ""),
        "checkpoint_id": stored["checkpoint_id"],
    }
    # LangGraph Server's reply also repeats the id and the checkpointer's config.
    return {
        "checkpoint": checkpoint,
        "checkpoint_id": checkpoint["checkpoint_id"],
        "configurable": checkpoint,
    }


@router.post("/{thread_id}/state/checkpoint", responses=errors(404, 415))
async def post_state_at(
    request: Request, thread_id: str, body: CheckpointRequest, owner: Owner
) -> dict[str, Any]:
    same_thread(thread_id, body.checkpoint.thread_id)
    return await state_json(request, thread_id, owner, body.checkpoint.checkpoint_id)


@router.post("/{thread_id}/history", responses=errors(404, 415))
async def post_history(
    request: Request, thread_id: str, body: HistoryRequest, owner: Owner
) -> list[dict[str, Any]]:
    return await history_json(request, thread_id, owner, body)


@router.get("/{thread_id}/history", responses=errors(404))
async def get_history(
    request: Request, thread_id: str, owner: Owner, limit: int = Query(10, ge=1, le=1000)
) -> list[dict[str, Any]]:
    return await history_json(request, thread_id, owner, HistoryRequest(limit=limit))


async def history_json(
    request: Request, thread_id: str, owner: str, body: HistoryRequest
) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first; only ever the URL's (owned) thread's."""
    thread = await owned_thread(request, thread_id, owner)
    before = (
        CheckpointRef(checkpoint_id=body.before) if isinstance(body.before, str) else body.before
    )
    checkpoint = body.checkpoint or CheckpointRef()
    same_thread(thread_id, checkpoint.thread_id, before.thread_id if before else None)
    if not thread["graph_id"]:
        return []
    configurable: dict[str, Any] = {"thread_id": thread["graph_thread"]}
    if checkpoint.checkpoint_ns:
        configurable["checkpoint_ns"] = checkpoint.checkpoint_ns
    if checkpoint.checkpoint_id:
        configurable["checkpoint_id"] = checkpoint.checkpoint_id
    graph = compile_strategy(thread["graph_id"], request.app.state.checkpointer)
    return [
        thread_state(snapshot, thread_id)
        async for snapshot in graph.aget_state_history(
            {"configurable": configurable},
            limit=body.limit,
            before={"configurable": {"checkpoint_id": before.checkpoint_id}} if before else None,
        )
    ]
