"""Questions whose answer was cut out of the knowledge base, beside questions that keep theirs.

SQuAD 2.0's hard unanswerable: the passage on the subject is in the knowledge base, and
retrieval finds it, but the sentence that answered is gone. For each answerable single-fact
question whose gold passage states its short answer word for word, every sentence of the
corpus holding that answer is cut, in turn for every other question: half the questions lose
their answer (``category: unanswerable_in_corpus``, ``extra.cut``), the others keep it and stay
answerable, so a system that never answers scores only the share cut. Saying not found is
right on a cut question, any answer wrong; a kept question is scored as before.

    python -m reflexrag.benchmarks.cut --qa QA --corpus CORPUS --out DIR [--limit 80]
    reflexrag eval --qa DIR/qa.jsonl --corpus DIR/corpus.jsonl --strategies all

What it does not test: an answer the corpus words differently elsewhere (a paraphrase is not
cut), which a reader would rightly still find.
"""

from __future__ import annotations

import random
import sys
from dataclasses import asdict
from typing import Any

from reflexrag.benchmarks.counterfactual import (
    read_inputs,
    short_answer,
    stress_set_parser,
    write_jsonl,
    write_stress_set,
)
from reflexrag.benchmarks.fixture import QAItem
from reflexrag.nodes.judges.spans import question_focus
from reflexrag.providers.text import is_chinese, join_sentences, split_sentences, unwrapped_lines

CUT_SUFFIX = "#cut"


def without(text: str, answer: str) -> str:
    """``text`` without its sentences that hold ``answer`` (a line left empty goes too)."""
    lines = []
    for line in unwrapped_lines(text):
        kept = [sentence for sentence in split_sentences(line) if answer not in sentence]
        if kept:
            lines.append(join_sentences(kept, chinese=is_chinese(line)))
    return "\n".join(lines)


def make(
    items: list[QAItem], corpus: list[dict[str, Any]], limit: int | None, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The questions (every other one cut) and the corpus without the cut answers."""
    passages = {row["doc_id"]: row for row in corpus}
    eligible: list[tuple[QAItem, str]] = []
    for item in items:
        fact = item.answerable and item.hop == "single"
        one_fact = fact and question_focus(item.question).kind not in ("description", "yesno")
        if one_fact and (answer := short_answer(item, passages)) is not None:
            eligible.append((item, answer))
    rng = random.Random(seed)
    rng.shuffle(eligible)
    if limit is not None:
        eligible = eligible[:limit]
    cut = {item.qid: answer for item, answer in eligible[::2]}
    rows = []
    for row in corpus:
        text = row["text"]
        for answer in cut.values():
            if answer in text:
                text = without(text, answer)
        if text.strip():  # a passage that said nothing else is gone
            rows.append({**row, "text": text})
    left = {row["doc_id"]: f"{row.get('title', '')}\n{row['text']}" for row in rows}
    questions = []
    for item, answer in eligible:
        if item.qid in cut:
            if any(answer in text for text in left.values()):
                continue  # still stated (in a title, say): it cannot be cut
            questions.append(
                {
                    "qid": f"{item.qid}{CUT_SUFFIX}",
                    "lang": item.lang,
                    "question": item.question,
                    "answers": [],
                    "answer_style": item.answer_style,
                    "hop": item.hop,
                    "category": "unanswerable_in_corpus",
                    "gold_doc_ids": [],
                    "source": item.source,
                    "extra": {"cut": answer, "cut_from": item.gold_doc_ids},
                }
            )
        elif any(answer in left.get(doc, "") for doc in item.gold_doc_ids):
            # Kept: its gold passage still states its answer.
            questions.append(asdict(item))
    return questions, rows


def main(argv: list[str] | None = None) -> int:
    args = stress_set_parser("cut").parse_args(argv)
    if (inputs := read_inputs(args)) is None:
        return 2
    items, corpus = inputs
    questions, cut_corpus = make(items, corpus, args.limit, args.seed)
    none_found = "no single-fact question's gold passage states a short answer to cut"
    written = write_stress_set(args.out, questions, none_found)
    if written == 0:
        write_jsonl(args.out / "corpus.jsonl", cut_corpus)
    return written


if __name__ == "__main__":
    sys.exit(main())
