"""Knowledge bases: one Chroma collection each, embedded (``PersistentClient``) under the data dir,
or on a Chroma server (``REFLEXRAG_CHROMA_URL``) that several replicas share.

Documents are split into token-bounded chunks with deterministic ids (``<doc_id>#<n>``), so
re-ingesting an unchanged document adds nothing and a changed one replaces its old chunks.
Embeddings are always computed by :mod:`providers.embeddings`; Chroma's own default
embedding function (which downloads a model) is never used.

The collection is the source of truth; the keyword index (:mod:`providers.lexical`) is kept a
subset of it and repaired from it whenever their chunk counts differ (after a crash, say), and
a document counts as stored only when all of its chunks are, so re-ingesting it after a crash
writes it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import chromadb
import httpx
import numpy as np
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import NotFoundError
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from reflexrag.providers.embeddings import get_embeddings, rescale_cosine
from reflexrag.providers.filters import Condition, chroma_where, post_filter
from reflexrag.providers.lexical import LexicalIndex, reciprocal_rank_fusion
from reflexrag.providers.settings import KB_NAME_RE, Settings, get_settings
from reflexrag.providers.text import split_into_chunks

_COLLECTION_PREFIX = "kb__"
METADATA_TYPES = (str, int, float, bool)
"""Metadata values a vector store keeps (nested objects and lists are left out)."""
RetrievalMode = Literal["vector", "bm25", "hybrid"]
Fusion = Literal["score", "rrf"]
HYBRID_COSINE_WEIGHT = 0.7
WRITE_BATCH = 1000
"""Chunks per write to the vector store (Chroma refuses batches over ~5,461)."""
EMBED_SLICE = 64
"""Chunks per call to the encoder, between progress reports (the encoder batches by 16)."""
VECTOR_INDEX = {"space": "cosine", "max_neighbors": 32, "ef_construction": 400, "ef_search": 400}
"""How a new collection's HNSW graph is built and searched (``benchmarks.vector_index``). With
Chroma's defaults (16 links, ef 100) the graph built from large writes missed the exact
nearest chunk for 6-10 of 912 questions over the five shared corpora in one collection (2,797
chunks), its recall@16 against an exact cosine search was 0.988-0.994, and two builds from the
same vectors agreed on the top 16 for 746-786 of the 912: an eval's retrieval changed from one
run to the next. With these: nearest chunk 911-912 of 912, recall@16 0.9997-1.0000, builds
agreeing on 909-911; the graph takes 1.6x as long to build (0.3 ms a chunk, beside seconds to
embed one) and a query 0.9-1.0 ms instead of 0.8."""


class KnowledgeBaseError(ValueError):
    """A user-facing problem with a knowledge base name or its documents."""


class IngestLimitError(KnowledgeBaseError):
    """An input over one of the configured caps on the work an ingest may cause (HTTP 413)."""


class IngestStoppedError(KnowledgeBaseError):
    """An ingest stopped on request (its client went away, its deadline passed): the
    documents of the batches written before are stored whole, the rest not at all."""

    def __init__(self, report: IngestReport) -> None:
        super().__init__(
            f"the ingest was stopped after storing {len(report.doc_ids)} of its documents"
        )
        self.report = report


class StoreUnavailableError(RuntimeError):
    """The vector store's server cannot be reached (a dependency down: HTTP 503)."""


