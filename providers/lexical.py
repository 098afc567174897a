"""The keyword (BM25) index of every knowledge base: postings in SQLite, updated per document.

Terms come from :func:`providers.text.terms`: folded English words and jieba-segmented Chinese
words, stopwords removed. Each chunk's term frequencies are rows of one table and BM25 is
computed by the database at query time, so

- adding or replacing one document writes only that document's rows, in one transaction
  (a crash leaves the document wholly indexed or not at all);
- every process that opens the data dir (a server, a CLI ingest beside it) reads the same,
  current index, with nothing held in memory to go stale;
- the vector store stays the source of truth: chunks are indexed here only after they are
  stored there, and removed here before they are removed there, so the index is always a
  subset of the store, and :meth:`LexicalIndex.chunk_count` against the store's count tells
  whether a crash left something to repair (see ``KnowledgeBase.reconcile``).
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from reflexrag.providers.text import terms

K1 = 1.5
B = 0.75
RRF_K = 60

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lexical_chunks (
    kb TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (kb, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lexical_chunks_by_doc ON lexical_chunks (kb, doc_id);
CREATE TABLE IF NOT EXISTS lexical_postings (
    kb TEXT NOT NULL,
    term TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    tf INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (kb, term, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lexical_postings_by_chunk ON lexical_postings (kb, chunk_id);
CREATE TABLE IF NOT EXISTS lexical_stats (
    kb TEXT PRIMARY KEY,
    chunks INTEGER NOT NULL,
    total_length INTEGER NOT NULL
);
"""


class LexicalIndex:
    """BM25 over one knowledge base's chunks, stored in a SQLite file shared by all of them."""

    def __init__(self, path: Path, kb: str) -> None:
        self.kb = kb
        self._db, self._lock = _connect(path)

    def chunk_count(self) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT chunks FROM lexical_stats WHERE kb=?", (self.kb,)
            ).fetchone()
        return row[0] if row else 0

    def chunk_ids(self) -> set[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT chunk_id FROM lexical_chunks WHERE kb=?", (self.kb,)
            ).fetchall()
        return {row[0] for row in rows}

    def add(self, chunks: dict[str, tuple[str, str]]) -> None:
        """Index ``chunks`` (chunk id → (doc id, text)) in one transaction."""
        rows, postings = [], []
        for chunk_id, (doc_id, text) in chunks.items():
            frequencies = Counter(terms(text, for_search=False))
            length = sum(frequencies.values())
            rows.append((self.kb, chunk_id, doc_id, length))
            postings += [(self.kb, t, chunk_id, tf, length) for t, tf in frequencies.items()]
        with self._lock, self._db:
            self._remove_chunks([chunk_id for _, chunk_id, _, _ in rows])
            self._db.executemany("INSERT INTO lexical_chunks VALUES (?, ?, ?, ?)", rows)
            self._db.executemany("INSERT INTO lexical_postings VALUES (?, ?, ?, ?, ?)", postings)
            self._add_stats(len(rows), sum(row[3] for row in rows))

    def remove_documents(self, doc_ids: Iterable[str]) -> None:
        """Unindex every chunk of these documents, in one transaction."""
        doc_ids = list(doc_ids)
        with self._lock, self._db:
            chunk_ids = [
                row[0]
                for start in range(0, len(doc_ids), 500)
                for row in self._db.execute(
                    "SELECT chunk_id FROM lexical_chunks WHERE kb=? AND doc_id IN "
                    f"({','.join('?' * len(doc_ids[start : start + 500]))})",
                    (self.kb, *doc_ids[start : start + 500]),
                )
            ]
            self._remove_chunks(chunk_ids)

    def remove_chunks(self, chunk_ids: Iterable[str]) -> None:
        with self._lock, self._db:
            self._remove_chunks(list(chunk_ids))

    def _remove_chunks(self, chunk_ids: list[str]) -> None:
        removed, removed_length = 0, 0
        for chunk_id in chunk_ids:
            row = self._db.execute(
                "DELETE FROM lexical_chunks WHERE kb=? AND chunk_id=? RETURNING length",
                (self.kb, chunk_id),
            ).fetchone()
            if row is None:
                continue
            self._db.execute(
                "DELETE FROM lexical_postings WHERE kb=? AND chunk_id=?", (self.kb, chunk_id)
            )
            removed, removed_length = removed + 1, removed_length + row[0]
        if removed:
            self._add_stats(-removed, -removed_length)

    def _add_stats(self, chunks: int, length: int) -> None:
        self._db.execute(
            "INSERT INTO lexical_stats VALUES (?, ?, ?) ON CONFLICT (kb) DO UPDATE SET "
            "chunks = chunks + excluded.chunks, "
            "total_length = total_length + excluded.total_length",
            (self.kb, chunks, length),
        )

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best (chunk id, BM25 score) pairs; chunks sharing no term are left out."""
        query_terms = sorted(set(terms(query, for_search=False)))
        if not query_terms or k < 1:
            return []
        with self._lock:
            stats = self._db.execute(
                "SELECT chunks, total_length FROM lexical_stats WHERE kb=?", (self.kb,)
            ).fetchone()
            if not stats or not stats[0]:
                return []
            total, average_length = stats[0], stats[1] / stats[0] or 1.0
            marks = ",".join("?" * len(query_terms))
            frequencies = self._db.execute(
                f"SELECT term, COUNT(*) FROM lexical_postings WHERE kb=? AND term IN ({marks}) "
                "GROUP BY term",
                (self.kb, *query_terms),
            ).fetchall()
            if not frequencies:
                return []
            weights = [
                (term, math.log(1 + (total - df + 0.5) / (df + 0.5))) for term, df in frequencies
            ]
            rows = self._db.execute(
                f"WITH q(term, idf) AS (VALUES {','.join(['(?, ?)'] * len(weights))}) "
                "SELECT p.chunk_id, SUM(q.idf * p.tf * ? / (p.tf + ? * (? + ? * p.length))) "
                "AS score FROM q JOIN lexical_postings p ON p.kb=? AND p.term=q.term "
                "GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT ?",
                (
                    *(value for pair in weights for value in pair),
                    K1 + 1,
                    K1,
                    1 - B,
                    B / average_length,
                    self.kb,
                    k,
                ),
            ).fetchall()
        return [(chunk_id, float(score)) for chunk_id, score in rows]

    def drop(self) -> None:
        """Forget the whole knowledge base."""
        with self._lock, self._db:
            for table in ("lexical_postings", "lexical_chunks", "lexical_stats"):
                self._db.execute(f"DELETE FROM {table} WHERE kb=?", (self.kb,))


_connections: dict[str, tuple[sqlite3.Connection, threading.Lock]] = {}
_connections_lock = threading.Lock()


def _connect(path: Path) -> tuple[sqlite3.Connection, threading.Lock]:
    """One connection (and the lock that serialises its use) per file and process, shared by
    the knowledge bases in it; other processes see each commit (WAL)."""
    key = str(path.resolve())
    with _connections_lock:
        if key not in _connections:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(key, check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            _connections[key] = (db, threading.Lock())
        return _connections[key]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int) -> list[str]:
    """Fuse ranked id lists: each id scores Σ 1 / (60 + rank); ties keep first appearance."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (RRF_K + rank)
    order = {item: n for n, item in enumerate(dict.fromkeys(i for r in rankings for i in r))}
    return sorted(fused, key=lambda item: (-fused[item], order[item]))[:k]
