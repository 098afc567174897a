"""Calibrate the local relevance judge on a QA fixture and print what it measured.

Two views of the same scores (a blend of rescaled e5 cosine and weighted term coverage):

* chunk level: for answerable questions, every retrieved chunk labelled gold or not; the
  threshold that maximises F1 of "relevant".
* question level, which is the decision Self-RAG actually makes: among the ``top_k`` chunks it
  grades, does any pass? Answerable questions should have a gold chunk passing; unanswerable
  and out-of-corpus questions should have none.

Run: ``python -m reflexrag.benchmarks.calibrate --qa QA.jsonl --corpus CORPUS.jsonl``.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reflexrag.benchmarks.fixture import load_qa
from reflexrag.nodes.judges.local import document_text
from reflexrag.providers.embeddings import rescale_cosine
from reflexrag.providers.knowledge_base import open_knowledge_base
from reflexrag.providers.loaders import load_jsonl
from reflexrag.providers.text import coverage, term_set, terms


@dataclass
class Retrieved:
    """One retrieved chunk of one question, with the features the judge blends."""

    lang: str
    answerable: bool
    cosine: np.ndarray  # per rank
    lexical: np.ndarray
    gold: np.ndarray


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


def collect(qa: Path, corpus: Path, depth: int) -> list[Retrieved]:
    with tempfile.TemporaryDirectory() as tmp:
        kb = open_knowledge_base("calibration", Path(tmp))
        kb.add(load_jsonl(corpus))
        found = []
        for item in load_qa(qa):
            question_terms = terms(item.question)
            docs = kb.search(item.question, depth)
            found.append(
                Retrieved(
                    lang=item.lang,
                    answerable=item.answerable,
                    cosine=rescale_cosine([d.metadata["score"] for d in docs]),
                    lexical=np.array(
                        [coverage(question_terms, term_set(document_text(d))) for d in docs]
                    ),
                    gold=np.array([d.metadata["doc_id"] in item.gold_doc_ids for d in docs]),
                )
            )
    return found


def chunk_level(questions: list[Retrieved]) -> None:
    answerable = [q for q in questions if q.answerable]
    cosine = np.concatenate([q.cosine for q in answerable])
    lexical = np.concatenate([q.lexical for q in answerable])
    labels = np.concatenate([q.gold for q in answerable])
    langs = np.concatenate([[q.lang] * len(q.gold) for q in answerable])
    print(f"chunk level: {len(labels)} (question, chunk) pairs, {labels.mean():.1%} gold")
    for weight in (0.4, 0.5, 0.6, 0.7):
        scores = weight * cosine + (1 - weight) * lexical
        per_lang = {
            str(lang): best_threshold(scores[langs == lang], labels[langs == lang])
            for lang in sorted(set(langs))
        }
        print(
            f"  cosine weight {weight}: threshold, F1 = {best_threshold(scores, labels)}; "
            f"per language {per_lang}"
        )


def question_level(questions: list[Retrieved], top_k: int) -> None:
    answerable = [q for q in questions if q.answerable]
    unanswerable = [q for q in questions if not q.answerable]
    print(
        f"question level, top_k={top_k}: {len(answerable)} answerable, "
        f"{len(unanswerable)} unanswerable"
    )
    for weight in (0.5, 0.6):
        for threshold in np.arange(0.40, 0.64, 0.02):
            found = np.mean(
                [(passes(q, weight, threshold, top_k) & q.gold[:top_k]).any() for q in answerable]
            )
            abstained = np.mean(
                [not passes(q, weight, threshold, top_k).any() for q in unanswerable]
            )
            print(
                f"  weight {weight} threshold {threshold:.2f}: answerable with a gold chunk "
                f"passing {found:.3f}; unanswerable with none passing {abstained:.3f}; "
                f"mean {(found + abstained) / 2:.3f}"
            )


def passes(question: Retrieved, weight: float, threshold: float, top_k: int) -> np.ndarray:
    blend = weight * question.cosine[:top_k] + (1 - weight) * question.lexical[:top_k]
    return blend >= threshold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--qa", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--depth", type=int, default=8, help="chunks retrieved per question")
    parser.add_argument("--top-k", type=int, default=4, help="chunks a strategy grades")
    args = parser.parse_args()
    questions = collect(args.qa, args.corpus, args.depth)
    chunk_level(questions)
    question_level(questions, args.top_k)


if __name__ == "__main__":
    main()
