"""Iterative retrieval's stop conditions and query choice, with scripted fake chat models."""

from __future__ import annotations

import json

from reflexrag.graphs.iterative import graph as iterative_graph
from reflexrag.nodes.judges import GENERATOR_BACKENDS
from reflexrag.nodes.judges.base import Answer
from reflexrag.nodes.judges.local import LocalJudge
from tests.flow import FakeEmbeddings, nodes, scripted

YES, NO = '{"binary_score": "yes"}', '{"binary_score": "no"}'


def scores(completeness: int, relevance: int = 8, missing: tuple[str, ...] = ()) -> str:
    return json.dumps(
        {
            "completeness": completeness,
            "relevance": relevance,
            "quality": 6,
            "missing": list(missing),
        }
    )


async def test_completeness_at_the_threshold_stops_after_one_round(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [YES, scores(8)], ["1943 [1]"], top_k=1)
    state = await iterative_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert len(state["rounds"]) == 1 and state["stop_reason"] == "answered"
    first = state["rounds"][0]
    assert first["query_kind"] == "question" and first["completeness"] == 8
    assert first["retrieved_ids"] == first["relevant_ids"] == ["tesla#0"]
    assert first["draft"] == "1943 [1]"


async def test_fixed_mode_runs_every_round_even_when_complete(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch,
        [YES, scores(10), "Thomas Edison", YES, scores(10)],
        ["draft one [1]", "final [1][2]"],
        top_k=1,
        iterative_stop="fixed",
        max_rounds=2,
    )
    state = await iterative_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert [r["round"] for r in state["rounds"]] == [1, 2]
    assert state["rounds"][1]["query"] == "Thomas Edison"
    # Round 2 fetched new evidence and the answer uses every round's relevant chunks.
    assert state["rounds"][1]["retrieved_ids"] == ["edison#0"]
    assert {s["doc_id"] for s in state["sources"]} == {"tesla", "edison"}


async def test_low_relevance_asks_an_alternative_query_high_an_expanded_one(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch,
        [
            NO,
            scores(2, relevance=1, missing=("inventor",)),
            "inventor Edison",
            YES,
            scores(5, relevance=8, missing=("death date",)),
            "Edison death date",
            NO,
            scores(5, relevance=7),
        ],
        ["Edison founded GE [1].", "Edison founded GE [1]."],
        top_k=1,
    )
    state = await iterative_graph.ainvoke(
        {"question": "When did the inventor die?"}, context=context
    )
    kinds = [r["query_kind"] for r in state["rounds"]]
    assert kinds == ["question", "alternative", "expanded"]
    summaries = [s["summary"] for s in state["steps"] if s["node"] == "next_query"]
    assert summaries[0].startswith("alternative") and summaries[1].startswith("expanded")


async def test_the_round_counter_bounds_a_loop_that_is_never_complete(flow_kb, monkeypatch):
    grader = [NO, scores(2, relevance=1)]
    grader += ["another query", NO, scores(2, relevance=1), "a third query", NO, scores(2, 1)]
    context = scripted(monkeypatch, grader, [], top_k=1, max_rounds=3)
    state = await iterative_graph.ainvoke(
        {"question": "Who won the 1998 World Cup?"}, context=context
    )
    assert len(state["rounds"]) == 3 and state["retrieval_attempts"] == 3
    assert nodes(state)[-1] == "give_up" and state["answer_kind"] == "not_found"
    assert state["stop_reason"] == "max_retrieval_attempts"


async def test_a_next_query_an_earlier_round_asked_ends_the_loop(flow_kb, monkeypatch):
    # Round 3 would fetch and grade what round 2 did: the loop ends after round 2 instead.
    grader = [NO, scores(2, relevance=1)] + ["another query", NO, scores(2, relevance=1)] * 2
    context = scripted(monkeypatch, grader, [], top_k=1, max_rounds=3)
    state = await iterative_graph.ainvoke(
        {"question": "Who won the 1998 World Cup?"}, context=context
    )
    assert [r["query"] for r in state["rounds"]] == ["Who won the 1998 World Cup?", "another query"]
    assert state["retrieval_attempts"] == 2
    assert nodes(state)[-2:] == ["next_query", "give_up"]
    assert state["answer_kind"] == "not_found"


async def test_a_written_answer_reads_the_accepted_chunks_and_an_extracted_one_round_1_too(
    flow_kb, monkeypatch
):
    # Round 1's chunk is judged irrelevant, round 2's relevant. The LLM generator writes from
    # the accepted chunk alone (as the Self-RAG tutorial does; the rejected one costs tokens
    # and distracts it); the extractive reader also reads what round 1 found, so a later hop
    # adds to what naive RAG would have read instead of replacing it.
    grader = [NO, scores(2, relevance=1, missing=("inventor",)), "inventor Edison", YES, scores(9)]
    context = scripted(monkeypatch, grader, ["Edison died in 1931 [1][2]."], top_k=1)
    state = await iterative_graph.ainvoke(
        {"question": "When did the inventor die?"}, context=context
    )
    first, second = (r["retrieved_ids"][0] for r in state["rounds"])
    assert state["rounds"][0]["relevant_ids"] == [] and state["rounds"][1]["relevant_ids"]
    assert {source["id"] for source in state["sources"]} == {second}
    reader = ReadingGenerator()
    reader.reads_first_retrieval = True
    context = scripted(monkeypatch, grader, [], top_k=1)
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: reader)
    await iterative_graph.ainvoke({"question": "When did the inventor die?"}, context=context)
    assert reader.quotable == [second, first]


class ReadingGenerator:
    """Answers with its first document; keeps what it was given to quote and to read."""

    backend = "fake"
    reports_confidence = False

    def __init__(self) -> None:
        self.quotable: list[str] = []
        self.read: list[str] = []

    async def generate(self, question, documents, rejected=(), background=()):
        self.quotable = [str(doc.id) for doc in documents]
        self.read = [str(doc.id) for doc in background]
        return Answer(documents[0].page_content, "extractive", [str(documents[0].id)])


async def test_the_answer_reads_every_rounds_chunks_beside_the_ones_it_may_quote(
    flow_kb, monkeypatch
):
    context = scripted(
        monkeypatch,
        [YES, scores(5, missing=("rival",)), "Thomas Edison", NO, scores(5)],
        [],
        top_k=1,
        max_rounds=2,
    )
    generator = ReadingGenerator()
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: generator)
    state = await iterative_graph.ainvoke(
        {"question": "Did Tesla outlive his rival?"}, context=context
    )
    first, second = (r["retrieved_ids"][0] for r in state["rounds"])
    # Round 2's chunk was judged irrelevant: not quoted, but read (a yes/no claim's other
    # part, or a name's full form, may be in it).
    assert generator.quotable == [first]
    assert generator.read == [first, second]


async def test_a_query_already_asked_is_not_asked_again():
    judge = LocalJudge(FakeEmbeddings())
    question = (
        "Did The Verge report a discount on the MacBook Air, while Engadget reported a deal "
        "on the Galaxy Buds?"
    )
    missing = ("engadget", "galaxy", "buds")
    first = await judge.next_query(question, "", "expanded", missing)
    again = await judge.next_query(question, "", "expanded", missing, asked=[question, first])
    # The same words would fetch the same chunks: the part of the question with the missing
    # words is asked instead, then the other part.
    assert again == "Engadget reported a deal on the Galaxy Buds?"
    last = await judge.next_query(question, "", "expanded", missing, asked=[first, again])
    assert last == "Did The Verge report a discount on the MacBook Air"