class StaleKnowledgeBaseError(KnowledgeBaseError):
    """The store no longer holds the collection this copy of a knowledge base reads: another
    process deleted it, or deleted it and made a new one under the same name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"knowledge base {name!r} was deleted while it was read")
        self.name = name


class UnknownKnowledgeBaseError(KnowledgeBaseError):
    """A knowledge base that does not exist was named for reading."""

    def __init__(self, name: str) -> None:
        known = ", ".join(list_knowledge_bases()) or "none yet"
        super().__init__(f"unknown knowledge base {name!r}; known: {known}")
        self.name = name


def validate_kb_name(name: str) -> str:
    if not KB_NAME_RE.match(name or ""):
        raise KnowledgeBaseError(
            f"invalid knowledge base name {name!r}: use 1-63 letters, digits, '-' or '_'"
        )
    return name


def document_heading(metadata: Mapping[str, Any]) -> str:
    """A document's title as read ("Nikola_Tesla" → "Nikola Tesla"), with its byline when it
    has one: "Is Google Search fair? (The Age, October 22, 2023)"."""
    title = str(metadata.get("title") or "").replace("_", " ").strip()
    byline = str(metadata.get("byline") or "").strip()
    if title and byline:
        return f"{title} ({byline})"
    return title or byline


def with_title(title: Any, chunk: str, section: Any = "") -> str:
    """What gets embedded and indexed: a chunk often never names its subject, or who wrote
    it and when; its document's heading (title and byline) and section heading do."""
    parts = (str(part or "").replace("_", " ").strip() for part in (title, section))
    heading = " › ".join(part for part in parts if part)
    return f"{heading}\n{chunk}" if heading else chunk


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class IngestReport:
    """What one ingest call changed."""

    added_documents: int = 0
    replaced_documents: int = 0
    unchanged_documents: int = 0
    added_chunks: int = 0
    doc_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SourceDocument:
    """A whole document before chunking; ``doc_id`` must be stable across re-ingests."""

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    sections: list[tuple[str, str]] = field(default_factory=list)
    """(heading path, text) of a structured document, in order; ``text`` is their join.
    Chunks never straddle two sections and carry their heading as ``section``."""

    def parts(self) -> list[tuple[str, str]]:
        return self.sections or [("", self.text)]


@dataclass
class _WriteBatch:
    """Chunks of several documents, written to the store and the index together."""

    doc_ids: list[str] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)
    """Stored documents whose chunks go before this batch is written."""
    ids: list[str] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)
    titled: list[str] = field(default_factory=list)
    metadatas: list[dict[str, Any]] = field(default_factory=list)

    def queue(self, doc: SourceDocument, digest: str, chunk_tokens: int) -> None:
        pieces = [
            (heading, chunk)
            for heading, body in doc.parts()
            for chunk in split_into_chunks(body, chunk_tokens)
        ]
        base = {k: v for k, v in doc.metadata.items() if isinstance(v, METADATA_TYPES)}
        title = document_heading(doc.metadata)
        self.doc_ids.append(doc.doc_id)
        for n, (heading, chunk) in enumerate(pieces):
            self.ids.append(f"{doc.doc_id}#{n}")
            self.chunks.append(chunk)
            self.titled.append(with_title(title, chunk, heading))
            self.metadatas.append(
                {
                    **base,
                    "doc_id": doc.doc_id,
                    "chunk": n,
                    "chunks": len(pieces),
                    "content_hash": digest,
                    **({"section": heading} if heading else {}),
                }
            )


