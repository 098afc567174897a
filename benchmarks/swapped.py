"""Questions about something the knowledge base never mentions, on the subject it does.

For each answerable single-hop question that names something its gold passage names (a
capitalised name, a figure), the name is swapped for one that no document of the corpus
mentions: a figure for another figure ("the iPhone 15" becomes "the iPhone 16" where the
corpus has no 16), a name for a name taken from another set's corpus. Every other word of the
question stays, so retrieval still finds the on-topic passage, which now answers a question
that was not asked. The question becomes ``category: unanswerable_in_corpus`` with
``extra.swapped``; saying not found is right, any answer wrong.

    python -m reflexrag.benchmarks.swapped --qa QA --corpus CORPUS --names OTHER_CORPUS --out DIR
    reflexrag eval --qa DIR/qa.jsonl --corpus CORPUS --strategies all

What it does not test: SQuAD 2.0's other unanswerables (a swap between two things the passage
does name, an antonym, a negation), which need a reader that understands the sentence.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from reflexrag.benchmarks.counterfactual import stress_set_parser, write_stress_set
from reflexrag.benchmarks.fixture import FixtureError, QAItem, load_qa
from reflexrag.nodes.judges.spans import names_in
from reflexrag.providers.text import is_chinese, term_set

_FIGURE_RE = re.compile(r"(?<![\d,.])\d{1,4}(?![\d,.]*\d)")


def other_figure(figure: str, said: frozenset[str], rng: random.Random) -> str | None:
    """A figure near ``figure`` (a year stays a year) that the corpus never says."""
    value = int(figure)
    spread = 30 if len(figure) == 4 else max(3, value)
    tried = [value + step for step in range(-spread, spread + 1) if step]
    rng.shuffle(tried)
    return next(
        (str(n) for n in tried if n > 0 and len(str(n)) == len(figure) and str(n) not in said),
        None,
    )


def swap(
    item: QAItem, said: frozenset[str], gold: frozenset[str], names: list[str], rng: random.Random
) -> tuple[str, str, str] | None:
    """The question with one thing it names, which its gold passage names too, swapped for
    something the corpus never mentions; with what was swapped for what."""
    question = item.question
    figures = [m for m in _FIGURE_RE.finditer(question) if m.group(0) in gold]
    if figures:
        found = rng.choice(figures)
        new = other_figure(found.group(0), said, rng)
        if new is not None:
            swapped = question[: found.start()] + new + question[found.end() :]
            return swapped, found.group(0), new
    asked = [name for name in names_in(question) if term_set(name) <= gold]
    asked = [name for name in asked if question.find(name) > 0]  # not the opening word
    if not asked or not names:
        return None
    old = rng.choice(asked)
    words = len(old.split())
    fitting = [name for name in names if len(name.split()) == words] or names
    new = rng.choice(fitting)
    return question.replace(old, new), old, new


def said_in(rows: list[dict[str, Any]]) -> frozenset[str]:
    """Every term the rows' titles and texts hold."""
    return frozenset().union(*(term_set(f"{r.get('title', '')} {r['text']}") for r in rows))


def make(
    items: list[QAItem],
    corpus: list[dict[str, Any]],
    other: list[dict[str, Any]],
    limit: int | None,
    seed: int,
) -> list[dict[str, Any]]:
    """The swapped questions."""
    passages = {row["doc_id"]: row for row in corpus}
    said = said_in(corpus)
    pool = dict.fromkeys(
        name
        for row in other
        for name in names_in(row["text"])
        if len(name) > 3 and not is_chinese(name) and not term_set(name) & said
    )
    names = sorted(pool)
    rng = random.Random(seed)
    eligible = [
        item
        for item in items
        if item.answerable and item.hop == "single" and item.lang == "en" and item.gold_doc_ids
    ]
    rng.shuffle(eligible)
    questions = []
    for item in eligible:
        if limit is not None and len(questions) >= limit:
            break
        gold_rows = [passages[d] for d in item.gold_doc_ids if d in passages]
        gold = frozenset().union(
            *(term_set(f"{r.get('title', '')} {r['text']}") for r in gold_rows)
        )
        swapped = swap(item, said, gold, names, rng)
        if swapped is None:
            continue
        question, old, new = swapped
        questions.append(
            {
                "qid": f"{item.qid}#swapped",
                "lang": item.lang,
                "question": question,
                "answers": [],
                "answer_style": item.answer_style,
                "hop": item.hop,
                "category": "unanswerable_in_corpus",
                "gold_doc_ids": item.gold_doc_ids,
                "source": item.source,
                "extra": {"swapped": {"from": old, "to": new}, "original": item.question},
            }
        )
    return questions


def main(argv: list[str] | None = None) -> int:
    parser = stress_set_parser("swapped")
    parser.add_argument(
        "--names", type=Path, required=True, help="another corpus to take new names from"
    )
    args = parser.parse_args(argv)
    try:
        items = load_qa(args.qa)
        corpus, other = (
            [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
            for path in (args.corpus, args.names)
        )
    except (OSError, FixtureError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    questions = make(items, corpus, other, args.limit, args.seed)
    none_found = "no English single-hop question names what its passage names"
    return write_stress_set(args.out, questions, none_found)


if __name__ == "__main__":
    sys.exit(main())
