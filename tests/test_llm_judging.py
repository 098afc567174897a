"""How the LLM judges spend calls and read replies: structured output first, one call per
verdict, lenient parsing, batched and cascaded grading, rules before the router, a cap on
calls in flight, and a failing model server turned into one clear error."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import httpx
import openai
import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS, llm
from reflexrag.nodes.judges.base import Answer, RelevanceGrade
from reflexrag.nodes.judges.cascade import cascade_band
from reflexrag.nodes.judges.llm import (
    LLMGenerator,
    LLMJudge,
    PassageScores,
    RetrievalVerdict,
    RoundReply,
    _refused,
    cited_documents,
    parse_verdict,
    supporting_window,
)
from reflexrag.nodes.judges.local import RELEVANCE_THRESHOLD
from reflexrag.nodes.judges.usage import metered, record
from reflexrag.providers.models import ModelServerError
from reflexrag.providers.settings import get_settings
from reflexrag.server.runner import run_question
from reflexrag.state import Context

DOCS = [Document(f"passage {n}", id=str(n)) for n in range(1, 5)]


class RecordingModel(GenericFakeChatModel):
    """Replies in order and records each call's prompt and request options."""

    calls: list[dict[str, Any]] = []  # noqa: RUF012 (a pydantic field, one list per instance)
    refuse: tuple[str, ...] = ()
    """Request options that make the 'server' answer 400, as one lacking them would."""
    delay: float = 0.0
    in_flight: int = 0
    most_in_flight: int = 0

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append({"prompt": messages[-1].content, **kwargs})
        if any(option in kwargs for option in self.refuse):
            request = httpx.Request("POST", "http://model.test/v1/chat/completions")
            raise openai.BadRequestError(
                f"unsupported: {', '.join(self.refuse)}",
                response=httpx.Response(400, request=request),
                body=None,
            )
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return ChatResult(generations=[ChatGeneration(message=next(self.messages))])


def model(*replies: str, **fields: Any) -> RecordingModel:
    return RecordingModel(messages=iter([AIMessage(r) for r in replies]), calls=[], **fields)


@pytest.fixture(autouse=True)
def _fresh_refusals():
    _refused.clear()
    yield
    _refused.clear()


async def test_a_verdict_is_one_json_schema_constrained_call():
    grader = model('{"binary_score": "yes", "score": 0.9}')
    with metered() as meter:
        (grade,) = await LLMJudge(grader).grade_documents("q", DOCS[:1])
    assert grade == RelevanceGrade(0.9, True)
    (call,) = grader.calls
    assert call["response_format"]["type"] == "json_schema"
    assert call["response_format"]["json_schema"]["name"] == "ScoredVerdict"
    assert meter.counts["llm.grader"] == 1


async def test_an_empty_draft_is_never_scored_complete_whatever_the_model_says():
    perfect = '{"relevance": 9, "completeness": 10, "quality": 10, "missing": ["1943"]}'
    judge = LLMJudge(model(perfect, perfect))
    empty = await judge.assess_round("When did Tesla die?", "", DOCS[:1], DOCS[:1])
    drafted = await judge.assess_round("When did Tesla die?", "In 1943.", DOCS[:1], DOCS[:1])
    assert (empty.relevance, empty.completeness, empty.quality) == (9, 1, 1)
    assert empty.missing == ["1943"]
    assert (drafted.completeness, drafted.quality) == (10, 10)


async def test_a_refused_response_format_falls_back_once_per_model():
    # The 'server' refuses response_format; the fake has no tool calling either; plain JSON
    # in the prompt works, and the refusals are remembered for the next verdict.
    grader = model('{"binary_score": "yes"}', '{"binary_score": "no"}', refuse=("response_format",))
    judge = LLMJudge(grader)
    first = await judge.grade_usefulness("q", "a")
    second = await judge.grade_usefulness("q", "a")
    assert (first.useful, second.useful) == (True, False)
    assert ["response_format" in call for call in grader.calls] == [True, False, False]