class KnowledgeBase:
    """A named collection of chunks with vector and keyword search."""

    def __init__(
        self,
        name: str,
        client: Any,
        embeddings: Embeddings,
        lexical_location: Path | str,
        chunk_tokens: int = 250,
        create: bool = True,
        owner: str | None = None,
    ):
        self.name = validate_kb_name(name)
        self._client = client
        self.embeddings = embeddings
        self.chunk_tokens = chunk_tokens
        collection = _COLLECTION_PREFIX + name
        if create:
            # A collection made before VECTOR_INDEX keeps the index it was made with.
            self._collection = client.get_or_create_collection(
                collection,
                embedding_function=None,
                metadata={"owner": owner} if owner else None,
                configuration={"hnsw": VECTOR_INDEX},
            )
        else:
            try:
                self._collection = client.get_collection(collection, embedding_function=None)
            except NotFoundError:
                raise UnknownKnowledgeBaseError(name) from None
        self._write_lock = threading.Lock()
        self._seen_chunks = False
        self.lexical = LexicalIndex(lexical_location, name)
        self.reconcile()

    def is_current(self) -> bool:
        """Whether the store still holds this very collection (a shared store's other users
        may have deleted it, or deleted it and made a new one under the same name)."""
        try:
            current = self._client.get_collection(self._collection.name, embedding_function=None)
        except NotFoundError:
            return False
        return current.id == self._collection.id

    @property
    def owner(self) -> str | None:
        """The API key (hash) that created it over HTTP; None for shared knowledge bases."""
        return (self._collection.metadata or {}).get("owner")

    def count(self) -> int:
        """Number of chunks stored."""
        return self._collection.count()

    def holds_chunks(self) -> bool:
        """Whether any chunk is stored. Once it has seen some, it stops asking until this
        knowledge base removes documents: over HTTP every count is a round trip, and every
        retrieval from the default knowledge base asks (should the sample be added?)."""
        if not self._seen_chunks:
            self._seen_chunks = self.count() > 0
        return self._seen_chunks

    def document_count(self) -> int:
        metadatas = self._collection.get(include=["metadatas"])["metadatas"] or []
        return len({meta.get("doc_id") for meta in metadatas})

    def documents(self) -> list[dict[str, Any]]:
        """Every stored document once: its id, title, source and chunk count, by id."""
        metadatas = self._collection.get(include=["metadatas"])["metadatas"] or []
        found: dict[str, dict[str, Any]] = {}
        for meta in metadatas:
            entry = found.setdefault(
                meta["doc_id"],
                {
                    "doc_id": meta["doc_id"],
                    "title": meta.get("title", ""),
                    "source": meta.get("source", ""),
                    "chunks": 0,
                },
            )
            entry["chunks"] += 1
        return [found[doc_id] for doc_id in sorted(found)]

    def delete_documents(self, doc_ids: Iterable[str]) -> list[str]:
        """Remove these documents (every chunk, and their keyword postings); returns the ids
        that were stored. The keyword index goes first, so it stays a subset of the vectors
        if the process dies midway (``reconcile`` finishes the job on the next open)."""
        wanted = sorted(set(doc_ids))
        with self._write_lock, self.lexical.exclusive():
            stored = [doc_id for doc_id in wanted if self.has_document(doc_id)]
            for doc_id in stored:
                self._remove_document(doc_id)
        return stored

    def has_document(self, doc_id: str) -> bool:
        """Whether a document of this id is stored (one chunk of it is looked up)."""
        return bool(self._collection.get(where={"doc_id": doc_id}, include=[], limit=1)["ids"])

    def reconcile(self) -> int:
        """Make the keyword index hold exactly the stored chunks; returns how many chunks it
        had to index or unindex (0 when the counts agree, the cheap common case)."""
        if self.lexical.chunk_count() == self.count():
            return 0
        with self._write_lock, self.lexical.exclusive():
            return self._reconcile()  # counted again: another writer may have just finished

    def _reconcile(self) -> int:
        if self.lexical.chunk_count() == self.count():
            return 0
        stored = set(self._collection.get(include=[])["ids"])
        indexed = self.lexical.chunk_ids()
        extra = indexed - stored
        self.lexical.remove_chunks(extra)
        missing = sorted(stored - indexed)
        for start in range(0, len(missing), WRITE_BATCH):
            got = self._collection.get(
                ids=missing[start : start + WRITE_BATCH], include=["documents", "metadatas"]
            )
            self.lexical.add(
                {
                    chunk_id: (
                        meta["doc_id"],
                        with_title(document_heading(meta), text, meta.get("section")),
                    )
                    for chunk_id, text, meta in zip(
                        got["ids"], got["documents"], got["metadatas"], strict=True
                    )
                }
            )
        return len(extra) + len(missing)

    def add(
        self,
        documents: Iterable[SourceDocument],
        progress: Callable[[int], None] | None = None,
        planned: Callable[[int], None] | None = None,
        report: IngestReport | None = None,
        max_chunks: int | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> IngestReport:
        """Chunk, embed and store documents; unchanged ones are skipped, changed ones replaced.
        A document id given twice is one document, the last given (as two upserts leave it).
        Over ``max_chunks`` new chunks, nothing is written (:class:`IngestLimitError`).

        Every document is chunked first, so ``planned`` learns how many chunks there are to
        embed, then ``progress`` how many more are embedded, ``EMBED_SLICE`` at a time.
        Chunks of several documents are written together, up to ``WRITE_BATCH`` at a time
        (one store transaction costs far less than one per document), each batch in the order
        that keeps the keyword index a subset of the vector store: unindex and delete what is
        replaced, store, index. ``report`` (filled as batches are stored) tells a caller that
        stops the ingest midway what is already stored. ``stop`` is asked between slices of
        the embedding, which comes before anything of a batch is removed or written: when it
        says so the ingest ends (:class:`IngestStoppedError`) with whole documents stored or
        none of them, and nothing replaced lost."""
        documents = list({doc.doc_id: doc for doc in documents}.values())
        for doc in documents:
            if not doc.doc_id or not doc.text.strip():
                raise KnowledgeBaseError(f"document {doc.doc_id!r} has no id or no text")
        report = report if report is not None else IngestReport()
        with self._write_lock, self.lexical.exclusive():
            self._reconcile()
            batches = self._plan(documents, report)
            chunks = sum(len(batch.ids) for batch in batches)
            if max_chunks is not None and chunks > max_chunks:
                raise IngestLimitError(
                    f"these documents make {chunks} chunks, over the cap of {max_chunks} per "
                    "request (REFLEXRAG_MAX_INGEST_CHUNKS); send fewer at a time"
                )
            if planned:
                planned(chunks)
            for batch in batches:
                vectors = self._embed(batch, progress, stop, report)
                for doc_id in batch.replaces:
                    self._remove_document(doc_id)
                self._store(batch, vectors, report)
        return report

    def _plan(self, documents: list[SourceDocument], report: IngestReport) -> list[_WriteBatch]:
        """The write batches for ``documents``: unchanged ones skipped, each id once a batch."""
        stored = self._stored_hashes([doc.doc_id for doc in documents])
        batches = [_WriteBatch()]
        for doc in documents:
            # What is embedded: a new title or byline re-embeds the document too.
            digest = content_hash(with_title(document_heading(doc.metadata), doc.text))
            if stored.get(doc.doc_id) == digest:
                report.unchanged_documents += 1
                continue
            if doc.doc_id in stored:  # some chunks stored, whole or cut short by a crash
                batches[-1].replaces.append(doc.doc_id)
                report.replaced_documents += 1
            else:
                report.added_documents += 1
            batches[-1].queue(doc, digest, self.chunk_tokens)
            stored[doc.doc_id] = digest
            if len(batches[-1].ids) >= WRITE_BATCH:
                batches.append(_WriteBatch())
        return [batch for batch in batches if batch.ids or batch.replaces]

    def _remove_document(self, doc_id: str) -> None:
        self._seen_chunks = False
        old = self._collection.get(where={"doc_id": doc_id}, include=[])["ids"]
        self.lexical.remove_documents([doc_id])
        for start in range(0, len(old), WRITE_BATCH):
            self._collection.delete(ids=old[start : start + WRITE_BATCH])

    def _embed(
        self,
        batch: _WriteBatch,
        progress: Callable[[int], None] | None,
        stop: Callable[[], bool] | None,
        report: IngestReport,
    ) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(batch.titled), EMBED_SLICE):
            if stop and stop():
                raise IngestStoppedError(report)
            texts = batch.titled[start : start + EMBED_SLICE]
            vectors += self.embeddings.embed_documents(texts)
            if progress:
                progress(len(texts))
        return vectors

    def _store(self, batch: _WriteBatch, vectors: list[list[float]], report: IngestReport) -> None:
        if not batch.ids:
            return
        for start in range(0, len(batch.ids), WRITE_BATCH):
            window = slice(start, start + WRITE_BATCH)
            self._collection.upsert(
                ids=batch.ids[window],
                embeddings=vectors[window],
                documents=batch.chunks[window],
                metadatas=batch.metadatas[window],
            )
        self.lexical.add(
            {
                chunk_id: (meta["doc_id"], text)
                for chunk_id, text, meta in zip(
                    batch.ids, batch.titled, batch.metadatas, strict=True
                )
            }
        )
        report.added_chunks += len(batch.ids)
        report.doc_ids.extend(batch.doc_ids)

    def _stored_hashes(self, doc_ids: list[str]) -> dict[str, str]:
        """Content hashes of the documents stored whole: a document whose chunks were not all
        written (a crash mid-ingest) has none, so the next ingest writes it again."""
        hashes: dict[str, str] = {}
        for start in range(0, len(doc_ids), 200):
            batch = doc_ids[start : start + 200]
            got = self._collection.get(where={"doc_id": {"$in": batch}}, include=["metadatas"])
            seen: Counter[str] = Counter()
            expected: dict[str, int] = {}
            for meta in got["metadatas"] or []:
                seen[meta["doc_id"]] += 1
                hashes[meta["doc_id"]] = meta["content_hash"]
                # Chunks written before the count was recorded: trust what is there.
                expected[meta["doc_id"]] = meta.get("chunks", 0)
            for doc_id, count in seen.items():
                if expected[doc_id] and count != expected[doc_id]:
                    hashes[doc_id] = "incomplete"
        return hashes

    def search(
        self,
        query: str,
        k: int = 4,
        mode: RetrievalMode = "vector",
        filters: Sequence[Condition] = (),
        fusion: Fusion = "score",
        exclude: Collection[str] = (),
    ) -> list[Document]:
        """The ``k`` best chunks for ``query`` by vector similarity, BM25, or both (``hybrid``),
        among chunks whose metadata passes ``filters`` and whose id is not in ``exclude``.

        Hybrid fuses by score (``HYBRID_COSINE_WEIGHT`` × rescaled cosine + the rest × BM25
        relative to the best BM25 hit) or by reciprocal rank (``fusion="rrf"``).
        ``metadata['score']`` is always the cosine similarity."""
        if mode not in ("vector", "bm25", "hybrid"):
            raise KnowledgeBaseError(f"unknown retrieval mode {mode!r}: vector, bm25 or hybrid")
        if fusion not in ("score", "rrf"):
            raise KnowledgeBaseError(f"unknown fusion {fusion!r}: score or rrf")
        vector = self.embeddings.embed_query(query)
        where = chroma_where(list(filters))
        # Conditions Chroma cannot evaluate are applied afterwards, on an over-fetched list.
        afterwards = post_filter(list(filters)) if mode == "vector" else list(filters)
        depth = k * (5 if afterwards else 1) * (4 if mode == "hybrid" else 1) + len(exclude)
        try:
            if mode == "vector":
                found = self._vector_search(vector, depth, where)
            else:
                lexical = self.lexical.search(query, max(depth, 5 * k))
                if mode == "bm25":
                    found = self._fetch([chunk_id for chunk_id, _ in lexical], vector)
                else:
                    dense = self._vector_search(vector, depth, where)
                    found = self._fuse(dense, lexical, vector, fusion)
        except NotFoundError:
            raise StaleKnowledgeBaseError(self.name) from None
        kept = [
            doc
            for doc in found
            if doc.id not in exclude and all(c.matches(doc.metadata) for c in afterwards)
        ]
        return kept[:k]

    def _fuse(
        self,
        dense: list[Document],
        lexical: list[tuple[str, float]],
        vector: list[float],
        fusion: Fusion,
    ) -> list[Document]:
        dense_ids = [str(doc.id) for doc in dense]
        if fusion == "rrf":
            lexical_ids = [chunk_id for chunk_id, _ in lexical]
            order = reciprocal_rank_fusion([dense_ids, lexical_ids], len(dense) + len(lexical))
            return self._fetch(order, vector)
        # Scores, unlike ranks, keep how far apart candidates are: fixture MRR@10 rose from
        # 0.984/0.977 (RRF, en/zh) to 0.984/0.992, above both single modes in both languages.
        # Dense hits arrive with text and cosine; only BM25-only hits need fetching.
        seen = set(dense_ids)
        pool = [*dense, *self._fetch([i for i, _ in lexical if i not in seen], vector)]
        best_bm25 = max((score for _, score in lexical), default=0.0) or 1.0
        bm25 = dict(lexical)
        cosine = rescale_cosine([doc.metadata["score"] for doc in pool])
        fused = {
            str(doc.id): HYBRID_COSINE_WEIGHT * float(cos)
            + (1 - HYBRID_COSINE_WEIGHT) * bm25.get(str(doc.id), 0.0) / best_bm25
            for doc, cos in zip(pool, cosine, strict=True)
        }
        return sorted(pool, key=lambda doc: -fused[str(doc.id)])

    def _vector_search(
        self, vector: list[float], k: int, where: dict[str, Any] | None = None
    ) -> list[Document]:
        # No count() first: it costs as much as the query (4 ms at 20k chunks), and Chroma
        # returns fewer results, or none, by itself.
        result = self._collection.query(
            query_embeddings=[vector],
            n_results=k,
            where=where,
            include=["documents", "metadatas", "distances"],
        )
        return [
            self._document(chunk_id, text, meta, 1.0 - distance)
            for chunk_id, text, meta, distance in zip(
                result["ids"][0],
                result["documents"][0],
                result["metadatas"][0],
                result["distances"][0],
                strict=True,
            )
        ]

    def _fetch(self, chunk_ids: list[str], vector: list[float]) -> list[Document]:
        """Chunks by id, in the given order, scored by cosine against ``vector``."""
        if not chunk_ids:
            return []
        got = self._collection.get(ids=chunk_ids, include=["documents", "metadatas", "embeddings"])
        query = np.asarray(vector)
        by_id = {
            chunk_id: self._document(chunk_id, text, meta, float(np.asarray(embedding) @ query))
            for chunk_id, text, meta, embedding in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            )
        }
        return [by_id[chunk_id] for chunk_id in chunk_ids if chunk_id in by_id]

    def _document(self, chunk_id: str, text: str, meta: dict[str, Any], score: float) -> Document:
        return Document(
            id=chunk_id,
            page_content=text,
            metadata={**meta, "score": round(score, 4), "kb": self.name},
        )


