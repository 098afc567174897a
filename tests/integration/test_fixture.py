"""The real embedded backend on the shared rag-eval fixture.

Floors sit a little under the numbers measured when they were set (see the README); each
test prints what it measured so CI logs show the current numbers.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from reflexrag.benchmarks import metrics
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


async def test_self_rag_answers_in_corpus_and_abstains_out_of_corpus(corpus_kb, questions):
    context = Context(kb=KB)
    contains, wrong_abstentions, seconds = [], [], []
    for item in (q for q in questions if q.answerable):
        result = await run_question("self_rag", item.question, context)
        # What the reader sees: the short answer and the sentence it comes from.
        shown = f"{result.answer} {result.quote}" if result.answer_kind != "not_found" else ""
        contains.append(metrics.contains_answer(shown, item.answers, item.lang))
        wrong_abstentions.append(result.answer_kind == "not_found")
        seconds.append(result.elapsed_s)
    honest = []
    for item in (q for q in questions if q.category == "out_of_corpus"):
        result = await run_question("self_rag", item.question, context)
        assert result.stop_reason is not None
        honest.append(result.answer_kind == "not_found")
    rate, abstain, honest_rate = (
        statistics.fmean(contains),
        statistics.fmean(wrong_abstentions),
        statistics.fmean(honest),
    )
    print(
        f"self_rag in-corpus contains-gold {rate:.3f} (n={len(contains)}), wrong abstention "
        f"{abstain:.3f}, out-of-corpus not-found {honest_rate:.3f} (n={len(honest)}), "
        f"median {statistics.median(seconds):.3f}s/question"
    )
    # Answers from the best evidence past the judges keep Self-RAG at naive's level (0.752
    # measured) with 1.0 % wrong abstentions, honest on 86 % of out-of-corpus questions.
    assert rate >= 0.70
    assert abstain <= 0.03
    assert honest_rate >= 0.70
