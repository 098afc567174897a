"""Calibrate the local relevance judge on a QA fixture and print what it measured.

For every answerable question it retrieves ``--depth`` chunks, labels each chunk gold or not,
and reports, for a grid of cosine weights, the threshold that maximises F1 of "relevant".
Run: ``python -m benchmarks.calibrate --qa QA.jsonl --corpus CORPUS.jsonl``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.fixture import load_qa
from nodes.judges.local import document_text, rescale_cosine
from providers.knowledge_base import open_knowledge_base
from providers.loaders import load_jsonl
from providers.text import coverage, term_set, terms


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(threshold, F1) maximising F1 of ``scores >= threshold`` against ``labels``."""
    best = (0.5, 0.0)
    for threshold in np.arange(0.05, 0.95, 0.01):
        predicted = scores >= threshold
        tp = np.sum(predicted & labels)
        precision = tp / max(predicted.sum(), 1)
        recall = tp / max(labels.sum(), 1)
        f1 = 2 * precision * recall / max(precision + recall, 1e-9)
        if f1 > best[1]:
            best = (round(float(threshold), 2), round(float(f1), 3))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--qa", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--depth", type=int, default=8)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        kb = open_knowledge_base("calibration", Path(tmp))
        kb.add(load_jsonl(args.corpus))
        rows = []
        for item in load_qa(args.qa):
            if not item.answerable:
                continue
            question_terms = terms(item.question)
            for doc in kb.search(item.question, args.depth):
                rows.append(
                    (
                        item.lang,
                        float(rescale_cosine(doc.metadata["score"])),
                        coverage(question_terms, term_set(document_text(doc))),
                        doc.metadata["doc_id"] in item.gold_doc_ids,
                    )
                )
    langs = np.array([r[0] for r in rows])
    cosine, lexical = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    labels = np.array([r[3] for r in rows])
    print(f"{len(rows)} (question, chunk) pairs, {labels.mean():.1%} gold")
    for weight in (0.3, 0.4, 0.5, 0.6, 0.7):
        scores = weight * cosine + (1 - weight) * lexical
        overall = best_threshold(scores, labels)
        per_lang = {
            lang: best_threshold(scores[langs == lang], labels[langs == lang])
            for lang in sorted(set(langs))
        }
        print(f"cosine weight {weight}: threshold, F1 = {overall}  per language {per_lang}")


if __name__ == "__main__":
    main()
