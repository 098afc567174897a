"""Questions that ask for two facts at once, built from pairs of real questions.

Two answerable single-hop questions whose gold passage is the same are joined into one:
"When did Tesla die, and where was he born?", "特斯拉哪一年去世，他出生在哪里？". The answer
must give both (``extra.answer_parts``: each part's gold answers); one of them alone is wrong.
A question joined with an unanswerable one about the same article (a question whose paragraph
the knowledge base does not hold, ``extra.withheld_doc_id``) asks for a fact that is not
there: it becomes ``category: unanswerable_in_corpus``, where saying not found is right and
answering only the part the knowledge base holds is wrong.

    python -m reflexrag.benchmarks.multipart --qa QA --out DIR
    reflexrag eval --qa DIR/qa.jsonl --corpus CORPUS --strategies all

The shared sets hold no question of several parts, so this is how the reader's parts
(``question_parts``) are measured.
"""

from __future__ import annotations

import random
import re
import sys
from collections import defaultdict
from typing import Any

from reflexrag.benchmarks.counterfactual import stress_set_parser, write_stress_set
from reflexrag.benchmarks.fixture import FixtureError, QAItem, load_qa
from reflexrag.nodes.judges.spans import QUESTION_WORD_RE

_END_RE = re.compile(r"[\s?？。.]+$")


def joined(first: QAItem, second: QAItem) -> str | None:
    """One question asking both, as a person would write it; None when one of them does not
    open with a question word (English), so no reader could tell where the second begins."""
    a, b = _END_RE.sub("", first.question), _END_RE.sub("", second.question)
    if first.lang.startswith("zh"):
        return f"{a}，{b}？"
    if not (QUESTION_WORD_RE.match(a) and QUESTION_WORD_RE.match(b)):
        return None
    return f"{a}, and {b[0].lower()}{b[1:]}?"


def article(doc_id: str) -> str:
    """The article a passage id belongs to: "xquad-en:3:4" → "xquad-en:3"."""
    return doc_id.rsplit(":", 1)[0]


def row(
    qid: str, question: str, items: list[QAItem], category: str, **extra: Any
) -> dict[str, Any]:
    """The joined question as a QA row: the gold passages of ``items`` (the questions the
    knowledge base can answer), the language and source of the first."""
    first = items[0]
    return {
        "qid": qid,
        "lang": first.lang,
        "question": question,
        "answers": [],
        "answer_style": "span",
        "hop": "single",
        "category": category,
        "gold_doc_ids": list(dict.fromkeys(d for item in items for d in item.gold_doc_ids)),
        "source": first.source,
        "extra": {"original": [item.question for item in items], **extra},
    }


def make(items: list[QAItem], limit: int | None, seed: int) -> list[dict[str, Any]]:
    """Pairs of questions on one passage (both answerable), then pairs of an answerable
    question and an unanswerable one on the same article, each question used once."""
    rng = random.Random(seed)
    on_passage: dict[tuple[str, str], list[QAItem]] = defaultdict(list)
    on_article: dict[str, list[QAItem]] = defaultdict(list)
    withheld = []
    for item in items:
        if item.hop != "single" or item.answer_style != "span":
            continue
        if item.answerable and len(item.gold_doc_ids) == 1:
            on_passage[(item.lang, item.gold_doc_ids[0])].append(item)
            on_article[article(item.gold_doc_ids[0])].append(item)
        elif not item.answerable and (doc := item.extra.get("withheld_doc_id")):
            withheld.append((article(doc), item))
    questions: list[dict[str, Any]] = []
    used: set[str] = set()
    for key in sorted(on_passage):
        group = on_passage[key]
        rng.shuffle(group)
        for first, second in zip(group[::2], group[1::2], strict=False):
            if (question := joined(first, second)) is not None:
                used.update((first.qid, second.qid))
                parts = [first.answers, second.answers]
                questions.append(
                    row(
                        f"{first.qid}+{second.qid}",
                        question,
                        [first, second],
                        "in_corpus",
                        answer_parts=parts,
                    )
                )
    for name, missing in sorted(withheld, key=lambda pair: pair[1].qid):
        known = [item for item in on_article.get(name, []) if item.qid not in used]
        if not known:
            continue
        known_item = rng.choice(known)
        used.add(known_item.qid)
        pair = [known_item, missing] if rng.random() < 0.5 else [missing, known_item]
        if (question := joined(*pair)) is not None:
            questions.append(
                row(
                    f"{pair[0].qid}+{pair[1].qid}",
                    question,
                    [known_item],
                    "unanswerable_in_corpus",
                    missing_part=missing.question,
                )
            )
    rng.shuffle(questions)
    return questions[:limit] if limit is not None else questions


def main(argv: list[str] | None = None) -> int:
    args = stress_set_parser("multipart", corpus=False).parse_args(argv)
    try:
        items = load_qa(args.qa)
    except (OSError, FixtureError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    questions = make(items, args.limit, args.seed)
    return write_stress_set(args.out, questions, "no two single-hop questions share a gold passage")


if __name__ == "__main__":
    sys.exit(main())
