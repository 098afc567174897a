"""The local complexity classifier and ambiguity rules, in English and Chinese."""

from __future__ import annotations

import pytest

from reflexrag.nodes.judges.local import LocalJudge
from reflexrag.nodes.judges.rules import unresolved_reference
from reflexrag.providers.embeddings import get_embeddings


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge(get_embeddings())


@pytest.mark.parametrize(
    ("question", "level"),
    [
        ("hello!", "no_retrieval"),
        ("谢谢", "no_retrieval"),
        ("What is 17 * 23?", "no_retrieval"),
        ("Write a Python function that reverses a string", "no_retrieval"),
        ("写一个排序函数", "no_retrieval"),
        ("When did Nikola Tesla die?", "single_step"),
        ("特斯拉是哪一年去世的？", "single_step"),
        ("What does CRAG do when retrieval is incorrect?", "single_step"),
        ("Are Christopher Nolan and Sathish Kalathil both film directors?", "multi_step"),
        ("BM25和向量检索有什么区别？", "multi_step"),
        ("Who directed the film that was shot in Leland, North Carolina in 1986?", "multi_step"),
        ("那篇论文的作者的导师在哪所大学任教？以及他研究什么？", "multi_step"),
        ("Why did the Normans invade England and what happened after?", "multi_step"),
    ],
)
async def test_levels(judge, question, level):
    verdict = await judge.classify_complexity(question)
    assert verdict.level == level, verdict
    assert verdict.reason
    assert "length" in verdict.features


async def test_features_explain_a_multi_step_verdict(judge):
    verdict = await judge.classify_complexity(
        "Compare BM25 and dense retrieval: which is better for Chinese queries?"
    )
    assert verdict.features["comparison"] and verdict.features["two_subjects"]
    assert verdict.features["score"] >= 3 and "comparison" in verdict.reason


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("What are the limits of this API?", "this API"),
        ("这个API有什么限制？", "这个API"),
        ("What does it do?", "it"),
        ("它支持哪些功能？", "它"),
    ],
)
async def test_unresolved_references_ask_back(judge, question, phrase):
    verdict = await judge.classify_complexity(question)
    assert verdict.ambiguous and verdict.features["unresolved_reference"] == phrase
    assert phrase in verdict.clarifying_question


@pytest.mark.parametrize(
    "question",
    [
        "What are the rate limits of the Chroma API?",
        "What did the dadaists do and why did they stop?",
        "What does it mean for a knot to be considered indecomposable?",
        "这个API在2024年之后有哪些限制？",
        "Who directed the film that was shot in Leland in 1986?",
    ],
)
def test_named_or_resolved_subjects_are_not_ambiguous(question):
    assert unresolved_reference(question) is None


def test_an_earlier_question_in_the_thread_resolves_the_reference():
    assert unresolved_reference("What are its limits?") == "its"
    assert unresolved_reference("What are its limits?", ["What is Self-RAG?"]) is None