@lru_cache(maxsize=4)
def _client(location: str) -> Any:
    """A Chroma client: a server's for an http(s) URL, else the embedded store in that dir."""
    settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if location.startswith(("http://", "https://")):
        url = urlsplit(location)
        try:
            return chromadb.HttpClient(
                host=url.hostname or "localhost",
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=settings,
            )
        except ValueError as exc:  # Chroma's "Could not connect to a Chroma server"
            raise StoreUnavailableError(f"the Chroma server at {location} is down: {exc}") from None
    Path(location).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=location, settings=settings)


@contextmanager
def vector_store_calls() -> Iterator[None]:
    """Around calls to the vector store: a Chroma server that cannot be reached (down,
    restarting) raises :class:`StoreUnavailableError`, whatever its client raised, so that
    callers can tell it from other failures and retry."""
    try:
        yield
    except httpx.TransportError as exc:
        raise StoreUnavailableError(
            f"the Chroma server at {_chroma_location()} cannot be reached: {exc}"
        ) from None


def _chroma_location() -> str:
    settings = get_settings()
    return settings.chroma_url or str(settings.chroma_dir.resolve())


_kb_cache: dict[tuple[str, str], KnowledgeBase] = {}
_kb_cache_lock = threading.Lock()
_attached: dict[str, KnowledgeBase] = {}


