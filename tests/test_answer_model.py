"""The answer models: their arithmetic, how they are fitted, and the models shipped."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from langchain_core.documents import Document

from reflexrag.benchmarks import answer_model as fitting
from reflexrag.nodes.judges import answer_model, local
from reflexrag.nodes.judges.answer_model import (
    ANSWER_FEATURES,
    SPAN_FEATURES,
    SPAN_PRECISION,
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


async def test_a_span_the_reader_is_not_sure_of_gives_way_to_its_sentence(monkeypatch):
    note = Document(
        "Nikola Tesla was a Serbian-American inventor. He died on 7 January 1943 in New York.",
        id="note#0",
        metadata={"title": "note"},
    )
    generator = ExtractiveGenerator(get_embeddings())
    shipped = answer_models()
    # Held out, no span bar made the shipped spans right 4 times in 5: the sentence answers.
    assert shipped.span_bar is None
    when = await generator.generate("When did Tesla die?", [note])
    assert when.text == "He died on 7 January 1943 in New York." and when.quote == ""
    assert "span_probability" in when.features
    assert when.confidence == pytest.approx(shipped.answers.probability(when.features), abs=1e-4)
    # A span model sure of this span gives it, quoting its sentence; one that is not, not.
    probability = when.features["span_probability"]
    for bar, expected in (
        (probability - 0.001, "7 January 1943"),
        (probability + 0.001, when.text),
    ):
        sure = dataclasses.replace(shipped, span_bar=bar)
        monkeypatch.setattr(local, "answer_models", lambda sure=sure: sure)
        answer = await generator.generate("When did Tesla die?", [note])
        assert answer.text == expected
        assert answer.quote == ("" if expected == when.text else when.text)


def _span_rows(name: str, n: int, signal: bool) -> list[dict]:
    """Answered questions with a span; with ``signal`` the span is right when its score is
    high, without it one in two at random."""
    rows = []
    for i in range(n):
        score = i / (n - 1)
        features = dict.fromkeys(SPAN_FEATURES, 0.0) | {"span_score": score}
        right = score > 0.5 if signal else i % 2 == 0
        rows.append({"set": name, "answers": True, "features": features, "span": right})
    return rows


def test_the_span_bar_is_the_lowest_at_which_held_out_spans_were_nearly_always_right():
    sets = [_span_rows(name, 40, signal=True) for name in ("a", "b", "c")]
    bar = fitting.fit_span_bar([row for rows in sets for row in rows])
    assert bar is not None and 0.5 <= bar <= 0.95
    span = fitting.fit_logistic([row for rows in sets for row in rows], SPAN_FEATURES, "span")
    models = answer_model.AnswerModels(answer_models().answers, span, bar)
    given = [row for row in _span_rows("held", 40, True) if models.gives_span(row["features"])]
    assert given and sum(row["span"] for row in given) / len(given) >= SPAN_PRECISION
    noise = [_span_rows(name, 40, signal=False) for name in ("a", "b", "c")]
    assert fitting.fit_span_bar([row for rows in noise for row in rows]) is None
    assert load_models(fitting.to_json(models)).span_bar == bar


@pytest.mark.parametrize("rule, flagged", [("unmentioned", ["16"]), ("unasked", True)])
def test_the_sweep_chooses_the_mildest_best_factor_and_reads_stress_sets_by_fold(
    monkeypatch, rule, flagged
):
    from reflexrag.nodes.judges.answer_model import AnswerModels

    # P ≥ 0.5 exactly when match ≥ 0.5: a sure answer (match 0.8, P 0.95) halved is unsure.
    sure = Logistic(("match",), (10.0,), 0.0, (0.5,), (1.0,))
    monkeypatch.setattr(fitting, "fit_models", lambda rows: AnswerModels(sure, sure, None))

    def row(name: str, answers: bool, discounted: bool, answerable: bool = True) -> dict:
        features = {"match": 0.8, "cosine": 0.8}
        return {
            "set": name,
            "answerable": answerable,
            "features": features,
            "answers": answers,
            "span": False,
            rule: flagged if discounted else [],
        }

    pair = [(True, False), (False, True)]  # right and not discounted; wrong and discounted
    rows = [row(name, a, u) for name in ("a", "b") for a, u in pair]
    mixed = ((True, False), (True, True), (False, True), (False, True))
    rows += [row("c", answers, unmentioned) for answers, unmentioned in mixed]
    stress = [row("a-swapped", False, True, answerable=False)]
    reports = {r["set"]: r for r in fitting.sweep(rows, stress, rule)}
    assert list(reports) == ["a", "a-swapped", "b", "c"]
    assert reports["a"]["f=1.0"] == 0.0 and reports["a"]["f=0.5"] == 0.5
    # 0.85 and 0.7 leave the sure answers sure; 0.5 is the mildest that helps.
    assert reports["a"]["f=0.7"] == 0.0
    assert [reports[name]["chosen"] for name in ("a", "b", "c")] == [0.5, 0.5, 0.5]
    assert reports["c"]["f=0.5"] == 0.25 and reports["c"]["hit"] == 3
    assert reports["a-swapped"]["f=1.0"] == -1.0 and reports["a-swapped"]["f=0.5"] == 1.0
    assert reports["a-swapped"]["chosen"] is None
