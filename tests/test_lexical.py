"""The keyword index, reciprocal rank fusion, the knowledge base's retrieval modes, and the
invariant that keyword index and vector store never disagree, even after a crash."""

import subprocess
import sys

import pytest

from reflexrag.providers import knowledge_base as kb_module
from reflexrag.providers.knowledge_base import (
    DataDirBusyError,
    KnowledgeBaseError,
    SourceDocument,
    UnknownKnowledgeBaseError,
    exclusive_writer,
    get_knowledge_base,
)
from reflexrag.providers.lexical import LexicalIndex, reciprocal_rank_fusion
from reflexrag.providers.settings import get_settings
from reflexrag.state import Context
from tests.conftest import REPO


def test_rrf_orders_by_summed_reciprocal_ranks():
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63
    assert reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=4) == ["a", "c", "b", "d"]
    assert reciprocal_rank_fusion([["x"], []], k=5) == ["x"]


@pytest.fixture(params=["sqlite", "postgres"])
def index_location(request, tmp_path) -> object:
    """Where an index lives: a SQLite file, or a Postgres database shared by replicas."""
    if request.param == "sqlite":
        return tmp_path / "lexical.sqlite"
    return request.getfixturevalue("fresh_database")


def test_bm25_ranks_exact_terms_in_both_languages_and_persists(index_location):
    index = LexicalIndex(index_location, "kb")
    index.add(
        {
            "tesla": ("t", "Nikola Tesla died in 1943 in New York."),
            "paris": ("p", "Paris is the capital of France."),
            "zh": ("z", "特斯拉于1943年在纽约去世。"),
        }
    )
    assert index.search("When did Tesla die?", 3)[0][0] == "tesla"
    assert index.search("特斯拉哪一年去世？", 3)[0][0] == "zh"
    assert index.search("bananas", 3) == []
    assert LexicalIndex(index_location, "other").search("capital", 3) == []
    index.remove_documents(["p"])
    assert index.search("capital of France", 1) == []
    assert index.chunk_count() == 2 and index.chunk_ids() == {"tesla", "zh"}


def test_bm25_scores_match_the_textbook_formula(index_location):
    import math

    index = LexicalIndex(index_location, "kb")
    index.add({"a": ("a", "heron heron fish"), "b": ("b", "fish pond"), "c": ("c", "pond")})
    # "heron": df 1 of 3 chunks; chunk a has tf 2 and length 3, the average length is 2.
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    expected = idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2))
    [(chunk_id, score)] = index.search("heron", 5)
    assert chunk_id == "a" and score == pytest.approx(expected)


def test_removing_a_chunk_drops_only_its_postings_and_merged_blobs_score_alike(
    index_location, monkeypatch
):
    from reflexrag.providers import lexical

    monkeypatch.setattr(lexical, "MAX_BLOCKS", 2)
    index = LexicalIndex(index_location, "kb")
    for n in range(5):  # five write batches: the term "heron" is merged past two blobs
        index.add({f"c{n}": (f"d{n}", "heron " * (n + 1) + "pond")})
    with index._store.reading() as db:
        query = "SELECT COUNT(*) FROM lexical_blocks WHERE term='heron'"
        assert db.execute(query).fetchone()[0] <= 2
    assert [chunk for chunk, _ in index.search("heron", 5)] == ["c4", "c3", "c2", "c1", "c0"]
    index.remove_documents(["d3"])
    assert [chunk for chunk, _ in index.search("heron", 5)] == ["c4", "c2", "c1", "c0"]
    assert index.chunk_count() == 4


def assert_same_ranking(found: list[tuple[str, float]], expected: list[tuple[str, float]]):
    assert [chunk for chunk, _ in found] == [chunk for chunk, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])


