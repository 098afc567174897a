"""Shared test setup: an isolated data dir per session and the shared rag-eval fixture."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LANGSMITH_TRACING", "false")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("REFLEXRAG_FIXTURES", REPO.parent / "shared/rag-eval/fixtures"))


@pytest.fixture(scope="session", autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test session writes its knowledge bases, cache and checkpoints to a temp dir."""
    from reflexrag.providers.settings import get_settings

    data_dir = tmp_path_factory.mktemp("reflexrag-data")
    os.environ["REFLEXRAG_DATA_DIR"] = str(data_dir)
    for name in ("JUDGE_BACKEND", "GENERATOR_BACKEND", "EMBEDDINGS", "DEFAULT_KB"):
        os.environ.pop(f"REFLEXRAG_{name}", None)
    get_settings.cache_clear()
    return data_dir


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not (FIXTURES / "qa.jsonl").exists():
        pytest.fail(f"the shared rag-eval fixture is missing at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="session")
def flow_kb(isolated_data_dir):
    """Three one-sentence documents for control-flow tests."""
    from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base

    kb = get_knowledge_base("flow")
    kb.add(
        [
            SourceDocument(
                "tesla", "Nikola Tesla died on 7 January 1943 in New York.", {"title": "Tesla"}
            ),
            SourceDocument(
                "edison", "Thomas Edison founded General Electric.", {"title": "Edison"}
            ),
            SourceDocument("paris", "Paris is the capital of France.", {"title": "Paris"}),
        ]
    )
    return kb


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _postgres_tool(name: str) -> str | None:
    return shutil.which(name) or next(iter(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")), None)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private Postgres cluster on a loopback port for the session (skips without initdb)."""
    initdb, pg_ctl = _postgres_tool("initdb"), _postgres_tool("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("initdb/pg_ctl not installed")
    # Not under pytest's private (0700, root-owned) temp root: the postgres user must reach it.
    folder = Path(tempfile.mkdtemp(prefix="reflexrag-pg-"))
    data, port = folder / "data", free_port()
    run_as: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*run_as, initdb, "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
    subprocess.run(
        [*run_as, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fresh_database(postgres_url: str) -> str:
    """An empty database of its own in the session's cluster."""
    import psycopg

    name = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return postgres_url.rsplit("/", 1)[0] + f"/{name}"
