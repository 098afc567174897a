"""Fit the local reader's answer models, leave-one-set-out (see :mod:`nodes.judges.answer_model`).

``dump`` reads every question of each set with what naive RAG reads (its corpus in a
throw-away knowledge base, the top 4 hybrid chunks) and writes, per question, the reader's
features with two labels: does the quoted sentence give the answer, and does the short span.
``fit`` then fits the logistic models on all sets but one and reports, on the one left
out, how well they rank and how well they are calibrated, and what answering only over 0.5
would score in truthfulness against always answering and always abstaining; each set is left
out in turn. Every set weighs the same in a fit, whatever its size. Last it fits on every set
and writes the shipped model file (``--write``) and one model per fold (``--folds DIR``),
which ``REFLEXRAG_ANSWER_MODEL=DIR/fold-SET.json reflexrag eval …`` runs on the set it was
fitted without.

    python -m reflexrag.benchmarks.answer_model dump --set NAME QA CORPUS --set … --out rows.jsonl
    python -m reflexrag.benchmarks.answer_model fit rows.jsonl --folds folds --write
    python -m reflexrag.benchmarks.answer_model sweep rows.jsonl [--stress stress.jsonl] [--rule R]

``sweep`` chooses the reader's discount factors the same way (``UNMENTIONED_FACTOR`` with
``--rule unmentioned``, ``UNASKED_FACTOR`` with ``--rule unasked``): held-out truthfulness at
each factor.

Any other constant of the reader is chosen by dumping once per value and comparing the dumps:

    python -m reflexrag.benchmarks.answer_model dump --reader KIND_BONUS=0.3 --set … --out b.jsonl
    python -m reflexrag.benchmarks.answer_model choose shipped=a.jsonl 0.3=b.jsonl …

``--reader NAME=VALUE`` sets a numeric constant of :mod:`nodes.judges.local` (or ``TOP_K``,
how many chunks naive reads) for the dump; ``choose`` reads each set with models fitted on the
other four, per dump, and lets each fold choose the dump best on its other four sets.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from reflexrag.benchmarks.evaluate import holds_gold
from reflexrag.benchmarks.fixture import load_qa
from reflexrag.benchmarks.metrics import markdown_table
from reflexrag.nodes.judges import answer_model, local
from reflexrag.nodes.judges.answer_model import (
    ANSWER_FEATURES,
    MODEL_FILE,
    SENTENCE_FEATURES,
    SPAN_FEATURES,
    SPAN_PRECISION,
    AnswerModels,
    Logistic,
)
from reflexrag.providers.embeddings import get_embeddings
from reflexrag.providers.knowledge_base import open_knowledge_base
from reflexrag.providers.loaders import load_jsonl

TOP_K = 4
L2 = 1.0
"""Inverse regularisation strength (scikit-learn's ``C``) of both models."""


async def dump_set(name: str, qa: Path, corpus: Path, directory: Path) -> list[dict[str, Any]]:
    """One row per question of the set: features, labels, and what was answered."""
    kb = open_knowledge_base(f"fit-{name}", directory)
    kb.add(load_jsonl(corpus))
    generator = local.ExtractiveGenerator(get_embeddings())
    rows = []
    for item in load_qa(qa):
        documents = await asyncio.to_thread(kb.search, item.question, TOP_K, "hybrid")
        answer = await generator.generate(item.question, documents, (), documents)
        shown = f"{answer.text} {answer.quote}".strip()
        answers = item.answerable and holds_gold(item, shown)
        rows.append(
            {
                "set": name,
                "qid": item.qid,
                "answerable": item.answerable,
                "answer": answer.text,
                "quote": answer.quote,
                "features": answer.features,
                "unmentioned": answer.unmentioned,
                "unasked": local.says_nothing_asked(answer.features),
                "answers": bool(answers),
                "span": bool(answers and holds_gold(item, answer.text)),
            }
        )
    return rows


def set_reader_constant(assignment: str) -> None:
    """``NAME=VALUE``: a numeric constant of the local reader (``TOP_K``: the chunks read)."""
    global TOP_K
    name, _, value = assignment.partition("=")
    if name == "TOP_K":
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"answer_model: TOP_K needs a whole number of chunks, not {value!r}")
        TOP_K = int(value)
        return
    current = getattr(local, name, None)
    if isinstance(current, bool) or not isinstance(current, int | float):
        raise SystemExit(f"answer_model: {name!r} is not a numeric constant of the reader")
    try:
        setattr(local, name, type(current)(float(value)))
    except ValueError:
        raise SystemExit(f"answer_model: {name} needs a number, not {value!r}") from None