def open_knowledge_base(name: str, directory: Path) -> KnowledgeBase:
    """A knowledge base stored under ``directory`` instead of the data dir (throw-away KBs)."""
    return KnowledgeBase(
        name, _client(str(directory.resolve())), get_embeddings(), directory / "lexical.sqlite"
    )


def attach_knowledge_base(kb: KnowledgeBase) -> None:
    """Make :func:`get_knowledge_base` return ``kb`` for its name in this process."""
    _attached[kb.name] = kb


def get_knowledge_base(
    name: str | None = None, create: bool = True, owner: str | None = None, verify: bool = True
) -> KnowledgeBase:
    """The named knowledge base under the configured data dir. A new one is created (owned
    by ``owner``, if given) only with ``create``; otherwise an unknown name raises
    :class:`UnknownKnowledgeBaseError`. With a shared store, the copy this process holds is
    first checked to be current (``verify``), unless the caller handles a stale one."""
    settings = get_settings()
    name = validate_kb_name(name or settings.default_kb)
    if name in _attached:
        return _attached[name]
    key = (_chroma_location(), name)
    with _kb_cache_lock:
        cached = _kb_cache.get(key)
        if cached is not None and settings.chroma_url and verify and not cached.is_current():
            del _kb_cache[key]  # deleted, and perhaps made again, by another process
        if key not in _kb_cache:
            _kb_cache[key] = KnowledgeBase(
                name,
                _client(key[0]),
                get_embeddings(),
                settings.lexical_index_location,
                create=create,
                owner=owner,
            )
        return _kb_cache[key]


