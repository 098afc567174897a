"""Turn graph state, updates and stream chunks into plain JSON (LangGraph Server's shapes)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langgraph.types import Interrupt, StateSnapshot
from pydantic import BaseModel


def jsonable(value: Any) -> Any:
    """Recursively convert documents, messages, interrupts and dataclasses to JSON values."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Document):
        return {
            "id": value.id,
            "page_content": value.page_content,
            "metadata": jsonable(value.metadata),
            "type": "Document",
        }
    if isinstance(value, BaseMessage):
        return jsonable(value.model_dump())
    if isinstance(value, Interrupt):
        return {"value": jsonable(value.value), "id": value.id}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def dumps(value: Any) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))


def checkpoint_ref(config: dict[str, Any] | None, thread_id: str) -> dict[str, Any] | None:
    """A checkpoint's reference as the API shows it, under the thread's public id."""
    if not config:
        return None
    configurable = config.get("configurable", {})
    return {
        "thread_id": thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


def thread_state(snapshot: StateSnapshot, thread_id: str) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` of thread ``thread_id`` as the API's ``ThreadState``
    (with the flat ``checkpoint_id`` / ``parent_checkpoint_id`` LangGraph Server still sends)."""
    checkpoint = checkpoint_ref(snapshot.config, thread_id)
    parent = checkpoint_ref(snapshot.parent_config, thread_id)
    return {
        "values": jsonable(snapshot.values),
        "next": list(snapshot.next),
        "checkpoint": checkpoint,
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "metadata": jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": parent,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "error": None if task.error is None else repr(task.error),
                "interrupts": jsonable(task.interrupts),
                "checkpoint": None,
                "state": None,
                "result": jsonable(task.result),
            }
            for task in snapshot.tasks
        ],
        "interrupts": jsonable(snapshot.interrupts),
    }
