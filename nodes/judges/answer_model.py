"""How likely an extractive answer is right, from features a person can read, with weights
learned on held-out-style data instead of set by hand.

The local reader picks the sentence that best matches a question; whether that sentence
*answers* it, or is merely on topic, is told by signals combined: how well it matches the
question in meaning and in words; how clearly it beats the other sentences it was chosen
from; whether its short span is the thing asked for. Logistic models weigh them
(``answer_model.json``, fitted leave-one-set-out over the shared sets by
``python -m reflexrag.benchmarks.answer_model``):

- ``answers``: P(the answer is right), for every answer. It is the answer's ``confidence``;
  since a right answer scores +1 and a wrong one -1, answering is worth more than abstaining
  exactly when it is over 0.5, which is why ``min_confidence`` defaults there.
- ``sentence``: the same probability for an answer one sentence gives, chosen among several,
  which also reads that sentence's ``lead`` over the best one it does not quote. A verdict
  over every document, a name counted across them or an answer in parts has no such lead:
  the ``answers`` model reads those.
- ``span``: P(the short span gives the answer, when the sentence does). The short span is
  the answer only over the model's ``span_bar``, otherwise the sentences the reader quotes
  are: a short answer is given only when the reader is sure of it. The bar is fitted too:
  the lowest at which, held out, the spans given were right at least ``SPAN_PRECISION`` of
  the time. When no bar gets there (``span_bar`` null) no span is sure enough and every
  answer is its sentence.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from reflexrag.providers.settings import get_settings

ANSWER_FEATURES = ("match", "cosine")
"""What the ``answers`` model reads; see :func:`local.answer_features`. Others were measured
and left out: the question's words weighted by their rarity among the retrieved chunks, its
names and numbers found, the margin over the best sentence of another document, the kind of
answer asked for, the language, and agreement with the question's negation (already in
``match``) each lowered the held-out ranking of some set or changed nothing (README)."""

SENTENCE_FEATURES = (*ANSWER_FEATURES, "lead")
"""What the ``sentence`` model reads; ``lead`` is the quoted sentence's lead, in the reader's
ranking, over the best sentence it does not quote (see :func:`local.sentence_lead`). Which
sentence answers is the reader's own uncertainty, apart from whether any does: a sentence far
ahead of the rest is the one its words and meaning point to, one barely ahead shares the
question's words with others. Held out it ranks right answers above wrong ones better than
match and meaning alone on four of the five shared sets (README)."""

SPAN_FEATURES = (
    "span_kind_found",
    "span_is_name",
    "span_words",
    "span_score",
    "span_from_question",
    "chinese",
    "kind_date",
    "kind_number",
    "kind_entity",
    "kind_thing",
)
"""What the ``span`` model reads; see :func:`local.span_features`."""

SPAN_PRECISION = 0.8
"""How often a short span must be right, held out, to be given instead of its sentence: a
wrong span before a right quote scores +0.5 where the sentence scores +1, so a span is worth
its brevity only when it is nearly always right."""


@dataclass(frozen=True)
class Logistic:
    """P(y) = 1 / (1 + exp(-(bias + Σ weight × (feature - mean) / scale)))."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    means: tuple[float, ...]
    scales: tuple[float, ...]

    def probability(self, values: dict[str, float]) -> float:
        z = self.bias + sum(
            w * (values.get(name, 0.0) - m) / s
            for name, w, m, s in zip(
                self.features, self.weights, self.means, self.scales, strict=True
            )
        )
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Logistic:
        return cls(
            features=tuple(data["features"]),
            weights=tuple(float(w) for w in data["weights"]),
            bias=float(data["bias"]),
            means=tuple(float(m) for m in data["means"]),
            scales=tuple(float(s) or 1.0 for s in data["scales"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "weights": [round(w, 6) for w in self.weights],
            "bias": round(self.bias, 6),
            "means": [round(m, 6) for m in self.means],
            "scales": [round(s, 6) for s in self.scales],
        }


@dataclass(frozen=True)
class AnswerModels:
    answers: Logistic
    span: Logistic
    span_bar: float | None = None
    """The span model's probability from which the short span is the answer; None: never."""
    sentence: Logistic | None = None
    """The ``sentence`` model; None (a file fitted before it) leaves every answer to
    ``answers``."""

    def sureness(self, features: dict[str, float]) -> float:
        """P(the answer these features describe is right): from the ``sentence`` model when
        the answer is one sentence chosen among several (its features hold a ``lead``), else
        from the ``answers`` model."""
        if self.sentence is not None and "lead" in features:
            return self.sentence.probability(features)
        return self.answers.probability(features)

    def gives_span(self, features: dict[str, float]) -> bool:
        """Whether the short span these features describe is sure enough to be the answer."""
        return self.span_bar is not None and self.span.probability(features) >= self.span_bar


MODEL_FILE = "answer_model.json"


@cache
def _read_models(path: str | None) -> AnswerModels | None:
    if path is not None:
        return load_models(json.loads(Path(path).read_text(encoding="utf-8")))
    try:
        text = resources.files("reflexrag.nodes.judges").joinpath(MODEL_FILE).read_text()
    except FileNotFoundError:
        return None
    return load_models(json.loads(text))


def answer_models() -> AnswerModels | None:
    """The fitted models: the settings' ``answer_model`` file, else those shipped beside this
    module; None when neither exists (the reader then uses its match scores alone)."""
    path = get_settings().answer_model
    return _read_models(str(path) if path else None)


def load_models(data: dict[str, Any]) -> AnswerModels:
    return AnswerModels(
        Logistic.from_json(data["answers"]),
        Logistic.from_json(data["span"]),
        None if data.get("span_bar") is None else float(data["span_bar"]),
        Logistic.from_json(data["sentence"]) if data.get("sentence") else None,
    )