async def test_an_unreadable_reply_is_one_call_and_a_counted_parse_failure():
    grader = model("¯\\_(ツ)_/¯")
    with metered() as meter:
        (grade,) = await LLMJudge(grader).grade_documents("q", DOCS[:1])
    assert not grade.relevant
    assert meter.counts == {
        "llm.grader": 1,
        "llm_parse_failures": 1,
        "tokens.prompt": meter.counts["tokens.prompt"],
        "tokens.completion": meter.counts["tokens.completion"],
    }


def test_small_model_replies_are_read_leniently():
    reply = parse_verdict(
        'Here you go:\n```json\n{"completeness": "8/10", "relevance": 11, "missing": 0}\n```',
        RoundReply,
    )
    assert (reply.completeness, reply.relevance, reply.missing) == (8, 10, [])
    assert parse_verdict('{"retrieve": false}', RetrievalVerdict).retrieve == "no"
    assert parse_verdict('{"scores": "8, 3.6/10"}', PassageScores).scores == [8, 4, 10]
    assert parse_verdict('{"missing": "Tesla, 1943", "completeness": 3}', RoundReply).missing == [
        "Tesla",
        "1943",
    ]


async def test_batched_grading_is_one_call_for_all_chunks():
    grader = model('{"scores": [2, 7, 0, 9]}')
    with metered() as meter:
        grades = await LLMJudge(grader, mode="batched").grade_documents("q", DOCS)
    assert grades == [
        RelevanceGrade(0.2, False),
        RelevanceGrade(0.7, True),
        RelevanceGrade(0.0, False),
        RelevanceGrade(0.9, True),
    ]
    assert meter.counts["llm.grader"] == 1
    (call,) = grader.calls
    assert all(f"[{n}] passage {n}" in call["prompt"] for n in range(1, 5))
    # The schema holds the model to one score per passage.
    scores = call["response_format"]["json_schema"]["schema"]["properties"]["scores"]
    assert scores["minItems"] == scores["maxItems"] == 4 and scores["items"]["maximum"] == 10


async def test_a_batched_reply_missing_scores_rejects_and_is_counted():
    with metered() as meter:
        grades = await LLMJudge(model('{"scores": [9]}'), mode="batched").grade_documents(
            "q", DOCS[:2]
        )
    assert not any(g.relevant for g in grades) and meter.counts["llm_parse_failures"] == 1


class StubLocalJudge:
    backend = "local"
    relevance_threshold = 0.58

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    async def grade_documents(self, question, documents):
        return [RelevanceGrade(s, s >= self.relevance_threshold) for s in self.scores]


async def test_the_cascade_asks_the_model_only_about_chunks_its_band_leaves_open(monkeypatch):
    monkeypatch.setattr(
        llm, "cascade_band", lambda: {"relevant_from": 0.8, "irrelevant_below": 0.4}
    )
    grader = model('{"scores": [6, 3]}')
    judge = LLMJudge(grader, mode="cascade", local=StubLocalJudge([0.9, 0.57, 0.1, 0.6]))
    with metered() as meter:
        grades = await judge.grade_documents("q", DOCS)
    # 0.9 and 0.1 are clear; 0.57 and 0.6 are shown to the model as passages 1 and 2.
    assert grades == [
        RelevanceGrade(0.9, True),
        RelevanceGrade(0.6, True),
        RelevanceGrade(0.1, False),
        RelevanceGrade(0.3, False),
    ]
    prompt = grader.calls[0]["prompt"]
    assert "[1] passage 2" in prompt and "[2] passage 4" in prompt and "passage 1" not in prompt
    assert meter.counts["llm.grader"] == 1 and meter.counts["cascade.decided_locally"] == 2


