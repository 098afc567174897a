"""The answer models: their arithmetic, how they are fitted, and the models shipped."""

from __future__ import annotations

import json
import math

import pytest
from langchain_core.documents import Document

from reflexrag.benchmarks import answer_model as fitting
from reflexrag.nodes.judges import answer_model
from reflexrag.nodes.judges.answer_model import (
    ANSWER_FEATURES,
    SPAN_FEATURES,
    Logistic,
    answer_models,
    load_models,
)
from reflexrag.nodes.judges.local import ExtractiveGenerator
from reflexrag.providers.embeddings import get_embeddings
from reflexrag.providers.settings import get_settings


def test_a_logistic_model_standardises_its_features_and_round_trips():
    model = Logistic(("a", "b"), (2.0, -1.0), 0.5, (0.5, 0.0), (0.25, 2.0))
    z = 0.5 + 2.0 * (1.0 - 0.5) / 0.25 - 1.0 * (4.0 - 0.0) / 2.0
    assert model.probability({"a": 1.0, "b": 4.0}) == pytest.approx(1 / (1 + math.exp(-z)))
    assert Logistic.from_json(model.to_json()).probability({"a": 0.2}) == pytest.approx(
        model.probability({"a": 0.2})
    )


def _rows(name: str, n: int, shift: float) -> list[dict]:
    """A set whose sentences answer when ``match`` is high; ``cosine`` is noise."""
    rows = []
    for i in range(n):
        match = i / (n - 1)
        rows.append(
            {
                "set": name,
                "answerable": True,
                "features": {"match": match, "cosine": (i * 7 % n) / n + shift},
                "answers": match > 0.5,
                "span": False,
            }
        )
    return rows


def test_fitting_learns_the_signal_and_weighs_every_set_the_same():
    small, large = _rows("small", 20, 0.0), _rows("large", 200, 0.3)
    model = fitting.fit_logistic(small + large, ("match", "cosine"), "answers")
    assert model.weights[0] > 0 and abs(model.weights[1]) < model.weights[0] / 5
    held = _rows("held", 40, 0.1)
    scores = [model.probability(row["features"]) for row in held]
    assert fitting.auroc(scores, [row["answers"] for row in held]) == 1.0
    # A perfectly ranked, well-separated set is answered where its sentences answer.
    answered = [row["answers"] for row, p in zip(held, scores, strict=True) if p >= 0.5]
    assert answered and all(answered)


def test_the_shipped_models_read_their_features_and_trust_a_better_match_more():
    models = answer_models()
    assert models is not None, "nodes/judges/answer_model.json is shipped"
    assert models.answers.features == ANSWER_FEATURES
    assert models.span.features == SPAN_FEATURES
    low = models.answers.probability({"match": 0.3, "cosine": 0.3})
    high = models.answers.probability({"match": 0.9, "cosine": 0.9})
    assert low < 0.5 < high


def test_a_models_file_in_the_settings_replaces_the_shipped_one(tmp_path, monkeypatch):
    shipped = answer_models()
    silent = json.loads(json.dumps(fitting.to_json(shipped)))
    silent["answers"]["weights"] = [0.0] * len(ANSWER_FEATURES)
    silent["answers"]["bias"] = -3.0
    path = tmp_path / "fold.json"
    path.write_text(json.dumps(silent))
    monkeypatch.setenv("REFLEXRAG_ANSWER_MODEL", str(path))
    get_settings.cache_clear()
    try:
        models = answer_models()
        assert models.answers.probability({"match": 1.0, "cosine": 1.0}) < 0.05
        assert load_models(silent).answers.bias == -3.0
    finally:
        monkeypatch.delenv("REFLEXRAG_ANSWER_MODEL")
        get_settings.cache_clear()
    assert answer_model.answer_models() == shipped


async def test_a_span_the_reader_is_not_sure_of_gives_way_to_its_sentence():
    note = Document(
        "Nikola Tesla was a Serbian-American inventor. He died on 7 January 1943 in New York.",
        id="note#0",
        metadata={"title": "note"},
    )
    generator = ExtractiveGenerator(get_embeddings())
    where = await generator.generate("Where did Tesla die?", [note])
    # The span reader offers "January" (a capitalised word beside the question's words); the
    # span model does not trust it, so the sentence it would quote answers.
    assert where.text == "He died on 7 January 1943 in New York."
    assert where.features["span_probability"] < answer_model.SPAN_BAR
    when = await generator.generate("When did Tesla die?", [note])
    assert when.text == "7 January 1943" and when.quote.startswith("He died")
    assert when.confidence == pytest.approx(
        answer_models().answers.probability(when.features), abs=1e-4
    )
