"""Metric functions against hand-checked cases."""

import pytest

from reflexrag.benchmarks import metrics
from reflexrag.benchmarks.evaluate import score, stratified_sample, truthfulness
from reflexrag.benchmarks.fixture import QAItem
from reflexrag.server.runner import RunResult


def test_english_normalisation_drops_case_punctuation_and_articles():
    assert metrics.normalize("The  Eiffel Tower!") == "eiffel tower"
    assert metrics.exact_match("the eiffel tower.", ["Eiffel Tower"]) == 1.0


def test_chinese_normalisation_is_character_level():
    assert metrics.normalize("一九四三年，", "zh") == "一九四三年"
    assert metrics.tokens("特斯拉 去世", "zh") == list("特斯拉去世")
    assert metrics.token_f1("他在1943年去世", ["1943年"], "zh") == pytest.approx(
        2 * (5 / 9) / (5 / 9 + 1)
    )
    # DRCD's rows are tagged zh-Hant: still characters, not one whitespace token.
    assert metrics.token_f1("聖母院", ["聖母院博物館"], "zh-Hant") == pytest.approx(2 / 3)
    assert metrics.exact_match("1909年。", ["1909年"], "zh-Hant") == 1.0


def test_f1_takes_the_best_gold_and_handles_empty_answers():
    assert metrics.token_f1("new york hotels", ["Paris", "New York hotels"]) == 1.0
    assert metrics.token_f1("", ["anything"]) == 0.0
    assert metrics.token_f1("in new york", ["new york city"]) == pytest.approx(2 / 3)


def test_contains_matches_whole_words_in_english_and_substrings_in_chinese():
    assert metrics.contains_answer("Tesla died in 1943.", ["1943"]) == 1.0
    assert metrics.contains_answer("Tesla died in 19431.", ["1943"]) == 0.0
    assert metrics.contains_answer("特斯拉于1943年去世。", ["1943年"], "zh") == 1.0
    assert metrics.contains_answer("", ["x"]) == 0.0


def test_rouge_l():
    # LCS "w y z": precision 3/4, recall 1.
    assert metrics.rouge_l("w x y z", ["w y z"]) == pytest.approx(2 * 0.75 * 1 / 1.75)
    # Articles are dropped before matching, as in SQuAD.
    assert metrics.rouge_l("a b c d", ["a c d"]) == pytest.approx(0.8)
    assert metrics.rouge_l("x", ["y"]) == 0.0


def test_retrieval_metrics():
    retrieved = ["d3", "d1", "d7"]
    assert metrics.hit_at_k(retrieved, ["d1"], 1) == 0.0
    assert metrics.hit_at_k(retrieved, ["d1"], 5) == 1.0
    assert metrics.mrr_at_k(retrieved, ["d1", "d7"]) == 0.5
    assert metrics.all_gold_recall(retrieved, ["d1", "d9"]) == 0.0
    assert metrics.all_gold_recall(retrieved, ["d1", "d7"]) == 1.0
    assert metrics.gold_fraction(["d1", "d2"], ["d1"]) == 0.5
    assert metrics.gold_fraction([], ["d1"]) == 0.0


def test_stratified_sample_covers_every_group_and_is_seeded():
    items = [
        QAItem(f"q{n}", lang, "q?", ["a"], category, "single", source)
        for n, (lang, category, source) in enumerate(
            [("en", "in_corpus", "a")] * 50
            + [("zh", "in_corpus", "b")] * 30
            + [("en", "out_of_corpus", "c")] * 5
        )
    ]
    sample = stratified_sample(items, 10, seed=1)
    assert len(sample) == 10
    assert len(stratified_sample(items, 40, seed=1)) == 40
    assert {item.source for item in sample} == {"a", "b", "c"}
    assert [i.qid for i in sample] == [i.qid for i in stratified_sample(items, 10, seed=1)]


def _result(answer: str, quote: str = "", kind: str = "extractive") -> RunResult:
    result = RunResult.failed("naive", "")
    result.answer, result.quote, result.answer_kind = answer, quote, kind
    return result


