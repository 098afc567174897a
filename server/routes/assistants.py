"""Assistants: one per strategy, addressed by its name or a stable UUID."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException

from reflexrag.graphs import STRATEGIES, Strategy, compile_strategy
from reflexrag.server.deps import Owner, errors
from reflexrag.server.schemas import AssistantSearch

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


@router.get("/{assistant_id}", responses=errors(404))
async def get_assistant(assistant_id: str, owner: Owner) -> dict[str, Any]:
    return assistant_json(resolve_assistant(assistant_id))


@router.get("/{assistant_id}/graph", responses=errors(404))
async def get_assistant_graph(assistant_id: str, owner: Owner) -> dict[str, Any]:
    return compile_strategy(resolve_assistant(assistant_id).name).get_graph().to_json()


@router.get("/{assistant_id}/schemas", responses=errors(404))
async def get_assistant_schemas(assistant_id: str, owner: Owner) -> dict[str, Any]:
    strategy = resolve_assistant(assistant_id)
    graph = compile_strategy(strategy.name)
    return {
        "graph_id": strategy.name,
        "input_schema": graph.get_input_jsonschema(),
        "output_schema": graph.get_output_jsonschema(),
        "state_schema": graph.get_output_jsonschema(),
        # Graphs are configured through their context schema, not `configurable`.
        "config_schema": None,
        "context_schema": graph.get_context_jsonschema(),
    }
