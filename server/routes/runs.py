"""Runs: streamed (Server-Sent Events), waited for, or in the background; joined and cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from reflexrag.graphs import STRATEGIES, compile_strategy
from reflexrag.server.deps import (
    Owner,
    check_kb_readable,
    errors,
    owned_thread,
    runs,
    same_thread,
    snapshot_of,
    store,
)
from reflexrag.server.routes.assistants import (
    assistant_context,
    context_fields,
    find_assistant,
)
from reflexrag.server.run_manager import UNSUPPORTED_STREAM_MODES, RunSpec
from reflexrag.server.schemas import RunCreate
from reflexrag.server.serialize import dumps, jsonable
from reflexrag.state import Context
from reflexrag.state.context import check_question

router = APIRouter(tags=["runs"], responses=errors(401, 404, 422))
_STARTS = errors(409, 413, 415)


def build_context(body: RunCreate, assistant: dict[str, Any]) -> Context:
    """The run's context: the assistant's (:func:`assistant_context`), then any Context
    fields the run sends in ``configurable``, then its ``context``."""
    configurable = body.config.configurable if body.config else {}
    overrides = {
        **assistant_context(assistant),
        **context_fields(configurable),
        **(body.context or {}),
    }
    try:
        return Context.from_overrides(overrides)
    except (TypeError, ValueError) as exc:
        raise HTTPException(422, f"invalid context: {exc}") from None


def validate_input(body: RunCreate, graph_id: str) -> None:
    for mode in body.stream_mode:
        if mode in UNSUPPORTED_STREAM_MODES:
            raise HTTPException(501, UNSUPPORTED_STREAM_MODES[mode])
    nodes = set(compile_strategy(graph_id).nodes) - {"__start__"}
    for field in ("interrupt_before", "interrupt_after"):
        asked = getattr(body, field)
        unknown = [] if asked in (None, "*") else sorted(set(asked) - nodes)
        if unknown:
            raise HTTPException(422, f"{field}: no node {unknown} in {graph_id}: {sorted(nodes)}")
    if body.input is not None and body.command is not None:
        raise HTTPException(422, "send either input or command, not both")
    if body.command is not None:
        check_command(body.command, nodes, graph_id)
    if body.input is not None:
        try:
            check_question(body.input.get("question"))
        except ValueError as exc:
            raise HTTPException(422, f"input.question: {exc}") from None


def check_command(command: dict[str, Any], nodes: set[str], graph_id: str) -> None:
    """A command that would do nothing, or fail inside the run, is refused up front: one with
    no field, a ``goto`` to a node the graph lacks, an ``update`` that is not state keys."""
    if not command:
        raise HTTPException(422, "command: give 'resume', 'goto' or 'update'")
    goto = command.get("goto")
    if goto is not None:
        targets = goto if isinstance(goto, list) else [goto]
        names = [t.get("node") if isinstance(t, dict) else t for t in targets]
        unknown = [name for name in names if name not in nodes]
        if unknown:
            raise HTTPException(
                422, f"command.goto: no node {unknown} in {graph_id}: {sorted(nodes)}"
            )
    update = command.get("update")
    if update is not None and not isinstance(update, dict | list):
        raise HTTPException(422, "command.update: an object of state keys and their values")


async def start_run(
    request: Request, owner: str, body: RunCreate, thread_id: str | None
) -> dict[str, Any]:
    """Validate the request, make its thread if needed, and start (or queue) the run: its
    record."""
    assistant = await find_assistant(request, owner, body.assistant_id)
    strategy = STRATEGIES[assistant["graph_id"]]
    context = await check_run(body, assistant, owner)
    checkpoint_id = body.checkpoint_id or (
        body.checkpoint.checkpoint_id if body.checkpoint else None
    )
    temporary = thread_id is None
    if temporary:
        if body.command is not None or checkpoint_id:
            raise HTTPException(422, "a stateless run has no thread to resume or fork")
        if body.input is None:
            raise HTTPException(422, "a stateless run needs an input")
        thread = await store(request).create_thread(owner, {"stateless": True})
    else:
        same_thread(
            thread_id,
            body.checkpoint.thread_id if body.checkpoint else None,
            body.config.configurable.get("thread_id") if body.config else None,
        )
        thread = await store(request).get_thread(thread_id, owner)
        if thread is None:
            if body.if_not_exists != "create":
                raise HTTPException(404, f"thread {thread_id} not found")
            thread = await store(request).create_thread(owner, {}, thread_id)
        if checkpoint_id:
            await snapshot_of(request, thread, checkpoint_id)  # 404 when it does not exist
        if body.command is not None and "resume" in body.command:
            await require_paused(request, thread)
        if body.input is None and body.command is None and not checkpoint_id:
            await require_state(request, thread)
    spec = RunSpec(
        thread_id=thread["thread_id"],
        graph_thread=thread["graph_thread"],
        graph_id=strategy.name,
        owner=owner,
        input=body.input,
        command=body.command,
        context=context,
        stream_modes=body.stream_mode,  # validated into a list
        checkpoint_id=checkpoint_id,
        recursion_limit=body.config.recursion_limit if body.config else None,
        metadata=body.metadata or {},
        multitask_strategy=body.multitask_strategy,
        delete_thread_after=temporary and body.on_completion != "keep",
        stream_subgraphs=body.stream_subgraphs,
        interrupt_before=body.interrupt_before,
        interrupt_after=body.interrupt_after,
        assistant_id=assistant["assistant_id"],
    )
    return await runs(request).start(spec)


async def check_run(body: RunCreate, assistant: dict[str, Any], owner: str) -> Context:
    """What a run of ``assistant`` would refuse in ``body`` (422, 501), and the knowledge
    bases it reads, which ``owner`` must be able to read (404); its context."""
    validate_input(body, assistant["graph_id"])
    context = build_context(body, assistant)
    await check_kb_readable(owner, context.kb, optional=context.web_kb)
    return context


async def require_state(request: Request, thread: dict[str, Any]) -> None:
    """A run without input continues the thread's state: 422 when there is none yet."""
    if await runs(request).busy(thread["graph_thread"]):
        return  # the run ahead of it will leave state to continue
    snapshot = await snapshot_of(request, thread)
    if snapshot is None or snapshot.created_at is None:  # no checkpoint yet
        raise HTTPException(
            422, f"thread {thread['thread_id']} has no state yet: the first run needs an input"
        )


