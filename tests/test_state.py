"""Reducers of the shared state."""

import pytest
from langchain_core.documents import Document

from reflexrag.state import RESET, Context, append_items, merge_documents, merge_grades, sum_counts


def doc(doc_id: str, text: str = "x") -> Document:
    return Document(page_content=text, id=doc_id)


def test_merge_documents_deduplicates_by_id_and_keeps_the_newer_copy():
    merged = merge_documents([doc("a", "old"), doc("b")], [doc("a", "new"), doc("c")])
    assert [d.id for d in merged] == ["a", "b", "c"]
    assert merged[0].page_content == "new"


def test_merge_documents_reset_clears_the_pool():
    assert merge_documents([doc("a")], RESET) == []
    assert merge_documents(None, None) == []


def test_merge_grades_latest_wins_and_reset():
    first = {"a": {"score": 0.2, "relevant": False, "query": "q"}}
    second = {"a": {"score": 0.9, "relevant": True, "query": "q2"}}
    assert merge_grades(first, second)["a"]["relevant"] is True
    assert merge_grades(first, RESET) == {}


def test_sum_counts_adds_per_key():
    assert sum_counts({"llm.grader": 2}, {"llm.grader": 3, "llm.generator": 1}) == {
        "llm.grader": 5,
        "llm.generator": 1,
    }
    assert sum_counts({"x": 1}, RESET) == {}


def test_append_items_grows_and_resets():
    one = [{"node": "retrieve", "summary": "4 chunks"}]
    assert append_items(one, one) == one + one
    assert append_items(one, RESET) == []


def test_context_rejects_unknown_fields_and_bad_limits():
    import pytest

    with pytest.raises(ValueError, match="unknown context field"):
        Context.from_overrides({"top_kk": 3})
    with pytest.raises(ValueError, match="top_k"):
        Context.from_overrides({"top_k": 0})
    assert Context.from_overrides({"top_k": 7}).top_k == 7


def test_llm_judging_comes_from_the_run_the_settings_or_the_default(monkeypatch):
    from reflexrag.providers.settings import get_settings
    from reflexrag.server.cli import _context, build_parser

    assert Context().llm_judging == "cascade"
    monkeypatch.setenv("REFLEXRAG_LLM_JUDGING", "batched")
    get_settings.cache_clear()
    try:
        assert Context().llm_judging == "batched"
        assert Context(llm_judging="per_call").llm_judging == "per_call"
        args = build_parser().parse_args(["ask", "q?", "--llm-judging", "per_call"])
        assert _context(args).llm_judging == "per_call"
        args = build_parser().parse_args(["eval", "--qa", "a", "--corpus", "b"])
        assert args.llm_judging is None
        with pytest.raises(ValueError, match="llm_judging"):
            Context(llm_judging="sometimes")
    finally:
        monkeypatch.delenv("REFLEXRAG_LLM_JUDGING")
        get_settings.cache_clear()
