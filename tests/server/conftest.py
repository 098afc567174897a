"""HTTP test servers: in-process uvicorn on free loopback ports, each with its own data dir."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn

from reflexrag.benchmarks import services
from reflexrag.benchmarks.services import new_database
from reflexrag.providers.settings import Settings
from reflexrag.server.app import create_app
from reflexrag.server.serving import server_config
from tests.conftest import REPO, free_port
from tests.flow import SELF_RAG_FIRST_PASS

SELF_RAG_ANSWERED = ["prepare", *SELF_RAG_FIRST_PASS]
"""The nodes of a self_rag run that answers on its first pass (prepare records no step)."""


@asynccontextmanager
async def running_server(data_dir: Path, **settings: object) -> AsyncIterator[str]:
    config = Settings(data_dir=data_dir, **settings)
    port = free_port()
    server = uvicorn.Server(
        server_config(
            create_app(config),
            "127.0.0.1",
            port,
            config,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    )
    task = asyncio.create_task(server.serve())
    for _ in range(600):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """The service on its embedded default, and with its threads, runs and run queue in
    Postgres (``REFLEXRAG_DATABASE_URL``): the API must not tell them apart."""
    database: dict[str, str] = {}
    if request.param == "postgres":
        cluster = request.getfixturevalue("postgres_url")
        database["database_url"] = new_database(cluster, f"service_{uuid.uuid4().hex[:12]}")
    async with running_server(
        tmp_path_factory.mktemp("service"),
        max_body_bytes=20_000,
        max_upload_bytes=50_000,
        **database,
    ) as url:
        yield url


@pytest.fixture
def slow_nodes():
    """Stretch every judge/KB call so a run is still going when the test acts on it."""
    from reflexrag.providers.settings import get_settings

    settings = get_settings()
    before = settings.test_delay_s
    settings.test_delay_s = 0.4
    yield
    settings.test_delay_s = before


def start_server(data_dir: Path, port: int, **env: str) -> subprocess.Popen:
    """``reflexrag serve`` in a process of its own, run from the repository."""
    return services.start_server(data_dir, port, cwd=REPO, **env)
