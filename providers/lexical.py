"""The keyword (BM25) index of every knowledge base: packed postings in SQLite, scored by numpy.

Terms come from :func:`providers.text.terms`: folded English words and jieba-segmented Chinese
words, stopwords removed. Each chunk gets a small integer *slot*; a term's postings are
``(slot, tf, length)`` int32 triples packed into blobs, one blob per term and write batch, so

- a query reads the blobs of its few terms and scores every posting at once with numpy
  (``bincount`` over slots), whatever the terms' frequencies: at 100k chunks that is a few
  milliseconds where SQL aggregation over posting rows took ~0.4 s;
- adding documents appends one blob per term and never rewrites the others; a term split over
  more than ``MAX_BLOCKS`` blobs is merged in the same transaction;
- removing a document deletes its chunk rows and leaves their slots as *tombstones*: a query
  drops dead slots' postings before it scores (so scores are what they would be without them),
  and once the dead outnumber ``COMPACT_SHARE`` of the live chunks (and ``MIN_COMPACT``) one
  transaction rewrites the blobs that hold them (each tombstone keeps its chunk's term list for
  that). Rewriting every blob of every term of a document at each removal cost 0.07–0.4 s at
  100k chunks (17× adding one in the scale benchmark); a crash leaves a removal wholly done
  or not at all;
- every process that opens the data dir (a server, a CLI ingest beside it) reads the same,
  current index, with nothing held in memory to go stale; with ``REFLEXRAG_DATABASE_URL``
  on Postgres the same tables (blobs as ``BYTEA``) are shared by every replica, and writers
  of one knowledge base take turns through an advisory lock;
- the vector store stays the source of truth: chunks are indexed here only after they are
  stored there, and removed here before they are removed there, so the index is always a
  subset of the store, and :meth:`LexicalIndex.chunk_count` against the store's count tells
  whether a crash (or an index from an older version, which is dropped) left something to
  rebuild (see ``KnowledgeBase.reconcile``).

SQLite's own FTS5 was measured first: its ``bm25()`` ranking scores every match of an OR
query, 1.1 s at 100k chunks; bm25s is fast but rebuilds its matrices to add a document and
keeps them in one process's memory.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from reflexrag.providers.database import (
    PostgresConnection,
    is_postgres,
    postgres_pool,
    take_session_lock,
)
from reflexrag.providers.text import terms

K1 = 1.5
B = 0.75
RRF_K = 60
MAX_BLOCKS = 32
"""Blobs a term's postings may span before they are merged into one."""
COMPACT_SHARE = 0.05
"""Dead slots, as a share of live chunks, past which their postings are rewritten away."""
MIN_COMPACT = 256
"""Dead slots always tolerated: a small index is not rewritten for every removal."""
SCHEMA_VERSION = 4
"""3: English terms are lemmas (simplemma), no longer plural-folded words. 4: Chinese terms
are cut from the text in Simplified characters (Traditional text was cut as it is)."""
_POSTING = np.dtype("<i4")
_IN_LIMIT = 500
"""Parameters per ``IN (...)`` list."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lexical_chunks (
    kb TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    slot INTEGER NOT NULL,
    length INTEGER NOT NULL,
    terms TEXT NOT NULL,
    PRIMARY KEY (kb, chunk_id)
) {without_rowid};
CREATE INDEX IF NOT EXISTS lexical_chunks_by_doc ON lexical_chunks (kb, doc_id);
CREATE UNIQUE INDEX IF NOT EXISTS lexical_chunks_by_slot ON lexical_chunks (kb, slot);
CREATE TABLE IF NOT EXISTS lexical_blocks (
    kb TEXT NOT NULL,
    term TEXT NOT NULL,
    block INTEGER NOT NULL,
    postings {blob} NOT NULL,
    PRIMARY KEY (kb, term, block)
) {without_rowid};
CREATE TABLE IF NOT EXISTS lexical_dead (
    kb TEXT NOT NULL,
    slot INTEGER NOT NULL,
    terms TEXT NOT NULL,
    PRIMARY KEY (kb, slot)
) {without_rowid};
CREATE TABLE IF NOT EXISTS lexical_stats (
    kb TEXT PRIMARY KEY,
    chunks INTEGER NOT NULL,
    total_length INTEGER NOT NULL,
    next_slot INTEGER NOT NULL,
    next_block INTEGER NOT NULL
);
"""
_OLD_TABLES = (
    "lexical_postings",
    "lexical_blocks",
    "lexical_chunks",
    "lexical_dead",
    "lexical_stats",
)


