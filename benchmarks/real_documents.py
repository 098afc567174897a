"""Real documents end to end: self-written Markdown (English and Chinese), HTML, a PDF whose
lines the layout wrapped and hyphenated, and a Word file with a table, read by the loaders
``reflexrag ingest`` uses into a fresh knowledge base, then asked questions whose answer is in
one file each and on-topic questions that none of them answers.

Per strategy it prints how many answers are right (the answer itself holds the expected
words), partly right (only its quote does), wrong, and, on the unanswerable questions, honest
"not found" against answered anyway.

    python -m reflexrag.benchmarks.real_documents [--strategies all]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import docx

from reflexrag.benchmarks.evaluate import ABSTENTIONS
from reflexrag.benchmarks.metrics import markdown_table
from reflexrag.benchmarks.services import minimal_pdf
from reflexrag.graphs import STRATEGIES
from reflexrag.providers.knowledge_base import attach_knowledge_base, open_knowledge_base
from reflexrag.providers.loaders import load_path
from reflexrag.server.runner import RunResult, run_question
from reflexrag.state import Context

HANDBOOK = """---
title: Heron Valley Library handbook
---
# Heron Valley Library handbook

## Borrowing

A member may borrow up to **eight items** at a time. Books are lent for three weeks; DVDs for
one week. Renew a loan at the desk, online, or from a terminal with `library renew ITEM-ID`.

!!! note "Late returns"
    Late returns cost 20 cents a day per item, up to the price of the item.

## Membership

Membership is free for anyone who lives, works or studies in Heron Valley.
"""

HANDBOOK_ZH = """# 鹭谷图书馆读者须知

## 借阅

读者每次最多可借八件资料。图书的借期为三周，光盘的借期为一周。

## 自习室

自习室位于二楼，需提前一天在网上预约座位。
"""

HOURS_HTML = """<!doctype html>
<html><head><title>Opening hours | Heron Valley Library</title></head>
<body>
<nav><a href="/">Home</a> <a href="/events">Events</a></nav>
<main>
<h1>Opening hours</h1>
<p>From Monday to Friday the library is open from 9:00 to 20:00.</p>
<p>On Saturdays the library opens at 10:00 and closes at 16:00. It is closed on Sundays and
public holidays.</p>
<h2>Book drop</h2>
<p>The book drop by the main entrance takes returns at any hour.</p>
</main>
<footer>Heron Valley Library, 12 River Street</footer>
</body></html>
"""

BICYCLE_PDF_LINES = [
    "Looking after the library's loan bicycles",
    "Oil the chain every 300 kilometres, or after any ride in the rain, and wipe off",
    "what the links do not take up. Clean a dirty chain with a biode-",
    "gradable degreaser before oiling it, never with petrol.",
    "Tyres",
    "Pump the tyres to 4 bar before every loan; the pressure range is printed on the",
    "side of each tyre.",
]


@dataclass(frozen=True)
class Question:
    question: str
    expected: tuple[str, ...]
    """Words the answer must hold (any one of them); none: no file answers it."""
    wrong: tuple[str, ...] = ()
    """Words that make an answer wrong whatever its quote says (a "yes" the text denies)."""


QUESTIONS = (
    Question("How many items can a member borrow at a time?", ("eight",)),
    Question("Which command renews a loan from a terminal?", ("library renew",)),
    Question("How much do late returns cost?", ("20 cents",)),
    Question("When does the library open on Saturdays?", ("10:00",)),
    Question("How often should the chain of a loan bicycle be oiled?", ("300 kilometres",)),
    Question("What should a dirty bicycle chain be cleaned with?", ("biodegradable degreaser",)),
    Question("What is the minimum age for volunteers?", ("16",)),
    Question("Who approves a swap of volunteer shifts?", ("volunteer coordinator",)),
    Question("图书的借期是多长时间？", ("三周",)),
    Question("自习室在几楼？", ("二楼",)),
    Question("Is the library open on Sundays?", ("no", "closed"), wrong=("yes",)),
    Question("How much does a replacement library card cost?", ()),
    Question("How many bicycles does the library lend?", ()),
    Question("自习室有多少个座位？", ()),
)


def write_folder(folder: Path) -> Path:
    """The documents, as files a user would have: their loaders' real inputs."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (folder / "handbook-zh.md").write_text(HANDBOOK_ZH, encoding="utf-8")
    (folder / "hours.html").write_text(HOURS_HTML, encoding="utf-8")
    (folder / "bicycles.pdf").write_bytes(
        minimal_pdf(BICYCLE_PDF_LINES, title="Loan bicycles: care and use")
    )
    document = docx.Document()
    document.add_paragraph("Volunteering at the library", style="Title")
    document.add_heading("Who can volunteer", level=1)
    document.add_paragraph("Volunteers must be at least 16 years old.")
    document.add_heading("Shifts", level=1)
    document.add_paragraph(
        "Shifts last three hours. A swap of shifts is approved by the volunteer coordinator."
    )
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, (("Shift", "Hours"), ("Morning", "9:00-12:00")), strict=True):
        row.cells[0].text, row.cells[1].text = cells
    document.save(str(folder / "volunteers.docx"))
    return folder


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def verdict(question: Question, result: RunResult) -> str:
    """right / partly / wrong on an answerable question; honest / answered on another."""
    abstained = result.answer_kind in ABSTENTIONS or result.error is not None
    if not question.expected:
        return "honest" if abstained else "answered"
    if abstained:
        return "not found"
    answer, quote = _folded(result.answer), _folded(result.quote or "")
    said = set(re.findall(r"\w+", answer))
    if any(words in said for words in question.wrong):
        return "wrong"
    if any(_folded(words) in answer for words in question.expected):
        return "right"
    return "partly" if any(_folded(words) in quote for words in question.expected) else "wrong"


async def run(strategies: list[str], directory: Path) -> dict[str, list[str]]:
    """Each strategy's verdict on every question, over a knowledge base of the folder."""
    kb = open_knowledge_base("real-documents", directory / "kb")
    kb.add(load_path(write_folder(directory / "documents")))
    attach_knowledge_base(kb)
    context = Context(kb="real-documents", ask_back=False)
    return {
        strategy: [
            verdict(question, await run_question(strategy, question.question, context))
            for question in QUESTIONS
        ]
        for strategy in strategies
    }


COLUMNS = ("right", "partly", "wrong", "not found", "honest", "answered")


def table(verdicts: dict[str, list[str]]) -> str:
    answerable = sum(bool(q.expected) for q in QUESTIONS)
    columns = [(c, f"{c} (of {answerable})") for c in COLUMNS[:4]]
    columns += [(c, f"{c} (of {len(QUESTIONS) - answerable})") for c in COLUMNS[4:]]
    reports = [
        {"set": strategy, **{column: Counter(found)[column] for column in COLUMNS}}
        for strategy, found in verdicts.items()
    ]
    return markdown_table(reports, columns, "strategy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", default="all", help="comma list, or all")
    args = parser.parse_args(argv)
    strategies = list(STRATEGIES) if args.strategies == "all" else args.strategies.split(",")
    with tempfile.TemporaryDirectory(prefix="reflexrag-real-documents-") as tmp:
        verdicts = asyncio.run(run(strategies, Path(tmp)))
    for strategy, found in verdicts.items():
        print(strategy, found, file=sys.stderr)
    print(table(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