def test_truthfulness_rewards_right_answers_and_honest_abstentions_only():
    tesla = QAItem("q", "en", "When did Tesla die?", ["1943"], "in_corpus", "single", "s")
    assert truthfulness(tesla, _result("7 January 1943")) == 1.0
    # The quote holds the gold, the short answer does not: half.
    assert truthfulness(tesla, _result("New York", "He died in 1943 in New York.")) == 0.5
    assert truthfulness(tesla, _result("1856", "He was born in 1856.")) == -1.0
    assert truthfulness(tesla, _result("not found", kind="not_found")) == 0.0
    assert truthfulness(tesla, RunResult.failed("naive", "server down")) == 0.0

    absent = QAItem("u", "en", "When did Tesla marry?", [], "unanswerable_in_corpus", "", "s")
    assert truthfulness(absent, _result("not found", kind="not_found")) == 1.0
    assert truthfulness(absent, _result("1943")) == -1.0
    # A failed run says nothing about the knowledge base: never an honest abstention.
    assert truthfulness(absent, RunResult.failed("naive", "server down")) == 0.0
    on_the_web = QAItem(
        "w",
        "en",
        "q?",
        ["x"],
        "unanswerable_in_corpus",
        "single",
        "s",
        extra={"answers_if_web": ["Paris"]},
    )
    assert truthfulness(on_the_web, _result("Paris")) == 1.0
    assert truthfulness(on_the_web, _result("Lyon")) == -1.0


PLANTED = QAItem(
    "c",
    "en",
    "Capital of Australia?",
    ["Canberra"],
    "counterfactual",
    "single",
    "s",
    extra={"fakeanswer": "Sydney"},
)
"""A question whose corpus plants a false answer (Sydney) beside the true one."""


def test_truthfulness_of_parts_long_answers_and_planted_answers():
    both = QAItem(
        "p",
        "en",
        "Director and star?",
        ["x"],
        "in_corpus",
        "single",
        "s",
        extra={"answer_parts": ["Nolan", ["Bale", "Christian Bale"]]},
    )
    assert truthfulness(both, _result("Nolan; Christian Bale")) == 1.0
    assert truthfulness(both, _result("Nolan")) == -1.0
    passage = "the court ruled that the law was unconstitutional in 1954"
    long = QAItem("l", "en", "q?", [passage], "in_corpus", "single", "s", answer_style="long")
    assert truthfulness(long, _result("The court ruled the law unconstitutional in 1954.")) == 1.0
    assert truthfulness(long, _result("Yes")) == -1.0
    planted = PLANTED
    assert truthfulness(planted, _result("Sydney")) == -1.0
    assert truthfulness(planted, _result("Canberra")) == 1.0
    assert truthfulness(planted, _result("not found", kind="not_found")) == 1.0


def test_a_planted_answer_counts_as_repeated_only_when_given_without_the_true_one():
    planted = PLANTED
    assert score(planted, _result("Sydney"))["planted_repeated"] == 1.0
    assert score(planted, _result("Canberra, not Sydney"))["planted_repeated"] == 0.0
    assert score(planted, _result("Sydney", kind="not_found"))["planted_repeated"] == 0.0
    assert score(planted, _result("Sydney"))["correct"] == 0.0


def fact(qid: str, question: str, answer: str, doc: str) -> QAItem:
    """An answerable single-hop English question whose answer ``doc`` states."""
    return QAItem(qid, "en", question, [answer], "in_corpus", "single", "s", "span", [doc])


def test_planting_a_false_answer_copies_the_gold_passage_with_another_answer_of_its_kind():
    from reflexrag.benchmarks.counterfactual import plant

    items = [
        fact("a", "When did Tesla die?", "1943", "tesla"),
        fact("b", "When did Edison die?", "1931", "edison"),
        fact("c", "Who built the bridge?", "John Roebling", "bridge"),
    ]
    corpus = [
        {"doc_id": "tesla", "title": "Tesla", "text": "Tesla died in 1943 in New York."},
        {"doc_id": "edison", "title": "Edison", "text": "Edison died in 1931 in New Jersey."},
        {"doc_id": "bridge", "title": "Bridge", "text": "John Roebling built the bridge."},
    ]
    questions, planted = plant(items, corpus, None, seed=1)
    by_qid = {row["qid"]: row for row in questions}
    # Dates trade places; the only name has no other name to trade with.
    assert set(by_qid) == {"a#planted", "b#planted"}
    assert by_qid["a#planted"]["extra"]["fakeanswer"] == "1931"
    assert by_qid["a#planted"]["category"] == "counterfactual"
    texts = {row["doc_id"]: row["text"] for row in planted}
    assert texts["tesla"] == "Tesla died in 1943 in New York."
    assert texts["tesla#planted"] == "Tesla died in 1931 in New York."