def test_removed_chunks_score_as_if_never_indexed_until_and_after_compaction(
    index_location, tmp_path, monkeypatch
):
    from reflexrag.providers import lexical

    monkeypatch.setattr(lexical, "MIN_COMPACT", 3)
    texts = {f"c{n}": (f"d{n}", "heron " * (n % 3 + 1) + f"pond fish{n % 2}") for n in range(12)}
    index = LexicalIndex(index_location, "kb")
    index.add(texts)
    survivors = LexicalIndex(tmp_path / "survivors.sqlite", "kb")

    def dead_rows() -> int:
        with index._store.reading() as db:
            return db.execute("SELECT COUNT(*) FROM lexical_dead").fetchone()[0]

    def postings_of(term: str) -> int:
        with index._store.reading() as db:
            rows = db.execute("SELECT postings FROM lexical_blocks WHERE term=?", (term,))
            return sum(len(blob) // 12 for (blob,) in rows.fetchall())

    index.remove_documents(["d0", "d1"])  # two tombstones, under the bar: nothing rewritten
    survivors.add({cid: value for cid, value in texts.items() if cid not in {"c0", "c1"}})
    assert dead_rows() == 2 and postings_of("heron") == 12
    for query in ("heron", "pond fish1", "fish0 heron"):
        assert_same_ranking(index.search(query, 12), survivors.search(query, 12))

    index.remove_documents(["d2", "d3"])  # four dead against eight live: compacted
    survivors.remove_documents(["d2", "d3"])
    assert dead_rows() == 0 and postings_of("heron") == 8
    assert_same_ranking(index.search("heron fish0", 12), survivors.search("heron fish0", 12))
    assert index.chunk_count() == 8


def test_an_index_from_an_older_version_is_rebuilt_from_the_store(tmp_path):
    import sqlite3

    from reflexrag.providers import lexical
    from reflexrag.providers.knowledge_base import open_knowledge_base

    kb = open_knowledge_base("kb", tmp_path)
    kb.add([SourceDocument("crag", "A retrieval evaluator grades documents.", {"title": "CRAG"})])
    path = str((tmp_path / "lexical.sqlite").resolve())
    lexical._connections.pop(path)[0].close()
    with sqlite3.connect(path) as old:  # the version 1 layout: one row per posting
        old.executescript(
            "DROP TABLE lexical_blocks; DROP TABLE lexical_chunks; DROP TABLE lexical_stats;"
            "CREATE TABLE lexical_postings (kb, term, chunk_id, tf, length);"
            "CREATE TABLE lexical_chunks (kb, chunk_id, doc_id, length);"
            "PRAGMA user_version=0;"
        )
    reopened = open_knowledge_base("kb", tmp_path)
    assert reopened.search("retrieval evaluator", 1, "bm25")[0].metadata["doc_id"] == "crag"


def test_traditional_and_simplified_chinese_find_each_other(index_location):
    index = LexicalIndex(index_location, "kb")
    index.add({"drcd": ("d", "議會大廈建於1998年。"), "other": ("o", "巴黎是法國的首都。")})
    assert index.search("议会大厦是哪一年建的？", 2)[0][0] == "drcd"
    assert index.search("議會大廈建於哪一年？", 2)[0][0] == "drcd"


def test_a_postgres_index_of_an_older_version_is_dropped_once(fresh_database):
    import psycopg

    LexicalIndex(fresh_database, "kb").add({"zh": ("z", "特斯拉于1943年在纽约去世。")})
    assert LexicalIndex(fresh_database, "kb").chunk_count() == 1  # current: kept
    with psycopg.connect(fresh_database, autocommit=True) as db:
        db.execute("UPDATE lexical_version SET version = 3")
    # Dropped; the knowledge base sees its count disagree with the store's and re-indexes.
    assert LexicalIndex(fresh_database, "kb").chunk_count() == 0
    with psycopg.connect(fresh_database, autocommit=True) as db:
        assert db.execute("SELECT version FROM lexical_version").fetchall() == [(4,)]


def test_knowledge_base_modes_and_index_maintenance():
    kb = get_knowledge_base("bm25-modes")
    kb.add(
        [
            SourceDocument(
                "crag",
                "A retrieval evaluator scores documents before generation.",
                {"title": "Corrective RAG (CRAG)"},
            ),
            SourceDocument("paris", "Paris is the capital of France.", {"title": "Paris"}),
        ]
    )
    for mode in ("vector", "bm25", "hybrid"):
        hits = kb.search("What is CRAG?", 1, mode)
        assert hits[0].metadata["doc_id"] == "crag", mode
        assert 0 < hits[0].metadata["score"] <= 1, "score is the cosine in every mode"
    kb.add([SourceDocument("paris", "Lyon hosts the Festival of Lights.", {"title": "Lyon"})])
    assert kb.search("capital France", 2, "bm25") == [], "the replaced text is unindexed"
    assert kb.search("Festival of Lights", 1, "bm25")[0].metadata["doc_id"] == "paris"
    with pytest.raises(KnowledgeBaseError, match="unknown retrieval mode"):
        kb.search("x", 1, "fuzzy")


def test_a_crash_between_the_two_stores_is_repaired(monkeypatch):
    """The vector store got a document, the process died before the keyword index did: the
    next open indexes it from the store, and re-ingesting finds it complete."""
    kb = get_knowledge_base("crash-lexical")
    kb.add([SourceDocument("d0", "The heron named Quill eats fish.", {"title": "Quill"})])

    def crash(chunks):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(kb.lexical, "add", crash)
    with pytest.raises(KeyboardInterrupt):
        kb.add([SourceDocument("d1", "A walrus named Tusk sleeps on ice.", {"title": "Tusk"})])
    monkeypatch.undo()
    assert kb.count() == 2 and kb.lexical.chunk_count() == 1
    assert kb.search("walrus Tusk", 1, "bm25") == [], "the crash left the index behind"

    kb_module._kb_cache.clear()
    reopened = get_knowledge_base("crash-lexical")
    assert reopened.lexical.chunk_count() == reopened.count() == 2
    assert reopened.search("walrus Tusk", 1, "bm25")[0].metadata["doc_id"] == "d1"


def test_a_document_cut_short_by_a_crash_is_written_again():
    kb = get_knowledge_base("crash-partial")
    text = " ".join(
        f"Sentence {n} talks about herons and their fishing habits." for n in range(150)
    )
    report = kb.add([SourceDocument("long", text, {"title": "Herons"})])
    assert report.added_chunks > 2
    # As if the process died after writing only some of the document's chunks.
    kb.lexical.remove_documents(["long"])
    kb._collection.delete(ids=["long#1"])
    again = kb.add([SourceDocument("long", text, {"title": "Herons"})])
    assert again.unchanged_documents == 0 and again.replaced_documents == 1
    assert kb.count() == report.added_chunks == kb.lexical.chunk_count()


def test_large_documents_are_written_in_batches(monkeypatch):
    monkeypatch.setattr(kb_module, "WRITE_BATCH", 2)
    kb = get_knowledge_base("batched")
    text = " ".join(f"Line {n} mentions the lighthouse keeper." for n in range(120))
    report = kb.add([SourceDocument("big", text, {"title": "Lighthouse"})])
    assert report.added_chunks > 2 and kb.count() == report.added_chunks


def test_reading_an_unknown_knowledge_base_creates_nothing():
    with pytest.raises(UnknownKnowledgeBaseError, match="unknown knowledge base 'nope'"):
        get_knowledge_base("nope", create=False)
    assert "nope" not in kb_module.list_knowledge_bases()


def test_a_second_process_cannot_write_while_the_data_dir_is_held():
    data_dir = get_settings().data_dir
    with exclusive_writer(data_dir, "a reflexrag server"):
        ingest = subprocess.run(
            [sys.executable, "-m", "reflexrag.server.cli", "ingest", "--sample", "--quiet"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ingest.returncode == 2
        assert "in use by a reflexrag server" in ingest.stderr
        assert "Traceback" not in ingest.stderr
        with pytest.raises(DataDirBusyError), exclusive_writer(data_dir, "another"):
            pass
    with exclusive_writer(data_dir, "free again"):
        pass


def test_context_rejects_an_unknown_retrieval_mode():
    with pytest.raises(ValueError, match="retrieval_mode"):
        Context(retrieval_mode="fuzzy")
