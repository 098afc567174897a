"""The long-term store: LangGraph's ``BaseStore`` (items by namespace and key) over HTTP, as
LangGraph Server serves it to ``client.store`` and Studio's memory view.

Each API key has its own store: every namespace is kept under a first label naming the key
(a digest, never the key), which no answer shows. Runs see the same store as
``runtime.store``, unscoped (a graph's own namespaces are the graph's business). No vector
index or time-to-live is configured, so ``query`` and ``ttl`` are refused (422) with the
reason.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import APIRouter, HTTPException, Query, Request, Response
from langgraph.store.base import BaseStore, Item

from reflexrag.providers.database import data_errors
from reflexrag.providers.text import reason_of
from reflexrag.server.deps import Owner, errors
from reflexrag.server.schemas import StoreDelete, StoreNamespaces, StorePut, StoreSearch
from reflexrag.server.store import user_id_of

router = APIRouter(prefix="/store", tags=["store"], responses=errors(401, 422))


def memory(request: Request) -> BaseStore:
    return request.app.state.memory


def scoped(owner: str, namespace: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return (user_id_of(owner), *namespace)


def item_json(item: Item) -> dict[str, Any]:
    found = {
        "namespace": list(item.namespace[1:]),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if hasattr(item, "score"):
        found["score"] = item.score
    return found


T = TypeVar("T")


async def stored(call: Awaitable[T]) -> T:
    """A store call; what the store refuses (a namespace, a value it cannot hold: NUL in
    Postgres text) is the request's mistake, a 422 with the reason."""
    try:
        return await call
    except (ValueError, *data_errors()) as exc:
        raise HTTPException(422, f"the store refused this: {reason_of(exc, 300)}") from None


def _not_configured(what: str) -> HTTPException:
    # A request this server's store cannot serve, not a fault of the server: 422.
    return HTTPException(422, f"{what} is not configured on this server's store")


@router.put("/items", status_code=204)
async def put_item(request: Request, body: StorePut, owner: Owner) -> Response:
    """Store ``value`` under (``namespace``, ``key``), replacing what was there."""
    if body.ttl is not None:
        raise _not_configured("a time-to-live")
    await stored(
        memory(request).aput(scoped(owner, body.namespace), body.key, body.value, index=False)
    )
    return Response(status_code=204)


@router.get("/items")
async def get_item(
    request: Request,
    owner: Owner,
    key: str = Query(min_length=1, max_length=1000),
    namespace: str = Query("", max_length=2000, description="labels joined by '.'"),
) -> dict[str, Any] | None:
    """The item, or null when there is none (as LangGraph Server answers)."""
    labels = [label for label in namespace.split(".") if label] if namespace else []
    item = await stored(memory(request).aget(scoped(owner, labels), key))
    return None if item is None else item_json(item)


@router.delete("/items", status_code=204)
async def delete_item(request: Request, body: StoreDelete, owner: Owner) -> Response:
    await stored(memory(request).adelete(scoped(owner, body.namespace), body.key))
    return Response(status_code=204)


@router.post("/items/search")
async def search_items(request: Request, body: StoreSearch, owner: Owner) -> dict[str, Any]:
    """Items under ``namespace_prefix`` whose values hold ``filter``'s key-value pairs."""
    if body.query:
        raise _not_configured("semantic search (a vector index)")
    found = await stored(
        memory(request).asearch(
            scoped(owner, body.namespace_prefix),
            filter=body.filter,
            limit=body.limit,
            offset=body.offset,
        )
    )
    return {"items": [item_json(item) for item in found]}


@router.post("/namespaces")
async def list_namespaces(request: Request, body: StoreNamespaces, owner: Owner) -> dict[str, Any]:
    found = await stored(
        memory(request).alist_namespaces(
            prefix=scoped(owner, body.prefix or []),
            suffix=tuple(body.suffix) if body.suffix else None,
            max_depth=None if body.max_depth is None else body.max_depth + 1,
            limit=body.limit,
            offset=body.offset,
        )
    )
    return {"namespaces": [list(namespace[1:]) for namespace in found]}