async def dump(sets: list[tuple[str, Path, Path]], out: Path) -> None:
    # The raw span and the reader's own match are what the models are fitted on: read
    # without any fitted model.
    local.answer_models = lambda: None
    with tempfile.TemporaryDirectory(prefix="reflexrag-fit-") as tmp, out.open("w") as sink:
        for name, qa, corpus in sets:
            rows = await dump_set(name, qa, corpus, Path(tmp))
            for row in rows:
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            print(f"{name}: {len(rows)} questions", file=sys.stderr)


def _matrix(rows: list[dict[str, Any]], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[row["features"].get(n, 0.0) for n in names] for row in rows], dtype=float)


def fit_logistic(rows: list[dict[str, Any]], names: tuple[str, ...], label: str) -> Logistic:
    """L2-regularised logistic regression on standardised features, each set weighing the
    same."""
    from sklearn.linear_model import LogisticRegression

    x = _matrix(rows, names)
    y = np.array([row[label] for row in rows], dtype=int)
    sizes = defaultdict(int)
    for row in rows:
        sizes[row["set"]] += 1
    share = np.array([len(rows) / (len(sizes) * sizes[row["set"]]) for row in rows])
    means, scales = x.mean(axis=0), x.std(axis=0)
    scales[scales == 0] = 1.0
    model = LogisticRegression(C=L2, max_iter=1000)
    model.fit((x - means) / scales, y, sample_weight=share)
    return Logistic(
        names, tuple(model.coef_[0]), float(model.intercept_[0]), tuple(means), tuple(scales)
    )


def span_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Questions whose sentence gives the answer and that got a short span: what the span
    model learns from."""
    return [row for row in rows if row["answers"] and "span_score" in row["features"]]


def sentence_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Questions one sentence answered, chosen among several: what the sentence model learns
    from."""
    return [row for row in rows if "lead" in row["features"]]


def fit_models(rows: list[dict[str, Any]]) -> AnswerModels:
    chosen = sentence_rows(rows)
    return AnswerModels(
        fit_logistic(rows, ANSWER_FEATURES, "answers"),
        fit_logistic(span_rows(rows), SPAN_FEATURES, "span"),
        fit_span_bar(rows),
        fit_logistic(chosen, SENTENCE_FEATURES, "answers") if chosen else None,
    )


SPAN_BARS = tuple(round(0.5 + 0.05 * step, 2) for step in range(10))
MIN_SPANS = 20
"""Fewest held-out spans a bar must give before their precision is believed."""


def fit_span_bar(rows: list[dict[str, Any]]) -> float | None:
    """The lowest bar at which the spans given, each set's by a span model fitted without
    it, were right at least ``SPAN_PRECISION`` of the time (each set weighing the same);
    None when no bar gets there. Set by the sets held out, not by those fitted on, since a
    model is surest of the questions it learnt from."""
    held_out: list[tuple[float, bool, float]] = []
    sets = list(dict.fromkeys(row["set"] for row in rows))
    for name in sets:
        train = span_rows([row for row in rows if row["set"] != name])
        held = span_rows([row for row in rows if row["set"] == name])
        if not train or not held:
            continue
        model = fit_logistic(train, SPAN_FEATURES, "span")
        held_out += [(model.probability(r["features"]), r["span"], 1 / len(held)) for r in held]
    for bar in SPAN_BARS:
        given = [(right, weight) for p, right, weight in held_out if p >= bar]
        if len(given) < MIN_SPANS:
            return None
        precision = sum(w for right, w in given if right) / sum(w for _, w in given)
        if precision >= SPAN_PRECISION:
            return bar
    return None


def auroc(scores: list[float], labels: list[bool]) -> float | None:
    positives = [s for s, y in zip(scores, labels, strict=True) if y]
    negatives = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


DISCOUNTS = {"unmentioned": "UNMENTIONED_FACTOR", "unasked": "UNASKED_FACTOR"}
"""The reader's rules that make an answer less sure, each by the row's key saying it applies
(a name of the question left unmentioned; a sentence holding none of its own words) and the
reader's constant giving the factor."""


def gated_probability(
    row: dict[str, Any], models: AnswerModels, factors: dict[str, float] | None = None
) -> float:
    """P(the answer is right) as the reader gates on it: lowered by each rule of
    :data:`DISCOUNTS` that applies to the row, by the factor ``factors`` gives that rule or
    else by the reader's own."""
    sure = models.sureness(row["features"])
    for rule, constant in DISCOUNTS.items():
        if row.get(rule):
            sure *= (factors or {}).get(rule, getattr(local, constant))
    return sure


