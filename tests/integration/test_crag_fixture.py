"""CRAG on the shared fixture: action accuracy and how often the web fallback recovers answers.

KB = ``corpus.jsonl``; the offline web = ``web.jsonl`` (withheld passages plus distractors).
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest

from reflexrag.benchmarks import metrics
from reflexrag.benchmarks.fixture import load_qa
from reflexrag.providers.knowledge_base import get_knowledge_base
from reflexrag.providers.loaders import load_jsonl
from reflexrag.server.runner import run_question
from reflexrag.state import Context

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def context(fixtures_dir: Path) -> Context:
    get_knowledge_base("fixture-corpus").add(load_jsonl(fixtures_dir / "corpus.jsonl"))
    get_knowledge_base("fixture-web").add(load_jsonl(fixtures_dir / "web.jsonl"))
    return Context(kb="fixture-corpus", web_kb="fixture-web", search_provider="local")


async def test_crag_actions_and_web_recovery(context, fixtures_dir):
    questions = load_qa(fixtures_dir / "qa.jsonl")
    actions: dict[str, Counter] = {"answerable": Counter(), "unanswerable": Counter()}
    web_gold_in_context, web_answers = [], []
    for item in questions:
        result = await run_question("crag", item.question, context)
        assert result.stop_reason is not None and result.crag_action is not None
        actions["answerable" if item.answerable else "unanswerable"][result.crag_action] += 1
        if item.web_gold_doc_ids:
            web_gold_in_context.append(
                bool(set(result.context_doc_ids) & set(item.web_gold_doc_ids))
            )
            shown = f"{result.answer} {result.quote}" if result.answer_kind != "not_found" else ""
            web_answers.append(metrics.contains_answer(shown, item.web_answers, item.lang))
    answerable, unanswerable = actions["answerable"], actions["unanswerable"]
    correct_rate = answerable["correct"] / sum(answerable.values())
    not_correct_rate = 1 - unanswerable["correct"] / sum(unanswerable.values())
    gold_rate, answer_rate = statistics.fmean(web_gold_in_context), statistics.fmean(web_answers)
    print(
        f"crag actions: answerable {dict(answerable)} (correct {correct_rate:.3f}); "
        f"unanswerable {dict(unanswerable)} (incorrect or ambiguous {not_correct_rate:.3f}); "
        f"web-gold questions (n={len(web_answers)}): gold web passage in final context "
        f"{gold_rate:.3f}, answer contains gold {answer_rate:.3f}"
    )
    assert correct_rate >= 0.85
    assert not_correct_rate >= 0.80
    assert gold_rate >= 0.72
    assert answer_rate >= 0.60


@pytest.mark.parametrize(
    ("question", "actions", "origin", "gold"),
    [
        ("What year did Tesla die?", {"correct"}, "kb", "1943"),
        (
            "What article was published in 1937?",
            {"incorrect", "ambiguous"},
            "web",
            "A Machine to End War",
        ),
    ],
)
def test_cli_crag_json(context, capsys, question, actions, origin, gold):
    import json

    from reflexrag.server.cli import main

    argv = [
        "ask",
        question,
        "--strategy",
        "crag",
        "--kb",
        context.kb,
        "--web-kb",
        context.web_kb,
        "--json",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["crag_action"] in actions and result["stop_reason"] == "answered"
    assert origin in {source["origin"] for source in result["sources"]}
    assert gold in f"{result['answer']} {result.get('quote', '')}"
