"""The local backend measured leave-one-set-out, end to end, over the five shared sets.

Every number in the README's table of the local backend comes from this protocol; before this
module it was a handful of shell steps nobody could re-run from the repository:

1. ``dump``: every question of each set read with what naive RAG reads (see
   :mod:`benchmarks.answer_model`), unless ``DIR/rows.jsonl`` already exists;
2. ``fit``: the answer models fitted on four sets and written per fold to
   ``DIR/folds/fold-SET.json`` (``--folds`` reuses existing ones), with the fit's held-out
   table in ``DIR/fit.md``;
3. ``reflexrag eval`` on each set in its own process, with ``REFLEXRAG_ANSWER_MODEL``
   pointing at the fold fitted without it, so no number is fitted on the set it reports;
4. one table: per set and strategy, truthfulness, answer rate, the share answered word for
   word as naive does, short answers right, honesty and wrong abstentions, then the verdict
   the answer-quality issue asks for: does the best self-correcting strategy beat both naive
   and always-abstaining on the set held out?

    python -m reflexrag.benchmarks.loso --out loso [--shared ../shared/rag-eval] [--sets …]

The embedding cache of the data dir makes a second run much faster than the first (hours on
two cores the first time, most of it embedding the dev corpora and candidate sentences).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

SELF_CORRECTING = ("self_rag", "crag", "self_crag", "iterative", "adaptive")


class SharedSet(NamedTuple):
    name: str
    folder: str
    label: str
    web: bool = False


SETS = (
    SharedSet("fixture", "fixtures", "fixture", web=True),
    SharedSet("clapnq", "dev/clapnq_dev", "CLAPNQ"),
    SharedSet("drcd", "dev/drcd", "DRCD"),
    SharedSet("multihop", "dev/multihop_rag_500", "MultiHop-RAG"),
    SharedSet("covidqa", "dev/covidqa", "COVID-QA"),
)
COLUMNS = (
    ("truthfulness", "truthfulness"),
    ("answer_rate", "answer rate"),
    ("identical_to_naive", "same as naive"),
    ("answer_right", "short answer right"),
    ("abstain_or_recover", "honest on unanswerable"),
    ("wrong_abstention", "wrong abstention"),
    ("judge_calls", "judge calls/q"),
)
VERDICT_NUMBERS = ("best_truthfulness", "naive", "always_abstain", "margin", "short_right")


def files(shared: Path, chosen: SharedSet) -> tuple[Path, Path, Path | None]:
    folder = shared / chosen.folder
    web = folder / "web.jsonl" if chosen.web else None
    return folder / "qa.jsonl", folder / "corpus.jsonl", web


def dump_and_fit(shared: Path, sets: list[SharedSet], out: Path) -> Path:
    """The answer models' rows (dumped once) and one model per fold; the fold directory."""
    rows = out / "rows.jsonl"
    if not rows.exists():
        arguments = ["dump", "--out", str(rows)]
        for chosen in SETS:  # the folds are fitted on every shared set, whichever are run
            qa, corpus, _ = files(shared, chosen)
            arguments += ["--set", chosen.name, str(qa), str(corpus)]
        run_module("reflexrag.benchmarks.answer_model", arguments)
    folds = out / "folds"
    fitted = run_module(
        "reflexrag.benchmarks.answer_model", ["fit", str(rows), "--folds", str(folds)]
    )
    (out / "fit.md").write_text(fitted)
    return folds