async def test_a_band_end_no_score_reached_leaves_that_side_to_the_model(monkeypatch):
    monkeypatch.setattr(
        llm, "cascade_band", lambda: {"relevant_from": None, "irrelevant_below": 0.4}
    )
    grader = model('{"scores": [9]}')
    judge = LLMJudge(grader, mode="cascade", local=StubLocalJudge([0.99, 0.1]))
    grades = await judge.grade_documents("q", DOCS[:2])
    assert grades == [RelevanceGrade(0.9, True), RelevanceGrade(0.1, False)]
    assert len(grader.calls) == 1


def test_the_band_is_where_local_verdicts_were_right_nine_times_in_ten():
    from reflexrag.benchmarks import cascade_band

    rows = [
        {"set": name, "score": n / 100, "relevant": n >= 70 or (40 <= n < 70 and n % 2 == 0)}
        for name in ("a", "b")
        for n in range(100)
    ]
    band = cascade_band.fit_band(rows)
    # Under 0.40 never relevant, from 0.70 always, between a coin toss: the clear regions
    # reach a little into the coin toss, as far as 9 in 10 verdicts stay right.
    assert 0.40 <= band["irrelevant_below"] <= 0.50 and 0.60 <= band["relevant_from"] <= 0.70
    report = cascade_band.report_fold("held", rows[:100], band)
    assert report["local_accuracy"] >= 0.9 and 0 < report["decided_locally"] < 1
    noise = [{"set": "a", "score": n / 100, "relevant": n % 2 == 0} for n in range(100)]
    assert cascade_band.fit_band(noise) == {"relevant_from": None, "irrelevant_below": None}


def test_the_shipped_band_decides_only_far_from_the_bar():
    band = cascade_band()
    assert band["irrelevant_below"] < RELEVANCE_THRESHOLD < band["relevant_from"]


async def test_an_unreadable_cascade_reply_keeps_the_local_verdicts():
    judge = LLMJudge(model("no idea"), mode="cascade", local=StubLocalJudge([0.6, 0.55]))
    grades = await judge.grade_documents("q", DOCS[:2])
    assert grades == [RelevanceGrade(0.6, True), RelevanceGrade(0.55, False)]


async def test_rules_decide_retrieval_before_the_router_is_asked():
    grader = model('{"retrieve": "no"}')
    judge = LLMJudge(grader, mode="batched")
    fact = await judge.needs_retrieval("What year did Tesla die?", DOCS[:1])
    small_talk = await judge.needs_retrieval("hello!", DOCS[:1])
    assert fact.needed and not small_talk.needed and grader.calls == []
    task = await judge.needs_retrieval("Write a haiku about autumn", DOCS[:1])
    assert not task.needed and len(grader.calls) == 1
    # A query typed as keywords, as search boxes get them, goes to the knowledge base too.
    for keywords in ("statue coming out of the ground in washington dc", "特斯拉 去世 年份"):
        assert (await judge.needs_retrieval(keywords, DOCS[:1])).needed
    assert len(grader.calls) == 1


async def test_grounded_and_useful_in_one_call_when_batched():
    grader = model('{"level": "fully", "answers_question": "yes"}')
    with metered() as meter:
        grade = await LLMJudge(grader, mode="batched").grade_answer("q", "a", DOCS[:1])
    assert grade.grounding.level == "fully" and grade.usefulness.useful
    assert meter.counts["llm.grader"] == 1


TESLA = Document(
    "Nikola Tesla was born in Smiljan. He moved to the United States in 1884. "
    "Tesla worked for Edison for a short time. He died in New York City in January 1943.",
    id="tesla",
)


async def test_an_answer_is_checked_against_the_sentences_its_words_come_from():
    grader = model('{"level": "fully", "answers_question": "yes"}')
    answer = "Tesla died in New York City in 1943 [1]."
    await LLMJudge(grader, mode="cascade", local=object()).grade_answer(
        "Where did Tesla die?", answer, [TESLA]
    )
    prompt = grader.calls[0]["prompt"]
    facts = prompt.split("Facts:\n")[1].split("\n\nQuestion:")[0]
    # The sentence with the place and year, and one naming Tesla; not the move in 1884.
    assert facts.startswith("[1] ") and facts.count(" … ") == 1
    assert "He died in New York City in January 1943." in facts and "Tesla" in facts
    assert "1884" not in facts


