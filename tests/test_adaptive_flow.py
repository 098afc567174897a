"""Adaptive routing and asking back, driven by scripted fake chat models (see tests/flow.py)."""

from __future__ import annotations

import json

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reflexrag.graphs import compile_strategy
from reflexrag.graphs.adaptive import graph as adaptive_graph
from tests.flow import nodes, scripted

YES = '{"binary_score": "yes"}'
FULLY = '{"level": "fully"}'
COMPLETE = '{"completeness": 9, "relevance": 8, "quality": 8, "missing": []}'


def level(name: str, **extra: object) -> str:
    return json.dumps({"level": name, "reason": "scripted", **extra})


async def test_no_retrieval_answers_directly(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [level("no_retrieval")], ["Hello! How can I help?"])
    state = await adaptive_graph.ainvoke({"question": "hi there"}, context=context)
    assert nodes(state) == ["classify_complexity", "answer_directly", "finish"]
    assert state["complexity"]["level"] == "no_retrieval"
    assert state["stop_reason"] == "no_retrieval_needed"
    assert state["generation"] == "Hello! How can I help?" and not state.get("documents")


async def test_single_step_runs_self_rag_without_its_own_retrieval_decision(flow_kb, monkeypatch):
    context = scripted(monkeypatch, [level("single_step"), YES, FULLY, YES], ["1943 [1]"], top_k=1)
    state = await adaptive_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state) == [
        "classify_complexity",
        "retrieve",
        "grade_documents",
        "generate",
        "grade_generation",
        "finish",
    ]
    # The classifier's verdict survives the subgraph's own prepare.
    assert state["complexity"]["level"] == "single_step" and state["stop_reason"] == "answered"
    assert state["usage"]["llm.classifier"] == 1 and state["usage"]["llm.grader"] == 3


async def test_multi_step_runs_the_iterative_subgraph(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch, [level("multi_step"), YES, COMPLETE], ["He died in 1943 [1]."], top_k=1
    )
    state = await adaptive_graph.ainvoke(
        {"question": "Who died first, Tesla or Edison?"}, context=context
    )
    assert nodes(state) == [
        "classify_complexity",
        "retrieve_round",
        "grade_round",
        "draft_answer",
        "assess_round",
        "finish",
    ]
    assert state["complexity"]["level"] == "multi_step" and len(state["rounds"]) == 1
    assert state["generation"] == "He died in 1943 [1]."


async def test_ambiguous_question_interrupts_and_resumes_the_same_thread(flow_kb, monkeypatch):
    ambiguous = level("single_step", ambiguous=True, clarifying_question="Which person?")
    context = scripted(
        monkeypatch, [ambiguous, level("single_step"), YES, FULLY, YES], ["1943 [1]"], top_k=1
    )
    graph = compile_strategy("adaptive", InMemorySaver())
    config = {"configurable": {"thread_id": "ask-back"}}
    await graph.ainvoke({"question": "When did he die?"}, config=config, context=context)
    paused = await graph.aget_state(config)
    assert paused.next == ("clarify",)
    assert paused.interrupts[0].value["question"] == "Which person?"

    state = await graph.ainvoke(Command(resume="Nikola Tesla"), config=config, context=context)
    assert state["original_question"] == "When did he die? (Nikola Tesla)"
    assert nodes(state)[:3] == ["classify_complexity", "clarify", "classify_complexity"]
    assert state["stop_reason"] == "answered" and state["generation"] == "1943 [1]"
    assert state["clarifications"] == 1


async def test_without_ask_back_an_ambiguous_question_ends_needing_clarification(
    flow_kb, monkeypatch
):
    ambiguous = level("single_step", ambiguous=True, clarifying_question="Which API?")
    context = scripted(monkeypatch, [ambiguous], [], ask_back=False)
    state = await adaptive_graph.ainvoke({"question": "What are its limits?"}, context=context)
    assert state["stop_reason"] == "needs_clarification"
    assert state["generation"] == "Which API?" and state["answer_kind"] == "clarification"
    assert nodes(state)[-1] == "needs_clarification"


async def test_an_earlier_question_in_the_thread_resolves_it(flow_kb, monkeypatch):
    context = scripted(
        monkeypatch,
        [level("no_retrieval"), level("single_step"), YES, FULLY, YES],
        ["Hi!", "1943 [1]"],
        top_k=1,
    )
    graph = compile_strategy("adaptive", InMemorySaver())
    config = {"configurable": {"thread_id": "follow-up"}}
    await graph.ainvoke({"question": "Tell me about Nikola Tesla"}, config=config, context=context)
    state = await graph.ainvoke({"question": "When did it end?"}, config=config, context=context)
    assert state["history"] == ["Tell me about Nikola Tesla"]
    assert state["original_question"] == "When did it end? (Tell me about Nikola Tesla)"
    assert "clarify" not in nodes(state)
