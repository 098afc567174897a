"""A small stratified evaluation run writes a complete, sane report."""

from __future__ import annotations

import json

import pytest

from reflexrag.benchmarks.evaluate import run_eval
from reflexrag.graphs import STRATEGIES

pytestmark = pytest.mark.integration


async def test_eval_smoke_run_writes_a_report(fixtures_dir, tmp_path):
    strategies = [*STRATEGIES, "tutorial_self_rag"]
    report = await run_eval(
        fixtures_dir / "qa.jsonl",
        fixtures_dir / "corpus.jsonl",
        fixtures_dir / "web.jsonl",
        strategies,
        tmp_path,
        limit=40,
        seed=0,
        progress=False,
    )
    for name in ("report.json", "report.md", "accuracy_vs_cost.png"):
        assert (tmp_path / name).stat().st_size > 0
    saved = json.loads((tmp_path / "report.json").read_text())
    assert set(saved["strategies"]) == set(strategies)
    assert len(saved["records"]) == 40 * len(strategies)
    table = (tmp_path / "report.md").read_text()
    for strategy in strategies:
        assert f"| {strategy} |" in table
        overall = report["strategies"][strategy]["overall"]
        assert overall["questions"] == 40
        for key in ("answer_contains", "f1", "exact_match", "hit@5", "mrr@10"):
            assert 0.0 <= overall[key] <= 1.0
        assert overall["seconds_p50"] <= overall["seconds_p95"]
        assert set(overall["by"] if "by" in overall else report["strategies"][strategy]["by"]) == {
            "lang",
            "category",
            "hop",
            "source",
        }
    naive = report["strategies"]["naive"]["overall"]
    self_rag = report["strategies"]["self_rag"]["overall"]
    reference = report["always_abstain"]["truthfulness"]
    print(
        f"smoke: truthfulness naive {naive['truthfulness']:.3f}, self_rag "
        f"{self_rag['truthfulness']:.3f}, always-abstain {reference:.3f}; naive contains "
        f"{naive['answer_contains']:.3f}, self_rag honest {self_rag['abstain_or_recover']:.3f}"
    )
    assert naive["answer_contains"] >= 0.65 and naive["answer_rate"] == 1.0
    assert naive["identical_to_naive"] == 1.0 > self_rag["identical_to_naive"]
    assert self_rag["truthfulness"] > max(naive["truthfulness"], reference)
    assert self_rag["abstain_or_recover"] > naive["abstain_or_recover"]
    assert "| always-abstain (reference) |" in table
