"""Assistants: one per strategy, addressed by its name or a stable UUID.

They are the built-in strategies, so they cannot be created, edited or versioned (501): a run
configures its strategy through ``context`` instead.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from langgraph.graph.state import CompiledStateGraph

from reflexrag.graphs import STRATEGIES, Strategy, compile_strategy
from reflexrag.server.deps import Owner, errors
from reflexrag.server.schemas import AssistantCount, AssistantSearch

_NAMESPACE = uuid.UUID("0b9c5a55-8a5e-4f4e-9d6b-2f4f1c3b7a10")
_EPOCH = "2026-01-01T00:00:00+00:00"

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


def resolve_assistant(assistant_id: str) -> Strategy:
    for strategy in STRATEGIES.values():
        if assistant_id in (strategy.name, assistant_json(strategy)["assistant_id"]):
            return strategy
    raise HTTPException(404, f"assistant {assistant_id!r} not found; use one of {list(STRATEGIES)}")


@router.post("/search")
async def search_assistants(body: AssistantSearch, owner: Owner) -> list[dict[str, Any]]:
    found = [assistant_json(s) for s in STRATEGIES.values() if body.graph_id in (None, s.name)]
    return found[body.offset : body.offset + body.limit]


@router.post("/count")
async def count_assistants(body: AssistantCount, owner: Owner) -> int:
    return sum(body.graph_id in (None, s.name) for s in STRATEGIES.values())


_BUILT_IN = (
    "assistants are reflexrag's built-in strategies and cannot be created, changed or "
    "versioned; configure a run with its context (e.g. {'top_k': 8}) instead"
)


# Deliberately unsupported: 501 with the reason, kept out of the OpenAPI schema.
@router.post("", status_code=501, include_in_schema=False)
async def create_assistant(owner: Owner) -> None:
    raise HTTPException(501, _BUILT_IN)


@router.patch("/{assistant_id}", status_code=501, include_in_schema=False)
async def update_assistant(assistant_id: str, owner: Owner) -> None:
    resolve_assistant(assistant_id)
    raise HTTPException(501, _BUILT_IN)


@router.delete("/{assistant_id}", status_code=501, include_in_schema=False)
async def delete_assistant(assistant_id: str, owner: Owner) -> None:
    resolve_assistant(assistant_id)
    raise HTTPException(501, _BUILT_IN)


@router.post("/{assistant_id}/versions", responses=errors(404))
async def assistant_versions(assistant_id: str, owner: Owner) -> list[dict[str, Any]]:
    """Every built-in assistant has exactly one version (a version has no ``updated_at``)."""
    version = assistant_json(resolve_assistant(assistant_id))
    del version["updated_at"]
    return [version]


@router.post("/{assistant_id}/latest", status_code=501, include_in_schema=False)
async def set_latest_version(assistant_id: str, owner: Owner) -> None:
    resolve_assistant(assistant_id)
    raise HTTPException(501, _BUILT_IN)


@router.get("/{assistant_id}", responses=errors(404))
async def get_assistant(assistant_id: str, owner: Owner) -> dict[str, Any]:
    return assistant_json(resolve_assistant(assistant_id))


@router.get("/{assistant_id}/graph", responses=errors(404))
async def get_assistant_graph(
    assistant_id: str,
    owner: Owner,
    xray: bool | int = Query(False, description="draw subgraphs' nodes too (or to this depth)"),
) -> dict[str, Any]:
    graph = compile_strategy(resolve_assistant(assistant_id).name)
    return graph.get_graph(xray=xray).to_json()


def schemas_json(graph_id: str, graph: CompiledStateGraph) -> dict[str, Any]:
    context = graph.get_context_jsonschema()
    return {
        "graph_id": graph_id,
        "input_schema": graph.get_input_jsonschema(),
        "output_schema": graph.get_output_jsonschema(),
        "state_schema": graph.get_output_jsonschema(),
        # Runs are configured by their context; Context fields sent in `configurable` are
        # read too, which is what this config schema says.
        "config_schema": {
            "title": f"{graph_id}_config",
            "type": "object",
            "properties": {"configurable": context},
        },
        "context_schema": context,
    }


@router.get("/{assistant_id}/schemas", responses=errors(404))
async def get_assistant_schemas(assistant_id: str, owner: Owner) -> dict[str, Any]:
    strategy = resolve_assistant(assistant_id)
    return schemas_json(strategy.name, compile_strategy(strategy.name))


@router.get("/{assistant_id}/subgraphs", responses=errors(404))
@router.get("/{assistant_id}/subgraphs/{namespace}", responses=errors(404))
async def get_assistant_subgraphs(
    assistant_id: str, owner: Owner, namespace: str | None = None, recurse: bool = False
) -> dict[str, Any]:
    """The schemas of the strategy's subgraphs, by namespace (adaptive runs the others)."""
    strategy = resolve_assistant(assistant_id)
    graph = compile_strategy(strategy.name)
    return {
        name: schemas_json(strategy.name, subgraph)
        async for name, subgraph in graph.aget_subgraphs(namespace=namespace, recurse=recurse)
    }
