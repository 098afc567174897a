"""What the local backend answers: the thing asked for, with the sentence that says it."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document

from reflexrag.nodes.judges.local import (
    ExtractiveGenerator,
    LocalJudge,
    LocalScorer,
    bridge_hop,
    question_names,
    question_parts,
    span_features,
    unmentioned,
    yes_or_no,
)
from reflexrag.nodes.judges.rules import unresolved_reference
from reflexrag.nodes.judges.spans import (
    _without_citations,
    answer_span,
    full_name,
    has_kind,
    holds_kind,
    matched_terms,
    names_in,
    question_focus,
)
from reflexrag.providers.text import join_terms, split_sentences
from tests.flow import FakeEmbeddings


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did Tesla die?", "date"),
        ("Who can enforce the treaty when member states fail to comply?", "person"),
        ("How many people live in Paris?", "number"),
        ("In which year was the bridge built?", "date"),
        ("Is Paris the capital of France?", "yesno"),
        # A yes/no question after a leading phrase; a question word first decides instead.
        ("After the report by The Age in October, did TechCrunch agree?", "yesno"),
        ("Which company, reported by The Verge, was sued?", "thing"),
        ("Why did the empire fall?", "description"),
        ("What is CRAG?", "description"),
        ("What is the capital of France?", "thing"),
        ("show me on a map where ecuador is", "place"),
        ("特斯拉哪一年去世？", "date"),
        ("什么是自我反思检索增强？", "description"),
        ("印歐語系因為哪一門語言而被發現？", "thing"),
        # 因為什麼 is "because of what", not 為什麼 ("why").
        ("多倫多因為什麼東西而掀起移民潮？", "thing"),
        ("這座橋是西元幾年建成的？", "date"),
        ("纽结不可分解是什么意思？", "description"),
        ("英屬印度在哪一世紀末期建立了省議會？", "date"),
        ("他是否去过北京？", "yesno"),
        ("会强制所有的参与者都必须裸体吗？", "yesno"),
        # 是否 in a clause of the thing the copula at the end asks for: "the way to tell whether".
        ("英國目前測量患者是否有高血壓的方法是?", "thing"),
        # A measure asked for by its noun is a number; what a text reports is a statement.
        ("What is the mortality rate of the disease in children?", "number"),
        ("What was the number of patients admitted?", "number"),
        ("What percent of the students are girls?", "number"),
        ("What did the Nature Medicine paper report?", "description"),
        ("What is the main conclusion of the study?", "description"),
        # What might explain something is an explanation, however many spaces it is typed with.
        ("What  could account for the spread of the virus?", "description"),
        ("What could be the implication of the finding?", "description"),
        # A question put as a statement asks with its last question word, not the verb
        # before it nor a relative "whose".
        ("The manuscript is in the hand of a musician whose godfather is whom?", "person"),
        (
            "Her first novel was published by a house founded in 2005, and is based where?",
            "place",
        ),
    ],
)
def test_the_main_question_word_decides_what_is_asked(question, kind):
    assert question_focus(question).kind == kind


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Nikola Tesla died on 7 January 1943.", True),
        # A time of day answers "when" a daily thing happens.
        ("On Saturdays the library opens at 10:00 and closes at 16:00.", True),
        ("The desk closes at 9 p.m. on weekdays.", True),
        ("The office opens at 8 am.", True),
        ("自习室下午3点开放。", True),
        # A score, a decimal and "am" the verb are no time.
        ("The match ended 3:1 for the visitors.", False),
        ("The ratio was 2.5 in the study.", False),
        ("I am 10 minutes away.", False),
    ],
)
def test_a_date_or_a_time_of_day_answers_when(text, held):
    assert has_kind("date", text) is held


@pytest.mark.parametrize(
    ("question", "text", "held"),
    [
        ("湖北地质学院在哪一年迁校？", "9月2日，学院迁往江陵。", False),
        ("湖北地质学院在哪一年迁校？", "1972年8月9日，学院迁往江陵。", True),
        ("湖北地质学院在哪一年迁校？", "一九七二年，学院迁往江陵。", True),
        ("湖北地質學院在哪一年遷校？", "民國61年，學院遷往江陵。", True),
        ("湖北地质学院在哪一年迁校？", "三年后，学院迁往江陵。", False),
        ("In what year did the college move?", "The college moved on 2 September.", False),
        ("In what year did the college move?", "The college moved in 1972.", True),
        # "When" is answered by any date, a day and a month too.
        ("学院何时迁校？", "9月2日，学院迁往江陵。", True),
    ],
)
def test_a_question_asking_which_year_wants_a_year_not_a_day(question, text, held):
    assert holds_kind(question, text) is held


def test_the_span_model_reads_a_day_as_not_what_a_year_question_asks():
    # The feature the span model weighs reads the same rule as the ranking.
    asked = "湖北地质学院在哪一年迁校？"
    assert span_features(asked, "9月2日", 0.8)["span_kind_found"] == 0.0
    assert span_features(asked, "1972年", 0.8)["span_kind_found"] == 1.0
    assert span_features("学院何时迁校？", "9月2日", 0.8)["span_kind_found"] == 1.0


async def test_which_year_is_answered_by_the_sentence_with_the_year_not_the_day():
    # The first sentence matches the question's words best, but says only the day and month.
    college = Document(
        id="college#0",
        page_content="9月2日，省政府同意地质学院在江陵建校。1972年，地质学院在江陵建校并开始招生。",
        metadata={"doc_id": "college", "title": "地质学院"},
    )
    question = "省政府在哪一年同意地质学院在江陵建校？"
    answer = await ExtractiveGenerator(FakeEmbeddings(), max_sentences=1).generate(
        question, [college]
    )
    assert "1972年" in f"{answer.text} {answer.quote}"


async def test_the_noun_of_what_year_is_the_kind_asked_for_not_a_word_to_find():
    # The second sentence holds "years" and a year, the first says when he died: "year" is
    # what the answer is (1943), not a word of the sentence that says it.
    tesla = Document(
        id="tesla#0",
        page_content="Tesla died on 7 January 1943. "
        "In the years after the rumours, Tesla was nominated for a prize in 1937.",
        metadata={"doc_id": "tesla", "title": "Nikola Tesla"},
    )
    answer = await ExtractiveGenerator(FakeEmbeddings(), max_sentences=1).generate(
        "What year did Tesla die?", [tesla]
    )
    assert "1943" in answer.text
    assert "1937" not in answer.text
    assert matched_terms("What year did Tesla die?") == ["tesla", "die"]
    assert matched_terms("Which centuries saw the bridge built?") == ["see", "bridge", "build"]


@pytest.mark.parametrize(
    ("question", "sentence", "span"),
    [
        (
            "When did Tesla die?",
            "Nikola Tesla died on 7 January 1943 in New York.",
            "7 January 1943",
        ),
        (
            "Who founded General Electric?",
            "Thomas Edison founded General Electric in 1892.",
            "Thomas Edison",
        ),
        (
            "How many people live in Paris?",
            "Paris has a population of about 2.1 million people.",
            "about 2.1 million",
        ),
        ("印歐語系因為哪一門語言而被發現？", "印歐語系是因為梵語而被發現的。", "梵語"),
        ("特斯拉哪一年去世？", "特斯拉于1943年在纽约去世。", "1943年"),
        # "Which year" wants the year of a full date.
        ("這座橋是西元幾年建成的？", "這座橋於1937年5月27日建成。", "1937年"),
        ("What year did Tesla die?", "Nikola Tesla died on 7 January 1943 in New York.", "1943"),
        # Traditional Chinese is segmented as well as Simplified; the noun asked about
        # ("which museum") ends the answer, and the answer stands where the question word
        # stands (具有[什麼特色]的機車).
        (
            "哪一個博物館收藏了這批古代手稿？",
            "這批古代手稿現由臺北的歷史博物館收藏。",
            "歷史博物館",
        ),
        (
            "具有什麼特色的機車成為當時的潮流？",
            "具有大型整流罩的機車成為當時的潮流。",
            "大型整流罩",
        ),
        ("多倫多因為什麼東西而掀起移民潮？", "十九世紀修築的鐵路為多倫多帶來一股移民潮。", "鐵路"),
        ("誰發明了電話？", "1876年，亞歷山大·貝爾發明了電話。", "亞歷山大·貝爾"),
        # Seasons and centuries answer "when"; a season gives way to a date.
        ("什麼時間去馬祖氣候較穩定？", "馬祖冬冷潮濕，秋天氣候較為穩定。", "秋天"),
        (
            "男子100米跑什么时候举行？",
            "2008年夏季奥运会的男子100米跑于2008年8月15日举行。",
            "2008年8月15日",
        ),
        # A number followed by the noun asked about names the thing.
        ("他在哪一個事件發生時被封鎖？", "二二八事件時，他的住所被封鎖。", "二二八事件"),
        # 简称什么: the words after 简称.
        ("冰雪皇后的简称什么？", "冰雪皇后（简称：DQ）是一间连锁餐厅。", "DQ"),
    ],
)
def test_the_answer_is_the_span_that_answers(question, sentence, span):
    assert answer_span(question, sentence).text == span


def test_an_english_phrase_without_a_name_or_number_is_answered_with_its_sentence():
    sentence = (
        "We propose that replication in the lungs breaks down the vessels, letting the virus "
        "spread across the body."
    )
    question = "What could account for the spread of the virus across the body?"
    assert answer_span(question, sentence).text == sentence


@pytest.mark.parametrize(
    ("question", "sentence", "span"),
    [
        # The names in a citation cite a paper; they do not answer.
        (
            "What are the predominant viruses in asthma exacerbations?",
            "Rhinovirus and RSV are the predominant viruses in asthma exacerbations "
            "(Jartti and Gern, 2017).",
            "Rhinovirus and RSV",
        ),
        # "However" opens the sentence, it is no name: the sentence answers.
        (
            "What did the advent of PCR technology lead to?",
            "However, with the advent of PCR technology, more viruses were recovered.",
            "However, with the advent of PCR technology, more viruses were recovered.",
        ),
        # Asked for several things: every name of the list.
        (
            "Which are the cytokines expressed by the epithelial cells?",
            "The epithelial cells express the cytokines IL-25, IL-33 and TSLP.",
            "IL-25, IL-33 and TSLP",
        ),
        # Asked what something is called: the words the sentence names it with, even when
        # they share a stem with the question.
        (
            "What is the name of the property that makes a number prime?",
            "The property of being prime is called primality.",
            "primality",
        ),
        (
            "What is the name of the process which confirms that a number is prime?",
            "A simple but slow method of verifying that a number is prime is known as trial "
            "division.",
            "trial division",
        ),
        # "What theorem …": the noun phrase the sentence builds on that noun.
        (
            "What theorem defines the main role of primes in number theory?",
            "The fundamental theorem of arithmetic establishes the central role of primes in "
            "number theory.",
            "fundamental theorem of arithmetic",
        ),
        # A count is neither the day of a date nor followed by the noun the question counts.
        (
            "How many people were infected as of Feb. 10, 2020?",
            "As of February 10, 2020, greater than 40,000 people were infected.",
            "40,000",
        ),
        (
            "How many possible bids were there in 1915?",
            "Edison received one of 38 possible bids in 1915 and Tesla one in 1937.",
            "38",
        ),
        # The 1 of HIV-1 is part of a name, not the number asked for.
        (
            "What is the rate of HIV-1 transmission without treatment?",
            "Without treatment, the rate of HIV-1 transmission is approximately 15-45% [1].",
            "approximately 15-45%",
        ),
    ],
)
def test_the_span_is_the_thing_asked_for_not_the_words_around_it(question, sentence, span):
    assert answer_span(question, sentence).text == span


def test_citations_are_blanked_and_a_long_unclosed_bracket_is_read_in_one_pass():
    sentence = "Rhinovirus (RV) leads (Jartti and Gern, 2017; Britto et al., 2017) [3, 4]."
    assert _without_citations(sentence) == "Rhinovirus (RV) leads " + " " * 44 + " " * 7 + "."
    # The markers written answers use, read by the same pattern: lists by ";" and ranges too.
    listed = "Both were found [2; 5] and later confirmed [6–8]."
    assert (
        _without_citations(listed)
        == "Both were found" + " " * 7 + " and later confirmed" + " " * 6 + "."
    )
    # A bracket that never closes, full of name-and-year pairs: a pattern that repeated
    # "anything, then a year" backtracked through it exponentially (20 pairs: minutes).
    unclosed = "(" + "Abc 1999 x, " * 200
    assert _without_citations(unclosed) == unclosed


def test_a_why_question_gets_the_whole_sentence():
    sentence = "The empire fell because its armies were spread too thin."
    assert answer_span("Why did the empire fall?", sentence).text == sentence


def test_sentences_split_at_ends_not_at_abbreviations():
    text = (
        "He met St. Mary and Michael E. Porter in the U.S. on Jan. 5. It rained.\n"
        "特斯拉去世。他是发明家！"
    )
    assert split_sentences(text) == [
        "He met St. Mary and Michael E. Porter in the U.S. on Jan. 5.",
        "It rained.",
        "特斯拉去世。",
        "他是发明家！",
    ]


def test_a_hard_wrapped_sentence_stays_one_and_headings_stay_apart():
    text = (
        "Clean area\n"
        "The clean area includes\n"
        "the administrative office and the diagnostic room.\n"
        "It was divided into four areas: contaminated, semicontaminated,\n"
        "buffer, and clean areas. Its tasks were (1) planning; (2)\n"
        "training; and (3) the DR examination room for\n"
        "6\n"
        "confirmed cases.\n"
        "7\n"
        "Staff areas\n"
        "Staff rest in shifts.\n"
        "def route(state):\n"
        "    return state\n"
        "SQLite | langgraph-checkpoint-sqlite\n"
        "memory | langgraph"
    )
    assert split_sentences(text) == [
        "Clean area",
        "The clean area includes the administrative office and the diagnostic room.",
        # A line ending on a comma or a bracket goes on in a lower-case line; a page number
        # printed between the halves of a sentence is dropped, one between sentences kept.
        "It was divided into four areas: contaminated, semicontaminated, buffer, and clean areas.",
        "Its tasks were (1) planning; (2) training; and (3) the DR examination room for "
        "confirmed cases.",
        "7",
        "Staff areas",
        "Staff rest in shifts.",
        "def route(state):",
        "return state",
        "SQLite | langgraph-checkpoint-sqlite",
        "memory | langgraph",
    ]


def test_query_terms_are_never_glued_into_new_words():
    assert (
        join_terms(["发现", "1753", "langgraph", "默认", "递归"]) == "发现 1753 langgraph 默认递归"
    )


def test_a_chinese_question_is_scored_by_meaning_alone_against_english_text():
    scorer = LocalScorer(FakeEmbeddings())
    same, crossed = scorer.scores(
        "特斯拉哪一年去世？", ["特斯拉于1943年去世。", "Tesla died in 1943."]
    )
    # Shared words lift the Chinese text; the English one is not penalised for having none.
    assert crossed == pytest.approx(float(scorer.scores("x", ["y"])[0]) / 0.5, rel=0.01)
    assert same > 0


async def test_overlapping_chunks_do_not_repeat_a_sentence():
    repeated = "Nikola Tesla died on 7 January 1943 in New York."
    documents = [
        Document(id="t#0", page_content=f"Tesla was an inventor. {repeated}"),
        Document(id="t#1", page_content=f"{repeated} He was 86."),
    ]
    answer = await ExtractiveGenerator(FakeEmbeddings(), max_sentences=3).generate(
        "When did Tesla die?", documents
    )
    assert (answer.text or answer.quote).count(repeated) == 1
    assert 0 < answer.confidence <= 1


async def test_an_explanation_is_the_sentences_that_match_it_best():
    best = "The empire fell because its armies were spread too thin along its borders."
    close = "When its armies were spread, the empire fell to invaders."
    documents = [Document(id="e#0", page_content=f"{best} {close} Rome is in Italy.")]
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(
        "Why did the empire fall when its armies were spread?", documents
    )
    # The answer is what it quotes (the best sentence and the one matching nearly as well),
    # so no separate quote repeats it.
    assert answer.text == f"{best} {close}"
    assert answer.quote == ""


async def test_what_is_questions_retrieve_whenever_the_knowledge_base_has_anything():
    judge = LocalJudge(FakeEmbeddings())
    closest = [Document(id="a", page_content="Something unrelated.")]
    assert (await judge.needs_retrieval("What is a cydippid?", closest)).needed
    assert not (await judge.needs_retrieval("What is a cydippid?", [])).needed


def test_a_demonstrative_before_a_name_needs_no_clarification():
    assert unresolved_reference("What do that Cydippids eat?") is None
    assert unresolved_reference("What are the limits of this API?") == "this API"


def test_sentences_split_the_same_from_many_threads():
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"Text {n} starts here. It has Dr. Smith in it. It ends at {n}." for n in range(200)]
    with ThreadPoolExecutor(8) as pool:
        split = list(pool.map(split_sentences, texts))
    assert all(parts[-1] == f"It ends at {n}." and len(parts) == 3 for n, parts in enumerate(split))


def test_names_part_at_full_stops_but_not_at_initials_or_titles():
    text = (
        "He won the Battle of Dalan Balzhut. Jamukha fled. Michael E. Mann met Dr. Ruth "
        "of the U.S. Army and read Altman’s memo."
    )
    assert names_in(text) == [
        "Battle of Dalan Balzhut",
        "Jamukha",
        "Michael E. Mann",
        "Dr. Ruth",
        "U.S. Army",
        "Altman",
    ]


def test_a_name_ends_at_a_line_break():
    # A title's last word and the next line's first word, or an answer and its quote.
    assert names_in("Bank of England\nThe governor said") == ["Bank of England"]
    assert names_in("Altman\nAt its conference, Altman spoke.") == ["Altman", "Altman"]


def test_a_name_is_given_in_the_fullest_form_the_documents_agree_on():
    named = names_in("OpenAI CEO Sam Altman spoke. Sam Altman left. Altman’s plan failed.")
    assert full_name("Altman", named) == "Sam Altman"
    # Two different longer forms: nothing certain, the name stays as it is.
    assert full_name("Google", names_in("Google Search grew. Google Play shrank.")) == "Google"
    assert full_name("Paris", names_in("Paris is big.")) == "Paris"


def multi_source_documents() -> list[Document]:
    articles = {
        "fortune": "Sam Bankman-Fried faced a jury in New York over the collapse of FTX.",
        "verge": "Bankman-Fried was compared to Warren Buffett by early investors.",
        "techcrunch": "Prosecutors said Bankman-Fried built FTX on lies, TechCrunch reported.",
        "cnbc": "Markets fell on Tuesday as investors weighed new data.",
    }
    return [
        Document(id=f"{source}#0", page_content=text, metadata={"doc_id": source})
        for source, text in articles.items()
    ]


async def test_a_question_tying_articles_together_is_answered_with_the_name_they_share():
    question = (
        "Who is the individual that faced a jury according to Fortune, "
        "and was compared to a famous investor according to The Verge?"
    )
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(
        question, multi_source_documents()
    )
    # Counted in three articles under two forms, answered with the full one, and quoted
    # from a sentence that names it.
    assert answer.text == "Sam Bankman-Fried"
    assert "Bankman-Fried" in answer.quote
    assert 0 < answer.confidence <= 1


async def test_an_answer_to_a_question_of_several_clauses_is_as_sure_as_the_part_it_answers():
    generator = ExtractiveGenerator(FakeEmbeddings())
    sentence = "Sam Bankman-Fried faced a jury in Manhattan over the collapse of FTX."
    question = "Who faced a jury over FTX, and won the Tour de France twice?"
    whole = float(generator.scorer.scores(question, [sentence])[0])
    # The sentence answers the first clause and says nothing of the second.
    assert generator.support(question, [sentence], np.array([whole]))[0] > whole
    assert generator.support("Who faced a jury over FTX?", [sentence], np.array([0.42]))[0] == 0.42


async def test_a_shared_name_is_quoted_from_the_sentence_that_best_answers_a_part():
    generator = ExtractiveGenerator(FakeEmbeddings())
    question = (
        "Who faced a jury over FTX fraud charges, and was compared to Warren Buffett "
        "according to The Verge?"
    )
    documents = [
        *multi_source_documents()[2:],
        Document(
            id="wired#0",
            page_content="Bankman-Fried faced FTX charges and was compared to Warren Buffett. "
            "Bankman-Fried faced a jury over FTX fraud charges.",
            metadata={"doc_id": "wired"},
        ),
    ]
    answer = await generator.generate(question, documents)
    assert answer.text == "Bankman-Fried"
    # The first sentence shares words with both parts and ranks first against the whole
    # question; the second answers the first part in full.
    assert answer.quote == "Bankman-Fried faced a jury over FTX fraud charges."
    # Its match, what the confidence is read from, is that sentence's support.
    support = generator.support(question, [answer.quote], np.zeros(1))[0]
    assert answer.features["match"] == pytest.approx(support)


async def test_a_who_question_gets_the_shared_name_of_a_person_not_of_a_company():
    documents = [
        *multi_source_documents()[:3],
        Document(
            id="wired#0",
            page_content="FTX collapsed in November; FTX customers lost billions.",
            metadata={"doc_id": "wired"},
        ),
    ]
    question = (
        "Who is the individual whose trial drew crowds according to Fortune, "
        "and who was likened to an investor according to The Verge?"
    )
    # FTX and Bankman-Fried are each named by three articles; the question asks for a person.
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(question, documents)
    assert answer.text == "Sam Bankman-Fried"


async def test_a_yes_no_claim_reads_the_background_but_quotes_only_the_documents():
    question = (
        "Did Engadget report a discount on the MacBook Air before The Verge reported a "
        "discount on the Galaxy Buds?"
    )
    strip = Document(id="engadget#0~0", page_content="Engadget found a MacBook Air discount.")
    verge = Document(id="verge#0", page_content="The Verge reported Galaxy Buds deals.")
    generator = ExtractiveGenerator(FakeEmbeddings())
    alone = await generator.generate(question, [strip])
    read = await generator.generate(question, [strip], background=[verge])
    # Half the claim is in the strip, the rest in a document beside it: together, a Yes.
    assert (alone.text, read.text) == ("No", "Yes")
    assert read.used_ids == ["engadget#0~0"]


async def test_a_yes_no_claim_about_who_reported_when_reads_the_byline():
    question = "Did The Verge report on September 26, 2023 that Google's search deals were fair?"
    text = "Google said its default search deals were fair to users."
    plain = Document(id="a#0", page_content=text, metadata={"title": "Search deals"})
    bylined = Document(
        id="a#0",
        page_content=text,
        metadata={"title": "Search deals", "byline": "The Verge, September 26, 2023"},
    )
    generator = ExtractiveGenerator(FakeEmbeddings())
    assert (await generator.generate(question, [plain])).text == "No"
    assert (await generator.generate(question, [bylined])).text == "Yes"


async def test_a_yes_no_claim_is_quoted_from_the_sentence_that_says_it():
    # A sentence repeating the question's words is no answer to "what …?", but it is what
    # confirms a yes/no claim.
    documents = [
        Document(id="p#0", page_content="Paris is the capital of France. It lies on the Seine.")
    ]
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(
        "Is Paris the capital of France?", documents
    )
    assert answer.text == "Yes"
    assert answer.quote.startswith("Paris is the capital of France.")
    what = await ExtractiveGenerator(FakeEmbeddings()).generate(
        "What is the capital of France, Paris?", documents
    )
    assert "Paris is the capital of France." not in f"{what.text} {what.quote}"


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "When did the iPhone 15 go on sale and how much does it cost?",
            ("When did the iPhone 15 go on sale", "how much does it cost?"),
        ),
        ("When and where did Tesla die?", ("When did Tesla die?", "where did Tesla die?")),
        (
            "What were the release date and the price of the iPhone 15?",
            (
                "What were the release date of the iPhone 15?",
                "What were the price of the iPhone 15?",
            ),
        ),
        ("霸王别姬的导演和主演是谁？", ("霸王别姬的导演是谁？", "霸王别姬的主演是谁？")),
        # Chinese asks each question in a clause of its own; a clause that asks nothing goes
        # with the question after it.
        (
            "1992年4月，罗保铭担任什么职务，他本科毕业于哪所大学？",
            ("1992年4月，罗保铭担任什么职务？", "他本科毕业于哪所大学？"),
        ),
        ("特斯拉哪一年去世？他出生在哪里？", ("特斯拉哪一年去世？", "他出生在哪里？")),
        # 多高 asks how tall; a last clause ending on the copula asks what follows it.
        (
            "纽西兰鸡毛松有多高，树叶是什么形状的？",
            ("纽西兰鸡毛松有多高？", "树叶是什么形状的？"),
        ),
        ("童工大多在哪个行业，女孩卖淫的比例为？", ("童工大多在哪个行业？", "女孩卖淫的比例为？")),
        # 認為 ends its clause on 為 and asks nothing; 多重 is "multiple".
        ("許多人認為，哪位皇帝推動了改革？", ()),
        ("多重感染很常见，原因是什么？", ()),
        ("在生物药学研究中，放线菌酮常被用来做什么？", ()),
        # 几乎 is "almost", and 任何 "any": no question word.
        ("他几乎每天都来，任何人都知道吗？", ()),
        # Comparisons ask about two things, not for two facts; one fact is one part.
        ("What is the difference between the senate and the house of representatives?", ()),
        ("Which is older, Paris or Rome, and by how much?", ()),
        (
            "What is the difference between the senate and what the house does?",
            (),
        ),
        (
            "What did Tesla make, and when did the partnership between Tesla and Lane form?",
            ("What did Tesla make", "when did the partnership between Tesla and Lane form?"),
        ),
        ("When did Tesla die?", ()),
    ],
)
def test_a_question_asking_for_two_facts_is_split_into_its_parts(question, parts):
    assert question_parts(question) == parts


IPHONE = Document(
    id="iphone#0",
    page_content="Apple announced the iPhone 15 at an event in Cupertino. The phone went on sale "
    "on September 22, 2023. It costs $799 in the United States. The camera has 48 megapixels.",
    metadata={"doc_id": "iphone", "title": "iPhone 15"},
)


async def test_each_part_of_a_two_part_question_is_answered_by_its_own_sentence():
    generator = ExtractiveGenerator(FakeEmbeddings())
    question = "When did the iPhone 15 go on sale and how much does it cost?"
    answer = await generator.generate(question, [IPHONE])
    assert answer.text == (
        "The phone went on sale on September 22, 2023. It costs $799 in the United States."
    )
    # As sure as its least sure part: never surer than that part asked alone.
    alone = await generator.generate("When did the iPhone 15 go on sale?", [IPHONE])
    assert answer.confidence <= alone.confidence


async def test_a_part_whose_sentence_says_none_of_its_own_words_is_less_sure(monkeypatch):
    from reflexrag.nodes.judges import local

    no_price = Document(
        id="iphone#0",
        page_content="Apple announced the iPhone 15 at an event in Cupertino. The phone went on "
        "sale on September 22, 2023. The camera has 48 megapixels.",
        metadata={"doc_id": "iphone", "title": "iPhone 15"},
    )
    question = "When did the iPhone 15 go on sale and how much does it cost?"
    sale, cost = question_parts(question)
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(question, [no_price])
    monkeypatch.setattr(local, "UNASKED_FACTOR", 1.0)
    undiscounted = await ExtractiveGenerator(FakeEmbeddings()).generate(question, [no_price])
    # No sentence says what it costs: that part is half as sure; the part the passage answers
    # is as sure as before.
    assert answer.part_confidences[cost] == pytest.approx(
        undiscounted.part_confidences[cost] / 2, abs=1e-4
    )
    assert answer.part_confidences[sale] == undiscounted.part_confidences[sale]


async def test_each_part_of_a_chinese_two_part_question_is_answered():
    film = Document(
        id="film#0",
        page_content="《霸王别姬》是一部1993年的中国电影。影片的导演是陈凯歌。"
        "张国荣和张丰毅担任主演。该片获得了金棕榈奖。",
        metadata={"doc_id": "film", "title": "霸王别姬"},
    )
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(
        "霸王别姬的导演和主演分别是谁？", [film]
    )
    assert answer.text == "影片的导演是陈凯歌。 张国荣和张丰毅担任主演。"


async def test_a_question_asking_two_things_is_not_answered_by_a_name_its_sources_share(
    monkeypatch,
):
    from reflexrag.nodes.judges import local

    documents = [
        Document(
            id="visit#0",
            page_content="Kenyatta visited China at the invitation of President Xi. "
            "Barack Obama avoided Kenya on his 2013 trip to Africa.",
        ),
        Document(
            id="vote#0",
            page_content="The 2007 election resulted in International Criminal Court trials. "
            "Barack Obama visited Kenya in July 2015.",
        ),
        Document(id="parks#0", page_content="Nairobi National Park lies south of the city."),
    ]
    question = (
        "Where did Kenyatta visit at the invitation of the President, "
        "and what was the result of the 2007 election?"
    )
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(question, documents)
    assert "China" in answer.text and "International Criminal Court" in answer.text
    # Read as one thing asked twice, the name both sources share would be the answer.
    monkeypatch.setattr(local, "asks_two_things", lambda question: False)
    shared = await ExtractiveGenerator(FakeEmbeddings()).generate(question, documents)
    assert shared.text == "Barack Obama"


async def test_a_yes_or_no_question_beside_another_is_answered_by_sentences_not_a_verdict():
    ride = Document(
        id="ride#0",
        page_content="世界裸体自行车游行号召人们拒绝对石油的依赖。"
        "参与者可以全裸或部分裸体，但并不强制所有的参与者都必须如此。",
        metadata={"doc_id": "ride", "title": "世界裸体自行车游行"},
    )
    question = "世界裸体自行车游行号召人们拒绝对什么的依赖，会强制参与者都必须裸体吗？"
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(question, [ride])
    assert "石油" in answer.text
    assert "并不强制" in answer.text
    assert set(answer.part_confidences) == set(question_parts(question))


async def test_a_sentence_about_the_subject_that_does_not_say_what_is_asked_gives_way(
    monkeypatch,
):
    # "《霸王别姬》…电影。" shares the title's words with the question; only the second sentence
    # holds what is asked about the film (导演).
    from reflexrag.nodes.judges import local

    film = Document(
        id="film#0",
        page_content="《霸王别姬》是一部1993年的中国电影。影片的导演是陈凯歌。该片获得了金棕榈奖。",
        metadata={"doc_id": "film", "title": "霸王别姬"},
    )
    question = "霸王别姬的导演是谁？"
    answer = await ExtractiveGenerator(FakeEmbeddings()).generate(question, [film])
    assert "影片的导演是陈凯歌。" in f"{answer.text} {answer.quote}"
    monkeypatch.setattr(local, "ASKED_FLOOR", 1.0)  # the question's own words not weighed
    unweighed = await ExtractiveGenerator(FakeEmbeddings()).generate(question, [film])
    assert "陈凯歌" not in f"{unweighed.text} {unweighed.quote}"


async def test_a_sentence_is_quoted_with_the_neighbour_that_matches_nearly_as_well():
    best = "The empire fell because its armies were spread too thin along its borders."
    close = "When its armies were spread, the empire fell to invaders."
    question = "Why did the empire fall when its armies were spread?"
    one = ExtractiveGenerator(FakeEmbeddings(), max_sentences=1)
    # Next to the best sentence in its chunk, the close one is quoted with it; the unrelated
    # neighbour on the other side is not.
    beside = [Document(id="e#0", page_content=f"Rome is in Italy. {best} {close}")]
    assert (await one.generate(question, beside)).text == f"{best} {close}"
    # In another chunk it is not a neighbour: one sentence is quoted.
    apart = [
        Document(id="e#0", page_content=f"Rome is in Italy. {best}"),
        Document(id="e#1", page_content=f"{close} Rome is in Italy."),
    ]
    assert (await one.generate(question, apart)).text == best


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("When did the iPhone 15 go on sale?", ["iPhone", "15"]),
        ("Which NFL team played at Super Bowl 50?", ["NFL", "Super", "Bowl", "50"]),
        # The opening word is capitalised by grammar; a possessive is the name's.
        ("What is Tesla's middle name?", ["Tesla"]),
        # One-digit figures are often spelled out in running text ("four primes").
        ("Is there always a minimum of 4 primes between them?", []),
        ("What enhanced anti-HIV1 activity?", ["anti-HIV1"]),
        ("2019年NBA总冠军是谁？", ["2019", "NBA"]),
        ("AGG01的实际功效有哪些？", ["AGG01"]),
        ("《霸王别姬》是哪一年上映的？", ["霸王别姬"]),
        ("how much does it cost", []),
    ],
)
def test_a_question_names_its_capitalised_words_figures_and_quoted_titles(question, names):
    assert question_names(question) == names


def test_a_name_is_mentioned_however_it_is_marked_but_a_figure_only_as_itself():
    passage = Document(
        id="t20#0",
        page_content="T20 raised anti-HIV-1 activity in 2016. The iPhone 15 went on sale.",
        metadata={"title": "Notes"},
    )
    assert unmentioned("What raised anti-HIV1 activity in 2016?", [passage]) == []
    assert unmentioned("When did the iPhone 16 go on sale?", [passage]) == ["16"]
    # "Notes" is the title: a name the title holds is mentioned.
    assert unmentioned("What do the Notes say about 201?", [passage]) == ["201"]


def test_a_long_name_is_mentioned_by_a_word_derived_from_it_a_short_one_is_not():
    passage = Document(
        id="radio#0",
        page_content="Marconi made the first transatlantic radio transmission. "
        "Seamans' committee met in Indiana.",
        metadata={"title": "Radio"},
    )
    assert unmentioned("Who first sent radio waves across the Atlantic?", [passage]) == []
    assert unmentioned("Who led the committee established by Seaman?", [passage]) == []
    # Under six letters a name opening a longer word may be another name.
    assert unmentioned("Where did the committee meet in India?", [passage]) == ["India"]
    # Inside a longer word, neither opening nor ending it, is no mention.
    assert unmentioned("What did Marconi send across the Atlant sea?", [passage]) == ["Atlant"]


def test_a_name_given_two_ways_is_mentioned_when_either_way_is():
    passage = Document(
        id="genes#0",
        page_content="High copy numbers of CCL3L1 suppress HIV-1. MBL promotes elimination.",
        metadata={"title": "Genetics"},
    )
    spelled = "What is the role of C-C Motif Chemokine Ligand 3 Like 1 (CCL3L1) in HIV-1?"
    assert unmentioned(spelled, [passage]) == []
    assert unmentioned("How does Mannanose Binding Lectin (MBL) act?", [passage]) == []
    # Neither way: both are named as missing.
    assert unmentioned("What does Foo Bar (FB) do to HIV-1?", [passage]) == ["Foo", "Bar", "FB"]


DIRECTORS = [
    "Christopher Nolan is an English-American film director, producer and screenwriter.",
    "Sathish Kalathil is an Indian film and documentary director and producer.",
]
MAGAZINES = [
    "Pick Me Up! is a British weekly women's magazine published by IPC Media.",
    "Woman's Viewpoint was a women's magazine published in Houston, Texas, from 1923 to 1927.",
]
AIRPORTS = [
    "Watertown International Airport is a county-owned airport in Jefferson County, New York.",
    "Alexandria International Airport is a public airport in Alexandria, Louisiana.",
]


def test_a_claim_about_both_of_two_names_must_hold_where_each_is_named():
    verdict, sure = yes_or_no(
        "Are Christopher Nolan and Sathish Kalathil both film directors?", DIRECTORS
    )
    assert verdict == "Yes" and sure > 0.5
    # "British" is said of Pick Me Up only: it does not make the Woman's Viewpoint British.
    question = "Are both magazines, the Woman's Viewpoint and Pick Me Up, British magazines?"
    assert yes_or_no(question, MAGAZINES)[0] == "No"
    # One of them named nowhere, or a claim that they are alike, leaves the verdict unsure.
    assert yes_or_no(question, MAGAZINES[:1]) == ("No", 0.5)
    same = (
        "Are Watertown International Airport and Alexandria International Airport both"
        " airports in the same state?"
    )
    assert yes_or_no(same, AIRPORTS) == ("No", 0.5)


@pytest.mark.parametrize(
    ("question", "clause_question", "about"),
    [
        (
            "Who directed the film that was shot in or around Leland, North Carolina in 1986?",
            "Which film was shot in or around Leland, North Carolina in 1986?",
            "Who directed Maximum Overdrive?",
        ),
        (
            "What government position was held by the woman who portrayed Corliss Archer?",
            "Who portrayed Corliss Archer?",
            "What government position was held by Maximum Overdrive?",
        ),
    ],
)
def test_a_subject_named_by_a_relative_clause_is_asked_about_in_two_hops(
    question, clause_question, about
):
    hop = bridge_hop(question)
    assert hop is not None and hop.clause_question == clause_question
    assert hop.about("Maximum Overdrive") == about


@pytest.mark.parametrize(
    "question",
    [
        "When did Tesla die?",
        # The clause asks (a question word in it), or the question asks nothing of its
        # subject but its name.
        "Who is the man that wrote what?",
        "What is the name of the virus that causes COVID-19?",
        "特斯拉是哪一年去世的？",
    ],
)
def test_other_questions_are_read_in_one_hop(question):
    hop = bridge_hop(question)
    assert hop is None or not hop.asked
