"""Fit the cascade's band leave-one-set-out: which chunk grades the local judge may decide.

In ``llm_judging="cascade"`` the local relevance judge decides a chunk only where it is
reliably right, and the model reads the rest. "Reliably" is measured, not assumed: ``dump``
grades every question's top 4 hybrid chunks of each shared set with the local judge and
labels each chunk relevant when it comes from a gold document of an answerable question (a
chunk of an unanswerable question is never relevant: it does not answer, however on topic it
is). ``fit`` then chooses, on all sets but one, the lowest score from which chunks were
relevant at least ``PRECISION`` of the time and the highest score under which they were
irrelevant at least ``PRECISION`` of the time (each set weighing the same), and reports on
the set left out how many chunks that band decides locally and how often rightly; each set
is left out in turn. Last it fits on every set and writes the shipped band (``--write``).

    python -m reflexrag.benchmarks.cascade_band dump --set NAME QA CORPUS --set … --out chunks.jsonl
    python -m reflexrag.benchmarks.cascade_band fit chunks.jsonl --write
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from reflexrag.benchmarks.fixture import load_qa
from reflexrag.benchmarks.metrics import markdown_table
from reflexrag.nodes.judges import cascade
from reflexrag.nodes.judges.local import LocalJudge
from reflexrag.providers.embeddings import get_embeddings
from reflexrag.providers.knowledge_base import open_knowledge_base
from reflexrag.providers.loaders import load_jsonl

TOP_K = 4
PRECISION = 0.9
"""How often the local judge's verdicts in the band's clear regions must be right."""
GRID = tuple(round(0.02 * step, 2) for step in range(51))


async def dump_set(name: str, qa: Path, corpus: Path, directory: Path) -> list[dict[str, Any]]:
    kb = open_knowledge_base(f"band-{name}", directory)
    kb.add(load_jsonl(corpus))
    judge = LocalJudge(get_embeddings())
    rows = []
    for item in load_qa(qa):
        documents = await asyncio.to_thread(kb.search, item.question, TOP_K, "hybrid")
        grades = await judge.grade_documents(item.question, documents)
        gold = set(item.gold_doc_ids) if item.answerable else set()
        rows += [
            {
                "set": name,
                "qid": item.qid,
                "score": grade.score,
                "relevant": doc.metadata.get("doc_id") in gold,
            }
            for doc, grade in zip(documents, grades, strict=True)
        ]
    return rows


async def dump(sets: list[tuple[str, Path, Path]], out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="reflexrag-band-") as tmp, out.open("w") as sink:
        for name, qa, corpus in sets:
            rows = await dump_set(name, qa, corpus, Path(tmp))
            for row in rows:
                sink.write(json.dumps(row) + "\n")
            print(f"{name}: {len(rows)} chunks", file=sys.stderr)


def _precision(rows: list[dict[str, Any]], keep: Any, label: bool) -> tuple[float, int]:
    """Set-weighted share of ``rows`` passing ``keep`` whose ``relevant`` is ``label``."""
    sizes: dict[str, int] = {}
    for row in rows:
        sizes[row["set"]] = sizes.get(row["set"], 0) + 1
    kept = [row for row in rows if keep(row["score"])]
    total = sum(1 / sizes[row["set"]] for row in kept)
    right = sum(1 / sizes[row["set"]] for row in kept if row["relevant"] == label)
    return (right / total if total else 0.0), len(kept)


def fit_band(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """``relevant_from``: the lowest score from which chunks were relevant ≥ ``PRECISION``
    (at least 20 of them), None when no score is; ``irrelevant_below``: the highest under
    which they were irrelevant ≥ ``PRECISION``, None when none is."""
    relevant_from = next(
        (
            t
            for t in GRID
            if (found := _precision(rows, lambda s, t=t: s >= t, True))[0] >= PRECISION
            and found[1] >= 20
        ),
        None,
    )
    irrelevant_below = next(
        (
            t
            for t in reversed(GRID)
            if (found := _precision(rows, lambda s, t=t: s < t, False))[0] >= PRECISION
            and found[1] >= 20
        ),
        None,
    )
    if relevant_from is not None and irrelevant_below is not None:
        irrelevant_below = min(irrelevant_below, relevant_from)
    return {"relevant_from": relevant_from, "irrelevant_below": irrelevant_below}


def report_fold(name: str, held: list[dict[str, Any]], band: dict[str, Any]) -> dict[str, Any]:
    decided = [
        (row, verdict)
        for row in held
        if (verdict := cascade.clear_verdict(row["score"], band)) is not None
    ]
    right = sum(verdict == row["relevant"] for row, verdict in decided)
    return {
        "set": name,
        "chunks": len(held),
        "relevant": sum(row["relevant"] for row in held) / len(held),
        **band,
        "decided_locally": len(decided) / len(held),
        "local_accuracy": right / len(decided) if decided else None,
    }


def fit(rows_path: Path, write: bool) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
    sets = list(dict.fromkeys(row["set"] for row in rows))
    reports = [
        report_fold(
            name,
            [row for row in rows if row["set"] == name],
            fit_band([row for row in rows if row["set"] != name]),
        )
        for name in sets
    ]
    if write:
        cascade.BAND_FILE.write_text(json.dumps(fit_band(rows), indent=1) + "\n")
    return reports


def table(reports: list[dict[str, Any]]) -> str:
    columns = (
        ("chunks", "chunks"),
        ("relevant", "relevant"),
        ("relevant_from", "relevant from"),
        ("irrelevant_below", "irrelevant below"),
        ("decided_locally", "decided locally"),
        ("local_accuracy", "local verdicts right"),
    )
    return markdown_table(reports, columns, "held-out set")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dumping = commands.add_parser("dump", help="local grades and gold labels of every chunk")
    dumping.add_argument(
        "--set", nargs=3, action="append", metavar=("NAME", "QA", "CORPUS"), required=True
    )
    dumping.add_argument("--out", type=Path, required=True)
    fitting = commands.add_parser("fit", help="fit leave-one-set-out, report, write")
    fitting.add_argument("rows", type=Path)
    fitting.add_argument("--write", action="store_true", help="write the shipped band")
    args = parser.parse_args(argv)
    if args.command == "dump":
        sets = [(name, Path(qa), Path(corpus)) for name, qa, corpus in args.set]
        asyncio.run(dump(sets, args.out))
    else:
        print(table(fit(args.rows, args.write)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
