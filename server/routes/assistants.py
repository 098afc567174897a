"""Assistants: the built-in strategies, and configurations of them that a key saves.

Each strategy is a built-in assistant, addressed by its name or a stable UUID, read-only.
``POST /assistants`` saves a configured one (a graph, a ``context`` such as
``{"top_k": 8, "min_confidence": 0.6}``, metadata), owned by the API key like a thread; every
change (``PATCH``) is a new version, and ``/latest`` picks the version in use. A run by an
assistant's id runs its graph with its context under the run's own.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from langgraph.graph.state import CompiledStateGraph

from reflexrag.graphs import STRATEGIES, Strategy, compile_strategy
from reflexrag.providers.database import integrity_errors
from reflexrag.server.deps import Owner, errors, store
from reflexrag.server.schemas import (
    AssistantCount,
    AssistantCreate,
    AssistantLatest,
    AssistantSearch,
    AssistantUpdate,
    AssistantVersionsRequest,
)
from reflexrag.server.store import metadata_contains
from reflexrag.state import Context

_NAMESPACE = uuid.UUID("0b9c5a55-8a5e-4f4e-9d6b-2f4f1c3b7a10")
_EPOCH = "2026-01-01T00:00:00+00:00"
_FIELDS = ("graph_id", "name", "description", "config", "context", "metadata")

router = APIRouter(prefix="/assistants", tags=["assistants"], responses=errors(401, 422))


def assistant_json(strategy: Strategy) -> dict[str, Any]:
    return {
        "assistant_id": str(uuid.uuid5(_NAMESPACE, strategy.name)),
        "graph_id": strategy.name,
        "name": strategy.name,
        "description": strategy.description,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": _EPOCH,
        "updated_at": _EPOCH,
    }


def built_in(assistant_id: str) -> dict[str, Any] | None:
    for strategy in STRATEGIES.values():
        if assistant_id in (strategy.name, assistant_json(strategy)["assistant_id"]):
            return assistant_json(strategy)
    return None


async def find_assistant(request: Request, owner: str, assistant_id: str) -> dict[str, Any]:
    """A built-in assistant or one of ``owner``'s; 404 otherwise."""
    found = built_in(assistant_id) or await store(request).get_assistant(assistant_id, owner)
    if found is None:
        raise HTTPException(
            404, f"assistant {assistant_id!r} not found; the built-in ones: {list(STRATEGIES)}"
        )
    return found


def context_fields(configurable: dict[str, Any]) -> dict[str, Any]:
    """The values of a config's ``configurable`` that name ``Context`` fields."""
    known = set(Context.__dataclass_fields__)
    return {key: value for key, value in configurable.items() if key in known}


def assistant_context(assistant: dict[str, Any]) -> dict[str, Any]:
    """What an assistant sets of a run's context: Context fields of its ``configurable``,
    then its ``context``."""
    configurable = (assistant.get("config") or {}).get("configurable") or {}
    return {**context_fields(configurable), **assistant["context"]}


def checked(fields: dict[str, Any]) -> dict[str, Any]:
    """An assistant's fields, refused (422) unless its graph exists and its context is one
    a run would accept."""
    if fields["graph_id"] not in STRATEGIES:
        raise HTTPException(
            422, f"graph_id: no graph {fields['graph_id']!r}; use one of {list(STRATEGIES)}"
        )
    if not isinstance((fields["config"] or {}).get("configurable", {}), dict):
        raise HTTPException(422, "config.configurable: an object")
    try:
        Context.from_overrides(assistant_context(fields))
    except (TypeError, ValueError) as exc:
        raise HTTPException(422, f"invalid context: {exc}") from None
    return fields


async def stored_assistant(request: Request, owner: str, assistant_id: str) -> dict[str, Any]:
    """One of ``owner``'s saved assistants: 409 for a built-in one, 404 for none."""
    if built_in(assistant_id):
        raise HTTPException(
            409,
            f"assistant {assistant_id!r} is built in and cannot be changed: save your own "
            "with POST /assistants and its graph_id",
        )
    return await find_assistant(request, owner, assistant_id)


def matches(assistant: dict[str, Any], body: AssistantCount) -> bool:
    if body.graph_id not in (None, assistant["graph_id"]):
        return False
    if body.name not in (None, assistant["name"]):
        return False
    return not body.metadata or metadata_contains_dict(assistant["metadata"], body.metadata)


