"""The HTTP service: the subset of the LangGraph Server API that ``langgraph-sdk`` uses.

One assistant per strategy (``assistant_id`` = the strategy name or a stable UUID), threads
checkpointed in SQLite (or Postgres), runs streamed as Server-Sent Events in LangGraph's format,
``interrupt()`` resumed with ``command: {"resume": ...}``, plus reflexrag's knowledge-base routes.
Every client mistake gets a 4xx with a JSON ``detail``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, fields
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request, UploadFile
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, ValidationError, field_validator
from starlette.datastructures import UploadFile as StarletteUploadFile

from graphs import STRATEGIES, Strategy, compile_strategy
from providers.checkpointer import open_checkpointers
from providers.knowledge_base import (
    KnowledgeBaseError,
    SourceDocument,
    get_knowledge_base,
    list_knowledge_bases,
    validate_kb_name,
)
from providers.loaders import ensure_sample_kb, load_path, load_sources
from providers.settings import Settings, get_settings
from server.run_manager import STREAM_MODES, ActiveRun, RunConflictError, RunManager, RunSpec
from server.serialize import dumps, jsonable, thread_state
from server.store import ServiceStore
from state import Context

VERSION = "0.1.0"
_ASSISTANT_NAMESPACE = uuid.UUID("0b9c5a55-8a5e-4f4e-9d6b-2f4f1c3b7a10")
_EPOCH = "2026-01-01T00:00:00+00:00"
_OPEN_PATHS = {"/ok", "/docs", "/openapi.json", "/redoc"}


# ---------------------------------------------------------------- request bodies


class RunCreate(BaseModel):
    assistant_id: str
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: str | list[str] = Field(default="values", validate_default=True)
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None
    multitask_strategy: Literal["reject", "interrupt", "enqueue"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "cancel"
    on_completion: Literal["delete", "keep"] | None = None
    if_not_exists: Literal["reject", "create"] = "reject"
    stream_subgraphs: bool = False
    model_config = {"extra": "allow"}  # SDK fields we accept and ignore (webhook, feedback_keys…)

    @field_validator("stream_mode")
    @classmethod
    def known_modes(cls, value: str | list[str]) -> list[str]:
        modes = [value] if isinstance(value, str) else list(value)
        unknown = [mode for mode in modes if mode not in STREAM_MODES]
        if unknown:
            raise ValueError(f"unsupported stream_mode {unknown}; use {sorted(STREAM_MODES)}")
        return modes or ["values"]

    @field_validator("command")
    @classmethod
    def known_command(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not set(value) <= {"resume", "goto", "update"}:
            raise ValueError("command takes 'resume', 'goto' or 'update'")
        return value


class ThreadCreate(BaseModel):
    thread_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    model_config = {"extra": "allow"}


class ThreadSearch(BaseModel):
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    model_config = {"extra": "allow"}


class AssistantSearch(BaseModel):
    graph_id: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    model_config = {"extra": "allow"}


class HistoryRequest(BaseModel):
    limit: int = Field(default=10, ge=1, le=1000)
    before: str | dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    model_config = {"extra": "allow"}


class CheckpointRequest(BaseModel):
    checkpoint: dict[str, Any]
    model_config = {"extra": "allow"}


class DocumentIn(BaseModel):
    text: str = Field(min_length=1)
    doc_id: str | None = None
    title: str | None = None
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)


class DocumentsIn(BaseModel):
    documents: list[DocumentIn] = Field(default_factory=list)
    urls: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- helpers


def assistant_json(strategy: Strategy) -> dict[str, Any]:
    return {
        "assistant_id": str(uuid.uuid5(_ASSISTANT_NAMESPACE, strategy.name)),
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


def build_context(body: RunCreate) -> Context:
    """The run's context from ``context`` plus any Context fields sent in ``configurable``."""
    known = {f.name for f in fields(Context)}
    configurable = (body.config or {}).get("configurable") or {}
    overrides = {k: v for k, v in configurable.items() if k in known}
    overrides.update(body.context or {})
    try:
        return Context.from_overrides(overrides)
    except (TypeError, ValueError) as exc:
        raise HTTPException(422, f"invalid context: {exc}") from None


