"""The answer models: their arithmetic, how they are fitted, and the models shipped."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from langchain_core.documents import Document

from reflexrag.benchmarks import answer_model as fitting
from reflexrag.nodes.judges import answer_model, local
from reflexrag.nodes.judges.answer_model import (
    ANSWER_FEATURES,
    SENTENCE_FEATURES,
    SPAN_FEATURES,
    SPAN_PRECISION,
    AnswerModels,
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


def test_fitting_learns_how_far_a_sentence_leads_from_the_sentences_chosen_among_others():
    def with_span(rows: list[dict]) -> list[dict]:
        spans = [*_span_rows("spans", 20, signal=True)]
        return [*rows, *(row | {"answerable": True} for row in spans)]

    rows = []
    for name in ("a", "b", "c"):
        for row in _rows(name, 40, 0.0):
            # The sentences that answer lead the rest clearly; the others barely.
            lead = 0.3 if row["answers"] else 0.02
            rows.append(row | {"features": row["features"] | {"lead": lead}})
    # A verdict or a counted name has no lead: only the answers model reads it.
    rows += _rows("d", 20, 0.0)
    models = fitting.fit_models(with_span(rows))
    assert models.sentence is not None and models.sentence.features == SENTENCE_FEATURES
    assert models.sentence.weights[SENTENCE_FEATURES.index("lead")] > 0
    reread = load_models(fitting.to_json(models)).sentence
    sure = {"match": 0.7, "cosine": 0.2, "lead": 0.3}
    assert reread.probability(sure) == pytest.approx(models.sentence.probability(sure), abs=1e-4)
    no_lead = with_span(_rows("a", 20, 0.0) + _rows("b", 20, 0.0))
    assert fitting.fit_models(no_lead).sentence is None


def test_an_answer_chosen_among_sentences_is_as_sure_as_the_sentence_model_says():
    answers = Logistic(("match",), (1.0,), 0.0, (0.5,), (1.0,))
    sentence = Logistic(("match", "lead"), (1.0, 5.0), 0.0, (0.5, 0.0), (1.0, 1.0))
    models = AnswerModels(answers, answers, None, sentence)
    assert models.sureness({"match": 0.5}) == pytest.approx(0.5)
    assert models.sureness({"match": 0.5, "lead": 0.2}) == pytest.approx(1 / (1 + math.exp(-1)))
    assert models.sureness({"match": 0.5, "lead": -0.2}) < 0.5
    # A models file fitted before the sentence model reads every answer with ``answers``.
    older = fitting.to_json(models)
    del older["sentence"]
    assert load_models(older).sentence is None
    assert load_models(older).sureness({"match": 0.5, "lead": 0.2}) == pytest.approx(0.5)


def test_a_sentence_leads_the_best_one_it_does_not_quote():
    order = np.array([0.9, 0.6, 0.85, 0.3])
    matches = order.copy()
    # The best quoted with the one close behind it: it leads the best of the rest, 0.6.
    assert local.sentence_lead(order, matches, [0, 2], 0) == pytest.approx(0.3)
    # A regeneration reads past the rejected best: it stands behind it.
    assert local.sentence_lead(order, matches, [1], 1) == pytest.approx(-0.3)
    # Nothing passed over, nothing to lead.
    assert local.sentence_lead(order, matches, [0, 1, 2, 3], 0) is None
    # Two sentences that both fill the scale (all of the question's words, a meaning past the
    # cosine's ceiling) are not known to tie: their lead is not known.
    full = np.array([1.0, 0.6, 1.0, 0.3])
    assert local.sentence_lead(full, full, [0], 0) is None
    assert local.sentence_lead(full, full, [0, 2], 0) == pytest.approx(0.4)


async def test_a_sentence_barely_ahead_of_a_rival_is_less_sure_than_one_far_ahead():
    answer = "Nikola Tesla died on 7 January 1943 in New York City."
    unrelated = Document(
        "The library opens at ten on Saturdays. Loans last three weeks.",
        id="library#0",
        metadata={"title": "library"},
    )
    rival = Document(
        "Nikola Tesla died poor in New York City, his papers say.",
        id="papers#0",
        metadata={"title": "papers"},
    )
    note = Document(answer, id="note#0", metadata={"title": "Tesla"})
    generator = ExtractiveGenerator(get_embeddings())
    alone = await generator.generate("When did Tesla die?", [note, unrelated])
    contested = await generator.generate("When did Tesla die?", [note, rival])
    assert alone.text == contested.text == answer
    # Same sentence, same match to the question: only the lead differs, and with it the
    # confidence.
    assert alone.features["match"] == contested.features["match"]
    assert contested.features["lead"] < alone.features["lead"]
    assert contested.confidence < alone.confidence


def test_the_shipped_sentence_model_trusts_a_clearer_lead_more():
    models = answer_models()
    assert models.sentence is not None and models.sentence.features == SENTENCE_FEATURES
    close = models.sureness({"match": 0.7, "cosine": 0.7, "lead": 0.01})
    clear = models.sureness({"match": 0.7, "cosine": 0.7, "lead": 0.3})
    assert close < clear


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
    assert when.confidence == pytest.approx(shipped.sureness(when.features), abs=1e-4)
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


def test_choose_reads_each_dump_held_out_and_each_fold_picks_the_best_on_its_other_sets(
    monkeypatch,
):
    # P ≥ 0.5 exactly when match ≥ 0.5: each row is answered when its match is.
    sure = Logistic(("match",), (10.0,), 0.0, (0.5,), (1.0,))
    monkeypatch.setattr(fitting, "fit_models", lambda rows: AnswerModels(sure, sure, None))

    def row(name: str, match: float, answers: bool) -> dict:
        features = {"match": match, "cosine": match}
        return {
            "set": name,
            "answerable": True,
            "features": features,
            "answers": answers,
            "span": False,
        }

    # Held out, the shipped reading scores -1, +1 and 0 on "a", "b" and "c" (a wrong answer,
    # a right one, an abstention), the other one 0, 0 and +1.
    shipped = [row("a", 0.8, False), row("b", 0.8, True), row("c", 0.2, True)]
    other = [row("a", 0.2, False), row("b", 0.2, True), row("c", 0.8, True)]
    reports = {r["set"]: r for r in fitting.choose([("shipped", shipped), ("other", other)])}
    assert [reports[n]["shipped"] for n in "abc"] == [-1.0, 1.0, 0.0]
    assert [reports[n]["other"] for n in "abc"] == [0.0, 0.0, 1.0]
    # Each fold chooses by its other two sets: "b" by -0.5 against 0.5; "a" (0.5 each) and
    # "c" (0.0 each) are ties, which go to the shipped value, listed first.
    assert [reports[n]["chosen"] for n in "abc"] == ["shipped", "other", "shipped"]
    assert [reports[n]["held_out"] for n in "abc"] == [-1.0, 0.0, 0.0]


def test_a_dump_reads_with_a_reader_constant_set_and_refuses_an_unknown_one(monkeypatch):
    monkeypatch.setattr(local, "KIND_BONUS", local.KIND_BONUS)
    monkeypatch.setattr(fitting, "TOP_K", fitting.TOP_K)
    fitting.set_reader_constant("KIND_BONUS=0.3")
    fitting.set_reader_constant("TOP_K=6")
    assert local.KIND_BONUS == 0.3 and fitting.TOP_K == 6
    with pytest.raises(SystemExit, match="not a numeric constant"):
        fitting.set_reader_constant("ExtractiveGenerator=1")
    with pytest.raises(SystemExit, match="not a numeric constant"):
        fitting.set_reader_constant("NO_SUCH_CONSTANT=1")
    with pytest.raises(SystemExit, match="needs a number"):
        fitting.set_reader_constant("KIND_BONUS=high")
    with pytest.raises(SystemExit, match="whole number"):
        fitting.set_reader_constant("TOP_K=0")
    assert local.KIND_BONUS == 0.3 and fitting.TOP_K == 6


def test_choose_refuses_a_dump_not_given_as_label_and_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        fitting.main(["choose", str(tmp_path / "rows.jsonl")])
    assert exited.value.code == 2 and "LABEL=ROWS" in capsys.readouterr().err