def _batches(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _IN_LIMIT):
        yield items[start : start + _IN_LIMIT]


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" * len(items))


def _unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=_POSTING).reshape(-1, 3)


def _without_dead(postings: np.ndarray, alive: np.ndarray | None) -> np.ndarray:
    return postings if alive is None else postings[alive[postings[:, 0]]]


def _alive(slots: int, dead: Sequence[int]) -> np.ndarray | None:
    """A mask over ``slots``, False where a removed chunk left its postings (``dead``); None
    if none did."""
    if not dead:
        return None
    alive = np.ones(slots, dtype=bool)
    alive[np.asarray(dead, dtype=np.int64)] = False
    return alive


class LexicalIndex:
    """BM25 over one knowledge base's chunks, stored in a SQLite file shared by all of them."""

    def __init__(self, location: Path | str, kb: str) -> None:
        """``location``: a SQLite file, or a ``postgresql://`` URL shared by replicas."""
        self.kb = kb
        self._store = _open_store(location)

    def exclusive(self) -> AbstractContextManager[None]:
        """Held around a whole write of this knowledge base (store and index), so writers in
        other processes take turns."""
        return self._store.exclusive(self.kb)

    def chunk_count(self) -> int:
        with self._store.reading() as db:
            return self._stats(db)[0]

    def chunk_ids(self) -> set[str]:
        with self._store.reading() as db:
            rows = db.execute("SELECT chunk_id FROM lexical_chunks WHERE kb=?", (self.kb,))
            return {row[0] for row in rows.fetchall()}

    def _stats(self, db: _Connection) -> tuple[int, int, int, int]:
        """(chunks, total length, next slot, next block) of this knowledge base."""
        row = db.execute(
            "SELECT chunks, total_length, next_slot, next_block FROM lexical_stats WHERE kb=?",
            (self.kb,),
        ).fetchone()
        return tuple(row) if row else (0, 0, 0, 0)

    def add(self, chunks: dict[str, tuple[str, str]]) -> None:
        """Index ``chunks`` (chunk id → (doc id, text)) in one transaction."""
        if not chunks:
            return
        counted = {
            chunk_id: Counter(terms(text, for_search=False))
            for chunk_id, (_, text) in chunks.items()
        }
        with self._store.writing(self.kb) as db:
            self._remove_chunks(db, list(chunks))
            count, total_length, slot, block = self._stats(db)
            rows, postings = [], defaultdict(list)
            for chunk_id, (doc_id, _) in chunks.items():
                frequencies = counted[chunk_id]
                length = sum(frequencies.values())
                rows.append((self.kb, chunk_id, doc_id, slot, length, "\n".join(frequencies)))
                for term, tf in frequencies.items():
                    postings[term].append((slot, tf, length))
                slot, count, total_length = slot + 1, count + 1, total_length + length
            db.executemany("INSERT INTO lexical_chunks VALUES (?, ?, ?, ?, ?, ?)", rows)
            db.executemany(
                "INSERT INTO lexical_blocks VALUES (?, ?, ?, ?)",
                (
                    (self.kb, term, block, np.asarray(triples, dtype=_POSTING).tobytes())
                    for term, triples in postings.items()
                ),
            )
            self._set_stats(db, count, total_length, slot, block + 1)
            self._merge_split_terms(db, sorted(postings))

    def _merge_split_terms(self, db: _Connection, touched: list[str]) -> None:
        alive, read = None, False
        for batch in _batches(touched):
            split = db.execute(
                f"SELECT term FROM lexical_blocks WHERE kb=? AND term IN ({_marks(batch)}) "
                "GROUP BY term HAVING COUNT(*) > ?",
                (self.kb, *batch, MAX_BLOCKS),
            ).fetchall()
            for (term,) in split:
                blocks = db.execute(
                    "SELECT block, postings FROM lexical_blocks WHERE kb=? AND term=?",
                    (self.kb, term),
                ).fetchall()
                if not read:
                    alive, read = self._stats_and_alive(db)[1], True
                merged = _without_dead(_unpack(b"".join(blob for _, blob in blocks)), alive)
                db.execute("DELETE FROM lexical_blocks WHERE kb=? AND term=?", (self.kb, term))
                db.execute(
                    "INSERT INTO lexical_blocks VALUES (?, ?, ?, ?)",
                    (self.kb, term, blocks[0][0], merged.tobytes()),
                )

    def _stats_and_alive(self, db: _Connection) -> tuple[tuple[int, int, int], np.ndarray | None]:
        """(chunks, total length, next slot) and the mask of live slots (:func:`_alive`), in
        one statement: a search makes it before every query."""
        rows = db.execute(
            "SELECT s.chunks, s.total_length, s.next_slot, d.slot FROM lexical_stats s "
            "LEFT JOIN lexical_dead d ON d.kb = s.kb WHERE s.kb=?",
            (self.kb,),
        ).fetchall()
        if not rows:
            return (0, 0, 0), None
        stats = tuple(rows[0][:3])
        return stats, _alive(stats[2], [row[3] for row in rows if row[3] is not None])

    def remove_documents(self, doc_ids: Iterable[str]) -> None:
        """Unindex every chunk of these documents, in one transaction."""
        doc_ids = list(doc_ids)
        with self._store.writing(self.kb) as db:
            chunk_ids = [
                row[0]
                for batch in _batches(doc_ids)
                for row in db.execute(
                    "SELECT chunk_id FROM lexical_chunks "
                    f"WHERE kb=? AND doc_id IN ({_marks(batch)})",
                    (self.kb, *batch),
                ).fetchall()
            ]
            self._remove_chunks(db, chunk_ids)

    def remove_chunks(self, chunk_ids: Iterable[str]) -> None:
        with self._store.writing(self.kb) as db:
            self._remove_chunks(db, list(chunk_ids))

    def _remove_chunks(self, db: _Connection, chunk_ids: list[str]) -> None:
        """Drop the chunks' rows and leave their slots as tombstones; compact when the dead
        pass ``COMPACT_SHARE`` of the live."""
        removed, removed_length = 0, 0
        for batch in _batches(chunk_ids):
            rows = db.execute(
                f"DELETE FROM lexical_chunks WHERE kb=? AND chunk_id IN ({_marks(batch)}) "
                "RETURNING slot, length, terms",
                (self.kb, *batch),
            ).fetchall()
            db.executemany(
                "INSERT INTO lexical_dead VALUES (?, ?, ?)",
                ((self.kb, slot, chunk_terms) for slot, _, chunk_terms in rows),
            )
            removed += len(rows)
            removed_length += sum(length for _, length, _ in rows)
        if not removed:
            return
        count, total_length, slot, block = self._stats(db)
        self._set_stats(db, count - removed, total_length - removed_length, slot, block)
        (dead,) = db.execute("SELECT COUNT(*) FROM lexical_dead WHERE kb=?", (self.kb,)).fetchone()
        if dead > max(MIN_COMPACT, COMPACT_SHARE * (count - removed)):
            self._compact(db)

    def compact(self) -> None:
        """Rewrite away every dead slot's postings now (removals do it when the dead pile up)."""
        with self._store.writing(self.kb) as db:
            self._compact(db)

    def _compact(self, db: _Connection) -> None:
        rows = db.execute("SELECT slot, terms FROM lexical_dead WHERE kb=?", (self.kb,)).fetchall()
        alive = _alive(self._stats(db)[2], [slot for slot, _ in rows])
        if alive is None:
            return
        touched = sorted({term for _, listed in rows for term in listed.split("\n") if term})
        for batch in _batches(touched):
            blocks = db.execute(
                "SELECT term, block, postings FROM lexical_blocks "
                f"WHERE kb=? AND term IN ({_marks(batch)})",
                (self.kb, *batch),
            ).fetchall()
            for term, block, blob in blocks:
                postings = _unpack(blob)
                kept = _without_dead(postings, alive)
                if len(kept) == len(postings):
                    continue
                if len(kept):
                    db.execute(
                        "UPDATE lexical_blocks SET postings=? WHERE kb=? AND term=? AND block=?",
                        (kept.tobytes(), self.kb, term, block),
                    )
                else:
                    db.execute(
                        "DELETE FROM lexical_blocks WHERE kb=? AND term=? AND block=?",
                        (self.kb, term, block),
                    )
        db.execute("DELETE FROM lexical_dead WHERE kb=?", (self.kb,))

    def _set_stats(
        self, db: _Connection, chunks: int, total_length: int, next_slot: int, next_block: int
    ) -> None:
        db.execute(
            "INSERT INTO lexical_stats VALUES (?, ?, ?, ?, ?) ON CONFLICT (kb) DO UPDATE SET "
            "chunks=excluded.chunks, total_length=excluded.total_length, "
            "next_slot=excluded.next_slot, next_block=excluded.next_block",
            (self.kb, chunks, total_length, next_slot, next_block),
        )

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best (chunk id, BM25 score) pairs; chunks sharing no term are left out."""
        query_terms = sorted(set(terms(query, for_search=False)))
        if not query_terms or k < 1:
            return []
        with self._store.reading() as db:
            (total, total_length, slots), alive = self._stats_and_alive(db)
            if not total:
                return []
            found: dict[str, list[bytes]] = defaultdict(list)
            for batch in _batches(query_terms):
                for term, blob in db.execute(
                    "SELECT term, postings FROM lexical_blocks "
                    f"WHERE kb=? AND term IN ({_marks(batch)})",
                    (self.kb, *batch),
                ):
                    found[term].append(bytes(blob))
            if not found:
                return []
            scores = np.zeros(slots, dtype=np.float32)
            average_length = total_length / total or 1.0
            # BM25 as idf·(k1+1)·tf / (tf + k1·(1-b) + k1·b·length/avg), in float32.
            constant, per_length = K1 * (1 - B), np.float32(K1 * B / average_length)
            for blobs in found.values():
                postings = _unpack(b"".join(blobs))
                # A dead slot's postings are not counted in df, and its score is zeroed below:
                # BM25 as if it had never been indexed, without copying the live postings.
                df = len(postings) if alive is None else np.count_nonzero(alive[postings[:, 0]])
                idf = np.float32(np.log(1 + (total - df + 0.5) / (df + 0.5)) * (K1 + 1))
                tf = postings[:, 1].astype(np.float32)
                weight = idf * tf / (tf + constant + per_length * postings[:, 2])
                scores += np.bincount(postings[:, 0], weights=weight, minlength=slots)
            if alive is not None:
                scores[~alive] = 0
            top = min(k, slots)
            hits = np.argpartition(-scores, top - 1)[:top]
            hits = hits[scores[hits] > 0]
            if not len(hits):
                return []
            # Best first; equal scores in the order the chunks were indexed.
            hits = sorted(hits.tolist(), key=lambda slot: (-scores[slot], slot))
            names = dict(
                db.execute(
                    "SELECT slot, chunk_id FROM lexical_chunks "
                    f"WHERE kb=? AND slot IN ({_marks(hits)})",
                    (self.kb, *hits),
                ).fetchall()
            )
        return [(names[slot], float(scores[slot])) for slot in hits if slot in names]

    def drop(self) -> None:
        """Forget the whole knowledge base."""
        with self._store.writing(self.kb) as db:
            for table in ("lexical_blocks", "lexical_chunks", "lexical_dead", "lexical_stats"):
                db.execute(f"DELETE FROM {table} WHERE kb=?", (self.kb,))


class _Connection(Protocol):
    """What the index needs of a database connection (``?`` placeholders)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any: ...


