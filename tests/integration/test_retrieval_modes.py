"""hit@5 and MRR@10 of each retrieval mode per language on the fixture's answerable questions.

Hybrid must be at least as good as the better of vector and BM25 in each language.
"""

from __future__ import annotations

import statistics

import pytest

from reflexrag.benchmarks import metrics
from reflexrag.benchmarks.fixture import load_qa
from reflexrag.providers.knowledge_base import get_knowledge_base
from reflexrag.providers.loaders import load_jsonl

pytestmark = pytest.mark.integration
# Floors a little under what was measured (hit@5, MRR@10).
FLOORS = {
    ("vector", "en"): (0.97, 0.95),
    ("vector", "zh"): (0.97, 0.94),
    ("bm25", "en"): (0.97, 0.91),
    ("bm25", "zh"): (0.97, 0.96),
    ("hybrid", "en"): (0.97, 0.96),
    ("hybrid", "zh"): (0.97, 0.97),
}


def test_retrieval_modes_per_language(fixtures_dir):
    kb = get_knowledge_base("fixture-corpus")
    kb.add(load_jsonl(fixtures_dir / "corpus.jsonl"))
    answerable = [q for q in load_qa(fixtures_dir / "qa.jsonl") if q.answerable]
    measured = {}
    for mode, lang in FLOORS:
        hits, ranks = [], []
        for item in (q for q in answerable if q.lang == lang):
            found = kb.search(item.question, 10, mode)
            ids = list(dict.fromkeys(doc.metadata["doc_id"] for doc in found))
            hits.append(metrics.hit_at_k(ids, item.gold_doc_ids, 5))
            ranks.append(metrics.mrr_at_k(ids, item.gold_doc_ids, 10))
        measured[mode, lang] = (round(statistics.fmean(hits), 3), round(statistics.fmean(ranks), 3))
    print(f"retrieval (hit@5, MRR@10) by mode and language: {measured}")
    for key, (hit_floor, mrr_floor) in FLOORS.items():
        assert measured[key][0] >= hit_floor and measured[key][1] >= mrr_floor, key
    for lang in ("en", "zh"):
        for metric in (0, 1):
            better = max(measured["vector", lang][metric], measured["bm25", lang][metric])
            assert measured["hybrid", lang][metric] >= better, (lang, metric, measured)