def search_knowledge_base(
    open_kb: Callable[[bool], KnowledgeBase], query: str, *args: Any
) -> list[Document]:
    """:meth:`KnowledgeBase.search` on ``open_kb(verify)``'s knowledge base, trusting the copy
    this process holds: asking a shared store first whether it is current would cost a round
    trip every retrieval. A collection deleted (or made again) by another process is not
    found by its id; the knowledge base is then opened again, verified, and searched once
    more."""
    try:
        return open_kb(False).search(query, *args)
    except StaleKnowledgeBaseError:
        return open_kb(True).search(query, *args)


def knowledge_base_owners() -> dict[str, str | None]:
    """Every knowledge base in the store, with its owner (None: shared)."""
    settings = get_settings()
    if not settings.chroma_url and not settings.chroma_dir.exists():
        return {}
    client = _client(_chroma_location())
    return {
        collection.name[len(_COLLECTION_PREFIX) :]: (collection.metadata or {}).get("owner")
        for collection in client.list_collections()
        if collection.name.startswith(_COLLECTION_PREFIX)
    }


def list_knowledge_bases() -> list[str]:
    return sorted(knowledge_base_owners())


def delete_knowledge_base(name: str) -> None:
    """Delete a knowledge base: its keyword index first, so it never outlives the store."""
    kb = get_knowledge_base(name, create=False)
    with kb._write_lock, kb.lexical.exclusive():
        kb.lexical.drop()
        _client(_chroma_location()).delete_collection(kb._collection.name)
    with _kb_cache_lock:
        for key in [key for key, value in _kb_cache.items() if value is kb]:
            del _kb_cache[key]


