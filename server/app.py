"""The HTTP service: the subset of the LangGraph Server API that ``langgraph-sdk`` uses.

One assistant per strategy (``assistant_id`` = the strategy name or a stable UUID), threads
checkpointed in SQLite (or Postgres), runs streamed as Server-Sent Events in LangGraph's format,
``interrupt()`` resumed with ``command: {"resume": ...}``, plus reflexrag's knowledge-base routes
(one router per resource in :mod:`server.routes`). Every client mistake gets a 4xx with a JSON
``detail``; state-changing requests must be JSON (or a multipart upload) and, from a browser,
come from the service's own origin or one allowed by ``REFLEXRAG_CORS_ORIGINS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from reflexrag.providers.checkpointer import Checkpointers, open_checkpointers
from reflexrag.providers.database import async_postgres_pool, database_errors
from reflexrag.providers.knowledge_base import (
    IngestLimitError,
    KnowledgeBaseError,
    StoreUnavailableError,
    knowledge_base_writer,
    list_knowledge_bases,
)
from reflexrag.providers.loaders import ensure_sample_kb
from reflexrag.providers.settings import Settings, get_settings
from reflexrag.providers.text import reason_of
from reflexrag.server.routes import assistants, crons, knowledge_bases, runs, system, threads
from reflexrag.server.routes import store as store_api
from reflexrag.server.routes.system import VERSION
from reflexrag.server.run_manager import RunConflictError, RunManager
from reflexrag.server.run_queue import RunQueue
from reflexrag.server.store import ServiceStore, StoredTextError

log = logging.getLogger("reflexrag.server")
STATIC_DIR = Path(__file__).parent / "static"
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
_BODY_TYPES = ("application/json", "multipart/form-data")


async def _reply(send: Any, status: int, detail: str) -> None:
    response = JSONResponse({"detail": detail}, status_code=status)
    await response({"type": "http"}, None, send)


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
            return await _reply(send, 413, f"request body over {limit} bytes")
        seen = 0

        async def counted_receive() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"request body over {limit} bytes")
            return message

        return await self.app(scope, counted_receive, send)


class BrowserRequestGuard:
    """Cross-site request forgery guard for state-changing requests.

    A page on another origin can make a browser send a "simple" POST (``text/plain``,
    ``no-cors``) that needs no preflight. Such requests are refused: a body must be JSON (or
    a multipart upload), and a request carrying an ``Origin`` must come from this service's
    own origin or one listed in ``cors_origins``. Clients outside browsers send no
    ``Origin`` and are unaffected."""

    def __init__(self, app: Any, allowed_origins: list[str]) -> None:
        self.app = app
        self.allowed = set(allowed_origins)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in _SAFE_METHODS:
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
        if origin is not None and origin != own and origin not in self.allowed:
            return await _reply(
                send,
                403,
                f"cross-origin request from {origin} refused; allow the origin with "
                "REFLEXRAG_CORS_ORIGINS",
            )
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if has_body and content_type not in _BODY_TYPES:
            return await _reply(
                send,
                415,
                f"unsupported content type {content_type or '(none)'!r}: send application/json"
                " (or multipart/form-data for uploads)",
            )
        return await self.app(scope, receive, send)


async def _open_service_state(
    settings: Settings, checkpointers: Checkpointers, stack: contextlib.AsyncExitStack
) -> tuple[ServiceStore, RunManager | RunQueue]:
    """Threads, runs and their executor: SQLite and in-process tasks for one process, or
    Postgres and a run queue that every replica shares."""
    if not settings.distributed:
        store = await ServiceStore.open(settings.data_dir / "service.sqlite")
        stack.push_async_callback(store.close)
        await store.recover_after_restart()
        return store, RunManager(store, checkpointers)
    pool = await stack.enter_async_context(async_postgres_pool(settings.database_url))
    store = await ServiceStore.open_postgres(pool)
    queue = await RunQueue.open(
        store, checkpointers, settings.database_url, settings.run_lease_s, settings.worker_slots
    )
    return store, queue


async def run_worker(settings: Settings) -> None:
    """Execute runs from the shared queue until SIGINT or SIGTERM (``reflexrag worker``): a
    replica without HTTP. Stopped, it hands the runs it holds to the other workers."""
    async with contextlib.AsyncExitStack() as stack:
        checkpointers = await stack.enter_async_context(open_checkpointers(settings))
        _, queue = await _open_service_state(settings, checkpointers, stack)
        stop = asyncio.Event()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signal_number, stop.set)
        log.warning("worker %s: up to %d runs at once", queue.worker_id, settings.worker_slots)
        try:
            await stop.wait()
        finally:
            await queue.close()


def dependency_errors() -> tuple[type[Exception], ...]:
    """What a down dependency raises: the Chroma server (connection refused, timed out), and
    Postgres (a closed connection, a pool with none to give) when its driver is installed."""
    import httpx

    return (StoreUnavailableError, httpx.TransportError, *database_errors())


WARM_UP_QUESTION = "What is Self-RAG?"
"""One the bundled sample documents answer, so that the warm-up reaches every node."""


async def _seed_and_warm_up(settings: Settings, checkpointer: Any, seed: bool = True) -> None:
    """Seed the default knowledge base if it is empty; then, with ``warm_up``, answer one
    question on it with the local backends, unrecorded (its checkpoints are deleted), so that
    the first request finds the encoder, the store, the Chinese segmenter and the judges
    loaded. Neither failing stops the server. Without ``seed`` a default knowledge base that
    is not there stays away, and nothing is warmed up."""
    from reflexrag.providers.text import load_segmenter
    from reflexrag.server.runner import run_question
    from reflexrag.state import Context

    default_kb = get_settings().default_kb
    try:
        if seed:
            await asyncio.to_thread(ensure_sample_kb, default_kb)
        elif default_kb not in await asyncio.to_thread(list_knowledge_bases):
            return
        if settings.warm_up:
            await asyncio.to_thread(load_segmenter)
            local = Context(kb=default_kb, judge_backend="local", generator_backend="local")
            thread_id = f"warm-up-{uuid.uuid4()}"
            result = await run_question(
                "self_rag", WARM_UP_QUESTION, local, checkpointer=checkpointer, thread_id=thread_id
            )
            await checkpointer.adelete_thread(thread_id)
            log.info("warmed up: one local run in %.2f s", result.elapsed_s)
    except Exception as exc:  # a store that is down: the first request will say so
        log.warning("start-up seeding or warm-up did not finish: %s", reason_of(exc))


class AsciiJSONResponse(JSONResponse):
    """JSON escaped to ASCII: a field error that echoes the client's input encodes even when
    that input holds a lone surrogate, which UTF-8 cannot (FastAPI's own answer is then a 500)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


def create_app(settings: Settings | None = None, seed_sample_kb: bool = True) -> FastAPI:
    """The service. ``settings`` governs the service's own state (auth, limits, the thread
    table, checkpoints); knowledge bases and models are read by the graphs from the process
    settings, which is the same object unless a caller (a test) passes another. Without
    ``seed_sample_kb`` (a server ``ask`` started, on a data dir whose user may never use the
    default knowledge base) an absent default knowledge base is not made at start-up."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with knowledge_base_writer("a reflexrag server", settings):
            async with contextlib.AsyncExitStack() as stack:
                checkpointers = await stack.enter_async_context(open_checkpointers(settings))
                store, manager = await _open_service_state(settings, checkpointers, stack)
                # The port opens at once; the sample KB is seeded (embedded on a fresh data
                # dir) in the background, and a run that needs it first waits for the same
                # seeding.
                log.info("seeding the default knowledge base in the background if it is empty")
                seeding = asyncio.create_task(
                    _seed_and_warm_up(settings, checkpointers.shared, seed_sample_kb)
                )
                app.state.store = store
                app.state.checkpointer = checkpointers.shared
                app.state.memory = checkpointers.store
                app.state.runs = manager
                scheduler = asyncio.create_task(crons.schedule_crons(app))
                try:
                    yield
                finally:
                    scheduler.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await scheduler
                    await manager.close()
                    # Waited for, not cancelled: a seeding thread would go on writing the
                    # store after the writer lock is released, a warm-up on the checkpointer
                    # after it is closed.
                    with contextlib.suppress(Exception):
                        await seeding

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
    app.add_middleware(BrowserRequestGuard, allowed_origins=origins)
    app.add_middleware(BodySizeLimit, settings=settings)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return AsciiJSONResponse({"detail": jsonable_encoder(exc.errors())}, status_code=422)

    @app.exception_handler(KnowledgeBaseError)
    async def kb_error(request: Request, exc: KnowledgeBaseError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(IngestLimitError)
    async def over_a_cap(request: Request, exc: IngestLimitError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=413)

    @app.exception_handler(StoredTextError)
    async def unstorable(request: Request, exc: StoredTextError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    for unavailable in dependency_errors():

        @app.exception_handler(unavailable)
        async def dependency_down(request: Request, exc: Exception) -> JSONResponse:
            # A store that is down is the service's trouble, not the request's: 503, which
            # clients and load balancers retry, never a 500.
            reason = reason_of(exc)
            return JSONResponse(
                {"detail": f"a service reflexrag depends on is unavailable: {reason}"},
                status_code=503,
                headers={"Retry-After": "5"},
            )

    @app.exception_handler(RunConflictError)
    async def conflict(request: Request, exc: RunConflictError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    for router in (system, assistants, threads, runs, crons, store_api, knowledge_bases):
        app.include_router(router.router)
    # The page at / is a reference client of the API above; its files ship in the package.
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    return app
