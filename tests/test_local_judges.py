"""The local (no-LLM) backend on small, hand-made cases with the real embedded model."""

import pytest
from langchain_core.documents import Document

from reflexrag.nodes.judges import local
from reflexrag.nodes.judges.local import ExtractiveGenerator, LocalJudge, answerable_sentence
from reflexrag.providers.embeddings import get_embeddings

TESLA = Document(
    "Tesla was renowned for his showmanship. Tesla died on 7 January 1943. "
    "His work fell into obscurity after his death.",
    id="tesla#0",
    metadata={"title": "Nikola_Tesla"},
)
PARIS = Document(
    "Paris is the capital and most populous city of France.",
    id="paris#0",
    metadata={"title": "Paris"},
)


async def test_relevance_separates_a_relevant_from_an_unrelated_document():
    judge = LocalJudge(get_embeddings())
    relevant, unrelated = await judge.grade_documents("What year did Tesla die?", [TESLA, PARIS])
    assert relevant.score > unrelated.score
    assert relevant.relevant and not unrelated.relevant


async def test_a_chunk_about_other_things_is_relevant_when_one_of_its_sentences_answers():
    # The chunk as a whole matches the question under the bar; its fourth sentence answers.
    apollo = Document(
        "The spacecraft was built in California and shipped to Florida in August. "
        "Engineers found hundreds of wiring faults during its ground tests. "
        "The crew complained about the simulator, which rarely matched the real cabin. "
        "During the plugs-out test an electrical fire began in the cabin, and it spread "
        "quickly in the pure oxygen atmosphere. "
        "The program was delayed by twenty months while the capsule was redesigned.",
        id="apollo#0",
        metadata={"title": "Apollo 1"},
    )
    judge = LocalJudge(get_embeddings())
    question = "What type of atmosphere helped fuel the fire throughout the cabin?"
    whole = judge.scorer.scores(question, [local.document_text(apollo)])[0]
    [grade] = await judge.grade_documents(question, [apollo])
    assert whole < judge.relevance_threshold <= grade.score and grade.relevant


async def test_a_passage_holding_one_clause_of_a_multi_part_question_is_relevant():
    judge = LocalJudge(get_embeddings())
    question = (
        "Which city, the capital and most populous city of France, "
        "was the place where the inventor who died on 7 January 1943 had worked as a young man?"
    )
    whole_only = LocalJudge(get_embeddings())
    whole_only.scorer.by_clause = False
    [by_clause] = await judge.grade_documents(question, [PARIS])
    [whole] = await whole_only.grade_documents(question, [PARIS])
    assert by_clause.score > whole.score
    assert by_clause.relevant


async def test_extractive_answer_quotes_the_best_sentence_with_its_source():
    answer = await ExtractiveGenerator(get_embeddings()).generate(
        "What year did Tesla die?", [TESLA, PARIS]
    )
    assert "1943" in answer.text and answer.kind == "extractive"
    assert answer.used_ids == ["tesla#0"]
    assert answer.text in TESLA.page_content


LELAND = Document(
    "Leland is a town in Brunswick County, North Carolina. A number of movies, such as "
    '"Maximum Overdrive" (1986), "Domestic Disturbance" (2001), and "We\'re the Millers" (2013) '
    "have been shot in or around Leland.",
    id="leland#0",
    metadata={"title": "Leland, North Carolina"},
)
OVERDRIVE = Document(
    "Maximum Overdrive is a 1986 American science fiction horror comedy film written and "
    "directed by Stephen King. The film stars Emilio Estevez and Pat Hingle.",
    id="overdrive#0",
    metadata={"title": "Maximum Overdrive"},
)