def truthfulness(
    row: dict[str, Any], models: AnswerModels | None, factors: dict[str, float] | None = None
) -> float:
    """What the reader scores on ``row``: always answering with its span (``models`` None),
    or answering over 0.5 only, with the span only when the span model is sure of it (over
    its bar). An answer a rule discounts is as much less sure as ``factors`` says (the
    reader's own factors by default)."""
    features = row["features"]
    has_span = "span_score" in features
    if models is None:
        answered, span_given = True, has_span
    else:
        answered = gated_probability(row, models, factors) >= 0.5
        span_given = has_span and models.gives_span(features)
    if not answered:
        return 1.0 if not row["answerable"] else 0.0
    if not row["answers"]:
        return -1.0
    return 1.0 if row["span"] or not span_given else 0.5


def report_fold(name: str, held: list[dict[str, Any]], models: AnswerModels) -> dict[str, Any]:
    p = [models.sureness(row["features"]) for row in held]
    labels = [row["answers"] for row in held]
    spans = span_rows(held)
    answered = [row for row in held if gated_probability(row, models) >= 0.5]
    span_given = [
        row
        for row in answered
        if "span_score" in row["features"] and models.gives_span(row["features"])
    ]
    return {
        "set": name,
        "questions": len(held),
        "answers_auroc": auroc(p, labels),
        "match_auroc": auroc([row["features"]["match"] for row in held], labels),
        "mean_p": statistics.fmean(p),
        "share_right": statistics.fmean(labels),
        "brier": statistics.fmean((q - y) ** 2 for q, y in zip(p, labels, strict=True)),
        "span_auroc": auroc(
            [models.span.probability(row["features"]) for row in spans],
            [row["span"] for row in spans],
        ),
        "answer_rate": len(answered) / len(held),
        "span_rate": len(span_given) / len(answered) if answered else 0.0,
        "truthfulness_gated": statistics.fmean(truthfulness(row, models) for row in held),
        "truthfulness_naive": statistics.fmean(truthfulness(row, None) for row in held),
        "always_abstain": statistics.fmean(0.0 if row["answerable"] else 1.0 for row in held),
    }


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fit(rows_path: Path, folds: Path | None, write: bool) -> list[dict[str, Any]]:
    rows = read_rows(rows_path)
    sets = list(dict.fromkeys(row["set"] for row in rows))
    reports = []
    for name in sets:
        train = [row for row in rows if row["set"] != name]
        models = fit_models(train)
        reports.append(report_fold(name, [row for row in rows if row["set"] == name], models))
        if folds is not None:
            folds.mkdir(parents=True, exist_ok=True)
            (folds / f"fold-{name}.json").write_text(json.dumps(to_json(models), indent=1))
    final = fit_models(rows)
    if write:
        target = Path(answer_model.__file__).with_name(MODEL_FILE)
        target.write_text(json.dumps(to_json(final), indent=1) + "\n")
    return reports


FACTORS = (1.0, 0.85, 0.7, 0.5, 0.25, 0.0)


def first_best(scores: dict[Any, float]) -> Any:
    """The first key whose score is the best (to rounding): ties go to the earlier one."""
    best = max(scores.values())
    return next(key for key, score in scores.items() if score >= best - 1e-9)


def _gated_truthfulness(
    models: AnswerModels, rule: str, held: list[dict[str, Any]], factor: float
) -> float:
    return statistics.fmean(truthfulness(row, models, {rule: factor}) for row in held)


def sweep(
    rows: list[dict[str, Any]], stress: list[dict[str, Any]], rule: str = "unmentioned"
) -> list[dict[str, Any]]:
    """Held out, the gated truthfulness at each factor for the answers ``rule`` discounts
    (see :data:`DISCOUNTS`; the other rules at the reader's own factors): each set read with
    the models fitted on the others, and the factor its fold chooses, the mildest with the
    best mean over the other sets (each weighing the same). ``stress`` rows (sets built from
    a shared one, named ``SET-…``) are read with that set's fold, and never choose."""
    sets = list(dict.fromkeys(row["set"] for row in rows))
    by_set = {name: [row for row in rows if row["set"] == name] for name in sets}
    reports = []
    for name in sets:
        models = fit_models([row for row in rows if row["set"] != name])
        scored = functools.partial(_gated_truthfulness, models, rule)
        # FACTORS runs from the mildest: a tie goes to the mildest factor.
        chosen = first_best(
            {
                factor: statistics.fmean(scored(by_set[o], factor) for o in sets if o != name)
                for factor in FACTORS
            }
        )
        for label, held in [
            (name, by_set[name]),
            *(
                (built, [row for row in stress if row["set"] == built])
                for built in dict.fromkeys(row["set"] for row in stress)
                if built.startswith(f"{name}-")
            ),
        ]:
            report = {"set": label, "hit": sum(bool(row.get(rule)) for row in held)}
            report.update({f"f={f}": scored(held, f) for f in FACTORS})
            report["chosen"] = chosen if label == name else None
            reports.append(report)
    return reports