def test_cutting_an_answer_removes_every_sentence_stating_it_and_keeps_the_others():
    from reflexrag.benchmarks.cut import make

    items = [
        fact("a", "When did Tesla die?", "1943", "tesla"),
        fact("b", "Where did Tesla move?", "New York", "tesla"),
        fact("c", "When did Edison die?", "1931", "edison"),
        fact("d", "Why is the sky blue?", "scattering", "sky"),  # asks for no single fact
    ]
    corpus = [
        {"doc_id": "tesla", "title": "Tesla", "text": "Tesla moved to New York.\nHe died in 1943."},
        {"doc_id": "edison", "title": "Edison", "text": "Edison died in 1931. Tesla: 1943."},
        {"doc_id": "sky", "title": "Sky", "text": "The sky is blue because of scattering."},
    ]
    questions, rows = make(items, corpus, None, seed=3)
    by_qid = {row["qid"]: row for row in questions}
    cut = [row for row in questions if row["category"] == "unanswerable_in_corpus"]
    kept = [row for row in questions if row["category"] == "in_corpus"]
    assert "d" not in by_qid and "d#cut" not in by_qid
    assert cut and kept and len(cut) + len(kept) == 3
    texts = " ".join(row["text"] for row in rows)
    for row in cut:
        assert row["qid"].endswith("#cut") and row["answers"] == []
        assert row["extra"]["cut"] not in texts  # cut wherever the corpus said it
    for row in kept:
        assert row["answers"][0] in texts  # a kept question's passage still answers it
    assert next(row for row in rows if row["doc_id"] == "sky") == corpus[2]


def test_swapping_puts_a_name_or_figure_the_corpus_never_mentions_into_the_question():
    from reflexrag.benchmarks.swapped import make, said_in

    items = [
        fact("a", "What happened at the 1998 election?", "x", "vote"),
        fact("b", "When did Tesla move to New York?", "x", "tesla"),
        fact("c", "Why is the sky blue?", "x", "sky"),  # names nothing
    ]
    corpus = [
        {"doc_id": "vote", "title": "Vote", "text": "The 1998 election, won by 1999 votes."},
        {"doc_id": "tesla", "title": "Tesla", "text": "Tesla moved to New York in 1884."},
        {"doc_id": "sky", "title": "Sky", "text": "The sky is blue because of scattering."},
    ]
    other = [{"doc_id": "o", "title": "Other", "text": "Marconi met Popov in Bologna."}]
    questions = {row["qid"]: row for row in make(items, corpus, other, None, seed=1)}
    assert set(questions) == {"a#swapped", "b#swapped"}
    said = said_in(corpus)
    for row in questions.values():
        assert row["category"] == "unanswerable_in_corpus" and row["answers"] == []
        swap = row["extra"]["swapped"]
        assert swap["to"] in row["question"] and swap["from"] not in row["question"]
        assert swap["to"].lower() not in said  # nothing in the corpus mentions it
    assert questions["a#swapped"]["extra"]["swapped"]["from"] == "1998"


