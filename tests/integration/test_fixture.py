"""The real embedded backend on the shared rag-eval fixture.

Floors sit a little under the numbers measured when they were set (see the README); each
test prints what it measured so CI logs show the current numbers.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from reflexrag.benchmarks import metrics
from reflexrag.benchmarks.evaluate import truthfulness
from reflexrag.benchmarks.fixture import load_qa
from reflexrag.providers.knowledge_base import get_knowledge_base
from reflexrag.providers.loaders import load_jsonl
from reflexrag.server.runner import run_question
from reflexrag.state import Context

pytestmark = pytest.mark.integration
KB = "fixture-corpus"


@pytest.fixture(scope="module")
def corpus_kb(fixtures_dir: Path):
    kb = get_knowledge_base(KB)
    kb.add(load_jsonl(fixtures_dir / "corpus.jsonl"))
    return kb


@pytest.fixture(scope="module")
def questions(fixtures_dir: Path):
    return load_qa(fixtures_dir / "qa.jsonl")


def test_dense_retrieval_hit_at_5(corpus_kb, questions):
    answerable = [q for q in questions if q.answerable]
    hits = {}
    for lang in ("en", "zh"):
        mine = [q for q in answerable if q.lang == lang]
        hits[lang] = statistics.fmean(
            metrics.hit_at_k(
                [d.metadata["doc_id"] for d in corpus_kb.search(q.question, 5)], q.gold_doc_ids, 5
            )
            for q in mine
        )
    print(f"dense hit@5 by language: {hits}")
    assert hits["en"] >= 0.95 and hits["zh"] >= 0.95


async def test_self_rag_is_more_truthful_than_naive_and_than_always_abstaining(
    corpus_kb, questions
):
    context = Context(kb=KB)
    scores: dict[str, list[float]] = {"naive": [], "self_rag": []}
    wrong_abstentions, honest = [], []
    for item in questions:
        for strategy, mine in scores.items():
            result = await run_question(strategy, item.question, context)
            assert result.stop_reason is not None
            mine.append(truthfulness(item, result))
            if strategy == "self_rag" and item.answerable:
                wrong_abstentions.append(result.answer_kind == "not_found")
            elif strategy == "self_rag" and item.category == "out_of_corpus":
                honest.append(result.answer_kind == "not_found")
    naive, self_rag = (statistics.fmean(scores[s]) for s in ("naive", "self_rag"))
    abstaining = statistics.fmean(0.0 if item.answerable else 1.0 for item in questions)
    print(
        f"truthfulness: self_rag {self_rag:.3f}, naive {naive:.3f}, always-abstain "
        f"{abstaining:.3f}; self_rag wrong abstention {statistics.fmean(wrong_abstentions):.3f}, "
        f"out-of-corpus not-found {statistics.fmean(honest):.3f} (n={len(honest)})"
    )
    # Measured with the model fitted without this set (README): self_rag 0.530, naive 0.192,
    # always-abstain 0.226; 19 % wrong abstentions, every out-of-corpus question not found.
    assert self_rag >= naive + 0.25
    assert self_rag >= abstaining + 0.2
    assert statistics.fmean(honest) >= 0.9
    assert statistics.fmean(wrong_abstentions) <= 0.25
