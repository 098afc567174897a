"""Plant false answers in a QA set's corpus, to measure whether the strategies repeat them.

For each answerable single-fact question whose gold passage holds its short answer word for
word (one question a passage), the corpus gets a second copy of that passage in which the
answer is replaced by another question's answer of the same kind (a date for a date, a name
for a name, in the same language): a knowledge base holding a stale or tampered copy of a
passage beside the original. The question becomes ``category: counterfactual`` with
``extra.fakeanswer``, which ``reflexrag eval`` scores: repeating the planted answer is wrong,
giving the true one or saying not found is right.

    python -m reflexrag.benchmarks.counterfactual --qa QA --corpus CORPUS --out DIR [--limit 60]
    reflexrag eval --qa DIR/qa.jsonl --corpus DIR/corpus.jsonl --strategies all

Only the planted copy's doc_id (``…#planted``) tells the two apart; nothing in the text does.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from reflexrag.benchmarks.fixture import FixtureError, QAItem, load_qa
from reflexrag.nodes.judges.spans import question_focus
from reflexrag.providers.text import is_chinese, word_count

MAX_ANSWER_WORDS = 6
MAX_ANSWER_CHARS_ZH = 12
PLANTED_SUFFIX = "#planted"


def short_answer(item: QAItem, passages: dict[str, dict[str, Any]]) -> str | None:
    """The gold answer a gold passage of ``item`` states word for word, if it is short."""
    for answer in item.answers:
        answer = answer.strip()
        too_long = (
            len(answer) > MAX_ANSWER_CHARS_ZH
            if is_chinese(answer)
            else word_count(answer) > MAX_ANSWER_WORDS
        )
        if not answer or too_long:
            continue
        if any(answer in passages[doc]["text"] for doc in item.gold_doc_ids if doc in passages):
            return answer
    return None


def plant(
    items: list[QAItem], corpus: list[dict[str, Any]], limit: int | None, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The counterfactual questions and the corpus with their planted passages added."""
    passages = {row["doc_id"]: row for row in corpus}
    eligible: list[tuple[QAItem, str, str]] = []
    for item in items:
        kind = question_focus(item.question).kind
        fact = item.answerable and item.hop == "single" and kind not in ("description", "yesno")
        if fact and (answer := short_answer(item, passages)) is not None:
            eligible.append((item, answer, kind))
    by_kind: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for _, answer, kind in eligible:
        by_kind[kind, is_chinese(answer)].append(answer)
    rng = random.Random(seed)
    rng.shuffle(eligible)
    questions, planted = [], []
    for item, answer, kind in eligible:
        if limit is not None and len(questions) >= limit:
            break
        gold = next(d for d in item.gold_doc_ids if d in passages and answer in passages[d]["text"])
        if gold + PLANTED_SUFFIX in {row["doc_id"] for row in planted}:
            continue  # one false copy a passage: two would outvote it on every other fact
        text = passages[gold]["text"]
        fakes = [
            fake
            for fake in by_kind[kind, is_chinese(answer)]
            if fake.lower() != answer.lower() and fake not in text and answer not in fake
        ]
        if not fakes:
            continue
        fake = rng.choice(fakes)
        planted.append(
            {
                **passages[gold],
                "doc_id": gold + PLANTED_SUFFIX,
                "text": text.replace(answer, fake),
            }
        )
        questions.append(
            {
                "qid": f"{item.qid}{PLANTED_SUFFIX}",
                "lang": item.lang,
                "question": item.question,
                "answers": [answer],
                "answer_style": item.answer_style,
                "hop": item.hop,
                "category": "counterfactual",
                "gold_doc_ids": [gold],
                "source": item.source,
                "extra": {"fakeanswer": fake, "planted_doc_id": gold + PLANTED_SUFFIX},
            }
        )
    return questions, [*corpus, *planted]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")


def write_stress_set(out: Path, questions: list[dict[str, Any]], none_found: str) -> int:
    """Write a stress set's questions to ``out/qa.jsonl`` and say how many: the exit code of
    its builder, 1 (with ``none_found`` on stderr) when there are none."""
    if not questions:
        print(f"error: {none_found}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "qa.jsonl", questions)
    print(f"{len(questions)} questions")
    return 0


def stress_set_parser(module: str, corpus: bool = True) -> argparse.ArgumentParser:
    """The arguments every stress-set builder takes: a QA set, its corpus (unless the builder
    reads the questions alone), where to write."""
    parser = argparse.ArgumentParser(prog=f"python -m reflexrag.benchmarks.{module}")
    parser.add_argument("--qa", type=Path, required=True, help="QA.jsonl")
    if corpus:
        parser.add_argument("--corpus", type=Path, required=True, help="CORPUS.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="directory to write")
    parser.add_argument("--limit", type=int, help="at most N questions")
    parser.add_argument("--seed", type=int, default=1)
    return parser


def read_inputs(args: argparse.Namespace) -> tuple[list[QAItem], list[dict[str, Any]]] | None:
    """A builder's QA set and corpus rows; None, with the error on stderr, when either cannot
    be read."""
    try:
        items = load_qa(args.qa)
        corpus = [json.loads(line) for line in args.corpus.read_text("utf-8").splitlines() if line]
    except (OSError, FixtureError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    return items, corpus


def main(argv: list[str] | None = None) -> int:
    args = stress_set_parser("counterfactual").parse_args(argv)
    if (inputs := read_inputs(args)) is None:
        return 2
    items, corpus = inputs
    questions, planted_corpus = plant(items, corpus, args.limit, args.seed)
    if not questions:
        print("error: no question's gold passage states a short answer to replace", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "qa.jsonl", questions)
    write_jsonl(args.out / "corpus.jsonl", planted_corpus)
    print(f"{len(questions)} questions, {len(planted_corpus) - len(corpus)} planted passages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
