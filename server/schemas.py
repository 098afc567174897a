"""Request bodies of the HTTP service, validated before any route runs.

Every field a client can get wrong has a type and a bound here, so a mistake is a 422 with
the field's name, never a 500 further in.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, Field, field_validator

from reflexrag.server.run_manager import STREAM_MODES, UNSUPPORTED_STREAM_MODES
from reflexrag.server.store import CRON_FIELDS, CRON_SORT_KEYS
from reflexrag.state.context import MAX_RECURSION_LIMIT

MAX_OFFSET = 1_000_000
MAX_URLS = 20
MAX_DOCUMENTS = 1000


def uuid_or_none(value: str | None) -> str | None:
    """An id a client chose: it must be a UUID, as LangGraph Server's are."""
    if value is not None:
        try:
            uuid.UUID(value)
        except ValueError:
            raise ValueError("must be a UUID") from None
    return value


ChosenId = Annotated[str | None, AfterValidator(uuid_or_none)]


def storable(value: Any) -> Any:
    """JSON that checkpoints and the store can write: both serialise with a library (msgpack,
    orjson) that holds no integer past 64 bits."""
    try:
        orjson.dumps(value)
    except TypeError as exc:
        raise ValueError(f"this cannot be stored: {exc}") from None
    return value


StorableJson = Annotated[dict[str, Any], AfterValidator(storable)]


class ErrorBody(BaseModel):
    """Every 4xx answer: a message (or FastAPI's list of field errors) in ``detail``."""

    detail: str | list[Any]


class CheckpointRef(BaseModel):
    """A checkpoint of the thread named in the URL; a ``thread_id`` here must be that one."""

    thread_id: str | None = None
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    checkpoint_map: dict[str, Any] | None = None


class RunConfig(BaseModel):
    """The part of a LangGraph ``RunnableConfig`` a run may set."""

    recursion_limit: int | None = Field(default=None, ge=1, le=MAX_RECURSION_LIMIT)
    configurable: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    model_config = {"extra": "allow"}


