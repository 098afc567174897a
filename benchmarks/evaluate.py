"""``reflexrag eval``: every strategy side by side on a QA fixture.

The corpus (and web snapshot) go into throw-away knowledge bases in a temporary directory;
embeddings come from the shared on-disk cache, so a second run embeds nothing. Each question
runs through each strategy; per-question records and aggregates go to ``report.json``, a
headline table to ``report.md``, and plots to PNG files.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from reflexrag.benchmarks import metrics
from reflexrag.benchmarks.fixture import QAItem, load_qa
from reflexrag.graphs import STRATEGIES, get_strategy
from reflexrag.providers.knowledge_base import attach_knowledge_base, open_knowledge_base
from reflexrag.providers.loaders import load_jsonl
from reflexrag.server.runner import RunResult, run_question
from reflexrag.state import Context

ABSTENTIONS = {"not_found", "clarification", "error"}
"""Outcomes that give no answer; of them only a run that failed is never an honest one."""
"""Answer kinds that give no answer. ``no_retrieval`` (an answer from general knowledge) is an
answer: it is not counted as an honest abstention."""
LONG_ANSWER_F1 = 0.5
"""Token F1 with a gold passage from which a long answer counts as giving it."""
CORPUS_KB = "eval-corpus"
WEB_KB = "eval-web"
# Comparison targets runnable by name; never part of "all".
BASELINES = {"tutorial_self_rag": "reflexrag.benchmarks.tutorial_self_rag"}
BREAKDOWNS = ("lang", "category", "hop", "source")
SLICE_COLUMNS = (
    ("truthfulness", "truthfulness"),
    ("answer_rate", "answer rate"),
    ("answer_contains", "contains"),
    ("f1", "F1"),
    ("rouge_l", "ROUGE-L"),
    ("hit@5", "hit@5"),
    ("all_gold_recall", "all-gold recall"),
    ("abstain_or_recover", "honest"),
    ("planted_repeated", "planted answer repeated"),
    ("web_gold_retrieved", "web gold retrieved"),
    ("seconds_mean", "mean s"),
)
HEADLINE = (
    ("truthfulness", "truthfulness"),
    ("answer_rate", "answer rate"),
    ("identical_to_naive", "same as naive"),
    ("answer_right", "short answer right"),
    ("answer_contains", "contains gold"),
    ("f1", "F1"),
    ("exact_match", "EM"),
    ("hit@5", "hit@5"),
    ("mrr@10", "MRR@10"),
    ("abstain_or_recover", "honest on unanswerable"),
    ("wrong_abstention", "wrong abstention"),
    ("planted_repeated", "planted answer repeated"),
    ("llm_calls", "LLM calls/q"),
    ("judge_calls", "judge calls/q"),
    ("seconds_mean", "mean s"),
    ("seconds_p50", "p50 s"),
    ("seconds_p95", "p95 s"),
)


@dataclass
class Record:
    qid: str
    strategy: str
    lang: str
    category: str
    hop: str
    source: str
    question: str
    answer: str
    quote: str
    confidence: float | None
    answer_kind: str | None
    sources: list[dict[str, Any]]
    stop_reason: str | None
    route: str | None
    rounds: int
    seconds: float
    usage: dict[str, int]
    counters: dict[str, int]
    metrics: dict[str, float]
    error: str | None = None
    """Why the run failed (a model server down, say), or was not run."""


def resolve_strategies(spec: str) -> list[str]:
    """``all`` = every registered strategy; otherwise a comma list of strategies/baselines."""
    if spec == "all":
        return list(STRATEGIES)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    for name in names:
        if name not in BASELINES:
            get_strategy(name)
    if not names:
        raise ValueError("no strategies named")
    return names


def stratified_sample(items: Sequence[QAItem], limit: int | None, seed: int) -> list[QAItem]:
    """``limit`` questions spread over (source, category, lang) groups in proportion, ≥1 each."""
    if not limit or limit >= len(items):
        return list(items)
    groups: dict[tuple[str, str, str], list[QAItem]] = defaultdict(list)
    for item in items:
        groups[(item.source, item.category, item.lang)].append(item)
    rng = random.Random(seed)
    quota = {key: max(1, round(limit * len(group) / len(items))) for key, group in groups.items()}
    while sum(quota.values()) > limit:
        largest = max(quota, key=lambda key: quota[key])
        quota[largest] -= 1
    while sum(quota.values()) < limit:
        roomiest = max(quota, key=lambda key: len(groups[key]) - quota[key])
        quota[roomiest] += 1
    chosen = [item for key in sorted(groups) for item in rng.sample(groups[key], quota[key])]
    return chosen


def contains_gold(item: QAItem, text: str) -> float:
    """1 when ``text`` holds every part of ``answer_parts``, or else a gold answer."""
    if parts := item.extra.get("answer_parts"):
        return metrics.contains_all_parts(text, parts, item.lang)
    return metrics.contains_answer(text, item.answers, item.lang)


def holds_gold(item: QAItem, text: str) -> bool:
    """Whether ``text`` gives the question's answer (:func:`contains_gold`); for a long
    (sentence) answer without parts, token F1 of at least ``LONG_ANSWER_F1`` with a gold
    answer, since a passage is rarely quoted word for word."""
    if not text:
        return False
    if item.answer_style == "long" and not item.extra.get("answer_parts"):
        return metrics.token_f1(text, item.answers, item.lang) >= LONG_ANSWER_F1
    return bool(contains_gold(item, text))


def truthfulness(item: QAItem, result: RunResult) -> float:
    """Meta's CRAG-benchmark scoring. Answerable: +1 when the short answer gives the answer,
    +0.5 when only its quote does, 0 for an abstention, -1 for a wrong answer. Unanswerable:
    +1 for an abstention (or, where the fixture's web snapshot holds the answer, for that
    answer), -1 for any other answer. Counterfactual (the corpus plants a false answer):
    abstaining or giving the true answer +1, anything else (repeating the planted answer)
    -1. A failed run is an abstention that is never honest: 0."""
    if result.answer_kind == "error":
        return 0.0
    abstained = result.answer_kind in ABSTENTIONS
    if item.category == "counterfactual":
        return 1.0 if abstained or holds_gold(item, result.answer) else -1.0
    if not item.answerable:
        if abstained:
            return 1.0
        shown = " ".join(filter(None, (result.answer, result.quote)))
        web = item.extra.get("answers_if_web")
        return 1.0 if web and metrics.contains_answer(shown, web, item.lang) else -1.0
    if abstained:
        return 0.0
    if holds_gold(item, result.answer):
        return 1.0
    return 0.5 if holds_gold(item, result.quote) else -1.0


def always_abstain(item: QAItem) -> float:
    """What a system that never answers scores on ``item``."""
    return 0.0 if item.answerable else 1.0


def score(item: QAItem, result: RunResult) -> dict[str, float]:
    """Every metric that applies to this question; the others are left out (not zero)."""
    abstained = result.answer_kind in ABSTENTIONS
    # What a reader sees: the short answer and the quote that supports it. EM and F1 are on
    # the short answer alone; "contains gold" on both.
    shown = "" if abstained else " ".join(filter(None, (result.answer, result.quote)))
    answer = "" if abstained else result.answer
    values: dict[str, float] = {
        "truthfulness": truthfulness(item, result),
        "answer_rate": float(not abstained),
        "always_abstain": always_abstain(item),
    }
    if item.answerable:
        values["exact_match"] = metrics.exact_match(answer, item.answers, item.lang)
        values["f1"] = metrics.token_f1(answer, item.answers, item.lang)
        values["answer_contains"] = contains_gold(item, shown)
        values["answer_right"] = float(holds_gold(item, answer))
        # Selective QA: an answer is right when it holds the gold (or, for a question the
        # knowledge base cannot answer, the web's answer); abstaining is right on those only.
        values["correct"] = values["answer_contains"]
        # A failed run is counted among the errors, not as an abstention.
        values["wrong_abstention"] = float(abstained and result.answer_kind != "error")
        if item.answer_style == "long":
            values["rouge_l"] = metrics.rouge_l(answer, item.answers, item.lang)
    elif item.category == "counterfactual":
        # The corpus plants a false answer: is it what the reader is told?
        planted = [str(item.extra.get("fakeanswer") or "")]
        values["planted_repeated"] = float(
            not abstained
            and bool(planted[0])
            and bool(metrics.contains_answer(answer, planted, item.lang))
            and not holds_gold(item, answer)
        )
        values["correct"] = float(holds_gold(item, shown))
    else:
        recovered = metrics.contains_answer(shown, item.web_answers, item.lang)
        values["web_recovery"] = recovered
        # A run that failed said nothing about the knowledge base: not an honest abstention.
        honest = abstained and result.answer_kind != "error"
        values["abstain_or_recover"] = float(honest or bool(recovered))
        values["correct"] = values["web_recovery"]
    if item.answerable and item.gold_doc_ids:
        gold = item.gold_doc_ids
        values["hit@5"] = metrics.hit_at_k(result.retrieved_doc_ids, gold, 5)
        values["mrr@10"] = metrics.mrr_at_k(result.retrieved_doc_ids, gold, 10)
        values["context_gold_fraction"] = metrics.gold_fraction(result.context_doc_ids, gold)
        if item.hop == "multi":
            values["all_gold_recall"] = metrics.all_gold_recall(result.retrieved_doc_ids, gold)
    elif item.web_gold_doc_ids:
        # Only a web fallback can reach these passages; the KB never holds them.
        values["web_gold_retrieved"] = float(
            bool(set(result.retrieved_doc_ids) & set(item.web_gold_doc_ids))
        )
    values["web_fallback"] = float(any(s.get("origin") == "web" for s in result.sources))
    return values


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if ordered else 0.0


def aggregate(records: Sequence[Record]) -> dict[str, Any]:
    """Means of every metric over the records it applies to, plus cost and latency."""
    by_metric: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for name, value in record.metrics.items():
            by_metric[name].append(value)
    summary: dict[str, Any] = {name: round(statistics.fmean(v), 4) for name, v in by_metric.items()}
    seconds = [r.seconds for r in records]
    keys = {key for record in records for key in record.usage}
    usage = {key: [record.usage.get(key, 0) for record in records] for key in sorted(keys)}
    summary.update(
        questions=len(records),
        answerable=sum(r.category == "in_corpus" for r in records),
        unanswerable=sum(r.category != "in_corpus" for r in records),
        errors=sum(r.answer_kind == "error" for r in records),
        failed_runs=sum(failed_run(r) for r in records),
        recursion_errors=sum(r.stop_reason == "recursion_error" for r in records),
        seconds_mean=round(statistics.fmean(seconds), 3) if seconds else 0.0,
        seconds_p50=round(_percentile(seconds, 0.5), 3),
        seconds_p95=round(_percentile(seconds, 0.95), 3),
        llm_calls=round(
            statistics.fmean(
                sum(v for k, v in r.usage.items() if k.startswith("llm.")) for r in records
            ),
            3,
        ),
        judge_calls=round(
            statistics.fmean(
                sum(v for k, v in r.usage.items() if k.startswith("local.")) for r in records
            ),
            3,
        ),
        calls_by_role={
            k: round(statistics.fmean(v), 3)
            for k, v in usage.items()
            if not k.startswith("tokens.")
        },
        tokens={
            k.removeprefix("tokens."): round(statistics.fmean(v), 1)
            for k, v in usage.items()
            if k.startswith("tokens.")
        },
        loops={
            name: round(statistics.fmean(r.counters.get(name, 0) for r in records), 3)
            for name in (
                "query_rewrites",
                "generation_attempts",
                "retrieval_attempts",
                "web_searches",
            )
        },
        stop_reasons=_count(r.stop_reason or "error" for r in records),
    )
    return summary


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for value in values:
        counts[value] += 1
    return dict(sorted(counts.items()))


def failed_run(record: Record) -> bool:
    """A run that failed for a reason outside the strategy (a model server down, a crash),
    not one that ended in a recursion error the graph itself ran into."""
    return record.stop_reason == "error"


async def _run_one(
    strategy: str, item: QAItem, context: Context, skip_because: str | None = None
) -> Record:
    graph, recursion_limit = None, None
    if strategy in BASELINES:
        module = importlib.import_module(BASELINES[strategy])
        graph, recursion_limit = module.graph, module.RECURSION_LIMIT
    if skip_because is not None:
        result = RunResult.failed(strategy, skip_because)
    else:
        try:
            result = await run_question(
                strategy, item.question, context, graph=graph, recursion_limit=recursion_limit
            )
        except Exception as exc:  # one failed run must not end the eval
            result = RunResult.failed(strategy, f"{type(exc).__name__}: {exc}")
    return Record(
        qid=item.qid,
        strategy=strategy,
        lang=item.lang,
        category=item.category,
        hop=item.hop,
        source=item.source,
        question=item.question,
        answer=result.answer,
        quote=result.quote,
        confidence=result.confidence,
        answer_kind=result.answer_kind,
        sources=result.sources,
        stop_reason=result.stop_reason,
        route=result.route,
        rounds=len(result.rounds),
        seconds=round(result.elapsed_s, 3),
        usage=result.usage,
        counters=result.counters,
        metrics=score(item, result),
        error=result.error,
    )


async def run_eval(
    qa_path: Path,
    corpus_path: Path,
    web_path: Path | None,
    strategies: list[str],
    out_dir: Path,
    limit: int | None = None,
    seed: int = 0,
    concurrency: int = 2,
    context_overrides: dict[str, Any] | None = None,
    progress: bool = True,
    max_consecutive_errors: int = 5,
) -> dict[str, Any]:
    """Run the evaluation and write ``report.json``, ``report.md`` and plots to ``out_dir``.
    After ``max_consecutive_errors`` failed runs in a row (0: never) the remaining runs are
    recorded as failed without being run."""
    items = stratified_sample(load_qa(qa_path), limit, seed)
    corpus = load_jsonl(corpus_path)
    web = load_jsonl(web_path) if web_path else []
    # Nobody answers a clarifying question in a batch: those runs end needs_clarification.
    context = Context.from_overrides(
        {"ask_back": False, **(context_overrides or {}), "kb": CORPUS_KB, "web_kb": WEB_KB}
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="reflexrag-eval-") as tmp:
        for name, documents in ((CORPUS_KB, corpus), (WEB_KB, web)):
            kb = open_knowledge_base(name, Path(tmp))
            with tqdm(
                desc=f"ingest {name}",
                unit="chunk",
                file=sys.stderr,
                disable=not progress or not documents,
            ) as bar:
                kb.add(documents, progress=bar.update, planned=bar.reset)
            attach_knowledge_base(kb)
        semaphore = asyncio.Semaphore(max(1, concurrency))
        bar = tqdm(
            total=len(items) * len(strategies),
            desc="questions",
            unit="run",
            file=sys.stderr,
            disable=not progress,
        )

        failures = {"in_a_row": 0}

        async def guarded(strategy: str, item: QAItem) -> Record:
            async with semaphore:
                # After this many failures in a row the backend is down: the rest are not
                # asked of it (each would wait for its timeout), and are recorded as failed.
                stop = (
                    f"not run: {failures['in_a_row']} runs in a row failed before it"
                    if max_consecutive_errors and failures["in_a_row"] >= max_consecutive_errors
                    else None
                )
                record = await _run_one(strategy, item, context, stop)
            if stop is None:
                failures["in_a_row"] = failures["in_a_row"] + 1 if failed_run(record) else 0
            bar.update()
            return record

        # Rotate which strategy meets a question first, so cold embedding-cache misses
        # (sentences embedded on first sight) do not all land on one strategy's latency.
        jobs = [
            (strategies[(i + shift) % len(strategies)], item)
            for i, item in enumerate(items)
            for shift in range(len(strategies))
        ]
        records = await asyncio.gather(*(guarded(strategy, item) for strategy, item in jobs))
        bar.close()
    report = build_report(records, strategies, context, time.perf_counter() - started)
    report["fixture"] = {
        "qa": str(qa_path),
        "corpus": str(corpus_path),
        "web": str(web_path) if web_path else None,
        "questions": len(items),
        "limit": limit,
        "seed": seed,
    }
    write_report(report, out_dir)
    return report


def build_report(
    records: Sequence[Record], strategies: list[str], context: Context, wall_s: float
) -> dict[str, Any]:
    per_strategy: dict[str, Any] = {}
    for strategy in strategies:
        mine = [r for r in records if r.strategy == strategy]
        breakdown = {
            field: {
                value: aggregate([r for r in mine if getattr(r, field) == value])
                for value in sorted({getattr(r, field) for r in mine})
            }
            for field in BREAKDOWNS
        }
        per_strategy[strategy] = {
            "overall": aggregate(mine),
            "by": breakdown,
            "risk_coverage": risk_coverage(mine),
        }
    baseline = "naive" if "naive" in strategies else None
    if baseline:
        for strategy in strategies:
            mine = [r for r in records if r.strategy == strategy]
            theirs = [r for r in records if r.strategy == baseline]
            per_strategy[strategy]["vs_naive"] = paired_comparison(mine, theirs)
            per_strategy[strategy]["overall"]["identical_to_naive"] = identical_share(mine, theirs)
    failed = [r for r in records if failed_run(r)]
    return {
        "strategies": per_strategy,
        "always_abstain": aggregate_reference(records),
        "failed_runs": {
            "count": len(failed),
            "first_errors": list(dict.fromkeys(r.error or "unknown" for r in failed))[:5],
        },
        "context": asdict(context),
        "wall_seconds": round(wall_s, 1),
        "records": [asdict(r) for r in records],
    }


def identical_share(records: Sequence[Record], baseline: Sequence[Record]) -> float:
    """Share of questions answered word for word as naive does (answer and quote): a
    strategy that equals naive there has not corrected anything."""
    theirs = {r.qid: (r.answer_kind, r.answer, r.quote) for r in baseline}
    same = [theirs.get(r.qid) == (r.answer_kind, r.answer, r.quote) for r in records]
    return round(statistics.fmean(same), 4) if same else 0.0


def aggregate_reference(records: Sequence[Record]) -> dict[str, Any]:
    """The always-abstain reference: +1 on every unanswerable question, 0 elsewhere, over the
    questions the strategies were asked (each once)."""
    questions = {r.qid: r for r in records}.values()
    by_category = defaultdict(list)
    for record in questions:
        by_category[record.category].append(record.metrics["always_abstain"])
    return {
        "truthfulness": round(statistics.fmean(r.metrics["always_abstain"] for r in questions), 4)
        if questions
        else 0.0,
        "answer_rate": 0.0,
        "by_category": {k: round(statistics.fmean(v), 4) for k, v in sorted(by_category.items())},
    }


def paired_comparison(records: Sequence[Record], baseline: Sequence[Record]) -> dict[str, Any]:
    """Per answerable question: does this strategy contain the gold where naive does not
    (a win) or the reverse (a loss)? With a two-sided sign test on wins vs losses."""
    theirs = {r.qid: r.metrics.get("answer_contains", 0.0) for r in baseline}
    wins = losses = ties = 0
    for record in records:
        if record.category != "in_corpus" or record.qid not in theirs:
            continue
        mine, other = record.metrics.get("answer_contains", 0.0), theirs[record.qid]
        wins += mine > other
        losses += mine < other
        ties += mine == other
    return {"wins": wins, "losses": losses, "ties": ties, "sign_test_p": sign_test(wins, losses)}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test: how likely a split this uneven is if neither side is better."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return round(min(1.0, 2 * tail), 4)


def risk_coverage(records: Sequence[Record]) -> dict[str, Any]:
    """Selective QA (Kamath et al. 2020): answers ranked by confidence, accuracy among the
    most confident share of all questions. Abstentions are never covered, so a strategy that
    abstains on 30 % of questions stops at coverage 0.7."""
    answered = sorted(
        (r for r in records if r.answer_kind not in ABSTENTIONS),
        key=lambda r: -(r.confidence if r.confidence is not None else 0.0),
    )
    total = len(records) or 1
    points, correct = [], 0.0
    for n, record in enumerate(answered, start=1):
        correct += record.metrics.get("correct", 0.0)
        points.append((round(n / total, 4), round(correct / n, 4)))
    at = {}
    for level in (0.25, 0.5, 0.75, 1.0):
        reached = [accuracy for coverage, accuracy in points if coverage <= level + 1e-9]
        at[f"{level:.2f}"] = reached[-1] if reached else None
    area = sum(accuracy for _, accuracy in points) / total if points else 0.0
    # Calibration: how often answers at each confidence level are right.
    bins: dict[str, list[float]] = defaultdict(list)
    for record in answered:
        level = min(4, int(5 * (record.confidence or 0.0)))
        bins[f"{level / 5:.1f}-{(level + 1) / 5:.1f}"].append(record.metrics.get("correct", 0.0))
    calibration = {
        key: {"answers": len(v), "accuracy": round(statistics.fmean(v), 3)}
        for key, v in sorted(bins.items())
    }
    return {
        "points": points,
        "accuracy_at": at,
        "area": round(area, 4),
        "calibration": calibration,
    }


def headline_table(report: dict[str, Any]) -> str:
    header = (
        "| strategy | answerable / unanswerable | errors | "
        + " | ".join(label for _, label in HEADLINE)
        + " | wins / losses vs naive (sign test p) |"
    )
    rule = "|---|---:|---:|" + "---:|" * len(HEADLINE) + "---:|"
    rows = []
    for strategy, data in report["strategies"].items():
        overall = data["overall"]
        cells = [f"{overall['answerable']} / {overall['unanswerable']}", str(overall["errors"])]
        for key, _ in HEADLINE:
            value = overall.get(key)
            cells.append(
                "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
            )
        paired = data.get("vs_naive")
        cells.append(
            f"{paired['wins']} / {paired['losses']} ({paired['sign_test_p']:.3f})"
            if paired and strategy != "naive"
            else "–"
        )
        rows.append(f"| {strategy} | " + " | ".join(cells) + " |")
    if reference := report.get("always_abstain"):
        cells = ["", ""] + [
            f"{reference[key]:.3f}" if key in reference else "–" for key, _ in HEADLINE
        ]
        rows.append("| always-abstain (reference) | " + " | ".join(cells) + " | – |")
    return "\n".join([header, rule, *rows])


def risk_coverage_table(report: dict[str, Any]) -> str:
    levels = ("0.25", "0.50", "0.75", "1.00")
    rows = [
        "| strategy | " + " | ".join(f"accuracy at coverage {x}" for x in levels) + " | area |",
        "|---|" + "---:|" * (len(levels) + 1),
    ]
    for strategy, data in report["strategies"].items():
        curve = data["risk_coverage"]
        cells = [
            "–" if curve["accuracy_at"][x] is None else f"{curve['accuracy_at'][x]:.3f}"
            for x in levels
        ]
        rows.append(f"| {strategy} | " + " | ".join(cells) + f" | {curve['area']:.3f} |")
    rows += ["", "Calibration (answers per confidence band: how many, and the share right):", ""]
    bands = [f"{b / 5:.1f}-{(b + 1) / 5:.1f}" for b in range(5)]
    rows += ["| strategy | " + " | ".join(bands) + " |", "|---|" + "---:|" * len(bands)]
    for strategy, data in report["strategies"].items():
        calibration = data["risk_coverage"]["calibration"]
        cells = [
            f"{calibration[b]['answers']}: {calibration[b]['accuracy']:.2f}"
            if b in calibration
            else "–"
            for b in bands
        ]
        rows.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_report(report: dict[str, Any], out_dir: Path) -> None:
    (out_dir / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=1))
    cost_plot = plot_tradeoff(report, out_dir / "accuracy_vs_cost.png")
    coverage_plot = plot_risk_coverage(report, out_dir / "risk_coverage.png")
    failed = report.get("failed_runs") or {}
    warning = (
        [
            f"**{failed['count']} runs failed** (scored as abstentions that are never honest; "
            f'"errors" below): ' + "; ".join(failed["first_errors"]),
            "",
        ]
        if failed.get("count")
        else []
    )
    lines = [
        "# reflexrag evaluation",
        "",
        *warning,
        headline_table(report),
        "",
        f"{report['fixture']['questions'] if 'fixture' in report else ''} questions per "
        f"strategy; wall time {report['wall_seconds']} s. Truthfulness (Meta's CRAG "
        "benchmark) is +1 for a short answer that gives the gold, +0.5 when only its quote "
        "does, 0 for an abstention and -1 for a wrong answer; on an unanswerable question +1 "
        "for abstaining (or the web's answer) and -1 for any other answer; a failed run 0. "
        "The always-abstain row is what never answering scores. Answer rate is over all "
        'questions; "same as naive" is the share answered word for word as naive does '
        '(answer and quote); "short answer right" is over answerable questions, on the '
        'short answer alone (token F1 >= 0.5 for long answers). "contains gold" is over answerable '
        "questions, on the short answer and its supporting quote (a not-found answer scores "
        '0); EM and F1 are on the short answer alone. "honest on unanswerable" is the share '
        "of unanswerable / out-of-corpus questions answered with not-found or with the web's "
        "answer (an answer from general knowledge is not an abstention). hit@5 and MRR@10 are "
        "over answerable questions, on the documents each strategy actually retrieved. Wins / "
        "losses: answerable questions where the strategy contains the gold and naive does not, "
        "and the reverse; p is a two-sided exact sign test.",
        "",
        f"![accuracy vs cost]({cost_plot.name})",
        "",
        "## Risk and coverage",
        "",
        "Answers ranked by their confidence; accuracy (right answers, counting any answer to an "
        "unanswerable question as wrong) among the most confident share of all questions. A "
        "strategy that abstains more stops at a lower coverage; `min_confidence` chooses the "
        "point on its curve.",
        "",
        risk_coverage_table(report),
        "",
        f"![risk and coverage]({coverage_plot.name})",
        "",
    ]
    for strategy, data in report["strategies"].items():
        lines += [
            f"## {strategy}",
            "",
            "| slice | n | " + " | ".join(label for _, label in SLICE_COLUMNS) + " |",
            "|---|---:|" + "---:|" * len(SLICE_COLUMNS),
        ]
        for field, slices in data["by"].items():
            for value, stats in slices.items():
                cells = [stats.get(key) for key, _ in SLICE_COLUMNS]
                shown = ["–" if c is None else f"{c:.3f}" for c in cells]
                lines.append(
                    f"| {field}={value} | {stats['questions']} | " + " | ".join(shown) + " |"
                )
        overall = data["overall"]
        lines += [
            "",
            f"stop reasons: {overall['stop_reasons']}; calls/q by role: "
            f"{overall['calls_by_role']}; tokens/q: {overall['tokens']}; "
            f"loops/q: {overall['loops']}",
            "",
        ]
    (out_dir / "report.md").write_text("\n".join(lines))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_MARKERS = "osD^v<>pP*Xh"


def plot_tradeoff(report: dict[str, Any], path: Path) -> Path:
    """Accuracy against calls and seconds; strategies in a legend (labels on the points
    overlap when strategies tie), axes from 0."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for n, (strategy, data) in enumerate(report["strategies"].items()):
        overall = data["overall"]
        accuracy = overall.get("answer_contains", 0.0)
        calls = overall["llm_calls"] + overall["judge_calls"]
        for axis, x in ((axes[0], calls), (axes[1], overall["seconds_mean"])):
            axis.scatter([x], [accuracy], s=70, marker=_MARKERS[n % len(_MARKERS)], label=strategy)
    axes[0].set_xlabel("judge + LLM calls per question")
    axes[1].set_xlabel("mean seconds per question")
    for axis in axes:
        axis.set_ylabel("answer contains gold (answerable)")
        axis.set_xlim(left=0)
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3)
    axes[1].legend(loc="lower right", fontsize=8)
    figure.suptitle("reflexrag strategies: accuracy vs cost")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def plot_risk_coverage(report: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.5, 4.5))
    for n, (strategy, data) in enumerate(report["strategies"].items()):
        points = data["risk_coverage"]["points"]
        if points:
            xs, ys = zip(*points, strict=True)
            axis.plot(xs, ys, label=strategy, linestyle=("-", "--", ":", "-.")[n % 4])
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1)
    axis.set_xlabel("coverage (share of all questions answered)")
    axis.set_ylabel("accuracy of the answered")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.suptitle("risk and coverage: answers ranked by confidence")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
