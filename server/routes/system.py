"""Health and version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

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
        "flags": {"assistants": True, "crons": True, "langsmith": False},
        "strategies": list(STRATEGIES),
        "default_kb": get_settings().default_kb,
    }
