"""Routing functions: each returns the next node's name and enforces a loop limit.

The limits are counters on the state compared with the run's limits, which ``prepare`` copies
from its :class:`state.Context` onto the state, so every path ends in ``finish`` or
``give_up`` long before any recursion limit. A router reads nothing but the state: it routes
the same in a run and in ``update_state``, which gives conditional edges no run context.
"""

from __future__ import annotations

from typing import Literal

from reflexrag.state import Context, Limits, RAGState


def limits_of(state: RAGState) -> Limits:
    """The run's limits; a state written before they were kept on it gets the defaults."""
    return state.get("limits") or Context().limits


def route_retrieval_decision(state: RAGState) -> Literal["retrieve", "generate"]:
    """Retrieve unless the router judge said the question needs no documents."""
    return "retrieve" if state.get("needs_retrieval", True) else "generate"


def found_nothing_new(state: RAGState) -> bool:
    """Whether a rewritten query's retrieval gave the run nothing new to read: no chunk it had
    not retrieved before; or, after answers that stood on sentences (or on a prompt) were
    turned down, no new chunk graded relevant, so the next answer could only stand on the
    evidence already read, past what was rejected. (A yes/no verdict or a name counted across
    documents stands on no one sentence: every chunk retrieved may change it.)"""
    new = state.get("new_chunk_ids")
    if not state.get("query_rewrites") or new is None:  # (a state kept before they were)
        return False
    if not new:
        return True
    grades = state.get("doc_grades") or {}
    if not state.get("stood_on") or any(i not in grades for i in new):
        return False  # nothing stood on was turned down, or the new chunks are ungraded
    return not any(grades[i]["relevant"] for i in new)


def route_after_retrieve(state: RAGState) -> Literal["grade_documents", "give_up"]:
    """An empty knowledge base has nothing to grade, nor has a rewritten query that found only
    chunks the run already had."""
    if not state.get("last_retrieved_ids"):
        return "give_up"
    return "give_up" if found_nothing_new(state) else "grade_documents"


def route_after_grading(state: RAGState) -> Literal["generate", "transform_query", "give_up"]:
    """Generate from relevant chunks; with none, rewrite the query while rewrites are left. A
    rewrite that brought nothing new to answer from ends the loop (:func:`found_nothing_new`)."""
    grades = state.get("doc_grades") or {}
    if found_nothing_new(state):
        return "give_up"
    if any(grades[i]["relevant"] for i in state.get("last_retrieved_ids") or [] if i in grades):
        return "generate"
    if any(grade["relevant"] for grade in grades.values()):
        # Earlier rounds already found evidence; answer from it rather than loop.
        return "generate"
    if state.get("query_rewrites", 0) < limits_of(state)["max_query_rewrites"]:
        return "transform_query"
    return "give_up"


def route_after_generate(state: RAGState) -> Literal["grade_generation", "finish"]:
    """An answer given without retrieval has no documents to be checked against."""
    return "grade_generation" if state.get("needs_retrieval", True) else "finish"


def _check_generation(
    state: RAGState, limits: Limits
) -> Literal["finish", "generate", "give_up", "retry"]:
    """Ungrounded → regenerate while allowed; useful and at least ``min_confidence`` sure →
    finish; grounded but useless, or less sure than the run asks → retry."""
    if state.get("grounding") == "none":
        if state.get("generation_attempts", 0) <= limits["max_regenerations"]:
            return "generate"
        return "give_up"
    confidence = state.get("confidence")
    sure = confidence is None or confidence >= limits["min_confidence"]
    return "finish" if state.get("useful") and sure else "retry"


def route_after_generation_grade(
    state: RAGState,
) -> Literal["finish", "generate", "transform_query", "give_up"]:
    """Self-RAG: a grounded but useless answer rewrites the query while rewrites are left."""
    limits = limits_of(state)
    route = _check_generation(state, limits)
    if route != "retry":
        return route
    if state.get("query_rewrites", 0) < limits["max_query_rewrites"]:
        return "transform_query"
    return "give_up"


def route_after_evaluation(
    state: RAGState,
) -> Literal["refine_knowledge", "rewrite_for_search", "give_up"]:
    """Correct → refine; otherwise search the web while searches are left."""
    action = state.get("crag_action")
    if action == "correct":
        return "refine_knowledge"
    if state.get("web_searches", 0) < limits_of(state)["max_web_searches"]:
        return "rewrite_for_search"
    return "refine_knowledge" if action == "ambiguous" else "give_up"


def route_after_refinement(state: RAGState) -> Literal["generate", "give_up"]:
    """Nothing relevant survived refinement: say so instead of answering from nothing."""
    return "generate" if state.get("knowledge_strips") else "give_up"


def route_after_corrective_check(
    state: RAGState,
) -> Literal["finish", "generate", "rewrite_for_search", "give_up"]:
    """Self-CRAG: a grounded but useless answer earns another web search while allowed."""
    limits = limits_of(state)
    route = _check_generation(state, limits)
    if route != "retry":
        return route
    if state.get("web_searches", 0) < limits["max_web_searches"]:
        return "rewrite_for_search"
    return "give_up"


def route_by_complexity(
    state: RAGState,
) -> Literal["clarify", "needs_clarification", "answer_directly", "single_step", "multi_step"]:
    """Ask back (once) about an unresolved reference, else follow the classifier's route."""
    complexity = state.get("complexity") or {}
    if complexity.get("ambiguous") and not state.get("clarifications"):
        return "clarify" if limits_of(state)["ask_back"] else "needs_clarification"
    level = complexity.get("level", "single_step")
    return "answer_directly" if level == "no_retrieval" else level


def _sure_draft(state: RAGState, limits: Limits) -> bool:
    """Whether the iterative draft may be the answer: there is one, at least as sure as the
    run's ``min_confidence`` (a draft the rounds never made sure is no answer)."""
    confidence = state.get("confidence")
    sure = confidence is None or confidence >= limits["min_confidence"]
    return bool(state.get("generation")) and sure


def route_after_round_retrieval(state: RAGState) -> Literal["grade_round", "finish", "give_up"]:
    """A round that finds nothing new ends the loop: with the draft so far, or not found."""
    if state.get("last_retrieved_ids"):
        return "grade_round"
    return "finish" if _sure_draft(state, limits_of(state)) else "give_up"


def route_after_next_query(state: RAGState) -> Literal["retrieve_round", "finish", "give_up"]:
    """A query an earlier round asked would fetch what that round fetched and grade it as it
    was graded: no next query was found, so the loop ends, with the draft so far or not
    found."""
    asked = {r["query"] for r in state.get("rounds") or []}
    if state.get("question") not in asked:
        return "retrieve_round"
    return "finish" if _sure_draft(state, limits_of(state)) else "give_up"


def route_after_assessment(state: RAGState) -> Literal["next_query", "finish", "give_up"]:
    """Stop when complete enough with a draft sure enough to answer (or, in ``fixed`` mode,
    never early) or out of rounds."""
    limits = limits_of(state)
    rounds = state.get("rounds") or []
    complete = (
        limits["iterative_stop"] == "completeness"
        and bool(rounds)
        and rounds[-1]["completeness"] >= limits["completeness_threshold"]
        and _sure_draft(state, limits)
    )
    if not complete and len(rounds) < limits["max_rounds"]:
        return "next_query"
    return "finish" if _sure_draft(state, limits) else "give_up"
