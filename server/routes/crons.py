"""Crons: run requests kept with a schedule and fired by the server (LangGraph's ``crons``).

``POST /runs/crons`` schedules a stateless run (each firing gets a new thread, deleted after
the run unless ``on_run_completed`` is ``"keep"``); ``POST /threads/{id}/runs/crons`` runs on
one thread, which keeps the runs' state. The request is checked as a run would be when the cron
is made, so a cron that could never start is refused then (404, 422), not at 3 a.m.

Every serving replica runs :func:`schedule_crons`. A cron is due when its ``next_run_date``
has passed; a replica claims a firing by moving that date to the next one in the cron's own
time zone, in one conditional update, so each firing starts exactly one run whichever replicas
poll. A server that was down does not catch up on the firings it missed: the next date is
counted from now.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from pydantic import ValidationError

from reflexrag.server.deps import Owner, errors, owned_thread, store
from reflexrag.server.routes.assistants import find_assistant
from reflexrag.server.routes.runs import check_run, start_run
from reflexrag.server.schemas import CronCount, CronCreate, CronSearch, CronUpdate, RunCreate
from reflexrag.server.store import CRON_FIELDS, timestamp

router = APIRouter(tags=["crons"], responses=errors(401, 404, 422))
log = logging.getLogger("reflexrag.server")

POLL_S = 5.0
"""How often each replica looks for due crons (LangGraph Server's scheduler: 5 s)."""
BATCH = 100
"""Due crons one poll fires at most; the rest wait for the next poll."""
_SCHEDULING = {"schedule", "end_time", "enabled", "timezone", "on_run_completed"}


def next_run_date(schedule: str, after: datetime, timezone: str | None) -> str | None:
    """The schedule's first time after ``after``, read in ``timezone`` (UTC when None), as
    stored; None when it names no date to come (a year field that has passed)."""
    from croniter import croniter
    from croniter.croniter import CroniterBadDateError

    local = after.astimezone(ZoneInfo(timezone) if timezone else UTC)
    try:
        return timestamp(croniter(schedule, local).get_next(datetime))
    except CroniterBadDateError:
        return None


def cron_json(cron: dict[str, Any], select: list[str] | None = None) -> dict[str, Any]:
    return {field: cron[field] for field in select or CRON_FIELDS}


async def _new_cron(
    request: Request, owner: str, body: CronCreate, thread_id: str | None
) -> dict[str, Any]:
    if body.command is not None:
        raise HTTPException(422, "a cron starts runs from an input, not a command")
    if body.input is None:
        raise HTTPException(422, "a cron needs the input its runs start from")
    assistant = await find_assistant(request, owner, body.assistant_id)
    await check_run(body, assistant, owner)
    cron_id = str(uuid.uuid4())
    payload = body.model_dump(exclude_unset=True, exclude=_SCHEDULING)
    payload.setdefault("config", {}).setdefault("configurable", {})["cron_id"] = cron_id
    return await store(request).create_cron(
        {
            "cron_id": cron_id,
            "owner": owner,
            "assistant_id": assistant["assistant_id"],
            "thread_id": thread_id,
            "schedule": body.schedule,
            "timezone": body.timezone,
            "end_time": timestamp(body.end_time) if body.end_time else None,
            # A thread's runs keep their thread; a stateless run's thread goes by default.
            "on_run_completed": None if thread_id else body.on_run_completed or "delete",
            "enabled": body.enabled,
            "next_run_date": next_run_date(body.schedule, datetime.now(UTC), body.timezone),
            "payload": payload,
            "metadata": body.metadata or {},
        }
    )


@router.post("/runs/crons")
async def create_cron(request: Request, body: CronCreate, owner: Owner) -> dict[str, Any]:
    """Schedule a stateless run."""
    return cron_json(await _new_cron(request, owner, body, None))


@router.post("/threads/{thread_id}/runs/crons")
async def create_thread_cron(
    request: Request, thread_id: str, body: CronCreate, owner: Owner
) -> dict[str, Any]:
    """Schedule a run on this thread."""
    await owned_thread(request, thread_id, owner)
    return cron_json(await _new_cron(request, owner, body, thread_id))


async def _owned_cron(request: Request, cron_id: str, owner: str) -> dict[str, Any]:
    cron = await store(request).get_cron(cron_id, owner)
    if cron is None:
        raise HTTPException(404, f"cron {cron_id} not found")
    return cron


@router.get("/runs/crons/{cron_id}")
async def get_cron(request: Request, cron_id: str, owner: Owner) -> dict[str, Any]:
    return cron_json(await _owned_cron(request, cron_id, owner))


@router.patch("/runs/crons/{cron_id}")
async def update_cron(
    request: Request, cron_id: str, body: CronUpdate, owner: Owner
) -> dict[str, Any]:
    """Change a cron: its schedule (the next date is counted again from now), whether it is
    enabled, when it ends, or the run it starts (checked again as a run would be)."""
    cron = await _owned_cron(request, cron_id, owner)
    given = body.model_dump(include=body.model_fields_set)
    changes: dict[str, Any] = {}
    run_fields = {key: value for key, value in given.items() if key not in _SCHEDULING}
    if run_fields:
        payload = {**cron["payload"], **{k: v for k, v in run_fields.items() if v is not None}}
        try:
            run = RunCreate.model_validate(payload)
        except ValidationError as exc:
            raise HTTPException(422, f"the run this cron would start: {exc}") from None
        await check_run(run, await find_assistant(request, owner, run.assistant_id), owner)
        changes["payload"] = payload
        if "metadata" in run_fields:
            changes["metadata"] = run_fields["metadata"] or {}
    if given.get("enabled") is not None:
        changes["enabled"] = given["enabled"]
    # A thread's runs always keep their thread.
    if given.get("on_run_completed") is not None and not cron["thread_id"]:
        changes["on_run_completed"] = given["on_run_completed"]
    if "end_time" in given:
        changes["end_time"] = timestamp(given["end_time"]) if given["end_time"] else None
    if "schedule" in given or "timezone" in given:
        schedule = given.get("schedule") or cron["schedule"]
        timezone = given["timezone"] if "timezone" in given else cron["timezone"]
        changes.update(schedule=schedule, timezone=timezone)
        changes["next_run_date"] = next_run_date(schedule, datetime.now(UTC), timezone)
    if changes:
        await store(request).update_cron(cron_id, owner, **changes)
    return cron_json(await _owned_cron(request, cron_id, owner))


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(request: Request, cron_id: str, owner: Owner) -> Response:
    if not await store(request).delete_cron(cron_id, owner):
        raise HTTPException(404, f"cron {cron_id} not found")
    return Response(status_code=204)


@router.post("/runs/crons/search")
async def search_crons(request: Request, body: CronSearch, owner: Owner) -> list[dict[str, Any]]:
    found = await store(request).search_crons(
        owner,
        assistant_id=body.assistant_id,
        thread_id=body.thread_id,
        enabled=body.enabled,
        metadata=body.metadata,
        sort_by=body.sort_by,
        descending=body.sort_order == "desc",
        limit=body.limit,
        offset=body.offset,
    )
    return [cron_json(cron, body.select) for cron in found]


@router.post("/runs/crons/count")
async def count_crons(request: Request, body: CronCount, owner: Owner) -> int:
    return await store(request).count_crons(owner, body.assistant_id, body.thread_id, body.metadata)


@dataclass
class _Fired:
    """What the run helpers read of a request, for a run a cron starts with none: the app."""

    app: FastAPI


async def fire_due_crons(app: FastAPI, moment: datetime | None = None) -> int:
    """Start one run for each due cron this replica claims; how many it started."""
    moment = moment or datetime.now(UTC)
    service = app.state.store
    started = 0
    for cron in await service.due_crons(moment, BATCH):
        following = next_run_date(cron["schedule"], moment, cron["timezone"])
        if following and cron["end_time"] and following > cron["end_time"]:
            following = None  # this firing is its last
        if not await service.claim_cron(cron, following):
            continue  # another replica fired it
        body = RunCreate.model_validate(cron["payload"])
        body.metadata = {**cron["metadata"], **(body.metadata or {})}
        if cron["thread_id"] is None:
            body.on_completion = cron["on_run_completed"] or "delete"
        try:
            await start_run(_Fired(app), cron["owner"], body, cron["thread_id"])  # type: ignore[arg-type]
        except HTTPException as exc:
            # What changed since the cron was made (its thread busy, its KB deleted) skips
            # this firing only.
            log.warning("cron %s started no run: %s", cron["cron_id"], exc.detail)
            continue
        started += 1
    return started


async def schedule_crons(app: FastAPI, poll_s: float = POLL_S) -> None:
    """Fire due crons every ``poll_s`` until cancelled; a database that is down is tried
    again at the next poll."""
    while True:
        try:
            await fire_due_crons(app)
        except Exception:
            log.exception("the cron scheduler could not read or fire crons; trying again")
        await asyncio.sleep(poll_s)