class _SqliteStore:
    """A SQLite file: one connection per file and process, its use serialised by a lock;
    other processes see each commit (WAL). One process at a time writes a data dir's
    knowledge bases (``knowledge_base.exclusive_writer``), so ``exclusive`` has nothing to add."""

    def __init__(self, path: Path) -> None:
        self._db, self._lock = _connect(path)

    @contextmanager
    def reading(self) -> Iterator[_Connection]:
        with self._lock:
            yield self._db

    @contextmanager
    def writing(self, kb: str) -> Iterator[_Connection]:
        with self._lock, self._db:
            yield self._db

    @contextmanager
    def exclusive(self, kb: str) -> Iterator[None]:
        yield


class _PostgresStore:
    """Postgres shared by every replica. A write transaction first takes a transaction-level
    advisory lock on its knowledge base, so two replicas never hand out the same slot or
    block; ``exclusive`` holds a session-level one for a whole document write."""

    def __init__(self, url: str) -> None:
        schema = _SCHEMA.format(blob="BYTEA", without_rowid="")
        self._pool = postgres_pool(url, schema, "lexical:schema")
        with self._pool.connection() as connection, connection.transaction():
            _migrate_postgres(connection, schema)

    @contextmanager
    def reading(self) -> Iterator[_Connection]:
        with self._pool.connection() as connection:
            yield PostgresConnection(connection)

    @contextmanager
    def writing(self, kb: str) -> Iterator[_Connection]:
        with self._pool.connection() as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"lexical:{kb}",))
            yield PostgresConnection(connection)

    @contextmanager
    def exclusive(self, kb: str) -> Iterator[None]:
        with self._pool.connection() as connection:
            take_session_lock(connection, f"writer:{kb}")
            try:
                yield
            finally:
                connection.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"writer:{kb}",))


