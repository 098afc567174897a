"""What the routes share: the caller's identity, the service's stores, owned threads and
knowledge bases, and the error answers each route declares in the OpenAPI schema.

Access model. Without API keys the service is single-user: every thread and knowledge base is
open. With keys (``REFLEXRAG_API_KEY``), each key is an owner:

- threads belong to the key that made them; another key cannot see, run or even detect them
  (thread ids are scoped per key);
- a knowledge base made over HTTP belongs to the key that first wrote to it: only that key
  may read it, write it, or run against it;
- knowledge bases made on the server's machine with the CLI (``default`` among them) are
  shared: every key may read them and none may change them over HTTP.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader
from langgraph.types import StateSnapshot

from reflexrag.graphs import compile_strategy
from reflexrag.providers.knowledge_base import knowledge_base_owners
from reflexrag.server.run_manager import RunManager
from reflexrag.server.schemas import ErrorBody
from reflexrag.server.store import ServiceStore

_API_KEY = APIKeyHeader(
    name="x-api-key",
    auto_error=False,
    description="One of the keys in REFLEXRAG_API_KEY; required only when keys are set.",
)


async def authenticate(
    request: Request, given: Annotated[str | None, Security(_API_KEY)] = None
) -> str:
    """The caller's owner id: a hash of its API key ("" when the service has no keys)."""
    keys = request.app.state.settings.api_keys
    if not keys:
        return ""
    # Header values arrive as Latin-1 text; comparing bytes accepts any of them safely.
    presented = (given or "").encode("latin-1", "replace")
    if not any(hmac.compare_digest(presented, key.encode()) for key in keys):
        raise HTTPException(401, "missing or invalid API key (send it as x-api-key)")
    return hashlib.sha256(presented).hexdigest()[:16]


Owner = Annotated[str, Depends(authenticate)]

_DESCRIPTIONS = {
    401: "Missing or invalid API key.",
    403: "Not allowed for this key (a shared knowledge base is read-only over HTTP).",
    404: "Not found, or not this key's.",
    409: "Conflict with the thread's state (busy, nothing paused, exists).",
    413: "Request body too large.",
    415: "Unsupported content type (send application/json).",
    422: "Invalid request: the message names the field.",
    501: "Not implemented by this server.",
    504: "The request took longer than the server allows (REFLEXRAG_INGEST_DEADLINE_S).",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry of the OpenAPI schema for these error codes."""
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in codes}


def store(request: Request) -> ServiceStore:
    return request.app.state.store


def runs(request: Request) -> RunManager:
    return request.app.state.runs


async def owned_thread(request: Request, thread_id: str, owner: str) -> dict[str, Any]:
    thread = await store(request).get_thread(thread_id, owner)
    if thread is None:
        raise HTTPException(404, f"thread {thread_id} not found")
    return thread


def same_thread(thread_id: str, *claimed: str | None) -> None:
    """A thread id sent in a body (``checkpoint``, ``config``) must be the URL's."""
    for other in claimed:
        if other not in (None, thread_id):
            raise HTTPException(422, f"thread_id {other!r} in the body is not the URL's thread")


async def snapshot_of(
    request: Request, thread: dict[str, Any], checkpoint_id: str | None = None
) -> StateSnapshot | None:
    """The thread's state (at ``checkpoint_id``); 404 when that checkpoint does not exist."""
    if not thread["graph_id"]:
        if checkpoint_id:
            raise HTTPException(404, f"checkpoint {checkpoint_id} not found")
        return None
    configurable = {"thread_id": thread["graph_thread"], "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
        checkpointer = request.app.state.checkpointer
        if await checkpointer.aget_tuple({"configurable": configurable}) is None:
            raise HTTPException(404, f"checkpoint {checkpoint_id} not found")
    graph = compile_strategy(thread["graph_id"], request.app.state.checkpointer)
    return await graph.aget_state({"configurable": configurable})


async def check_kb_readable(owner: str, name: str, optional: str | None = None) -> None:
    """404 unless knowledge base ``name`` exists and this key may read it; ``optional`` (a
    run's web stand-in) may be missing, but not another key's. One listing for both."""
    owners = await asyncio.to_thread(knowledge_base_owners)

    def hidden(kb: str) -> bool:
        return bool(owner) and owners[kb] not in (None, owner)

    for kb, required in ((name, True), (optional, False)):
        if kb is None or (kb not in owners and not required):
            continue
        if kb not in owners or hidden(kb):
            visible = sorted(n for n in owners if not hidden(n))
            raise HTTPException(
                404, f"knowledge base {kb!r} not found; known: {', '.join(visible) or 'none'}"
            )


async def kb_owner_for_writing(name: str, owner: str) -> str | None:
    """The owner a write to ``name`` creates it with; 403/404 when this key may not write."""
    owners = await asyncio.to_thread(knowledge_base_owners)
    if not owner:
        return owners.get(name)
    if name not in owners:
        return owner
    if owners[name] is None:
        raise HTTPException(
            403,
            f"knowledge base {name!r} is shared and read-only over the API; "
            "ingest into it with the CLI on the server, or write to a knowledge base of your own",
        )
    if owners[name] != owner:
        raise HTTPException(404, f"knowledge base {name!r} not found")
    return owner
