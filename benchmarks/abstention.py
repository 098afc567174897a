"""How ``min_confidence`` trades answers for honesty, read off one evaluation run.

Run ``reflexrag eval ... --min-confidence 0`` (every answer the judges accept stands, and with
``--best-effort`` every self-correcting loop that ends without one answers from the best
evidence the judges accept, with its confidence), and this prints what each threshold would
give: an answer below the threshold becomes "not found". An estimate: in a run at that
threshold, an accepted answer under it first sends the loop looking further, which may find a
surer one, so a real run abstains at most this often. Choose the threshold on one split,
confirm it on another.

Run: ``python -m reflexrag.benchmarks.abstention eval-out/report.json [more reports…]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

THRESHOLDS = (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 1.0)


def from_the_knowledge_base(record: dict[str, Any]) -> bool:
    """An answer drawn from retrieved evidence, accepted by the judges or given from the best
    evidence after the loop gave up (not one that needed no retrieval)."""
    return record["answer_kind"] == "extractive" and record["stop_reason"] != (
        "no_retrieval_needed"
    )


def at_threshold(records: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    answerable = [r for r in records if r["category"] == "in_corpus"]
    unanswerable = [r for r in records if r["category"] != "in_corpus"]

    def abstains(record: dict[str, Any]) -> bool:
        if record["answer_kind"] in ("not_found", "clarification", "error"):
            return True
        return from_the_knowledge_base(record) and (record["confidence"] or 0.0) < threshold

    def contains(record: dict[str, Any]) -> float:
        return 0.0 if abstains(record) else record["metrics"].get("answer_contains", 0.0)

    def truthful(record: dict[str, Any]) -> float:
        if record["answer_kind"] != "error" and abstains(record):
            return 0.0 if record["category"] == "in_corpus" else 1.0
        return record["metrics"].get("truthfulness", 0.0)

    return {
        "truthfulness": sum(map(truthful, records)) / max(1, len(records)),
        "contains_gold": sum(map(contains, answerable)) / max(1, len(answerable)),
        "wrong_abstention": sum(map(abstains, answerable)) / max(1, len(answerable)),
        "honest_on_unanswerable": sum(
            abstains(r) or r["metrics"].get("web_recovery", 0.0) > 0 for r in unanswerable
        )
        / max(1, len(unanswerable)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--strategies", default="self_rag,crag,self_crag,iterative,adaptive")
    args = parser.parse_args()
    for path in args.reports:
        records = json.loads(path.read_text())["records"]
        print(f"\n{path}")
        print("strategy   threshold  truthful  contains  wrong-abst  honest")
        for strategy in args.strategies.split(","):
            mine = [r for r in records if r["strategy"] == strategy]
            if not mine:
                continue
            for threshold in THRESHOLDS:
                row = at_threshold(mine, threshold)
                print(
                    f"{strategy:10s} {threshold:9.2f}  {row['truthfulness']:+.3f}    "
                    f"{row['contains_gold']:.3f}     "
                    f"{row['wrong_abstention']:.3f}       {row['honest_on_unanswerable']:.3f}"
                )


if __name__ == "__main__":
    main()