async def require_paused(request: Request, thread: dict[str, Any]) -> None:
    """A ``resume`` answers an ``interrupt()``: 409 when the thread has none waiting."""
    if await runs(request).busy(thread["graph_thread"]):
        return  # the current run may still pause; the queued resume is checked by LangGraph
    snapshot = await snapshot_of(request, thread)
    if snapshot is None or not snapshot.interrupts:
        raise HTTPException(
            409, f"thread {thread['thread_id']} has no run waiting for a reply to resume"
        )


HEARTBEAT_S = 15.0
"""Silence after which a stream sends an SSE comment, so proxies keep an idle stream open."""


def sse_response(
    request: Request, run: dict[str, Any], on_disconnect: str, after: int = -1
) -> StreamingResponse:
    """The run's events as Server-Sent Events, each with its position in the run's stream as
    its ``id`` (a client that lost the stream reconnects to ``Location`` with the last id it
    saw as ``Last-Event-ID`` and gets only what came after: ``after``)."""
    manager = runs(request)

    async def frames() -> AsyncIterator[str]:
        finished = False
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for item in manager.events(run["run_id"]):
                    queue.put_nowait(item)
            finally:
                queue.put_nowait(None)

        pumping = asyncio.create_task(pump())
        try:
            position = -1
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    yield ": heartbeat\n\n"
                    continue
                if item is None:
                    break
                position += 1
                if position > after:
                    event, data = item
                    yield f"event: {event}\nid: {position}\ndata: {dumps(data)}\n\n"
            await pumping  # its error, if it failed, ends the stream
            finished = True
        finally:
            pumping.cancel()
            # The client went away: stop the run if asked to; it stays resumable from its
            # last checkpoint.
            if on_disconnect == "cancel" and not finished:
                manager.cancel_soon(run["run_id"])

    location = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={
            "Content-Location": location,
            "Location": f"{location}/stream",
            "Cache-Control": "no-store",
        },
    )