class RunCreate(BaseModel):
    assistant_id: str
    input: StorableJson | None = None
    command: StorableJson | None = None
    config: RunConfig | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: str | list[str] = Field(default="values", validate_default=True)
    checkpoint_id: str | None = None
    checkpoint: CheckpointRef | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "cancel"
    on_completion: Literal["delete", "keep"] | None = None
    if_not_exists: Literal["reject", "create"] = "reject"
    stream_subgraphs: bool = False
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    model_config = {"extra": "allow"}  # SDK fields we accept and ignore (webhook, feedback_keys…)

    @field_validator("stream_mode")
    @classmethod
    def known_modes(cls, value: str | list[str]) -> list[str]:
        modes = [value] if isinstance(value, str) else list(value)
        known = set(STREAM_MODES) | set(UNSUPPORTED_STREAM_MODES)  # the latter: 501 later
        unknown = [mode for mode in modes if mode not in known]
        if unknown:
            raise ValueError(f"unsupported stream_mode {unknown}; use {sorted(STREAM_MODES)}")
        return modes or ["values"]

    @field_validator("command")
    @classmethod
    def known_command(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not set(value) <= {"resume", "goto", "update"}:
            raise ValueError("command takes 'resume', 'goto' or 'update'")
        return value


OnRunCompleted = Literal["delete", "keep"]


def valid_schedule(value: str) -> str:
    from croniter import croniter
    from croniter.croniter import CroniterBadDateError

    if not croniter.is_valid(value):
        raise ValueError(
            "not a cron schedule: five fields (minute hour day month weekday), e.g. "
            "'*/5 * * * *', or six with seconds last"
        )
    try:
        croniter(value).get_next()
    except CroniterBadDateError:
        raise ValueError(f"the schedule {value!r} names no date to come (31 February?)") from None
    return value


def valid_timezone(value: str | None) -> str | None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if value is not None:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
    return value


Schedule = Annotated[str, Field(max_length=200), AfterValidator(valid_schedule)]
TimeZone = Annotated[str | None, Field(max_length=100), AfterValidator(valid_timezone)]


class CronCreate(RunCreate):
    """A run request with a schedule (``crons.create``, ``crons.create_for_thread``)."""

    schedule: Schedule
    end_time: datetime | None = None
    enabled: bool = True
    timezone: TimeZone = None
    on_run_completed: OnRunCompleted | None = None


class CronUpdate(BaseModel):
    """``crons.update``: the fields given replace the cron's; an explicit null end_time
    clears it."""

    schedule: Schedule | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    timezone: TimeZone = None
    on_run_completed: OnRunCompleted | None = None
    input: StorableJson | None = None
    metadata: dict[str, Any] | None = None
    config: RunConfig | None = None
    context: dict[str, Any] | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    stream_mode: str | list[str] | None = None
    stream_subgraphs: bool | None = None
    model_config = {"extra": "allow"}


class CronCount(BaseModel):
    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    model_config = {"extra": "allow"}


class CronSearch(CronCount):
    enabled: bool | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal[CRON_SORT_KEYS] = "created_at"  # type: ignore[valid-type]
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[Literal[CRON_FIELDS]] | None = None  # type: ignore[valid-type]


class ThreadCreate(BaseModel):
    thread_id: ChosenId = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    model_config = {"extra": "allow"}


class ThreadUpdate(BaseModel):
    metadata: dict[str, Any] = Field(default_factory=dict)
    model_config = {"extra": "allow"}


class StateUpdate(BaseModel):
    """``threads.update_state``: write values as if ``as_node`` had returned them."""

    values: Annotated[dict[str, Any] | list[Any] | None, AfterValidator(storable)] = None
    as_node: str | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None
    model_config = {"extra": "allow"}


class ThreadCount(BaseModel):
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    model_config = {"extra": "allow"}


class ThreadSearch(ThreadCount):
    """The filters of a count, and a page of the results."""

    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


class AssistantCount(BaseModel):
    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    model_config = {"extra": "allow"}


class AssistantSearch(AssistantCount):
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


class AssistantUpdate(BaseModel):
    graph_id: str | None = None
    name: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    model_config = {"extra": "allow"}


class AssistantCreate(AssistantUpdate):
    graph_id: str
    assistant_id: ChosenId = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


class AssistantVersionsRequest(BaseModel):
    metadata: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    model_config = {"extra": "allow"}


class AssistantLatest(BaseModel):
    version: int = Field(ge=1, le=2**31 - 1)


class HistoryRequest(BaseModel):
    limit: int = Field(default=10, ge=1, le=1000)
    before: str | CheckpointRef | None = None
    checkpoint: CheckpointRef | None = None
    model_config = {"extra": "allow"}


class CheckpointRequest(BaseModel):
    checkpoint: CheckpointRef
    model_config = {"extra": "allow"}


class DocumentIn(BaseModel):
    text: str = Field(min_length=1)
    doc_id: str | None = Field(default=None, min_length=1, max_length=512)
    title: str | None = Field(default=None, max_length=1000)
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def plain_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not key or key.startswith(("chroma:", "#", "$")) or key in RESERVED_METADATA:
                raise ValueError(f"metadata key {key!r} is empty or reserved")
        return value


RESERVED_METADATA = {"doc_id", "chunk", "chunks", "content_hash", "owner", "kb", "score"}


class DocumentsIn(BaseModel):
    documents: list[DocumentIn] = Field(default_factory=list, max_length=MAX_DOCUMENTS)
    urls: list[str] = Field(
        default_factory=list,
        max_length=MAX_URLS,
        description="http(s) URLs to fetch; local paths are a CLI-only feature.",
    )


Label = Annotated[str, Field(min_length=1, max_length=200, pattern="^[^.\x00]+$")]
"""A namespace label of the store: LangGraph joins labels with '.' and refuses NUL."""
StoreKey = Annotated[str, Field(min_length=1, max_length=1000, pattern="^[^\x00]+$")]
FilterKey = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
"""A value filter's key: what LangGraph's SQL stores accept (a path of names)."""


class StoreDelete(BaseModel):
    namespace: list[Label] = Field(min_length=1, max_length=10)
    key: StoreKey


class StorePut(StoreDelete):
    value: StorableJson
    index: Literal[False] | list[str] | None = None
    ttl: float | None = None


class StoreSearch(BaseModel):
    namespace_prefix: list[Label] = Field(default_factory=list, max_length=10)
    filter: Annotated[dict[FilterKey, Any], AfterValidator(storable)] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    query: str | None = None
    model_config = {"extra": "allow"}


class StoreNamespaces(BaseModel):
    prefix: list[Label] | None = Field(default=None, max_length=10)
    suffix: list[Label] | None = Field(default=None, max_length=10)
    max_depth: int | None = Field(default=None, ge=1, le=10)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