async def test_a_written_answer_sharing_no_word_with_its_passages_is_not_grounded():
    # The model would call it grounded; no word of it is in the passage, so it is not asked.
    grader = model('{"level": "fully", "answers_question": "yes"}')
    judge = LLMJudge(grader, mode="cascade", local=object())
    with metered() as meter:
        made_up = await judge.grade_answer(
            "What year did Tesla die?", "The answer to this question is: 2019", [TESLA]
        )
    assert made_up.grounding.level == "none" and made_up.usefulness is None
    assert grader.calls == [] and meter.counts["grounding.decided_locally"] == 1
    # Across languages shared words mean nothing: the model reads it.
    other = await judge.grade_answer("特斯拉哪一年去世？", "特斯拉于1943年去世。", [TESLA])
    assert other.grounding.level == "fully" and len(grader.calls) == 1


async def test_a_written_answer_standing_on_no_passage_is_sure_of_nothing():
    writer = model("The answer to this question is: 2019", "Tesla died in 1943.", "2019 [1]")
    made_up = await LLMGenerator(writer).generate("What year did Tesla die?", [TESLA])
    assert made_up.confidence == 0.0 and made_up.used_ids == []
    # Its words are the passage's, or it cites one for the judges to check: not known.
    said = await LLMGenerator(writer).generate("What year did Tesla die?", [TESLA])
    cited = await LLMGenerator(writer).generate("What year did Tesla die?", [TESLA])
    assert said.confidence is None and cited.confidence is None


class Reader:
    """A local reader that says how sure it is that a sentence of the passages answers."""

    backend = "local"
    reports_confidence = True
    reads_first_retrieval = True

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.asked: list[tuple] = []

    async def generate(self, question, documents, rejected=(), background=()) -> Answer:
        self.asked.append((question, list(documents), list(rejected), list(background)))
        record("local", "generator", 10_000)  # what the local reader estimates it read
        return self.answer


async def test_a_reader_vouches_for_a_written_answer_with_its_own_sureness():
    question, other = "What year did Tesla die?", Document("Edison founded GE.", id="e")
    writer = model("Tesla died in 1943 [1].", "Tesla died in 1943 [1].", "The answer is: 2019")
    said = "Nikola Tesla died on 7 January 1943 in New York."
    sure = Reader(Answer("1943", "extractive", ["tesla"], confidence=0.83, stands_on=[said]))
    with metered() as meter:
        vouched = await LLMGenerator(writer, reader=sure).generate(
            question, [TESLA], ["x"], [other]
        )
    assert vouched.text == "Tesla died in 1943 [1]." and vouched.confidence == 0.83
    # The read is a local call; what the reader counts as read is no model's prompt tokens.
    assert meter.counts["local.reader"] == 1 and meter.counts["llm.generator"] == 1
    assert "local.generator" not in meter.counts and meter.counts["tokens.prompt"] < 10_000
    # It reads the passages afresh: what rejected answers stood on is the writer's business.
    assert sure.asked == [(question, [TESLA], [], [other])]
    nothing = Reader(Answer("", "extractive"))
    unread = await LLMGenerator(writer, reader=nothing).generate(question, [TESLA])
    assert unread.confidence == 0.0
    # An answer standing on no passage stays sure of nothing, whatever the reader would say.
    made_up = await LLMGenerator(writer, reader=sure).generate(question, [TESLA])
    assert made_up.confidence == 0.0 and len(sure.asked) == 1
    # A verdict stands on no one sentence: its sureness is how much of the claim the passages
    # cover, not whether they hold what the model wrote, so the cited passages' grades stand.
    verdict = Reader(Answer("Yes", "extractive", ["tesla"], confidence=0.2))
    asked = "Did Tesla die in New York?"
    written = await LLMGenerator(model("Yes, in New York [1]."), reader=verdict).generate(
        asked, [TESLA]
    )
    assert written.confidence is None and verdict.asked
    assert LLMGenerator(writer, reader=sure).reports_confidence
    assert not LLMGenerator(writer).reports_confidence