def choose(dumps: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Held out, the gated truthfulness of each dump (one value of a reader constant) on each
    set, read with the models fitted on the other sets of that dump, and the dump each fold
    chooses: the best mean over its other sets (each weighing the same), the first listed
    on a tie, so list the shipped value first."""
    labels = [label for label, _ in dumps]
    sets = list(dict.fromkeys(row["set"] for row in dumps[0][1]))
    held: dict[tuple[str, str], float] = {}
    for label, rows in dumps:
        for name in sets:
            models = fit_models([row for row in rows if row["set"] != name])
            held[label, name] = statistics.fmean(
                truthfulness(row, models) for row in rows if row["set"] == name
            )
    reports = []
    for name in sets:
        chosen = first_best(
            {label: statistics.fmean(held[label, o] for o in sets if o != name) for label in labels}
        )
        report: dict[str, Any] = {"set": name}
        report.update({label: held[label, name] for label in labels})
        report["chosen"] = chosen
        report["held_out"] = held[chosen, name]
        reports.append(report)
    return reports


def to_json(models: AnswerModels) -> dict[str, Any]:
    return {
        "answers": models.answers.to_json(),
        "span": models.span.to_json(),
        "span_bar": models.span_bar,
        "sentence": models.sentence.to_json() if models.sentence is not None else None,
    }


def table(reports: list[dict[str, Any]]) -> str:
    columns = (
        ("questions", "n"),
        ("share_right", "sentence right"),
        ("mean_p", "mean P"),
        ("answers_auroc", "AUROC"),
        ("match_auroc", "AUROC of match alone"),
        ("brier", "Brier"),
        ("span_auroc", "span AUROC"),
        ("answer_rate", "answer rate"),
        ("span_rate", "span given"),
        ("truthfulness_naive", "truthfulness, always answer"),
        ("truthfulness_gated", "truthfulness, P ≥ 0.5"),
        ("always_abstain", "always abstain"),
    )
    return markdown_table(reports, columns, "held-out set")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dumping = commands.add_parser("dump", help="features and labels of every question")
    dumping.add_argument(
        "--set", nargs=3, action="append", metavar=("NAME", "QA", "CORPUS"), required=True
    )
    dumping.add_argument("--out", type=Path, required=True)
    dumping.add_argument(
        "--reader",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="read with this constant of nodes/judges/local.py (or TOP_K) set",
    )
    fitting = commands.add_parser("fit", help="fit leave-one-set-out, report, write")
    fitting.add_argument("rows", type=Path)
    fitting.add_argument("--folds", type=Path, help="write each fold's model here")
    fitting.add_argument("--write", action="store_true", help="write the shipped model file")
    sweeping = commands.add_parser(
        "sweep", help="held-out truthfulness per factor for the answers a rule discounts"
    )
    sweeping.add_argument("rows", type=Path)
    sweeping.add_argument("--stress", type=Path, help="rows of sets built from shared ones")
    sweeping.add_argument("--rule", choices=sorted(DISCOUNTS), default="unmentioned")
    choosing = commands.add_parser(
        "choose", help="held-out truthfulness per dump, and each fold's choice among them"
    )
    choosing.add_argument("dumps", nargs="+", metavar="LABEL=ROWS")
    args = parser.parse_args(argv)
    if args.command == "dump":
        for assignment in args.reader:
            set_reader_constant(assignment)
        sets = [(name, Path(qa), Path(corpus)) for name, qa, corpus in args.set]
        asyncio.run(dump(sets, args.out))
    elif args.command == "choose":
        named = [dump.partition("=") for dump in args.dumps]
        for label, _, path in named:
            if not label or not Path(path).is_file():
                parser.error(f"{label}={path}: give each dump as LABEL=ROWS, ROWS a dump's file")
        dumps = [(label, read_rows(Path(path))) for label, _, path in named]
        columns = [(label, label) for label, _ in dumps]
        columns += [("chosen", "fold's choice"), ("held_out", "held out, chosen")]
        print(markdown_table(choose(dumps), columns, "held-out set"))
    elif args.command == "sweep":
        stress = read_rows(args.stress) if args.stress else []
        columns = [("hit", "hit"), *((f"f={f}", f"f={f}") for f in FACTORS)]
        columns.append(("chosen", "fold's choice"))
        print(markdown_table(sweep(read_rows(args.rows), stress, args.rule), columns, "set"))
    else:
        print(table(fit(args.rows, args.folds, args.write)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
