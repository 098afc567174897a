"""Self-RAG control flow, driven by scripted fake chat models over a tiny real knowledge base.

Each fake replies in call order, and running out of replies raises, so these tests also pin
how many judge calls every branch makes.
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from reflexrag.graphs.naive import graph as naive_graph
from reflexrag.graphs.self_rag import graph as self_rag_graph
from tests.flow import SELF_RAG_FIRST_PASS, nodes, scripted

WEB_READ = {"documents": [Document("a page", metadata={"origin": "web"})], "web_searches": 1}
"""The state of a run that read web pages: a give-up says it looked on the web too."""

YES, NO = '{"binary_score": "yes"}', '{"binary_score": "no"}'
ROUTE_YES, ROUTE_NO = '{"retrieve": "yes"}', '{"retrieve": "no", "reason": "small talk"}'
FULLY, UNGROUNDED = '{"level": "fully"}', '{"level": "no"}'


async def test_happy_path_answers(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [ROUTE_YES, YES, YES, FULLY, YES], ["He died in 1943 [1]."])
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state) == SELF_RAG_FIRST_PASS
    assert state["stop_reason"] == "answered"
    assert state["generation"] == "He died in 1943 [1]."
    assert state["sources"]
    usage = state["usage"]
    assert (usage["llm.router"], usage["llm.grader"], usage["llm.generator"]) == (1, 4, 1)


async def test_irrelevant_documents_rewrite_the_query_and_retrieve_again(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch,
        [ROUTE_YES, NO, "Thomas Edison General Electric", YES, FULLY, YES],
        ["1943 [1]"],
        top_k=1,
    )
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state)[:5] == [
        "decide_retrieval",
        "retrieve",
        "grade_documents",
        "transform_query",
        "retrieve",
    ]
    assert state["question"] == "Thomas Edison General Electric"
    assert state["original_question"] == "When did Tesla die?"
    assert state["query_rewrites"] == 1 and state["retrieval_attempts"] == 2
    assert state["stop_reason"] == "answered"


async def test_chunks_retrieved_again_are_not_graded_again(flow_kb, monkeypatch):
    # The rewrite finds Paris's chunk and Edison's again: Edison's grade for this question is
    # reused, not re-asked, so the script needs exactly one grader reply per distinct chunk.
    grader = [ROUTE_YES, NO, NO, "Paris capital of France", NO]
    context = scripted(monkeypatch, grader, [], top_k=2, max_query_rewrites=1)
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state).count("retrieve") == 2
    assert state["new_chunk_ids"] == ["paris#0"]
    assert state["usage"]["llm.grader"] == 3
    assert state["stop_reason"] == "max_retrieval_attempts"


async def test_a_rewrite_that_finds_only_chunks_already_read_ends_the_loop(flow_kb, monkeypatch):
    # "Tesla death" fetches the one chunk already read and graded irrelevant: grading it again,
    # or rewriting again from it, cannot change anything, so the run says not found at once.
    grader = [ROUTE_YES, NO, "Tesla death"]
    context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=3)
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state)[-3:] == ["transform_query", "retrieve", "give_up"]
    assert state["steps"][-2]["summary"].endswith(", 0 not retrieved before")
    assert state["stop_reason"] == "no_new_evidence" and state["answer_kind"] == "not_found"
    assert state["query_rewrites"] == 1


async def test_ungrounded_answer_is_regenerated(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch, [ROUTE_YES, YES, YES, UNGROUNDED, FULLY, YES], ["made up", "1943 [1]"]
    )
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state).count("generate") == 2
    assert state["generation"] == "1943 [1]" and state["generation_attempts"] == 2
    assert state["stop_reason"] == "answered"


async def test_grounded_but_useless_answer_transforms_the_query(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch,
        # The rewrite finds Edison's chunk, which the run had not read.
        [ROUTE_YES, YES, FULLY, NO, "Thomas Edison General Electric", YES, FULLY, YES],
        ["Tesla lived in New York [1].", "He died in 1943 [1]."],
        top_k=1,
    )
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    sequence = nodes(state)
    assert sequence[sequence.index("grade_generation") + 1] == "transform_query"
    assert state["stop_reason"] == "answered" and state["query_rewrites"] == 1


class RecordingReader:
    """The local extractive reader (words only), recording what each call was told to read
    past."""

    backend, reports_confidence, reads_first_retrieval = "local", True, True

    def __init__(self) -> None:
        from reflexrag.nodes.judges.local import ExtractiveGenerator
        from tests.flow import FakeEmbeddings

        self.reader = ExtractiveGenerator(FakeEmbeddings())
        self.rejected: list[list[str]] = []

    async def generate(self, question, documents, rejected=(), background=()):
        self.rejected.append(list(rejected))
        return await self.reader.generate(question, documents, rejected, background)


async def test_an_answer_turned_down_is_not_given_again_over_the_same_evidence(
    flow_kb, monkeypatch
):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS

    # The first answer is judged ungrounded, so the same three chunks are read again. The
    # reader, told what the first answer stood on, answers from another sentence.
    grader = [ROUTE_YES, YES, YES, YES, UNGROUNDED, FULLY, YES]
    context = scripted(monkeypatch, grader, [], top_k=3, min_confidence=0.0)
    reader = RecordingReader()
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: reader)
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    first, second = state["stood_on"]
    assert first == "Nikola Tesla died on 7 January 1943 in New York."
    assert reader.rejected == [[], [first]]
    assert second != first and first not in state["generation"]
    drafts = [entry["summary"] for entry in state["steps"] if entry["node"] == "generate"]
    assert drafts[1].endswith("past what 1 rejected answer stood on")
    assert state["stop_reason"] == "answered" and state["generation_attempts"] == 2


async def test_with_every_sentence_turned_down_nothing_is_checked_and_the_loop_looks_further(
    flow_kb, monkeypatch
):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS

    # One chunk of one sentence, turned down: the next reading of it has nothing left to say,
    # which is not sent to the judges (the script has no reply for it) and is no answer. The
    # rewrite then finds only that chunk again: nothing new to answer from, so not found.
    grader = [ROUTE_YES, YES, UNGROUNDED, "Tesla death"]
    context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=1, min_confidence=0.0)
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: RecordingReader())
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    checks = [entry["summary"] for entry in state["steps"] if entry["node"] == "grade_generation"]
    assert checks[1].startswith("no answer to check")
    drafts = [entry["summary"] for entry in state["steps"] if entry["node"] == "generate"]
    assert drafts[1].endswith("stood on: nothing new to answer")
    assert nodes(state)[-3:] == ["transform_query", "retrieve", "give_up"]
    assert state["stop_reason"] == "no_new_evidence"
    assert state["answer_kind"] == "not_found"


async def test_a_useful_answer_less_sure_than_the_run_asks_looks_further(flow_kb, monkeypatch):
    # The chunk is relevant but scored 0.4, so the answer citing it is 0.4 sure: under
    # min_confidence 0.5 the loop rewrites the query while it may (each rewrite finds a chunk
    # the run had not read, graded irrelevant), then says not found.
    unsure = '{"binary_score": "yes", "score": 0.4}'
    grader = [ROUTE_YES, unsure, FULLY, YES, "Edison", NO, FULLY, YES, "Paris", NO, FULLY, YES]
    context = scripted(
        monkeypatch, grader, ["1943 [1]"] * 3, top_k=1, max_query_rewrites=2, min_confidence=0.5
    )
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["query_rewrites"] == 2 and nodes(state).count("generate") == 3
    assert state["stop_reason"] == "max_retrieval_attempts"
    assert state["answer_kind"] == "not_found"

    context = scripted(monkeypatch, grader[:4], ["1943 [1]"], top_k=1, min_confidence=0.4)
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["stop_reason"] == "answered" and state["confidence"] == 0.4


async def test_exhausted_rewrites_end_with_not_found(flow_kb, monkeypatch):
    # Each rewrite finds a chunk the run had not read, graded irrelevant like the first.
    grader = [ROUTE_YES, NO, "Thomas Edison General Electric", NO, "Paris capital of France", NO]
    context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=2)
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["stop_reason"] == "max_retrieval_attempts"
    assert state["answer_kind"] == "not_found"
    assert "could not find" in state["generation"]
    assert state["retrieval_attempts"] == 3 and state["query_rewrites"] == 2
    assert len(state["steps"]) <= 2 + 3 * 3
    assert state["sources"], "the closest evidence is reported"


async def test_a_loop_that_gives_up_says_not_found_unless_best_effort_is_asked_for(
    flow_kb, monkeypatch
):
    question = {"question": "When did Tesla die?"}
    limits = {"top_k": 1, "max_query_rewrites": 0, "min_confidence": 0.0}
    # By default no generation is even tried: the judges accepted nothing.
    context = scripted(monkeypatch, [ROUTE_YES, NO], [], **limits)
    state = await self_rag_graph.ainvoke(question, context=context)
    assert state["answer_kind"] == "not_found" and "generate" not in nodes(state)

    # best_effort: the best evidence answers, but only past the grounding and usefulness
    # judges, and says so in its kind.
    limits["best_effort"] = True
    context = scripted(monkeypatch, [ROUTE_YES, NO, FULLY, YES], ["1943 [1]"], **limits)
    state = await self_rag_graph.ainvoke(question, context=context)
    assert state["answer_kind"] == "best_effort" and state["generation"] == "1943 [1]"
    assert state["stop_reason"] == "max_retrieval_attempts"

    context = scripted(monkeypatch, [ROUTE_YES, NO, FULLY, NO], ["1943 [1]"], **limits)
    state = await self_rag_graph.ainvoke(question, context=context)
    assert state["answer_kind"] == "not_found", "an answer the usefulness judge rejected"


async def test_a_temperature_0_model_is_not_asked_again_what_it_answered_wrongly(
    flow_kb, monkeypatch
):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS
    from reflexrag.nodes.judges.llm import LLMGenerator

    # A model that writes the same answer to the same prompt wrote an ungrounded one. Asking
    # it again would buy the same answer: the loop rewrites the query instead, and as the
    # rewrite fetches the same three chunks there is nothing new to write from, so the model
    # is never called again (the generator's script holds one reply) and the run gives up.
    grader = [ROUTE_YES, YES, YES, YES, UNGROUNDED, "Tesla death"]
    context = scripted(monkeypatch, grader, [], top_k=3, max_query_rewrites=1)
    writer = GenericFakeChatModel(messages=iter([AIMessage("He was born in 1856 [1].")]))
    generator = LLMGenerator(writer, deterministic=True)
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: generator)
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state)[4:] == [
        "grade_generation",
        "generate",
        "grade_generation",
        "transform_query",
        "retrieve",
        "give_up",
    ]
    assert state["stop_reason"] == "no_new_evidence"
    assert state["usage"]["llm.generator"] == 1
    assert state["stood_on"][0].startswith("prompt sha256:")
    assert state["answer_kind"] == "not_found"
    assert "1856" not in state["generation"]


async def test_in_cascade_a_written_answer_the_passages_do_not_hold_is_not_found(
    flow_kb, monkeypatch
):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS
    from reflexrag.nodes.judges.llm import LLMGenerator
    from reflexrag.nodes.judges.local import ExtractiveGenerator
    from reflexrag.providers.embeddings import get_embeddings

    # The model writes a date the Edison passage does not hold, cites it, and the LLM judges
    # call the passage relevant and the answer grounded and useful. The local reader, which
    # vouches for a written answer in cascade mode, finds no sentence saying when Edison
    # died: the answer is under min_confidence and, with no rewrite left, the run gives up.
    # Over the Tesla passage the same script answers.
    reader = ExtractiveGenerator(get_embeddings())
    runs = {}
    for question, written in [
        ("When did Edison die?", "Edison died in 1931 [1]."),
        ("When did Tesla die?", "Tesla died in 1943 [1]."),
    ]:
        grader = [ROUTE_YES, YES, FULLY, YES]
        context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=0)
        writer = GenericFakeChatModel(messages=iter([AIMessage(written)]))
        generator = LLMGenerator(writer, reader=reader)
        monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx, g=generator: g)
        runs[question] = await self_rag_graph.ainvoke({"question": question}, context=context)
    edison, tesla = runs["When did Edison die?"], runs["When did Tesla die?"]
    assert "under min_confidence" in edison["steps"][-2]["summary"]
    assert edison["answer_kind"] == "not_found" and nodes(edison)[-1] == "give_up"
    assert "1931" not in edison["generation"]
    assert tesla["confidence"] >= 0.5 and tesla["stop_reason"] == "answered"
    assert tesla["generation"] == "Tesla died in 1943 [1]."


async def test_never_grounded_ends_with_max_generation_attempts(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch,
        [ROUTE_YES, YES, YES, UNGROUNDED, UNGROUNDED, UNGROUNDED],
        ["a", "b", "c"],
    )
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["stop_reason"] == "max_generation_attempts"
    assert state["generation_attempts"] == 3
    assert state["answer_kind"] == "not_found"


async def test_zero_limits_still_terminate(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [ROUTE_YES, NO, NO], [])
    context.max_query_rewrites = 0
    state = await self_rag_graph.ainvoke({"question": "anything"}, context=context)
    assert nodes(state) == ["decide_retrieval", "retrieve", "grade_documents", "give_up"]


async def test_no_retrieval_needed_answers_directly(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [ROUTE_NO], ["Hello! How can I help?"])
    state = await self_rag_graph.ainvoke({"question": "hello"}, context=context)
    assert nodes(state) == ["decide_retrieval", "generate", "finish"]
    assert state["stop_reason"] == "no_retrieval_needed"
    assert state["answer_kind"] == "no_retrieval"


async def test_empty_knowledge_base_gives_up(monkeypatch):
    from reflexrag.providers.knowledge_base import get_knowledge_base

    get_knowledge_base("empty-kb", create=True)
    context = scripted(monkeypatch, [ROUTE_YES], [])
    context.kb = "empty-kb"
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["stop_reason"] == "empty_knowledge_base"


async def test_an_unknown_knowledge_base_is_an_error_not_an_empty_one(monkeypatch):
    from reflexrag.providers.knowledge_base import UnknownKnowledgeBaseError, list_knowledge_bases

    context = scripted(monkeypatch, [ROUTE_YES], [])
    context.kb = "never-made"
    with pytest.raises(UnknownKnowledgeBaseError, match="never-made"):
        await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert "never-made" not in list_knowledge_bases()


async def test_naive_retrieves_once_and_answers(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [], ["1943 [2]"])
    state = await naive_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state) == ["retrieve", "generate", "finish"]
    assert len(state["sources"]) == 1 and state["stop_reason"] == "answered"


async def test_a_thread_holds_many_questions(flow_kb, monkeypatch, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    from reflexrag.graphs import compile_strategy

    graph = compile_strategy("self_rag", InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    context = scripted(monkeypatch, [ROUTE_YES, NO, NO] + ["r", NO, NO] * 3, [])
    first = await graph.ainvoke({"question": "unknown thing"}, config, context=context)
    assert first["answer_kind"] == "not_found"
    context = scripted(monkeypatch, [ROUTE_YES, YES, YES, FULLY, YES], ["1943 [1]"])
    second = await graph.ainvoke({"question": "When did Tesla die?"}, config, context=context)
    assert second["stop_reason"] == "answered"
    assert second["query_rewrites"] == 0 and nodes(second)[0] == "decide_retrieval"


async def test_tutorial_baseline_recursion_failure_is_a_result_not_a_crash(flow_kb, monkeypatch):
    from reflexrag.benchmarks import tutorial_self_rag
    from reflexrag.server.runner import run_question

    context = scripted(monkeypatch, [NO] * 40, [])
    result = await run_question(
        "tutorial_self_rag",
        "Who won the 1998 World Cup?",
        context,
        graph=tutorial_self_rag.graph,
        recursion_limit=tutorial_self_rag.RECURSION_LIMIT,
    )
    assert result.stop_reason == "recursion_error"
    assert result.answer == ""
    # A failure, never an abstention: the eval counts it among the errors.
    assert result.answer_kind == "error" and "recursion limit" in result.error
    # Its sequential grading and rewrites before the failure are still counted.
    assert result.usage["llm.grader"] >= 4 and result.usage["llm.rewriter"] >= 2


def record_prompts(monkeypatch) -> list[str]:
    """The last message of every prompt sent to a (fake) chat model, in order."""
    from reflexrag.nodes.judges import llm

    asked: list[str] = []
    real_call = llm.call_model

    async def recorded(model, messages, config):
        asked.append(messages[-1].content)
        return await real_call(model, messages, config)

    monkeypatch.setattr(llm, "call_model", recorded)
    return asked


async def test_a_written_answer_is_checked_against_the_passages_it_cites(flow_kb, monkeypatch):
    asked = record_prompts(monkeypatch)
    context = scripted(monkeypatch, [ROUTE_YES, YES, YES, FULLY, YES], ["He died in 1943 [2]."])
    state = await self_rag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["stop_reason"] == "answered"
    written = next(prompt for prompt in asked if prompt.startswith("You answer questions"))
    grounding = next(prompt for prompt in asked if "grounded in a set of facts" in prompt)
    first, second = (written.split(f"[{n}] ", 1)[1].split("\n\n", 1)[0] for n in (1, 2))
    facts = grounding.split("Facts:", 1)[1].split("Answer:", 1)[0]
    assert second in facts and first not in facts  # the cited passage, and only it
    assert [source["id"] for source in state["sources"]] == [state["sources"][0]["id"]]


class TwoPartReader:
    """A generator sure of one part of a two-part question and never of the other."""

    backend, reports_confidence, reads_first_retrieval = "fake", True, False

    async def generate(self, question, documents, rejected=(), background=()):
        from reflexrag.nodes.judges import Answer

        parts = {"When did Tesla die?": 0.9, "where was he buried?": 0.2}
        text = "Nikola Tesla died on 7 January 1943 in New York."
        ids = [str(doc.id) for doc in documents]
        return Answer(text, "extractive", ids, confidence=0.2, part_confidences=parts)


async def test_a_part_never_answered_is_searched_for_then_named_in_the_give_up(
    flow_kb, monkeypatch
):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS
    from reflexrag.server.runner import run_question

    asked = record_prompts(monkeypatch)
    # (The rewrite finds Edison's chunk, which the run had not read.)
    grader = [ROUTE_YES, YES, FULLY, YES, "Edison", YES, FULLY, YES]
    context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=1)
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: TwoPartReader())
    question = "When did Tesla die and where was he buried?"
    result = await run_question("self_rag", question, context)
    # The rewrite is asked for the missing part first, within the question it belongs to.
    rewrite = next(prompt for prompt in asked if prompt.startswith("Rewrite the question"))
    assert f"Question: where was he buried? ({question})" in rewrite
    rewritten = next(entry for entry in result.steps if entry["node"] == "transform_query")
    assert "missing part" in rewritten["summary"]
    assert result.stop_reason == "max_retrieval_attempts"
    assert result.answer_kind == "not_found"
    assert result.answer == (
        "I could not find an answer in the knowledge base to part of the question: "
        "where was he buried."
    )
    assert result.to_json()["missing_parts"] == ["where was he buried?"]


class ForgetfulReader:
    """Sure of the first part over the first passages only: the passages retrieved for the
    missing part answer neither part."""

    backend, reports_confidence, reads_first_retrieval = "fake", True, False

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, question, documents, rejected=(), background=()):
        from reflexrag.nodes.judges import Answer

        self.calls += 1
        died = 0.9 if self.calls == 1 else 0.3
        parts = {"When did Tesla die?": died, "where was he buried?": 0.2}
        ids = [str(doc.id) for doc in documents]
        return Answer(
            f"answer {self.calls}", "extractive", ids, confidence=0.2, part_confidences=parts
        )


async def test_a_part_found_in_an_earlier_round_stays_found_for_the_give_up(flow_kb, monkeypatch):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS
    from reflexrag.server.runner import run_question

    # (The rewrite finds Edison's chunk, which the run had not read.)
    grader = [ROUTE_YES, YES, FULLY, YES, "Edison", YES, FULLY, YES]
    context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=1)
    reader = ForgetfulReader()
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: reader)
    question = "When did Tesla die and where was he buried?"
    result = await run_question("self_rag", question, context)
    assert reader.calls == 2  # the second round read the missing part's passages
    assert result.answer_kind == "not_found"
    # The second round was sure of neither part; the first had found when he died.
    assert result.answer == (
        "I could not find an answer in the knowledge base to part of the question: "
        "where was he buried."
    )


class UnsureReader:
    """Never sure; its first answer leaves ``first_unsaid`` of what is asked unsaid (says all
    of it when empty), every later one leaves "buried" unsaid."""

    backend, reports_confidence, reads_first_retrieval = "fake", True, False

    def __init__(self, first_unsaid: list[str]) -> None:
        self.first_unsaid = first_unsaid
        self.calls = 0

    async def generate(self, question, documents, rejected=(), background=()):
        from reflexrag.nodes.judges import Answer

        self.calls += 1
        unsaid = self.first_unsaid if self.calls == 1 else ["buried"]
        ids = [str(doc.id) for doc in documents]
        return Answer(f"answer {self.calls}", "extractive", ids, confidence=0.2, unasked=unsaid)


@pytest.mark.parametrize("first_unsaid, named", [(["buried"], True), ([], False)])
async def test_a_give_up_names_only_words_no_answer_of_the_run_quoted(
    flow_kb, monkeypatch, first_unsaid, named
):
    from reflexrag.nodes.judges import GENERATOR_BACKENDS
    from reflexrag.server.runner import run_question

    # (The rewrite finds Edison's chunk, which the run had not read.)
    grader = [ROUTE_YES, YES, FULLY, YES, "Edison", YES, FULLY, YES]
    context = scripted(monkeypatch, grader, [], top_k=1, max_query_rewrites=1)
    reader = UnsureReader(first_unsaid)
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: reader)
    result = await run_question("self_rag", "Where was Tesla buried?", context)
    assert reader.calls == 2 and result.answer_kind == "not_found"
    # When the first answer (turned down for its confidence) quoted a passage saying
    # "buried", the give-up must not claim that no passage found did.
    said_nothing = "the passages I found say nothing about “buried”."
    assert result.answer.endswith(said_nothing) is named, result.answer
    assert result.to_json().get("unasked", []) == (["buried"] if named else [])


def test_a_give_up_names_the_missing_part_only_when_some_part_was_answered():
    from reflexrag.nodes.judges import Answer
    from reflexrag.nodes.rag import missing_parts, not_found_text

    sure_of_one = Answer("…", "extractive", part_confidences={"导演是谁？": 0.8, "主演是谁？": 0.3})
    assert missing_parts(sure_of_one, 0.5) == ["主演是谁？"]
    sure_of_none = Answer("…", "extractive", part_confidences={"a?": 0.1, "b?": 0.3})
    assert missing_parts(sure_of_none, 0.5) == []
    assert missing_parts(Answer("…", "extractive", confidence=0.1), 0.5) == []

    question = "霸王别姬的导演和主演是谁？"
    named = not_found_text(question, {"missing_parts": ["霸王别姬的主演是谁？"]})
    assert named == "我在知识库中没有找到问题这一部分的答案：霸王别姬的主演是谁。"
    on_the_web = not_found_text(question, {"missing_parts": ["主演"], **WEB_READ})
    assert on_the_web.startswith("我在知识库和网络搜索中都没有找到")
    assert not_found_text("When did Tesla die?", {}) == (
        "I could not find an answer in the knowledge base."
    )


def test_a_give_up_names_what_the_question_names_and_no_passage_mentions():
    from reflexrag.nodes.rag import not_found_text

    state = {"unmentioned": ["iPhone", "16"]}
    assert not_found_text("When did the iPhone 16 go on sale?", state) == (
        "I could not find an answer in the knowledge base: no passage I found mentions "
        "“iPhone”, “16”."
    )
    searched = not_found_text("When did the iPhone 16 go on sale?", {**state, **WEB_READ})
    assert searched.startswith("I could not find an answer in the knowledge base or on the web:")
    assert not_found_text("2019年NBA总冠军是谁？", {"unmentioned": ["2019", "NBA"]}) == (
        "我在知识库中没有找到答案：找到的段落都没有提到“2019”、“NBA”。"
    )
    # The parts of a multi-part question come first: they say more.
    both = not_found_text("q?", {"missing_parts": ["b?"], "unmentioned": ["16"]})
    assert both.endswith("to part of the question: b.")


def test_a_give_up_names_the_words_asked_that_no_passage_said():
    from reflexrag.nodes.rag import not_found_text

    question = "What language were books translated into during the era of Haymo of Faversham?"
    state = {"unasked": ["language", "books"]}
    assert not_found_text(question, state) == (
        "I could not find an answer in the knowledge base: the passages I found say nothing "
        "about “language”, “books”."
    )
    searched = not_found_text(question, {**state, **WEB_READ})
    assert searched.startswith("I could not find an answer in the knowledge base or on the web:")
    assert searched.endswith("say nothing about “language”, “books”.")
    assert not_found_text("成吉思汗死后，帝国东边是什么海？", {"unasked": ["东边", "海"]}) == (
        "我在知识库中没有找到答案：找到的段落都没有说到“东边”、“海”。"
    )
    # A name no passage mentions says more: it is named instead.
    both = not_found_text(question, {"unasked": ["language"], "unmentioned": ["Haymo"]})
    assert both.endswith("no passage I found mentions “Haymo”.")


def test_nothing_new_is_read_from_the_state_alone():
    from reflexrag.nodes.routing import found_nothing_new

    def graded(relevant: bool) -> dict:
        return {"x": {"score": 0.9 if relevant else 0.1, "relevant": relevant, "query": "q"}}

    rewritten = {"query_rewrites": 1, "stood_on": ["A sentence turned down."]}
    assert not found_nothing_new({"new_chunk_ids": []}), "the first retrieval"
    assert found_nothing_new({**rewritten, "new_chunk_ids": []})
    assert not found_nothing_new({**rewritten, "new_chunk_ids": ["x"]}), "still to be graded"
    assert found_nothing_new({**rewritten, "new_chunk_ids": ["x"], "doc_grades": graded(False)})
    assert not found_nothing_new({**rewritten, "new_chunk_ids": ["x"], "doc_grades": graded(True)})
    # A verdict or a shared name stands on no sentence: an irrelevant new chunk may change it.
    verdict = {**rewritten, "stood_on": [], "new_chunk_ids": ["x"], "doc_grades": graded(False)}
    assert not found_nothing_new(verdict)
    assert not found_nothing_new({"query_rewrites": 1}), "a state kept before the field was"
