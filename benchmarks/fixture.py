"""Reading a QA fixture (the schema of ``shared/rag-eval/fixtures``) into typed records."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class FixtureError(ValueError):
    """A QA file that does not follow the schema."""


@dataclass(frozen=True)
class QAItem:
    qid: str
    lang: str
    question: str
    answers: list[str]
    category: str
    hop: str
    source: str
    answer_style: str = "span"
    gold_doc_ids: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def answerable(self) -> bool:
        return self.category == "in_corpus"

    @property
    def web_answers(self) -> list[str]:
        return list(self.extra.get("answers_if_web") or self.answers)

    @property
    def web_gold_doc_ids(self) -> list[str]:
        return list(self.extra.get("web_gold_doc_ids") or [])


def load_qa(path: Path) -> list[QAItem]:
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(
                QAItem(
                    qid=str(row["qid"]),
                    lang=row.get("lang", "en"),
                    question=row["question"],
                    answers=list(row.get("answers") or []),
                    category=row.get("category", "in_corpus"),
                    hop=row.get("hop", "single"),
                    source=row.get("source", "unknown"),
                    answer_style=row.get("answer_style", "span"),
                    gold_doc_ids=list(row.get("gold_doc_ids") or []),
                    extra=dict(row.get("extra") or {}),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise FixtureError(f"{path}:{number}: not a QA row ({exc})") from None
    if not items:
        raise FixtureError(f"{path} holds no questions")
    return items
