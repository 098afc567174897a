"""Answer and retrieval metrics, SQuAD-style for English and character-level for Chinese."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from reflexrag.providers.text import is_chinese

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_CJK_PUNCTUATION = "，。！？；：“”‘’（）《》【】、…—·「」『』"
_PUNCTUATION = set(string.punctuation) | set(_CJK_PUNCTUATION)


def _strip_punctuation(text: str) -> str:
    return "".join(
        " " if ch in _PUNCTUATION or unicodedata.category(ch).startswith("P") else ch for ch in text
    )


def _language(text: str, lang: str | None) -> str:
    """Chinese ("zh") for any zh tag (zh, zh-Hant, zh-CN), else "en"; guessed when unset."""
    if lang is None:
        return "zh" if is_chinese(text) else "en"
    return "zh" if lang.lower().split("-")[0] == "zh" else "en"


def normalize(text: str, lang: str | None = None) -> str:
    """SQuAD normalisation for English; for Chinese, punctuation and spaces removed."""
    lang = _language(text, lang)
    text = _strip_punctuation(unicodedata.normalize("NFKC", text).lower())
    if lang == "zh":
        return "".join(text.split())
    return " ".join(_ARTICLES_RE.sub(" ", text).split())


def tokens(text: str, lang: str | None = None) -> list[str]:
    """Word tokens for English, characters for Chinese (CJK runs inside English split too)."""
    lang = _language(text, lang)
    normalized = normalize(text, lang)
    if lang == "zh":
        return list(normalized)
    return normalized.split()


def exact_match(prediction: str, golds: Sequence[str], lang: str | None = None) -> float:
    pred = normalize(prediction, lang)
    return float(any(pred == normalize(gold, lang) for gold in golds))


def token_f1(prediction: str, golds: Sequence[str], lang: str | None = None) -> float:
    best = 0.0
    pred_tokens = tokens(prediction, lang)
    for gold in golds:
        gold_tokens = tokens(gold, lang)
        common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if not common:
            continue
        precision, recall = common / len(pred_tokens), common / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains_answer(prediction: str, golds: Sequence[str], lang: str | None = None) -> float:
    """1 when a normalised gold answer occurs inside the normalised prediction."""
    pred = normalize(prediction, lang)
    if not pred:
        return 0.0
    if _language(prediction, lang) != "zh" and not is_chinese(prediction):
        pred = f" {pred} "
        return float(any(f" {normalize(g, lang)} " in pred for g in golds if normalize(g, lang)))
    return float(any(normalize(g, lang) in pred for g in golds if normalize(g, lang)))


def contains_all_parts(
    prediction: str, parts: Sequence[str | Sequence[str]], lang: str | None = None
) -> float:
    """1 when every part (a string, or a list of alternative strings) occurs in the answer."""
    return float(
        all(
            contains_answer(prediction, [part] if isinstance(part, str) else list(part), lang)
            for part in parts
        )
    )


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[-1]))
        previous = current
    return previous[-1]


def rouge_l(prediction: str, golds: Sequence[str], lang: str | None = None) -> float:
    """ROUGE-L F1 (longest common subsequence), best over the gold answers."""
    best = 0.0
    pred_tokens = tokens(prediction, lang)
    for gold in golds:
        gold_tokens = tokens(gold, lang)
        lcs = _lcs(pred_tokens, gold_tokens)
        if lcs:
            precision, recall = lcs / len(pred_tokens), lcs / len(gold_tokens)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def hit_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    return float(bool(set(retrieved[:k]) & set(gold)))


def mrr_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    for rank, doc_id in enumerate(retrieved[:k], start=1):
        if doc_id in gold:
            return 1.0 / rank
    return 0.0


def all_gold_recall(retrieved: Sequence[str], gold: Sequence[str]) -> float:
    """1 when every gold passage was retrieved (multi-hop questions need all of them)."""
    return float(bool(gold) and set(gold) <= set(retrieved))


def gold_fraction(context: Sequence[str], gold: Sequence[str]) -> float:
    """Share of the final context that is gold."""
    return sum(doc_id in gold for doc_id in context) / len(context) if context else 0.0


def markdown_table(
    reports: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], first: str
) -> str:
    """``reports`` as a Markdown table: one row per report, named by its ``set``, then the
    ``columns`` (key, heading); None shows as "–", integers as they are, other numbers to
    three decimals, strings as they are."""
    lines = [
        f"| {first} | " + " | ".join(label for _, label in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for report in reports:
        cells = [
            "–"
            if report[key] is None
            else str(report[key])
            if isinstance(report[key], int | str)
            else f"{report[key]:.3f}"
            for key, _ in columns
        ]
        lines.append(f"| {report['set']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
