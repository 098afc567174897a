"""HTTP test servers: in-process uvicorn on free loopback ports, each with its own data dir."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from reflexrag.providers.settings import Settings
from reflexrag.server.app import create_app
from tests.conftest import REPO, free_port


@asynccontextmanager
async def running_server(data_dir: Path, **settings: object) -> AsyncIterator[str]:
    app = create_app(Settings(data_dir=data_dir, **settings))
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
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


@pytest.fixture(scope="module")
async def base_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    async with running_server(
        tmp_path_factory.mktemp("service"), max_body_bytes=20_000, max_upload_bytes=50_000
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
    environment = {**os.environ, "REFLEXRAG_DATA_DIR": str(data_dir), **env}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reflexrag.server.cli",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {process.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not start within 90 s")