_connections: dict[str, tuple[sqlite3.Connection, threading.Lock]] = {}
_connections_lock = threading.Lock()


def _open_store(location: Path | str) -> _SqliteStore | _PostgresStore:
    if is_postgres(location):
        return _PostgresStore(str(location))
    return _SqliteStore(Path(location))


def _migrate(db: sqlite3.Connection) -> None:
    """An index written by an older version is dropped: its knowledge bases' chunk counts
    then disagree with their stores and the next open rebuilds them from the stored text."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    with db:
        for table in _OLD_TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _migrate_postgres(connection: Any, schema: str) -> None:
    """As :func:`_migrate`, on the shared database: the first replica to open an index of an
    older version (or of none recorded) drops and recreates its tables, under the schema
    lock, so the others find it current."""
    connection.execute("SELECT pg_advisory_xact_lock(hashtext('lexical:schema'))")
    connection.execute("CREATE TABLE IF NOT EXISTS lexical_version (version INTEGER NOT NULL)")
    (version,) = connection.execute("SELECT max(version) FROM lexical_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    connection.execute(f"DROP TABLE IF EXISTS {', '.join(_OLD_TABLES)}")
    for statement in schema.split(";"):
        if statement.strip():
            connection.execute(statement)
    connection.execute("DELETE FROM lexical_version")
    connection.execute("INSERT INTO lexical_version VALUES (%s)", (SCHEMA_VERSION,))


def _connect(path: Path) -> tuple[sqlite3.Connection, threading.Lock]:
    """One connection (and the lock that serialises its use) per file and process, shared by
    the knowledge bases in it."""
    key = str(path.resolve())
    with _connections_lock:
        if key not in _connections:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(key, check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            _migrate(db)
            db.executescript(_SCHEMA.format(blob="BLOB", without_rowid="WITHOUT ROWID"))
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