def test_only_the_cascade_gives_the_llm_generator_a_local_reader(monkeypatch):
    writer = GenericFakeChatModel(messages=iter([]))
    monkeypatch.setattr("reflexrag.providers.models.get_chat_model", lambda role: writer)

    def built(mode: str) -> LLMGenerator:
        return GENERATOR_BACKENDS["llm"](Context(generator_backend="llm", llm_judging=mode))

    assert built("cascade").reader is not None
    assert built("batched").reader is None and built("per_call").reader is None


def test_a_window_is_the_whole_passage_when_the_answer_shares_nothing_or_needs_all_of_it():
    assert supporting_window("I could not find it.", TESLA) is TESLA
    everything = "Smiljan, United States 1884, Edison, New York 1943."
    assert supporting_window(everything, TESLA) is TESLA
    window = supporting_window("1943年去世", Document("特斯拉是发明家。他于1943年去世。"))
    assert window.page_content == "他于1943年去世。"


async def test_calls_in_flight_are_capped(monkeypatch):
    monkeypatch.setattr(get_settings(), "llm_max_concurrency", 2)
    replies = ['{"binary_score": "yes"}'] * 6
    grader = model(*replies, delay=0.05)
    documents = [Document(f"passage {n}", id=str(n)) for n in range(6)]
    grades = await LLMJudge(grader).grade_documents("q", documents)
    assert len(grades) == 6 and grader.most_in_flight == 2


def test_an_uncited_answer_names_the_passages_that_hold_it():
    documents = [
        Document("Nikola Tesla died in New York in 1943.", id="a"),
        Document("Paris is the capital of France.", id="b"),
    ]
    assert [d.id for d in cited_documents("Tesla died in 1943.", documents)] == ["a"]
    # A small model's answer: mostly filler words, one that names the source.
    filler = "The answer to this question is 1943."
    assert [d.id for d in cited_documents(filler, documents)] == ["a"]
    assert [d.id for d in cited_documents("See [2].", documents)] == ["b"]
    # Lists and ranges, as other models write them.
    assert [d.id for d in cited_documents("Both [1, 2].", documents)] == ["a", "b"]
    assert [d.id for d in cited_documents("Both [1-2].", documents)] == ["a", "b"]
    assert [d.id for d in cited_documents("The second [2–2].", documents)] == ["b"]
    assert cited_documents("No idea.", documents) == []


class UnreachableModel(GenericFakeChatModel):
    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise openai.APIConnectionError(request=httpx.Request("POST", "http://model.test/v1"))


async def test_an_unreachable_model_server_is_one_error_with_the_steps_so_far(flow_kb, monkeypatch):
    dead = UnreachableModel(messages=iter([]))
    monkeypatch.setitem(JUDGE_BACKENDS, "dead", lambda ctx: LLMJudge(dead, mode="batched"))
    monkeypatch.setitem(GENERATOR_BACKENDS, "dead", lambda ctx: LLMGenerator(dead))
    context = Context(kb="flow", judge_backend="dead", generator_backend="dead")
    result = await run_question("self_rag", "When did Tesla die?", context)
    assert result.stop_reason == "error" and result.answer_kind == "error"
    assert result.error.startswith("cannot reach the model server")
    # The router needed no call; retrieval ran before the grader's call failed.
    assert [s["node"] for s in result.steps] == ["decide_retrieval", "retrieve"]
    with pytest.raises(ModelServerError):
        await LLMGenerator(dead).generate("q", DOCS[:1])