def metadata_contains_dict(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return metadata_contains(json.dumps(stored), json.dumps(wanted))


async def every_assistant(request: Request, owner: str, body: AssistantCount) -> list[dict]:
    """The key's saved assistants that match, newest first, then the built-in ones."""
    saved = await store(request).search_assistants(owner, body.graph_id, body.name, body.metadata)
    return [*saved, *(a for s in STRATEGIES.values() if matches(a := assistant_json(s), body))]


@router.post("/search")
async def search_assistants(
    request: Request, body: AssistantSearch, owner: Owner
) -> list[dict[str, Any]]:
    found = await every_assistant(request, owner, body)
    return found[body.offset : body.offset + body.limit]


@router.post("/count")
async def count_assistants(request: Request, body: AssistantCount, owner: Owner) -> int:
    return len(await every_assistant(request, owner, body))


@router.post("", responses=errors(409))
async def create_assistant(request: Request, body: AssistantCreate, owner: Owner) -> dict[str, Any]:
    """Save a configuration of a built-in graph as version 1 of a new assistant."""
    fields = checked(
        {
            "graph_id": body.graph_id,
            "name": body.name or body.graph_id,
            "description": body.description,
            "config": body.config or {},
            "context": body.context or {},
            "metadata": body.metadata or {},
        }
    )
    assistant_id = body.assistant_id or str(uuid.uuid4())
    existing = built_in(assistant_id) or await store(request).get_assistant(assistant_id, owner)
    if existing is None:
        try:
            await store(request).create_assistant(owner, assistant_id, **fields)
            return await find_assistant(request, owner, assistant_id)
        except integrity_errors():
            existing = await find_assistant(request, owner, assistant_id)
    if body.if_exists == "do_nothing":
        return existing
    raise HTTPException(409, f"assistant {assistant_id} already exists")


@router.patch("/{assistant_id}", responses=errors(404, 409))
async def update_assistant(
    request: Request, assistant_id: str, body: AssistantUpdate, owner: Owner
) -> dict[str, Any]:
    """A new version: the fields given replace the current version's (metadata is merged
    into it), and it becomes the version in use."""
    current = await stored_assistant(request, owner, assistant_id)
    fields = {name: current[name] for name in _FIELDS}
    fields.update(body.model_dump(include=set(_FIELDS) - {"metadata"}, exclude_none=True))
    fields["metadata"] = {**current["metadata"], **(body.metadata or {})}
    try:
        await store(request).add_assistant_version(assistant_id, owner, checked(fields))
    except integrity_errors():
        raise HTTPException(409, f"assistant {assistant_id} changed meanwhile; retry") from None
    return await find_assistant(request, owner, assistant_id)


@router.delete("/{assistant_id}", status_code=204, responses=errors(404, 409))
async def delete_assistant(request: Request, assistant_id: str, owner: Owner) -> Response:
    await stored_assistant(request, owner, assistant_id)
    await store(request).delete_assistant(assistant_id, owner)
    return Response(status_code=204)


@router.post("/{assistant_id}/versions", responses=errors(404))
async def assistant_versions(
    request: Request, assistant_id: str, owner: Owner, body: AssistantVersionsRequest | None = None
) -> list[dict[str, Any]]:
    """The assistant's versions, newest first (a version has no ``updated_at``); a built-in
    assistant has exactly one."""
    body = body or AssistantVersionsRequest()
    found = await find_assistant(request, owner, assistant_id)
    if built_in(assistant_id):
        del found["updated_at"]
        versions = [found] if metadata_contains_dict(found["metadata"], body.metadata or {}) else []
        return versions[body.offset : body.offset + body.limit]
    return await store(request).assistant_versions(
        found["assistant_id"], owner, body.metadata, body.limit, body.offset
    )


@router.post("/{assistant_id}/latest", responses=errors(404, 409))
async def set_latest_version(
    request: Request, assistant_id: str, body: AssistantLatest, owner: Owner
) -> dict[str, Any]:
    """Make one of the assistant's versions the one runs use."""
    if (found := built_in(assistant_id)) and body.version == 1:
        return found
    await stored_assistant(request, owner, assistant_id)
    if not await store(request).set_assistant_version(assistant_id, owner, body.version):
        raise HTTPException(404, f"assistant {assistant_id} has no version {body.version}")
    return await find_assistant(request, owner, assistant_id)


@router.get("/{assistant_id}", responses=errors(404))
async def get_assistant(request: Request, assistant_id: str, owner: Owner) -> dict[str, Any]:
    return await find_assistant(request, owner, assistant_id)


@router.get("/{assistant_id}/graph", responses=errors(404))
async def get_assistant_graph(
    request: Request,
    assistant_id: str,
    owner: Owner,
    xray: bool | int = Query(False, description="draw subgraphs' nodes too (or to this depth)"),
) -> dict[str, Any]:
    assistant = await find_assistant(request, owner, assistant_id)
    return compile_strategy(assistant["graph_id"]).get_graph(xray=xray).to_json()


def schemas_json(graph_id: str, graph: CompiledStateGraph) -> dict[str, Any]:
    context = graph.get_context_jsonschema()
    return {
        "graph_id": graph_id,
        "input_schema": graph.get_input_jsonschema(),
        "output_schema": graph.get_output_jsonschema(),
        "state_schema": graph.get_output_jsonschema(),
        # As LangGraph Server answers for a graph with a context schema: its fields (a run
        # may send them in `context`, or in `config.configurable`).
        "config_schema": context,
        "context_schema": context,
    }


@router.get("/{assistant_id}/schemas", responses=errors(404))
async def get_assistant_schemas(
    request: Request, assistant_id: str, owner: Owner
) -> dict[str, Any]:
    graph_id = (await find_assistant(request, owner, assistant_id))["graph_id"]
    return schemas_json(graph_id, compile_strategy(graph_id))


@router.get("/{assistant_id}/subgraphs", responses=errors(404))
@router.get("/{assistant_id}/subgraphs/{namespace}", responses=errors(404))
async def get_assistant_subgraphs(
    request: Request,
    assistant_id: str,
    owner: Owner,
    namespace: str | None = None,
    recurse: bool = False,
) -> dict[str, Any]:
    """The schemas of the strategy's subgraphs, by namespace (adaptive runs the others)."""
    graph_id = (await find_assistant(request, owner, assistant_id))["graph_id"]
    graph = compile_strategy(graph_id)
    return {
        name: schemas_json(graph_id, subgraph)
        async for name, subgraph in graph.aget_subgraphs(namespace=namespace, recurse=recurse)
    }
