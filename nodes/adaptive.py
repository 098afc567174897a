"""Adaptive routing's nodes: classify the question's complexity, ask back when it points at
something nobody named, and answer directly when no retrieval is needed.

Asking back uses LangGraph's ``interrupt()``: the run pauses with the clarifying question in
its checkpoint, and resuming the thread with ``Command(resume=reply)`` continues it.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from reflexrag.nodes.judges.rules import unresolved_reference
from reflexrag.nodes.judges.usage import metered
from reflexrag.nodes.rag import answer_from, context_of, judge_for, original_question, step
from reflexrag.state import ComplexityInfo, Context, RAGState


def _with_reply(question: str, reply: str) -> str:
    return f"{question} ({reply})" if reply else question


async def classify_complexity(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Classify the question (no retrieval / single-step / multi-step) and pick the route."""
    context = context_of(runtime)
    question = original_question(state)
    history = state.get("history") or []
    update: dict[str, Any] = {}
    if history and not state.get("clarifications") and unresolved_reference(question):
        # "What are its limits?" after "What is Self-RAG?": search with what "it" refers to.
        question = _with_reply(question, history[-1])
        update = {"question": question, "original_question": question}
    with metered() as meter:
        judge = await judge_for(context)
        verdict = await judge.classify_complexity(question, history)
    info = ComplexityInfo(
        level=verdict.level,
        ambiguous=verdict.ambiguous,
        clarifying_question=verdict.clarifying_question,
        features=verdict.features,
        reason=verdict.reason,
    )
    flag = ", ambiguous" if verdict.ambiguous else ""
    return {
        **update,
        "complexity": info,
        "steps": step("classify_complexity", f"{verdict.level}{flag}: {verdict.reason}"),
        "usage": meter.counts,
    }


async def clarify(state: RAGState) -> dict[str, Any]:
    """Ask the user what the question refers to, then continue with their reply."""
    asked = state["complexity"]["clarifying_question"]
    question = original_question(state)
    reply = interrupt({"question": asked, "original_question": question})
    if isinstance(reply, dict):
        reply = reply.get("answer") or reply.get("reply") or ""
    reply = str(reply or "").strip()
    clarified = _with_reply(question, reply)
    # The reply resolves the reference for the classifier, as an earlier question would.
    history = {"history": [*(state.get("history") or []), reply]} if reply else {}
    return {
        **history,
        "question": clarified,
        "original_question": clarified,
        "clarifications": state.get("clarifications", 0) + 1,
        "steps": step("clarify", f"{asked} → {reply!r}"),
    }


async def needs_clarification(state: RAGState) -> dict[str, Any]:
    """End without guessing: the answer is the clarifying question."""
    return {
        "generation": state["complexity"]["clarifying_question"],
        "answer_kind": "clarification",
        "sources": [],
        "stop_reason": "needs_clarification",
        "steps": step("needs_clarification", "asked back instead of guessing"),
    }


async def answer_directly(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from the model's general knowledge, without retrieval; the local generator,
    which can only quote documents, says so instead of answering."""
    update = await answer_from(state, context_of(runtime), [])
    return {
        **update,
        "needs_retrieval": False,
        "steps": step("answer_directly", f"{update['answer_kind']} answer, no retrieval"),
    }
