"""Shared test setup: an isolated data dir per session and the shared rag-eval fixture."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflexrag.benchmarks.services import (  # noqa: F401 - free_port is re-exported to tests
    free_port,
    new_database,
    postgres_tool,
    private_postgres,
)

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LANGSMITH_TRACING", "false")
# A plain ``ask`` would leave a server running for the next one: tests that want one say so.
os.environ["REFLEXRAG_KEEP_ALIVE_S"] = "0"

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


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private Postgres cluster on a loopback port for the session (skips without initdb)."""
    if not (postgres_tool("initdb") and postgres_tool("pg_ctl")):
        pytest.skip("initdb/pg_ctl not installed")
    with private_postgres() as url:
        yield url


@pytest.fixture
def fresh_database(postgres_url: str) -> str:
    """An empty database of its own in the session's cluster."""
    return new_database(postgres_url, f"test_{uuid.uuid4().hex[:12]}")