async def wait_result(request: Request, run_id: str, on_disconnect: str) -> dict:
    """The run's final values once it ends; a client that hangs up first cancels it, unless
    it asked for ``on_disconnect: continue``."""
    manager = runs(request)
    while not await manager.wait(run_id, timeout=0.5):
        if on_disconnect == "cancel" and await request.is_disconnected():
            await manager.cancel(run_id, wait=True)
    return await manager.result(run_id)


@router.post("/threads/{thread_id}/runs/stream", responses=_STARTS)
async def stream_thread_run(
    request: Request, thread_id: str, body: RunCreate, owner: Owner
) -> StreamingResponse:
    run = await start_run(request, owner, body, thread_id)
    return sse_response(request, run, body.on_disconnect)


@router.post("/runs/stream", responses=_STARTS)
async def stream_stateless_run(
    request: Request, body: RunCreate, owner: Owner
) -> StreamingResponse:
    run = await start_run(request, owner, body, None)
    return sse_response(request, run, body.on_disconnect)


@router.post("/threads/{thread_id}/runs/wait", responses=_STARTS)
async def wait_thread_run(
    request: Request, thread_id: str, body: RunCreate, owner: Owner
) -> dict[str, Any]:
    run = await start_run(request, owner, body, thread_id)
    return await wait_result(request, run["run_id"], body.on_disconnect)


@router.post("/runs/wait", responses=_STARTS)
async def wait_stateless_run(request: Request, body: RunCreate, owner: Owner) -> dict:
    run = await start_run(request, owner, body, None)
    return await wait_result(request, run["run_id"], body.on_disconnect)


@router.post("/threads/{thread_id}/runs", responses=_STARTS)
async def create_background_run(
    request: Request, thread_id: str, body: RunCreate, owner: Owner
) -> JSONResponse:
    run = await start_run(request, owner, body, thread_id)
    location = f"/threads/{thread_id}/runs/{run['run_id']}"
    return JSONResponse(run, headers={"Content-Location": location})


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    request: Request, thread_id: str, owner: Owner, limit: int = Query(10, ge=1, le=1000)
) -> list[dict[str, Any]]:
    await owned_thread(request, thread_id, owner)
    return await store(request).list_runs(thread_id, owner, limit)


async def owned_run(request: Request, thread_id: str, run_id: str, owner: str) -> dict:
    run = await store(request).get_run(run_id, owner)
    if run is None or run["thread_id"] != thread_id:
        raise HTTPException(404, f"run {run_id} not found")
    return run


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(request: Request, thread_id: str, run_id: str, owner: Owner) -> dict:
    return await owned_run(request, thread_id, run_id, owner)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(request: Request, thread_id: str, run_id: str, owner: Owner) -> dict:
    await owned_run(request, thread_id, run_id, owner)
    if await runs(request).tracks(run_id):
        return await wait_result(request, run_id, "continue")
    thread = await owned_thread(request, thread_id, owner)
    snapshot = await snapshot_of(request, thread)
    return jsonable(snapshot.values) if snapshot else {}


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_run_stream(
    request: Request,
    thread_id: str,
    run_id: str,
    owner: Owner,
    last_event_id: str | None = Header(None, alias="Last-Event-ID"),
) -> StreamingResponse:
    """The run's stream from its first event, or from after ``Last-Event-ID``."""
    run = await owned_run(request, thread_id, run_id, owner)
    if not await runs(request).tracks(run_id):
        raise HTTPException(404, f"run {run_id} is no longer streaming")
    try:
        after = -1 if last_event_id in (None, "") else int(last_event_id)
    except ValueError:
        raise HTTPException(422, "Last-Event-ID: the id of an event of this run") from None
    return sse_response(request, run, "continue", after)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202, responses=errors(501))
async def cancel_run(
    request: Request,
    thread_id: str,
    run_id: str,
    owner: Owner,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> dict[str, Any]:
    await owned_run(request, thread_id, run_id, owner)
    if action == "rollback":
        raise HTTPException(
            501,
            "cancel action 'rollback' is not supported; use 'interrupt', or start the next "
            "run with multitask_strategy 'rollback'",
        )
    await runs(request).cancel(run_id, wait)
    return await owned_run(request, thread_id, run_id, owner)
