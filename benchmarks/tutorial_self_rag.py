"""Baseline: the widely copied LangGraph Self-RAG tutorial shape, re-implemented for comparison.

Its traits, kept on purpose: one *sequential* grader call per retrieved document, separate
hallucination and answer graders, and loops bounded only by ``recursion_limit=10``, so a hard
question ends in ``GraphRecursionError`` (the harness counts that as an error, never an
abstention). It uses the same judges and generator as reflexrag so only the control flow
differs. Not a product strategy: it is absent from ``graphs.STRATEGIES`` and the default
evaluation list.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from reflexrag.nodes.judges.usage import metered
from reflexrag.nodes.rag import (
    context_of,
    generator_for,
    graded_documents,
    judge_for,
    prepare,
    retrieve,
    step,
    to_source,
)
from reflexrag.state import Context, DocGrade, InputState, RAGState

RECURSION_LIMIT = 10


async def grade_each_document(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """One grader call per document, one after the other, as the tutorial does."""
    judge = await judge_for(context_of(runtime))
    wanted = set(state.get("last_retrieved_ids") or [])
    grades: dict[str, DocGrade] = {}
    with metered() as meter:
        for doc in (d for d in state.get("documents") or [] if d.id in wanted):
            (grade,) = await judge.grade_documents(state["question"], [doc])
            grades[str(doc.id)] = DocGrade(
                score=grade.score, relevant=grade.relevant, query=state["question"]
            )
    relevant = sum(g["relevant"] for g in grades.values())
    return {
        "doc_grades": grades,
        "usage": meter.counts,
        "steps": step("grade_documents", f"{relevant}/{len(grades)} relevant"),
    }


async def tutorial_generate(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Generate from the documents that passed grading in the latest round."""
    wanted = set(state.get("last_retrieved_ids") or [])
    documents = [d for d in graded_documents(state) if d.id in wanted]
    with metered() as meter:
        generator = await generator_for(context_of(runtime))
        # Every answer before was turned down: a local reader stands on other sentences, and
        # a model is asked the same prompt again, as the tutorial asks it.
        answer = await generator.generate(
            state["original_question"], documents, state.get("stood_on") or []
        )
    used = set(answer.used_ids)
    return {
        "generation": answer.text,
        "quote": answer.quote,
        "confidence": answer.confidence,
        "answer_kind": answer.kind,
        "sources": [to_source(d) for d in documents if str(d.id) in used],
        "stood_on": answer.stands_on if answer.kind == "extractive" else [],
        "generation_attempts": state.get("generation_attempts", 0) + 1,
        "usage": meter.counts,
        "steps": step("generate", answer.kind),
    }


async def tutorial_transform_query(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Rewrite the current query (the tutorial rewrites its own previous rewrite)."""
    attempt = state.get("query_rewrites", 0) + 1
    with metered() as meter:
        judge = await judge_for(context_of(runtime))
        query = await judge.rewrite_query(state["question"], attempt, [])
    return {
        "question": query,
        "query_rewrites": attempt,
        "usage": meter.counts,
        "steps": step("transform_query", query),
    }


async def tutorial_grade_generation(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Hallucination grader, then answer grader, as two separate calls, both on the
    generation: what the tutorial's LLM writes is a whole answer, which for the extractive
    generator is the short answer with the sentence it is quoted from."""
    judge = await judge_for(context_of(runtime))
    wanted = set(state.get("last_retrieved_ids") or [])
    documents = [d for d in graded_documents(state) if d.id in wanted]
    generation = " ".join(filter(None, (state["generation"], state.get("quote"))))
    with metered() as meter:
        grounding = await judge.grade_grounding(state.get("quote") or generation, documents)
        useful = False
        if grounding.level != "none":
            useful = (await judge.grade_usefulness(state["original_question"], generation)).useful
    return {
        "grounding": grounding.level,
        "useful": useful,
        "usage": meter.counts,
        "stop_reason": "answered" if useful else None,
        "steps": step("grade_generation", f"{grounding.level}, useful={useful}"),
    }


def decide_to_generate(state: RAGState) -> Literal["generate", "transform_query"]:
    wanted = set(state.get("last_retrieved_ids") or [])
    relevant = [d for d in graded_documents(state) if d.id in wanted]
    return "generate" if relevant else "transform_query"


def grade_generation_route(state: RAGState) -> Literal["generate", "transform_query", "__end__"]:
    if state.get("grounding") == "none":
        return "generate"
    return END if state.get("useful") else "transform_query"


builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
builder.add_node(prepare)
builder.add_node(retrieve)
builder.add_node("grade_documents", grade_each_document)
builder.add_node("generate", tutorial_generate)
builder.add_node("grade_generation", tutorial_grade_generation)
builder.add_node("transform_query", tutorial_transform_query)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "retrieve")
builder.add_edge("retrieve", "grade_documents")
builder.add_conditional_edges("grade_documents", decide_to_generate)
builder.add_edge("transform_query", "retrieve")
builder.add_edge("generate", "grade_generation")
builder.add_conditional_edges("grade_generation", grade_generation_route)

graph = builder.compile()
graph.name = "tutorial_self_rag"