def validate_input(body: RunCreate) -> None:
    if body.input is not None and body.command is not None:
        raise HTTPException(422, "send either input or command, not both")
    if body.input is not None:
        question = body.input.get("question")
        if not isinstance(question, str) or not question.strip():
            raise HTTPException(422, "input.question must be a non-empty string")


def checkpoint_id_of(body: RunCreate) -> str | None:
    return body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")


async def authenticate(request: Request) -> str:
    """The caller's owner id: a hash of its API key ("" when the service has no keys)."""
    keys = request.app.state.settings.api_keys
    if not keys:
        return ""
    given = request.headers.get("x-api-key") or ""
    if not any(hmac.compare_digest(given, key) for key in keys):
        raise HTTPException(401, "missing or invalid API key (send it as x-api-key)")
    return hashlib.sha256(given.encode()).hexdigest()[:16]


Owner = Annotated[str, Depends(authenticate)]


class BodySizeLimit:
    """Reject request bodies over the configured size with 413 before reading them all."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path: str = scope.get("path", "")
        limit = (
            self.settings.max_upload_bytes
            if path.startswith("/kb/")
            else self.settings.max_body_bytes
        )
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await self._reject(send, limit)
        seen = 0

        async def counted_receive() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"request body over {limit} bytes")
            return message

        return await self.app(scope, counted_receive, send)

    async def _reject(self, send: Any, limit: int) -> None:
        response = JSONResponse({"detail": f"request body over {limit} bytes"}, status_code=413)
        await response({"type": "http"}, None, send)


# ---------------------------------------------------------------- the app


STATIC_DIR = Path(__file__).parent / "static"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service. ``settings`` governs the service's own state (auth, limits, the thread
    table, checkpoints); knowledge bases and models are read by the graphs from the process
    settings, which is the same object unless a caller (a test) passes another."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Warm up before the first request: seed the default KB and load the embedding model.
        await asyncio.to_thread(ensure_sample_kb, settings.default_kb)
        store = await ServiceStore.open(settings.data_dir / "service.sqlite")
        await store.recover_after_restart()
        async with open_checkpointers(settings) as checkpointers:
            app.state.store = store
            app.state.checkpointer = checkpointers.shared
            app.state.runs = RunManager(store, checkpointers)
            try:
                yield
            finally:
                for active in list(app.state.runs.active.values()):
                    await app.state.runs.cancel(active, wait=True)
                await store.close()

    app = FastAPI(
        title="reflexrag",
        version=VERSION,
        description="Self-correcting RAG strategies behind the LangGraph Server API.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=origins, allow_methods=["*"], allow_headers=["*"]
        )
    app.add_middleware(BodySizeLimit, settings=settings)

    @app.exception_handler(KnowledgeBaseError)
    async def kb_error(request: Request, exc: KnowledgeBaseError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(RunConflictError)
    async def conflict(request: Request, exc: RunConflictError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    register_routes(app)
    # The page at / is a reference client of the API above; its files ship in the package.
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    return app


def register_routes(app: FastAPI) -> None:
    def store(request: Request) -> ServiceStore:
        return request.app.state.store

    def runs(request: Request) -> RunManager:
        return request.app.state.runs

    async def owned_thread(request: Request, thread_id: str, owner: str) -> dict[str, Any]:
        thread = await store(request).get_thread(thread_id, owner)
        if thread is None:
            raise HTTPException(404, f"thread {thread_id} not found")
        return thread

    async def snapshot_of(
        request: Request, thread: dict[str, Any], checkpoint_id: str | None = None
    ):
        if not thread["graph_id"]:
            return None
        graph = compile_strategy(thread["graph_id"], request.app.state.checkpointer)
        configurable = {"thread_id": thread["thread_id"]}
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        return await graph.aget_state({"configurable": configurable})

    async def thread_json(request: Request, thread: dict[str, Any]) -> dict[str, Any]:
        snapshot = await snapshot_of(request, thread)
        interrupts: dict[str, list[Any]] = {}
        values: dict[str, Any] = {}
        if snapshot is not None:
            values = jsonable(snapshot.values)
            for task in snapshot.tasks:
                if task.interrupts:
                    interrupts[task.id] = jsonable(task.interrupts)
        return {
            **{k: v for k, v in thread.items() if k != "graph_id"},
            "values": values,
            "interrupts": interrupts,
        }

    # -- service

    @app.get("/ok")
    async def ok() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/info")
    async def info(owner: Owner) -> dict[str, Any]:
        return {
            "version": VERSION,
            "flags": {"assistants": True, "crons": False, "langsmith": False},
            "strategies": list(STRATEGIES),
            "default_kb": get_settings().default_kb,
        }

    # -- assistants

    @app.post("/assistants/search")
    async def search_assistants(body: AssistantSearch, owner: Owner) -> list[dict[str, Any]]:
        found = [assistant_json(s) for s in STRATEGIES.values() if body.graph_id in (None, s.name)]
        return found[body.offset : body.offset + body.limit]

    @app.get("/assistants/{assistant_id}")
    async def get_assistant(assistant_id: str, owner: Owner) -> dict[str, Any]:
        return assistant_json(resolve_assistant(assistant_id))

    @app.get("/assistants/{assistant_id}/graph")
    async def get_assistant_graph(assistant_id: str, owner: Owner) -> dict[str, Any]:
        strategy = resolve_assistant(assistant_id)
        return compile_strategy(strategy.name).get_graph().to_json()

    @app.get("/assistants/{assistant_id}/schemas")
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

    # -- threads

    @app.post("/threads")
    async def create_thread(request: Request, body: ThreadCreate, owner: Owner) -> dict[str, Any]:
        if body.thread_id:
            try:
                uuid.UUID(body.thread_id)
            except ValueError:
                raise HTTPException(422, "thread_id must be a UUID") from None
            existing = await store(request).get_thread(body.thread_id, owner)
            if existing is not None:
                if body.if_exists == "do_nothing":
                    return await thread_json(request, existing)
                raise HTTPException(409, f"thread {body.thread_id} already exists")
            if await store(request).thread_exists(body.thread_id):
                raise HTTPException(409, f"thread {body.thread_id} already exists")
        thread = await store(request).create_thread(owner, body.metadata, body.thread_id)
        return await thread_json(request, thread)

    @app.post("/threads/search")
    async def search_threads(request: Request, body: ThreadSearch, owner: Owner) -> list[Any]:
        found = await store(request).search_threads(
            owner, body.metadata, body.status, body.limit, body.offset
        )
        return [await thread_json(request, thread) for thread in found]

    @app.get("/threads/{thread_id}")
    async def get_thread(request: Request, thread_id: str, owner: Owner) -> dict[str, Any]:
        return await thread_json(request, await owned_thread(request, thread_id, owner))

    @app.delete("/threads/{thread_id}", status_code=204)
    async def delete_thread(request: Request, thread_id: str, owner: Owner) -> Response:
        await owned_thread(request, thread_id, owner)
        if (active := runs(request).busy(thread_id)) is not None:
            await runs(request).cancel(active, wait=True)
        await request.app.state.checkpointer.adelete_thread(thread_id)
        await store(request).delete_thread(thread_id)
        return Response(status_code=204)

    @app.get("/threads/{thread_id}/state")
    async def get_state(request: Request, thread_id: str, owner: Owner) -> dict[str, Any]:
        return await state_json(request, thread_id, owner, None)

    @app.get("/threads/{thread_id}/state/{checkpoint_id}")
    async def get_state_at(
        request: Request, thread_id: str, checkpoint_id: str, owner: Owner
    ) -> dict[str, Any]:
        return await state_json(request, thread_id, owner, checkpoint_id)

    @app.post("/threads/{thread_id}/state/checkpoint")
    async def post_state_at(
        request: Request, thread_id: str, body: CheckpointRequest, owner: Owner
    ) -> dict[str, Any]:
        return await state_json(request, thread_id, owner, body.checkpoint.get("checkpoint_id"))

    async def state_json(
        request: Request, thread_id: str, owner: str, checkpoint_id: str | None
    ) -> dict[str, Any]:
        thread = await owned_thread(request, thread_id, owner)
        snapshot = await snapshot_of(request, thread, checkpoint_id)
        if snapshot is None or (checkpoint_id and snapshot.config is None):
            if checkpoint_id:
                raise HTTPException(404, f"checkpoint {checkpoint_id} not found")
            return {
                "values": {},
                "next": [],
                "checkpoint": None,
                "metadata": {},
                "created_at": None,
                "parent_checkpoint": None,
                "tasks": [],
                "interrupts": [],
            }
        return thread_state(snapshot)

    @app.post("/threads/{thread_id}/history")
    async def post_history(
        request: Request, thread_id: str, body: HistoryRequest, owner: Owner
    ) -> list[dict[str, Any]]:
        return await history_json(request, thread_id, owner, body)

    @app.get("/threads/{thread_id}/history")
    async def get_history(
        request: Request, thread_id: str, owner: Owner, limit: int = Query(10, ge=1, le=1000)
    ) -> list[dict[str, Any]]:
        return await history_json(request, thread_id, owner, HistoryRequest(limit=limit))

    async def history_json(
        request: Request, thread_id: str, owner: str, body: HistoryRequest
    ) -> list[dict[str, Any]]:
        thread = await owned_thread(request, thread_id, owner)
        if not thread["graph_id"]:
            return []
        graph = compile_strategy(thread["graph_id"], request.app.state.checkpointer)
        before = body.before
        if isinstance(before, str):
            before = {"configurable": {"checkpoint_id": before}}
        elif isinstance(before, dict):
            before = {"configurable": {"checkpoint_id": before.get("checkpoint_id")}}
        configurable = {"thread_id": thread_id, **(body.checkpoint or {})}
        return [
            thread_state(snapshot)
            async for snapshot in graph.aget_state_history(
                {"configurable": configurable}, limit=body.limit, before=before
            )
        ]

    # -- runs

    async def start_run(
        request: Request, owner: str, body: RunCreate, thread_id: str | None
    ) -> ActiveRun:
        strategy = resolve_assistant(body.assistant_id)
        validate_input(body)
        context = build_context(body)
        temporary = thread_id is None
        if temporary:
            thread = await store(request).create_thread(owner, {"stateless": True})
            thread_id = thread["thread_id"]
        elif await store(request).get_thread(thread_id, owner) is None:
            if body.if_not_exists != "create" or await store(request).thread_exists(thread_id):
                raise HTTPException(404, f"thread {thread_id} not found")
            await store(request).create_thread(owner, {}, thread_id)
        recursion_limit = (body.config or {}).get("recursion_limit")
        spec = RunSpec(
            thread_id=thread_id,
            graph_id=strategy.name,
            owner=owner,
            input=body.input,
            command=body.command,
            context=context,
            stream_modes=body.stream_mode,  # validated into a list
            checkpoint_id=checkpoint_id_of(body),
            recursion_limit=recursion_limit if isinstance(recursion_limit, int) else None,
            metadata=body.metadata or {},
            multitask_strategy=body.multitask_strategy,
            delete_thread_after=temporary and body.on_completion != "keep",
            stream_subgraphs=body.stream_subgraphs,
        )
        return await runs(request).start(spec)

    async def request_cancel(active: ActiveRun) -> None:
        if active.task is not None:
            active.task.cancel()

    def sse_response(active: ActiveRun, on_disconnect: str) -> StreamingResponse:
        async def frames() -> AsyncIterator[str]:
            try:
                async for event, data in active.subscribe():
                    yield f"event: {event}\ndata: {dumps(data)}\n\n"
            finally:
                # The client went away (or the stream ended): stop the run if asked to; it
                # stays resumable from its last checkpoint.
                if on_disconnect == "cancel" and not active.finished.is_set():
                    await request_cancel(active)

        location = f"/threads/{active.spec.thread_id}/runs/{active.run_id}"
        return StreamingResponse(
            frames(),
            media_type="text/event-stream",
            headers={"Content-Location": location, "Cache-Control": "no-store"},
        )

    def wait_result(active: ActiveRun) -> dict[str, Any]:
        if active.error:
            return {"__error__": active.error}
        return active.final_values or {}

    @app.post("/threads/{thread_id}/runs/stream")
    async def stream_thread_run(
        request: Request, thread_id: str, body: RunCreate, owner: Owner
    ) -> StreamingResponse:
        active = await start_run(request, owner, body, thread_id)
        return sse_response(active, body.on_disconnect)

    @app.post("/runs/stream")
    async def stream_stateless_run(
        request: Request, body: RunCreate, owner: Owner
    ) -> StreamingResponse:
        active = await start_run(request, owner, body, None)
        return sse_response(active, body.on_disconnect)

    @app.post("/threads/{thread_id}/runs/wait")
    async def wait_thread_run(
        request: Request, thread_id: str, body: RunCreate, owner: Owner
    ) -> dict[str, Any]:
        active = await start_run(request, owner, body, thread_id)
        await active.finished.wait()
        return wait_result(active)

    @app.post("/runs/wait")
    async def wait_stateless_run(request: Request, body: RunCreate, owner: Owner) -> dict:
        active = await start_run(request, owner, body, None)
        await active.finished.wait()
        return wait_result(active)

    @app.post("/threads/{thread_id}/runs")
    async def create_background_run(
        request: Request, thread_id: str, body: RunCreate, owner: Owner
    ) -> JSONResponse:
        active = await start_run(request, owner, body, thread_id)
        location = f"/threads/{thread_id}/runs/{active.run_id}"
        return JSONResponse(active.run, headers={"Content-Location": location})

    @app.get("/threads/{thread_id}/runs")
    async def list_runs(
        request: Request, thread_id: str, owner: Owner, limit: int = Query(10, ge=1, le=1000)
    ) -> list[dict[str, Any]]:
        await owned_thread(request, thread_id, owner)
        return await store(request).list_runs(thread_id, owner, limit)

    async def owned_run(request: Request, thread_id: str, run_id: str, owner: str) -> dict:
        run = await store(request).get_run(run_id, owner)
        if run is None or run["thread_id"] != thread_id:
            raise HTTPException(404, f"run {run_id} not found")
        return run

    @app.get("/threads/{thread_id}/runs/{run_id}")
    async def get_run(request: Request, thread_id: str, run_id: str, owner: Owner) -> dict:
        return await owned_run(request, thread_id, run_id, owner)

    @app.get("/threads/{thread_id}/runs/{run_id}/join")
    async def join_run(request: Request, thread_id: str, run_id: str, owner: Owner) -> dict:
        await owned_run(request, thread_id, run_id, owner)
        active = runs(request).active.get(run_id)
        if active is not None:
            await active.finished.wait()
            return wait_result(active)
        thread = await owned_thread(request, thread_id, owner)
        snapshot = await snapshot_of(request, thread)
        return jsonable(snapshot.values) if snapshot else {}

    @app.get("/threads/{thread_id}/runs/{run_id}/stream")
    async def join_run_stream(
        request: Request, thread_id: str, run_id: str, owner: Owner
    ) -> StreamingResponse:
        await owned_run(request, thread_id, run_id, owner)
        active = runs(request).active.get(run_id)
        if active is None:
            raise HTTPException(404, f"run {run_id} is no longer streaming")
        return sse_response(active, "continue")

    @app.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202)
    async def cancel_run(
        request: Request,
        thread_id: str,
        run_id: str,
        owner: Owner,
        wait: bool = False,
        action: Literal["interrupt", "rollback"] = "interrupt",
    ) -> dict[str, Any]:
        await owned_run(request, thread_id, run_id, owner)
        if action == "rollback":
            raise HTTPException(422, "action 'rollback' is not supported; use 'interrupt'")
        active = runs(request).active.get(run_id)
        if active is not None:
            await runs(request).cancel(active, wait)
        return await owned_run(request, thread_id, run_id, owner)

    # -- knowledge bases

    def kb_summary(name: str) -> dict[str, Any]:
        kb = get_knowledge_base(name)
        return {"name": name, "documents": kb.document_count(), "chunks": kb.count()}

    @app.get("/kb")
    async def list_kbs(owner: Owner) -> list[str]:
        return await asyncio.to_thread(list_knowledge_bases)

    @app.get("/kb/{name}")
    async def get_kb(name: str, owner: Owner) -> dict[str, Any]:
        validate_kb_name(name)
        if name not in await asyncio.to_thread(list_knowledge_bases):
            raise HTTPException(404, f"knowledge base {name!r} not found")
        return await asyncio.to_thread(kb_summary, name)

    @app.post(
        "/kb/{name}/documents",
        openapi_extra={
            "requestBody": {
                "content": {
                    "application/json": {"schema": DocumentsIn.model_json_schema()},
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {"file": {"type": "string", "format": "binary"}},
                        }
                    },
                }
            }
        },
    )
    async def add_documents(request: Request, name: str, owner: Owner) -> dict[str, Any]:
        """JSON ``{"documents": [...], "urls": [...]}``, or a multipart upload of one file."""
        validate_kb_name(name)
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            upload = (await request.form()).get("file")
            if not isinstance(upload, StarletteUploadFile):
                raise HTTPException(422, "send the file in a multipart field named 'file'")
            return await ingest(name, await uploaded_documents(upload))
        try:
            body = DocumentsIn.model_validate_json(await request.body())
        except ValidationError as exc:
            raise HTTPException(422, exc.errors(include_url=False, include_context=False)) from None
        if not body.documents and not body.urls:
            raise HTTPException(422, "send documents and/or urls")
        allow_private = request.app.state.settings.allow_private_urls
        documents = [
            SourceDocument(
                doc.doc_id or f"api-{hashlib.sha1(doc.text.encode()).hexdigest()[:12]}",
                doc.text,
                {**doc.metadata, "title": doc.title or doc.doc_id or doc.text[:60]},
            )
            for doc in body.documents
        ]
        documents += await asyncio.to_thread(load_sources, body.urls, allow_private)
        return await ingest(name, documents)

    @app.post("/kb/{name}/files")
    async def upload_file(name: str, file: UploadFile, owner: Owner) -> dict[str, Any]:
        """The same as a multipart POST to ``/kb/{name}/documents``."""
        validate_kb_name(name)
        return await ingest(name, await uploaded_documents(file))

    async def uploaded_documents(file: StarletteUploadFile) -> list[SourceDocument]:
        suffix = Path(file.filename or "upload.txt").suffix
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{Path(file.filename or 'upload').stem}{suffix}"
            path.write_bytes(await file.read())
            documents = await asyncio.to_thread(load_path, path)
        # Ids from the upload's name, not the temporary path, so re-uploading is idempotent.
        return [
            SourceDocument(
                doc.doc_id if suffix == ".jsonl" else f"upload:{file.filename}",
                doc.text,
                {**doc.metadata, "source": file.filename},
            )
            for doc in documents
        ]

    async def ingest(name: str, documents: list[SourceDocument]) -> dict[str, Any]:
        kb = await asyncio.to_thread(get_knowledge_base, name)
        report = await asyncio.to_thread(kb.add, documents)
        return {"kb": name, **asdict(report), "chunks": await asyncio.to_thread(kb.count)}
