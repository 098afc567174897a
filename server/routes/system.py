"""Health and version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from reflexrag.graphs import STRATEGIES
from reflexrag.providers.settings import get_settings
from reflexrag.server.deps import Owner, errors

VERSION = "0.1.0"

router = APIRouter(tags=["system"])


@router.get("/ok")
async def ok() -> dict[str, bool]:
    return {"ok": True}


@router.get("/info", responses=errors(401))
async def info(owner: Owner) -> dict[str, Any]:
    return {
        "version": VERSION,
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "strategies": list(STRATEGIES),
        "default_kb": get_settings().default_kb,
    }


# LangGraph Server APIs reflexrag deliberately does not offer: 501 with the reason (never a
# silent 404), kept out of the OpenAPI schema.
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE"]


@router.api_route("/runs/crons", methods=_ANY, include_in_schema=False)
@router.api_route("/runs/crons/{path:path}", methods=_ANY, include_in_schema=False)
@router.api_route("/threads/{thread_id}/runs/crons", methods=_ANY, include_in_schema=False)
async def crons_api(owner: Owner, path: str = "", thread_id: str = "") -> None:
    raise HTTPException(501, "crons are not supported; schedule runs with your own scheduler")