async def test_a_model_saying_ambiguous_asks_back_only_when_the_question_points_at_nothing():
    said = '{"level": "single_step", "ambiguous": true, "clarifying_question": "%s"}'
    clear = await LLMJudge(model(said % "What year did Tesla die?")).classify_complexity(
        "What year did Tesla die?"
    )
    assert not clear.ambiguous and clear.clarifying_question == ""
    vague = await LLMJudge(model(said % "What are its limits?")).classify_complexity(
        "What are its limits?"
    )
    # The model echoed the question: the rules' own clarifying question is asked instead.
    assert (
        vague.ambiguous
        and vague.clarifying_question == 'Which one do you mean by "its"? Please name it.'
    )


async def test_a_question_about_facts_is_never_classified_as_needing_no_retrieval():
    said = '{"level": "no_retrieval"}'
    fact = await LLMJudge(
        model(said), mode="cascade", local=StubLocalJudge([])
    ).classify_complexity("What year did Tesla die?")
    assert fact.level == "single_step"
    chat = await LLMJudge(model(said), mode="batched").classify_complexity("Write a haiku")
    assert chat.level == "no_retrieval"


async def test_a_prompt_too_long_for_the_server_is_an_error_not_a_refused_feature():
    class TooLong(RecordingModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            request = httpx.Request("POST", "http://model.test/v1/chat/completions")
            raise openai.BadRequestError(
                "the request exceeds the available context size",
                response=httpx.Response(400, request=request),
                body=None,
            )

    too_long = TooLong(messages=iter([]), calls=[])
    with pytest.raises(ModelServerError, match="context size"):
        await LLMJudge(too_long).grade_usefulness("q", "a")
    assert id(too_long) not in _refused


BLOCKING_CHECK = """
import asyncio
from blockbuster import blockbuster_ctx
from langchain_core.documents import Document
from reflexrag.nodes.judges.llm import cited_documents
from reflexrag.nodes.rag import generator_for, judge_for
from reflexrag.state import Context

async def main():
    context = Context(judge_backend="llm", generator_backend="llm", llm_judging="per_call")
    await generator_for(context)
    await judge_for(context)
    docs = [Document("特斯拉在1943年1月7日去世。", id="1"), Document("Tesla died in 1943.", id="2")]
    with blockbuster_ctx():  # what langgraph dev runs nodes under: a blocking call raises
        cited = cited_documents("特斯拉在1943年去世", docs)
    print(sorted(doc.id for doc in cited))

asyncio.run(main())
"""


def test_the_llm_backends_load_language_data_before_a_node_reads_text(tmp_path):
    """A fresh process: the first LLM generator and judge are built in a worker thread, and
    what their nodes then do with text (jieba's dictionary, lemmas, tokens) never touches the
    disk on the event loop, which ``langgraph dev`` refuses with a BlockingError."""
    env = {
        **os.environ,
        "REFLEXRAG_DATA_DIR": str(tmp_path),
        "REFLEXRAG_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    done = subprocess.run(
        [sys.executable, "-c", BLOCKING_CHECK], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['1']"


def test_a_writer_is_taken_as_deterministic_only_at_temperature_0():
    from langchain_openai import ChatOpenAI

    def writer(**settings):
        return ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", **settings)

    assert LLMGenerator(writer(temperature=0)).deterministic
    assert not LLMGenerator(writer(temperature=0.7)).deterministic
    # A model that does not say (a fake, a wrapped runnable) is asked again, as before.
    assert not LLMGenerator(GenericFakeChatModel(messages=iter([]))).deterministic


async def test_a_deterministic_writer_answers_nothing_to_a_prompt_it_was_rejected_on():
    writer = GenericFakeChatModel(messages=iter([AIMessage("1943 [1]"), AIMessage("1943 [1]")]))
    generator = LLMGenerator(writer, deterministic=True)
    first = await generator.generate("When did Tesla die?", DOCS[:1])
    again = await generator.generate("When did Tesla die?", DOCS[:1], first.stands_on)
    assert first.text == "1943 [1]" and again.text == "" and again.used_ids == []
    # Other evidence is another prompt: the model is asked.
    other = await generator.generate("When did Tesla die?", DOCS[:2], first.stands_on)
    assert other.text == "1943 [1]" and other.stands_on != first.stands_on
