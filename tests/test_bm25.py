"""BM25 index, reciprocal rank fusion, and the knowledge base's retrieval modes."""

import pytest

from providers import knowledge_base as kb_module
from providers.bm25 import BM25Index, reciprocal_rank_fusion
from providers.knowledge_base import KnowledgeBaseError, SourceDocument, get_knowledge_base
from state import Context


def test_rrf_orders_by_summed_reciprocal_ranks():
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63
    assert reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=4) == ["a", "c", "b", "d"]
    assert reciprocal_rank_fusion([["x"], []], k=5) == ["x"]


def test_bm25_ranks_exact_terms_in_both_languages_and_persists(tmp_path):
    index = BM25Index(tmp_path / "kb.bm25.json")
    index.update(
        {
            "tesla": "Nikola Tesla died in 1943 in New York.",
            "paris": "Paris is the capital of France.",
            "zh": "特斯拉于1943年在纽约去世。",
        }
    )
    assert index.search("When did Tesla die?", 3)[0][0] == "tesla"
    assert index.search("特斯拉哪一年去世？", 3)[0][0] == "zh"
    assert index.search("bananas", 3) == []
    reloaded = BM25Index(tmp_path / "kb.bm25.json")
    assert reloaded.search("capital of France", 1)[0][0] == "paris"
    reloaded.update({}, remove=["paris"])
    assert BM25Index(tmp_path / "kb.bm25.json").search("capital of France", 1) == []


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


def test_an_index_missing_on_disk_is_rebuilt_from_the_collection():
    kb = get_knowledge_base("bm25-rebuild")
    kb.add([SourceDocument("d1", "The heron named Quill eats fish.", {"title": "Quill"})])
    kb.bm25.path.unlink()
    kb_module._kb_cache.clear()
    reopened = get_knowledge_base("bm25-rebuild")
    assert reopened is not kb
    assert reopened.search("heron", 1, "bm25")[0].metadata["doc_id"] == "d1"


def test_context_rejects_an_unknown_retrieval_mode():
    with pytest.raises(ValueError, match="retrieval_mode"):
        Context(retrieval_mode="fuzzy")