async def test_a_subject_named_by_a_relative_clause_is_found_first_then_asked_about():
    # The sentence about the town names the film, not who directed it: the answer is read in
    # two hops, quoting both sentences.
    question = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
    generator = ExtractiveGenerator(get_embeddings())
    answer = await generator.generate(question, [LELAND, OVERDRIVE])
    assert "Stephen King" in answer.text
    assert "shot in or around Leland" in answer.quote and "directed by Stephen King" in answer.quote
    assert set(answer.used_ids) == {"leland#0", "overdrive#0"}
    # Without the document about the film, the chain breaks and the town's sentence stands;
    # iterative's next round then asks about the film by its name.
    alone = await generator.generate(question, [LELAND])
    assert "Stephen King" not in f"{alone.text} {alone.quote}"
    # It names the film and says nothing of who directed it: half as sure as the sentence
    # read alone, and "directed" is what the next rewrite looks for.
    read_alone = generator.read(question, [LELAND])
    assert alone.text == read_alone.text
    assert alone.confidence == pytest.approx(read_alone.confidence * local.UNASKED_FACTOR, abs=1e-4)
    assert alone.unasked == ["directed"]
    judge = LocalJudge(get_embeddings())
    draft = f"{alone.text}\n{alone.quote}"
    follow_up = await judge.next_query(question, draft, "expanded", [])
    assert follow_up == "Who directed Maximum Overdrive?"
    asked_before = await judge.next_query(question, draft, "expanded", [], [follow_up])
    assert asked_before != follow_up


async def test_the_next_query_takes_the_names_a_draft_writes_whole():
    # The answer and its quote stand a line apart: no name runs across the line, and a
    # line's first word ("A") is no name.
    judge = LocalJudge(get_embeddings())
    draft = 'Maximum Overdrive\nA number of movies, such as "Maximum Overdrive", were shot there.'
    query = await judge.next_query("Which films were shot in Leland?", draft, "expanded", [])
    assert query.startswith("Maximum Overdrive") and "\n" not in query


async def test_regeneration_stands_on_no_rejected_sentence():
    generator = ExtractiveGenerator(get_embeddings(), max_sentences=1)
    first = await generator.generate("What year did Tesla die?", [TESLA])
    assert len(first.stands_on) == 1 and first.stands_on[0] in TESLA.page_content
    second = await generator.generate("What year did Tesla die?", [TESLA], first.stands_on)
    assert second.text and second.stands_on != first.stands_on
    assert first.stands_on[0] not in (second.quote or second.text)
    rejected = [*first.stands_on, *second.stands_on]
    third = await generator.generate("What year did Tesla die?", [TESLA], rejected)
    assert not set(third.stands_on) & set(rejected)


async def test_grounding_tells_quoted_from_invented_text():
    judge = LocalJudge(get_embeddings())
    quoted = await judge.grade_grounding("Tesla died on 7 January 1943.", [TESLA])
    invented = await judge.grade_grounding("Bananas grow on volcanic islands quickly.", [TESLA])
    assert quoted.level == "fully"
    assert invented.level == "none"


async def test_a_written_answers_citation_markers_are_not_graded_as_claims():
    # A model's answer checked by the local judge: "[1]" points at a passage, and a passage
    # holding no "1" does not make it less grounded.
    judge = LocalJudge(get_embeddings())
    died = Document("Tesla died on 7 January 1943.", id="d")
    cited = await judge.grade_grounding("Tesla died on 7 January 1943. [1]", [died])
    inline = await judge.grade_grounding("Tesla died in January 1943 [2].", [died])
    listed = await judge.grade_grounding("Tesla died on 7 January 1943 [2, 5-7].", [died])
    assert (cited.level, cited.score) == ("fully", 1.0)
    assert (inline.level, inline.score) == ("fully", 1.0)
    assert (listed.level, listed.score) == ("fully", 1.0)


async def test_usefulness_checks_the_answer_type():
    judge = LocalJudge(get_embeddings())
    dated = await judge.grade_usefulness("When did Tesla die?", "Tesla died on 7 January 1943.")
    undated = await judge.grade_usefulness("When did Tesla die?", "Tesla was a showman.")
    assert dated.useful and not undated.useful
    # Asked which year, a day and a month are no answer: the loop looks further.
    question = "In what year did Tesla die?"
    day = await judge.grade_usefulness(question, "Tesla died on 7 January in New York.")
    year = await judge.grade_usefulness(question, "Tesla died on 7 January 1943 in New York.")
    assert not day.useful and day.reason == "expected a year, the answer has none"
    assert year.useful