def test_the_multi_part_builder_writes_its_set_or_says_why_not(tmp_path, capsys):
    import json

    from reflexrag.benchmarks.multipart import main

    out = tmp_path / "out"
    assert main(["--qa", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    qa = tmp_path / "qa.jsonl"
    rows = [
        {"qid": "a", "question": "When did Tesla die?", "answers": ["1943"], "gold_doc_ids": ["t"]},
        {
            "qid": "b",
            "question": "Where was he born?",
            "answers": ["Smiljan"],
            "gold_doc_ids": ["t"],
        },
    ]
    qa.write_text(json.dumps(rows[0]) + "\n", "utf-8")
    assert main(["--qa", str(qa), "--out", str(out)]) == 1
    assert "no two single-hop questions share a gold passage" in capsys.readouterr().err
    assert not out.exists()
    qa.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    assert main(["--qa", str(qa), "--out", str(out)]) == 0
    written = [json.loads(line) for line in (out / "qa.jsonl").read_text("utf-8").splitlines()]
    assert [row["qid"] for row in written] in (["a+b"], ["b+a"])


def test_the_leave_one_set_out_verdict_takes_the_best_self_correcting_strategy():
    from reflexrag.benchmarks.loso import summary, verdict

    def overall(truthfulness: float) -> dict:
        return {"overall": {"truthfulness": truthfulness, "answer_rate": 0.5, "answer_right": 0.6}}

    report = {
        "strategies": {"naive": overall(0.1), "self_rag": overall(0.4), "crag": overall(0.5)},
        "always_abstain": {"truthfulness": 0.3},
    }
    judged = verdict("CLAPNQ", report)
    # Naive is the baseline, never the best self-correcting strategy, whatever it scores.
    assert judged["best"] == "crag" and judged["margin"] == pytest.approx(0.2)
    table = summary([("CLAPNQ", report)])
    assert "| CLAPNQ | crag | 0.500 | 0.100 | 0.300 | +0.200 | 0.600 |" in table
    assert "| CLAPNQ | always-abstain | 0.300 | 0.000 |" in table
    report["strategies"]["naive"] = overall(0.9)
    assert verdict("CLAPNQ", report)["margin"] == pytest.approx(-0.4)


def test_two_questions_on_one_passage_are_joined_into_one_asking_for_both():
    from reflexrag.benchmarks.evaluate import truthfulness
    from reflexrag.benchmarks.multipart import make

    def item(qid, question, answers, doc, lang="en", category="in_corpus", **extra):
        docs = [doc] if category == "in_corpus" else []
        return QAItem(qid, lang, question, answers, category, "single", "s", "span", docs, extra)

    items = [
        item("a", "When did Tesla die?", ["1943"], "t:1:0"),
        item("b", "Where was Tesla born?", ["Smiljan"], "t:1:0"),
        item("c", "特斯拉哪一年去世？", ["1943"], "tz:1:0", "zh"),
        item("d", "特斯拉出生在哪里？", ["斯米良"], "tz:1:0", "zh"),
        item("e", "Who funded Tesla's lab?", ["Morgan"], "t:1:1"),
        item(
            "f",
            "What did Tesla write in 1937?",
            [],
            "",
            category="unanswerable_in_corpus",
            withheld_doc_id="t:1:4",
        ),
        item("g", "Tesla moved to New York in 1884.", ["1884"], "t:2:0"),  # no question word
        item("h", "Why?", ["x"], "t:2:0"),
    ]
    rows = {row["qid"]: row for row in make(items, None, seed=1)}
    assert len(rows) == 3
    both = next(
        row
        for row in rows.values()
        if row["lang"] == "en" and row["answers"] == [] and row["category"] == "in_corpus"
    )
    assert both["question"] in (
        "When did Tesla die, and where was Tesla born?",
        "Where was Tesla born, and when did Tesla die?",
    )
    assert sorted(both["extra"]["answer_parts"]) == [["1943"], ["Smiljan"]]
    chinese = next(row for row in rows.values() if row["lang"] == "zh")
    assert chinese["question"] in (
        "特斯拉哪一年去世，特斯拉出生在哪里？",
        "特斯拉出生在哪里，特斯拉哪一年去世？",
    )
    # The question the knowledge base cannot answer, joined with one it can: not found is right.
    half = next(row for row in rows.values() if row["category"] == "unanswerable_in_corpus")
    assert half["question"] in (
        "Who funded Tesla's lab, and what did Tesla write in 1937?",
        "What did Tesla write in 1937, and who funded Tesla's lab?",
    )
    assert half["extra"]["missing_part"] == "What did Tesla write in 1937?"
    # One part alone is a wrong answer; both parts are right.
    asked = QAItem(
        both["qid"],
        "en",
        both["question"],
        [],
        "in_corpus",
        "single",
        "s",
        "span",
        [],
        both["extra"],
    )
    assert truthfulness(asked, _result("Tesla died in 1943.")) == -1.0
    assert truthfulness(asked, _result("Tesla died in 1943. He was born in Smiljan.")) == 1.0