def knowledge_base_writer(
    holder: str, settings: Settings | None = None
) -> AbstractContextManager[None]:
    """What a process holds while it may write the configured knowledge bases: nothing when
    they are shared (a Chroma server and a Postgres keyword index take any process's writes,
    one per knowledge base at a time), else the data dir's :func:`exclusive_writer` lock."""
    settings = settings or get_settings()
    if settings.shared_knowledge_bases:
        return nullcontext()
    return exclusive_writer(settings.data_dir, holder)


class DataDirBusyError(KnowledgeBaseError):
    """Another process holds the data dir's writer lock."""


@contextmanager
def exclusive_writer(data_dir: Path, holder: str) -> Iterator[None]:
    """Hold the writer lock of ``data_dir``'s knowledge bases for the ``with`` block.

    The embedded Chroma store is not shared between processes (a second process's writes
    stay invisible to the first one's index), so one process at a time may write: a running
    server holds the lock for its lifetime and a CLI ingest beside it is refused with a
    pointer to the server's API. The kernel releases the lock when its holder dies."""
    data_dir.mkdir(parents=True, exist_ok=True)
    handle = (data_dir / "writer.lock").open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        who = handle.read().strip() or "another reflexrag process"
        handle.close()
        raise DataDirBusyError(
            f"the data dir {data_dir} is in use by {who}; add documents through its API "
            "(POST /kb/NAME/documents) or stop it first"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{holder} (pid {os.getpid()})")
    handle.flush()
    try:
        yield
    finally:
        handle.truncate(0)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