async def test_retrieval_rules():
    judge = LocalJudge(get_embeddings())
    assert not (await judge.needs_retrieval("hello!")).needed
    assert not (await judge.needs_retrieval("2 + 2 * 3")).needed
    assert not (await judge.needs_retrieval("Write a Python function that sorts a list")).needed
    # A weak best match is no reason to skip the knowledge base: its loop decides.
    assert (await judge.needs_retrieval("What is love?", [PARIS])).needed
    assert not (await judge.needs_retrieval("What is love?", [])).needed
    assert (await judge.needs_retrieval("What is Nikola Tesla known for?", [PARIS, TESLA])).needed
    assert (await judge.needs_retrieval("特斯拉是哪一年去世的？")).needed


async def test_rewrite_extracts_keywords_and_expands_later():
    judge = LocalJudge(get_embeddings())
    first = await judge.rewrite_query("What year did Tesla die?", 1, [TESLA])
    second = await judge.rewrite_query("What year did Tesla die?", 2, [TESLA])
    assert first == "year tesla die"
    assert second.startswith(first) and len(second) > len(first)
    assert await judge.rewrite_query("特斯拉是哪一年去世的？", 1, []) == "特斯拉去世"


async def test_a_definition_question_is_answered_by_the_lead_of_the_document_it_names():
    crag = Document(
        "Corrective Retrieval Augmented Generation adds a retrieval evaluator in front of "
        "generation. On PopQA the paper reports accuracy rising from 50.5 to 54.9 for CRAG.",
        id="crag#0",
        metadata={"title": "Corrective RAG (CRAG)", "chunk": 0},
    )
    answer = await ExtractiveGenerator(get_embeddings()).generate("What is CRAG?", [crag, PARIS])
    assert answer.text.startswith("Corrective Retrieval Augmented Generation adds")


PRONOUN_NOTE = (
    "Nikola Tesla was a Serbian-American inventor. He died on 7 January 1943 in New York. "
    "He is best known for his contributions to the alternating current electricity supply system."
)


async def test_a_sentence_naming_its_subject_by_a_pronoun_is_read_with_the_one_before():
    note = Document(PRONOUN_NOTE, id="note#0", metadata={"title": "note"})
    answer = await ExtractiveGenerator(get_embeddings()).generate("When did Tesla die?", [note])
    # The shipped span model is never sure enough of a span (see test_answer_model): the
    # sentence that says when answers, not the one naming Tesla.
    assert answer.text == "He died on 7 January 1943 in New York."


async def test_headings_and_questions_are_never_the_answer():
    page = Document(
        "When did Tesla die?\nTesla's death\nHe died on 7 January 1943 in New York.",
        id="faq#0",
        metadata={"title": "Nikola Tesla"},
    )
    answer = await ExtractiveGenerator(get_embeddings()).generate("When did Tesla die?", [page])
    assert "1943" in answer.text
    assert "?" not in answer.quote and "Tesla's death" not in answer.quote


async def test_a_heading_naming_covid_19_is_no_answer():
    # Digits inside a name are no figure: the line is still a heading, however well it
    # matches the question.
    page = Document(
        "Noncontaminated CT disinfection procedures after suspected COVID-19 case examination\n"
        "The gantry is wiped with 75% ethanol and the room is aired for 30 min.",
        id="ct#0",
        metadata={"title": "Radiology"},
    )
    answer = await ExtractiveGenerator(get_embeddings()).generate(
        "What's the recommended procedure to disinfect a CT scanner after a COVID-19 exposure?",
        [page],
    )
    assert answer.text == "The gantry is wiped with 75% ethanol and the room is aired for 30 min."
    # A figure of its own makes a statement, in Chinese too.
    assert not answerable_sentence("H1N1 outbreak in Mexico", frozenset())
    assert answerable_sentence("人口约3000人", frozenset())


async def test_every_strategy_answers_tesla_over_the_pronoun_note(isolated_data_dir):
    from reflexrag.graphs import STRATEGIES
    from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base
    from reflexrag.server.runner import run_question
    from reflexrag.state import Context

    get_knowledge_base("pronoun-note").add(
        [SourceDocument("note", PRONOUN_NOTE, {"title": "note"})]
    )
    for strategy in STRATEGIES:
        context = Context(kb="pronoun-note", judge_backend="local", generator_backend="local")
        result = await run_question(strategy, "When did Tesla die?", context)
        assert "7 January 1943" in result.answer, (strategy, result.answer, result.stop_reason)
        assert "best known" not in result.answer


