"""Retrieval latency, incremental indexing and ingest time as a knowledge base grows.

Synthetic chunks (Zipf-distributed words) with deterministic pseudo-random 384-d vectors go
through the project's own :class:`KnowledgeBase` (embedded Chroma + the SQLite keyword index),
so the numbers are the store's and the index's, not the encoder's. With bm25s installed, the
same chunks and queries through it are printed beside them as the library peer. Adding,
replacing and deleting one document are timed ``--samples`` times each (p50 / p95 / max):
through the knowledge base, and through the keyword index alone, which ``--index-only`` measures
at sizes the embedded vector store takes hours to fill.

    python -m reflexrag.benchmarks.scale --sizes 1000,10000,100000
    python -m reflexrag.benchmarks.scale --index-only --sizes 100000,300000,1000000
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from reflexrag.providers.knowledge_base import KnowledgeBase, SourceDocument, _client
from reflexrag.providers.lexical import LexicalIndex

DIMENSIONS = 384
VOCABULARY = 20_000
WORDS_PER_CHUNK = 60
QUERIES = 60
SAMPLES = 30


class HashEmbeddings(Embeddings):
    """A unit vector per text, seeded by its hash: free, deterministic, no model."""

    def _vector(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        vector = np.random.default_rng(seed).standard_normal(DIMENSIONS)
        return (vector / np.linalg.norm(vector)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def synthetic_documents(count: int, seed: int = 7, start: int = 0) -> list[SourceDocument]:
    rng = np.random.default_rng(seed + start)
    words = rng.zipf(1.3, size=(count, WORDS_PER_CHUNK)) % VOCABULARY
    return [
        SourceDocument(f"doc-{start + n}", " ".join(f"w{w}" for w in row), {"title": f"T{n}"})
        for n, row in enumerate(words)
    ]


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.1f} / {p95 * 1000:.1f}"


def _ms_max(samples: list[float]) -> str:
    return f"{_ms(samples)} / {max(samples) * 1000:.1f}"


def _timed(action: Callable[[SourceDocument], object], documents: list[SourceDocument]) -> str:
    samples = []
    for document in documents:
        began = time.perf_counter()
        action(document)
        samples.append(time.perf_counter() - began)
    return _ms_max(samples)


def _queries() -> list[str]:
    rng = np.random.default_rng(11)
    return [" ".join(f"w{w % VOCABULARY}" for w in rng.zipf(1.3, size=5)) for _ in range(QUERIES)]


def _edits(size: int, samples: int) -> tuple[list[SourceDocument], list[SourceDocument]]:
    """``samples`` new documents, and as many new texts for stored ids spread over the index."""
    added = [synthetic_documents(1, seed=99, start=size + n)[0] for n in range(samples)]
    replaced = [
        synthetic_documents(1, seed=98, start=n * size // samples)[0] for n in range(samples)
    ]
    return added, replaced


EDIT_COLUMNS = ("add one p50 / p95 / max ms", "replace one", "delete one")


def measure(size: int, directory: Path, samples: int) -> dict[str, str]:
    embeddings = HashEmbeddings()
    kb = KnowledgeBase("scale", _client(str(directory)), embeddings, directory / "lexical.sqlite")
    documents = synthetic_documents(size)
    started = time.perf_counter()
    for batch in range(0, size, 1000):
        kb.add(documents[batch : batch + 1000])
    ingest_s = time.perf_counter() - started
    queries = _queries()
    latency: dict[str, list[float]] = {"vector": [], "bm25": [], "hybrid": []}
    for mode, found in latency.items():
        for query in queries:
            began = time.perf_counter()
            kb.search(query, 4, mode)  # type: ignore[arg-type]
            found.append(time.perf_counter() - began)
    added, replaced = _edits(size, samples)
    # A replace is a stored id with new text: unindex, delete, store, index.
    edits = (
        _timed(lambda doc: kb.add([doc]), added),
        _timed(lambda doc: kb.add([doc]), replaced),
        _timed(lambda doc: kb.delete_documents([doc.doc_id]), added),
    )
    began = time.perf_counter()
    KnowledgeBase("scale", _client(str(directory)), embeddings, directory / "lexical.sqlite")
    reopen_s = time.perf_counter() - began
    disk = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return {
        "chunks": f"{kb.count():,}",
        "ingest": f"{ingest_s:.1f} s ({size / ingest_s:,.0f} chunks/s)",
        "vector p50 / p95 ms": _ms(latency["vector"]),
        "bm25 p50 / p95 ms": _ms(latency["bm25"]),
        "hybrid p50 / p95 ms": _ms(latency["hybrid"]),
        **dict(zip(EDIT_COLUMNS, edits, strict=True)),
        "open (reconcile)": f"{reopen_s * 1000:.0f} ms",
        "disk": f"{disk / 1e6:.0f} MB",
        "peak RSS": f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB",
        **bm25s_peer(documents, queries),
    }


def measure_index(size: int, directory: Path, samples: int) -> dict[str, str]:
    """The keyword index alone: what adding, replacing and deleting a document costs there."""
    index = LexicalIndex(directory / "lexical.sqlite", "scale")
    started = time.perf_counter()
    for batch in range(0, size, 10_000):
        documents = synthetic_documents(min(10_000, size - batch), start=batch)
        index.add({doc.doc_id: (doc.doc_id, doc.text) for doc in documents})
    ingest_s = time.perf_counter() - started
    found = []
    for query in _queries():
        began = time.perf_counter()
        index.search(query, 4)
        found.append(time.perf_counter() - began)
    added, replaced = _edits(size, samples)

    def add(doc: SourceDocument) -> None:
        index.add({doc.doc_id: (doc.doc_id, doc.text)})

    edits = (
        _timed(add, added),
        _timed(add, replaced),
        _timed(lambda doc: index.remove_documents([doc.doc_id]), added),
    )
    began = time.perf_counter()
    index.compact()
    compact_s = time.perf_counter() - began
    disk = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return {
        "chunks": f"{index.chunk_count():,}",
        "ingest": f"{ingest_s:.1f} s ({size / ingest_s:,.0f} chunks/s)",
        "bm25 p50 / p95 ms": _ms(found),
        **dict(zip(EDIT_COLUMNS, edits, strict=True)),
        f"compact {samples * 2} dead": f"{compact_s * 1000:.0f} ms",
        "disk": f"{disk / 1e6:.0f} MB",
        "peak RSS": f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB",
    }


def bm25s_peer(documents: list[SourceDocument], queries: list[str]) -> dict[str, str]:
    """The same chunks and queries through bm25s (in memory, rebuilt to add a document), when
    it is installed (``pip install bm25s``)."""
    try:
        import bm25s
    except ImportError:
        return {"bm25s query p50 / p95 ms": "–", "bm25s index (add one = rebuild)": "–"}
    texts = [doc.text for doc in documents]
    began = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
    index_s = time.perf_counter() - began
    samples = []
    for query in queries:
        began = time.perf_counter()
        retriever.retrieve(
            bm25s.tokenize([query], stopwords=None, show_progress=False), k=4, show_progress=False
        )
        samples.append(time.perf_counter() - began)
    return {
        "bm25s query p50 / p95 ms": _ms(samples),
        "bm25s index (add one = rebuild)": f"{index_s:.1f} s",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reflexrag.benchmarks.scale")
    parser.add_argument("--sizes", default="1000,10000", help="chunk counts, comma-separated")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="edits timed of each kind")
    parser.add_argument(
        "--index-only", action="store_true", help="the keyword index alone, no vector store"
    )
    args = parser.parse_args(argv)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="reflexrag-scale-") as tmp:
            run = measure_index if args.index_only else measure
            rows.append(run(size, Path(tmp), args.samples))
        print(rows[-1], file=sys.stderr, flush=True)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(row[key] for key in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
