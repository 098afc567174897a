"""Iterative retrieval's nodes: each round retrieves new chunks for the current query, grades
them against that query, drafts an answer from everything gathered, and scores the round.

The next query follows from the scores: an *alternative* query when the round's documents
were not relevant, an *expanded* one (the draft's new names plus what is still missing)
when they were but the answer is incomplete.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langgraph.runtime import Runtime

from reflexrag.nodes.judges.usage import metered
from reflexrag.nodes.rag import (
    answer_from,
    context_of,
    generator_for,
    grade_chunks,
    judge_for,
    original_question,
    retrieve_chunks,
    step,
    with_first_retrieval,
)
from reflexrag.state import Context, QueryKind, RAGState, Round

RELEVANCE_FLOOR = 5
"""A round whose documents score below this (0-10) calls for an alternative query."""


def next_query_kind(last: Round) -> QueryKind:
    return "alternative" if last["relevance"] < RELEVANCE_FLOOR else "expanded"


def _round_relevant_ids(state: RAGState) -> list[str]:
    grades = state.get("doc_grades") or {}
    return [i for i in state.get("last_retrieved_ids") or [] if grades.get(i, {}).get("relevant")]


def gathered_documents(state: RAGState) -> list[Document]:
    """Every round's relevant chunks so far, this round's included, in round order."""
    by_id = {doc.id: doc for doc in state.get("documents") or []}
    earlier = (i for r in state.get("rounds") or [] for i in r["relevant_ids"])
    wanted = dict.fromkeys([*earlier, *_round_relevant_ids(state)])
    return [by_id[i] for i in wanted if i in by_id]


async def retrieve_round(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Fetch chunks for this round's query, leaving out the evidence already gathered (a chunk
    an earlier round found irrelevant may well be relevant to this round's query)."""
    gathered = {i for r in state.get("rounds") or [] for i in r["relevant_ids"]}
    return await retrieve_chunks(
        state, runtime, "retrieve_round", state["question"], exclude=gathered
    )


async def grade_round(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Grade the round's chunks against the round's query: a later hop's evidence (the
    director's biography) is relevant to the follow-up query, not to the original wording."""
    return await grade_chunks(state, runtime, "grade_round", state["question"])


async def draft_answer(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from every round's relevant chunks so far, this round's included, and what the
    first round found (what naive RAG reads: a later hop must add evidence, not hide it)."""
    context = context_of(runtime)
    gathered = gathered_documents(state)
    if not gathered:
        return {
            "generation": "",
            "missing_parts": [],
            "disputed": [],
            "unmentioned": [],
            "unasked": [],
            "steps": step("draft_answer", "nothing relevant yet"),
        }
    generator = await generator_for(context)
    documents = with_first_retrieval(state, context, gathered, generator)
    update = await answer_from(state, context, documents, retry=False, generator=generator)
    return {**update, "steps": step("draft_answer", f"draft from {len(documents)} chunks")}


async def assess_round(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Score the round (relevance, completeness, quality) and record it."""
    context = context_of(runtime)
    rounds = state.get("rounds") or []
    by_id = {doc.id: doc for doc in state.get("documents") or []}
    round_documents = [by_id[i] for i in state.get("last_retrieved_ids") or [] if i in by_id]
    # The draft with the sentence it quotes, a line apart (the answer's name and the quote's
    # first word are not one name): that sentence names the bridge to the next hop.
    draft = "\n".join(filter(None, (state.get("generation"), state.get("quote"))))
    with metered() as meter:
        judge = await judge_for(context)
        scores = await judge.assess_round(
            original_question(state), draft, round_documents, gathered_documents(state)
        )
    record = Round(
        round=len(rounds) + 1,
        query=state["question"],
        query_kind=state.get("query_kind") or "question",
        retrieved_ids=[str(doc.id) for doc in round_documents],
        relevant_ids=_round_relevant_ids(state),
        draft=draft,
        relevance=scores.relevance,
        completeness=scores.completeness,
        quality=scores.quality,
        missing=list(scores.missing),
    )
    summary = (
        f"round {record['round']}: relevance {scores.relevance}/10, completeness "
        f"{scores.completeness}/10, quality {scores.quality}/10"
    )
    return {"rounds": [record], "steps": step("assess_round", summary), "usage": meter.counts}


async def next_query(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Build the next round's query from the question, the draft and what is missing."""
    context = context_of(runtime)
    last = state["rounds"][-1]
    kind = next_query_kind(last)
    with metered() as meter:
        judge = await judge_for(context)
        query = await judge.next_query(
            original_question(state),
            last["draft"],
            kind,
            last["missing"],
            [r["query"] for r in state["rounds"]],
        )
    return {
        "question": query,
        "query_kind": kind,
        "steps": step("next_query", f"{kind}: {query!r}"),
        "usage": meter.counts,
    }