IPHONE_NOTE = (
    "The Apple iPhone 15 went on sale in the United States on September 22, 2023, at a price "
    "of $799."
)


async def test_an_answer_about_something_no_passage_mentions_is_half_as_sure(monkeypatch):
    from reflexrag.nodes.judges import local

    note = Document(IPHONE_NOTE, id="iphone#0", metadata={"title": "iPhone 15"})
    generator = ExtractiveGenerator(get_embeddings())
    asked = await generator.generate("When did the iPhone 15 go on sale?", [note])
    assert asked.unmentioned == [] and asked.confidence >= 0.5
    # The same sentence, read for a country (or a phone) the passage never names.
    elsewhere = "When did the iPhone 15 go on sale in Germany?"
    other = await generator.generate(elsewhere, [note])
    assert "September 22, 2023" in f"{other.text} {other.quote}"
    assert other.unmentioned == ["Germany"] and other.confidence < 0.5
    monkeypatch.setattr(local, "UNMENTIONED_FACTOR", 1.0)
    unchecked = await generator.generate(elsewhere, [note])
    # Without the check the reader was sure enough to answer with the US date.
    assert unchecked.confidence >= 0.5
    assert other.confidence == pytest.approx(unchecked.confidence / 2, abs=1e-3)
    newer = await generator.generate("When did the iPhone 16 go on sale?", [note])
    assert newer.unmentioned == ["16"] and newer.confidence < 0.5


HAYMO_NOTE = (
    "Haymo of Faversham was an English Franciscan scholar. He lectured at Oxford and Paris."
)


async def test_a_sentence_holding_none_of_what_is_asked_is_half_as_sure(monkeypatch):
    from reflexrag.nodes.judges import local

    note = Document(HAYMO_NOTE, id="haymo#0", metadata={"title": "Haymo of Faversham"})
    generator = ExtractiveGenerator(get_embeddings())
    # A two-hop question: the passage is about its subject, not about what it asks.
    bridge = "What language were books translated into during the era of Haymo of Faversham?"
    about = await generator.generate(bridge, [note])
    assert about.features["asked"] == 0.0
    assert about.unasked == ["language", "books", "translated", "era"]
    monkeypatch.setattr(local, "UNASKED_FACTOR", 1.0)
    unchecked = await generator.generate(bridge, [note])
    assert about.text == unchecked.text
    assert about.confidence == pytest.approx(unchecked.confidence / 2, abs=1e-3)
    # A sentence that says what is asked ("lectured", read with its subject) is not discounted.
    monkeypatch.setattr(local, "UNASKED_FACTOR", 0.0)
    answered = await generator.generate("Where did Haymo of Faversham lecture?", [note])
    assert "Oxford" in f"{answered.text} {answered.quote}"
    assert answered.features["asked"] == 1.0 and answered.confidence > 0
    assert answered.unasked == []


async def test_the_gated_strategies_say_what_no_passage_said(isolated_data_dir):
    from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base
    from reflexrag.server.runner import run_question
    from reflexrag.state import Context

    get_knowledge_base("haymo").add(
        [SourceDocument("haymo", HAYMO_NOTE, {"title": "Haymo of Faversham"})]
    )
    context = Context(kb="haymo", judge_backend="local", generator_backend="local")
    question = "What language were books translated into during the era of Haymo of Faversham?"
    said = "the passages I found say nothing about “language”, “books”, “translated”, “era”."
    for strategy in ("self_rag", "self_crag", "iterative", "adaptive"):
        result = await run_question(strategy, question, context)
        assert result.answer_kind == "not_found", (strategy, result.answer, result.stop_reason)
        assert result.answer.endswith(said), (strategy, result.answer)
        assert result.to_json()["unasked"] == ["language", "books", "translated", "era"]
        if strategy == "self_rag":
            # Its rewrites led with what the question asks before it gave up.
            rewrites = [e["summary"] for e in result.steps if e["node"] == "transform_query"]
            assert rewrites and all("which no passage it quoted said" in r for r in rewrites)
    # Naive RAG has no answer check: it answers with the sentence about Haymo.
    naive = await run_question("naive", question, context)
    assert "Franciscan" in naive.answer


