"""How the app is served: uvicorn, with a deadline on receiving each request's headers and a
cap on open connections.

uvicorn has no timeout on a request being received: its keep-alive timer is reset by every
byte, so a client that sends its headers a byte at a time (slow loris), or opens a socket and
says nothing, holds a connection for ever. Each connection here must have sent a complete
request head within ``header_timeout_s`` of opening, or of the previous response; a slow body
or a long-running stream is the app's to bound, and is not cut.

A server that ``reflexrag ask`` starts (``serve --for-ask``, see ``discovery``) is wrapped in
two more layers: one that answers only requests carrying its owner's token, and one that tells
how long it has had nothing to do, so that it can stop by itself.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any

import uvicorn
from starlette.responses import JSONResponse

from reflexrag.providers.settings import Settings


class _HeaderDeadline:
    """Mixin for a uvicorn HTTP protocol: close a connection whose next request head has not
    arrived in time. A new request is told by the protocol starting a new request cycle."""

    header_timeout_s = 20.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(  # type: ignore[attr-defined]
            self.header_timeout_s,
            self._expire,
            self.cycle,  # type: ignore[attr-defined]
        )

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, waiting_after: Any) -> None:
        transport = self.transport  # type: ignore[attr-defined]
        if self.cycle is waiting_after and not transport.is_closing():  # type: ignore[attr-defined]
            transport.close()


def http_protocol(header_timeout_s: float) -> type:
    """uvicorn's HTTP protocol (httptools when installed, else h11) with the header deadline."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    return type(
        f"Deadline{base.__name__}",
        (_HeaderDeadline, base),
        {"header_timeout_s": header_timeout_s},
    )


def server_config(
    app: Any, host: str, port: int, settings: Settings, **options: Any
) -> uvicorn.Config:
    """The uvicorn configuration every server of ours runs with (the CLI's and the tests')."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=http_protocol(settings.header_timeout_s),
        limit_concurrency=settings.max_connections,
        **options,
    )


class OwnerOnly:
    """ASGI middleware: an HTTP request without ``token`` in ``header`` is refused (401)."""

    def __init__(self, app: Any, header: str, token: str) -> None:
        self.app = app
        self.header = header.lower().encode()
        self.token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(self.header, b"")
            if not hmac.compare_digest(given, self.token):
                refusal = JSONResponse(
                    {"detail": "this server answers its owner's reflexrag ask only"},
                    status_code=401,
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Activity:
    """ASGI middleware that tells how long its app has had no HTTP request in flight (a
    streamed run is in flight until its stream ends)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.in_flight = 0
        self.since = time.monotonic()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.since = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight."""
        return 0.0 if self.in_flight else time.monotonic() - self.since