def run_module(module: str, arguments: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``python -m module …`` and return what it printed; its progress goes to stderr."""
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return done.stdout


def evaluate(
    shared: Path, chosen: SharedSet, fold: Path | None, out: Path, extra: list[str]
) -> dict[str, Any]:
    """``reflexrag eval`` on one set, in a process of its own that reads ``fold``."""
    qa, corpus, web = files(shared, chosen)
    arguments = ["eval", "--qa", str(qa), "--corpus", str(corpus), "--out", str(out), *extra]
    if web is not None:
        arguments += ["--web", str(web)]
    env = {"REFLEXRAG_ANSWER_MODEL": str(fold)} if fold is not None else {}
    run_module("reflexrag.server.cli", arguments, env)
    return json.loads((out / "report.json").read_text())


def cell(value: Any) -> str:
    return "–" if value is None else value if isinstance(value, str) else f"{value:.3f}"


def strategy_rows(label: str, report: dict[str, Any]) -> list[str]:
    """One table line per strategy of a set's report, then the always-abstain reference."""
    lines = []
    for strategy, result in report["strategies"].items():
        overall = result["overall"]
        cells = [label, strategy, *(cell(overall.get(key)) for key, _ in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    reference = {"truthfulness": report["always_abstain"]["truthfulness"], "answer_rate": 0.0}
    cells = [label, "always-abstain", *(cell(reference.get(key)) for key, _ in COLUMNS)]
    lines.append("| " + " | ".join(cells) + " |")
    return lines


def verdict(label: str, report: dict[str, Any]) -> dict[str, Any] | None:
    """The best self-correcting strategy against naive and always-abstaining, on one set."""
    results = report["strategies"]
    scored = {s: results[s]["overall"]["truthfulness"] for s in SELF_CORRECTING if s in results}
    if not scored or "naive" not in results:
        return None
    best = max(scored, key=lambda s: scored[s])
    naive = results["naive"]["overall"]["truthfulness"]
    abstain = report["always_abstain"]["truthfulness"]
    margin = scored[best] - max(naive, abstain)
    return {
        "set": label,
        "best": best,
        "best_truthfulness": scored[best],
        "naive": naive,
        "always_abstain": abstain,
        "margin": round(margin, 4),
        "short_right": results[best]["overall"].get("answer_right"),
    }


def summary(reports: list[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        "| set | strategy | " + " | ".join(heading for _, heading in COLUMNS) + " |",
        "|---|---|" + "---:|" * len(COLUMNS),
    ]
    for label, report in reports:
        lines += strategy_rows(label, report)
    lines += [
        "",
        "| held-out set | best self-correcting | its truthfulness | naive | always abstain "
        "| margin over both | its short answers right |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, report in reports:
        if (v := verdict(label, report)) is not None:
            cells = [label, v["best"], *(cell(v[k]) for k in VERDICT_NUMBERS)]
            cells[-2] = f"{v['margin']:+.3f}"
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="rows, folds and reports")
    parser.add_argument(
        "--shared",
        type=Path,
        default=Path(os.environ.get("REFLEXRAG_SHARED", "../shared/rag-eval")),
        help="the shared rag-eval folder (default: ../shared/rag-eval)",
    )
    parser.add_argument(
        "--sets", default=",".join(s.name for s in SETS), help="comma-separated: run these"
    )
    parser.add_argument("--folds", type=Path, help="fold models to use instead of fitting")
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="read every set with the shipped answer model (not leave-one-set-out)",
    )
    parser.add_argument("--strategies", default="all")
    parser.add_argument("--concurrency", default="2")
    args = parser.parse_args(argv)
    by_name = {s.name: s for s in SETS}
    unknown = [n for n in args.sets.split(",") if n not in by_name]
    if unknown:
        parser.error(f"unknown set {unknown[0]!r}: choose from {', '.join(by_name)}")
    chosen = [by_name[n] for n in args.sets.split(",")]
    for shared_set in chosen:
        for path in files(args.shared, shared_set):
            if path is not None and not path.is_file():
                parser.error(f"no such file: {path}")
    if args.folds is not None:
        for shared_set in chosen:
            if not (args.folds / f"fold-{shared_set.name}.json").is_file():
                parser.error(f"no fold for {shared_set.name} in {args.folds}")
    args.out.mkdir(parents=True, exist_ok=True)
    extra = ["--strategies", args.strategies, "--concurrency", args.concurrency]
    reports = []
    try:
        folds = None if args.shipped else args.folds or dump_and_fit(args.shared, chosen, args.out)
        for shared_set in chosen:
            fold = None if folds is None else folds / f"fold-{shared_set.name}.json"
            report = evaluate(args.shared, shared_set, fold, args.out / shared_set.name, extra)
            reports.append((shared_set.label, report))
            print(f"{shared_set.label}: done", file=sys.stderr)
    except subprocess.CalledProcessError as exc:
        step = " ".join(str(part) for part in exc.cmd[2:4])
        print(f"loso: {step} failed (exit {exc.returncode}); see its output above", file=sys.stderr)
        return 1
    text = summary(reports)
    (args.out / "loso.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