async def test_the_gated_strategies_say_what_no_passage_mentions(isolated_data_dir):
    from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base
    from reflexrag.server.runner import run_question
    from reflexrag.state import Context

    get_knowledge_base("iphone").add([SourceDocument("note", IPHONE_NOTE, {"title": "iPhone 15"})])
    context = Context(kb="iphone", judge_backend="local", generator_backend="local")
    question = "When did the iPhone 15 go on sale in Germany?"
    for strategy in ("self_rag", "self_crag", "iterative", "adaptive"):
        result = await run_question(strategy, question, context)
        assert result.answer_kind == "not_found", (strategy, result.answer, result.stop_reason)
        # (self_crag searched the web as well, and says so.)
        assert result.answer.startswith("I could not find an answer in the knowledge base")
        assert result.answer.endswith(": no passage I found mentions “Germany”."), strategy
        assert result.to_json()["unmentioned"] == ["Germany"]
        if strategy == "self_rag":
            # Its rewrite looked for what was missing before it gave up.
            rewrites = [e["summary"] for e in result.steps if e["node"] == "transform_query"]
            assert rewrites and all(
                "for Germany, which no passage mentioned" in r for r in rewrites
            )
    # Naive RAG has no answer check: it answers with the date in the United States.
    naive = await run_question("naive", question, context)
    assert "September 22, 2023" in naive.answer


TESLA_TRUE = "Nikola Tesla died on 7 January 1943 in New York, in room 3327 of the hotel."
TESLA_PLANTED = "Nikola Tesla died on 7 January 1956 in New York, in room 3327 of the hotel."


def _copies(*texts: str) -> list[Document]:
    return [
        Document(text, id=f"copy{n}#0", metadata={"doc_id": f"copy{n}", "title": "Nikola Tesla"})
        for n, text in enumerate(texts)
    ]


async def test_two_documents_stating_one_fact_with_two_values_dispute_the_answer():
    generator = ExtractiveGenerator(get_embeddings())
    disputed = await generator.generate("When did Tesla die?", _copies(TESLA_TRUE, TESLA_PLANTED))
    assert sorted(disputed.disputed) == sorted([TESLA_TRUE, TESLA_PLANTED])
    alone = await generator.generate("When did Tesla die?", _copies(TESLA_TRUE))
    assert alone.disputed == []
    # Either copy may be the wrong one: half as sure as the sentence alone.
    assert disputed.confidence == pytest.approx(alone.confidence / 2, abs=0.01)


@pytest.mark.parametrize(
    "other",
    [
        # The same date in other words, and a sentence that adds to the statement: no dispute.
        "Tesla died in New York on 7 January 1943, in room 3327 of the hotel.",
        "Nikola Tesla died on 7 January 1943 in New York, in room 3327 of the hotel, aged 86.",
        # Another value of something not asked about (the room, for "when"): no dispute.
        "Nikola Tesla died on 7 January 1943 in New York, in room 3328 of the hotel.",
    ],
)
async def test_sources_agreeing_on_what_is_asked_do_not_dispute_it(other):
    answer = await ExtractiveGenerator(get_embeddings()).generate(
        "When did Tesla die?", _copies(TESLA_TRUE, other)
    )
    assert answer.disputed == []


async def test_a_disputed_fact_is_not_found_and_the_give_up_quotes_both_sources(
    isolated_data_dir,
):
    from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base
    from reflexrag.server.runner import run_question
    from reflexrag.state import Context

    get_knowledge_base("planted").add(
        [
            SourceDocument("true", TESLA_TRUE, {"title": "Nikola Tesla"}),
            SourceDocument("planted", TESLA_PLANTED, {"title": "Nikola Tesla"}),
        ]
    )
    context = Context(kb="planted", judge_backend="local", generator_backend="local")
    result = await run_question("self_rag", "When did Tesla die?", context)
    assert result.answer_kind == "not_found", result.answer
    assert result.stop_reason == "sources_disagree"
    assert result.answer.startswith("I could not find an answer the knowledge base agrees on")
    assert "1943" in result.answer and "1956" in result.answer
    assert sorted(result.disputed) == sorted([TESLA_TRUE, TESLA_PLANTED])
    assert {source["doc_id"] for source in result.sources} >= {"true", "planted"}
