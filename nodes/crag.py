"""Corrective RAG nodes (Yan et al. 2024): evaluate retrieval, search the web, refine knowledge.

The retrieval evaluator scores each retrieved chunk (the judge's 0-1 relevance score); two
thresholds turn the scores into an action: *correct* → refine the internal chunks, *incorrect*
→ rewrite into search keywords and use web results, *ambiguous* → both. Refinement is
decompose-then-recompose: split into strips, score each strip, drop short and irrelevant
ones, keep the best ``n``; every strip keeps its source document's id and origin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langgraph.runtime import Runtime

from reflexrag.nodes.judges.usage import metered
from reflexrag.nodes.rag import context_of, emit, judge_for, original_question, step
from reflexrag.providers.search import SearchError, get_search_provider, search_with_timeout
from reflexrag.providers.text import (
    is_chinese,
    join_sentences,
    split_sentences,
    word_count,
    word_spans,
)
from reflexrag.state import Context, CragAction, DocGrade, RAGState

WINDOW_WORDS = 50
SENTENCES_PER_STRIP = 3
MIN_STRIP_WORDS = 4


def crag_action(
    scores: Sequence[float], upper: float, lower: float, aggregation: str = "any"
) -> CragAction:
    """The paper's rule (``any`` document ≥ upper → correct; any ≥ lower → ambiguous; else
    incorrect) or the mean of the top three scores against the same two thresholds."""
    if not scores:
        return "incorrect"
    if aggregation == "mean_top3":
        top = sorted(scores, reverse=True)[:3]
        mean = sum(top) / len(top)
        if mean >= upper:
            return "correct"
        return "incorrect" if mean < lower else "ambiguous"
    if max(scores) >= upper:
        return "correct"
    return "ambiguous" if max(scores) >= lower else "incorrect"


def decompose(text: str, mode: str) -> list[str]:
    """Split a passage into strips: ~50-word windows, 3-sentence groups, or the passage."""
    if mode == "passage":
        strips = [text.strip()]
    elif mode == "window":
        spans = word_spans(text)
        strips = [
            text[spans[i][0] : spans[min(i + WINDOW_WORDS, len(spans)) - 1][1]]
            for i in range(0, len(spans), WINDOW_WORDS)
        ]
    else:
        sentences = split_sentences(text)
        chinese = is_chinese(text)
        strips = [
            join_sentences(sentences[i : i + SENTENCES_PER_STRIP], chinese=chinese)
            for i in range(0, len(sentences), SENTENCES_PER_STRIP)
        ]
    return [strip for strip in strips if word_count(strip) >= MIN_STRIP_WORDS]


def to_strips(documents: Sequence[Document], mode: str) -> list[Document]:
    return [
        Document(id=f"{doc.id}~{n}", page_content=strip, metadata={**doc.metadata, "strip": n})
        for doc in documents
        for n, strip in enumerate(decompose(doc.page_content, mode))
    ]


def thresholds(judge: Any, context: Context) -> tuple[float, float]:
    upper, lower = judge.crag_thresholds[context.crag_aggregation]
    return (
        upper if context.crag_upper is None else context.crag_upper,
        lower if context.crag_lower is None else context.crag_lower,
    )


def _retrieved(state: RAGState, origin: str) -> list[Document]:
    wanted = set(state.get("last_retrieved_ids") or [])
    return [
        doc
        for doc in state.get("documents") or []
        if doc.id in wanted and (doc.metadata.get("origin") == "web") == (origin == "web")
    ]


async def evaluate_retrieval(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Score every retrieved chunk and decide: correct, incorrect or ambiguous."""
    context = context_of(runtime)
    question = original_question(state)
    documents = _retrieved(state, "kb")
    with metered() as meter:
        judge = await judge_for(context)
        grades = await judge.grade_documents(question, documents)
    upper, lower = thresholds(judge, context)
    scores = [grade.score for grade in grades]
    action = crag_action(scores, upper, lower, context.crag_aggregation)
    best = max(scores, default=0.0)
    emit(runtime, {"node": "evaluate_retrieval", "action": action, "scores": scores})
    return {
        "crag_action": action,
        "doc_grades": {
            str(doc.id): DocGrade(score=g.score, relevant=g.score >= lower, query=question)
            for doc, g in zip(documents, grades, strict=True)
        },
        "steps": step(
            "evaluate_retrieval",
            f"{action} (best {best:.2f}; upper {upper:.2f}, lower {lower:.2f})",
        ),
        "usage": meter.counts,
    }


async def rewrite_for_search(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Turn the question into at most three search keywords."""
    with metered() as meter:
        judge = await judge_for(context_of(runtime))
        query = await judge.search_query(original_question(state))
    return {
        "web_query": query,
        "steps": step("rewrite_for_search", repr(query)),
        "usage": meter.counts,
    }


async def web_fallback(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Search the web; a failing provider means no external knowledge, never a crash."""
    context = context_of(runtime)
    query = state.get("web_query") or original_question(state)
    searches = state.get("web_searches", 0) + 1
    # An ambiguous retrieval's chunks are refined beside the web's pages, or alone without
    # them.
    kept = (
        [doc.id for doc in _retrieved(state, "kb")]
        if state.get("crag_action") == ("ambiguous")
        else []
    )
    try:
        provider = get_search_provider(context.search_provider, context.web_kb)
        results = await search_with_timeout(provider, query, context.top_k)
    except SearchError as exc:
        emit(runtime, {"node": "web_fallback", "error": str(exc)})
        return {
            "web_searches": searches,
            "last_retrieved_ids": kept,
            "steps": step("web_fallback", f"no external knowledge ({exc})"),
        }
    emit(runtime, {"node": "web_fallback", "query": query, "hits": len(results)})
    return {
        "documents": results,
        "last_retrieved_ids": [*kept, *(str(doc.id) for doc in results)],
        "web_searches": searches,
        "steps": step("web_fallback", f"{len(results)} web results for {query!r}"),
    }


async def refine_knowledge(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Decompose the kept documents into strips, score them, recompose the best ``n``."""
    context = context_of(runtime)
    question = original_question(state)
    grades = state.get("doc_grades") or {}
    action = state.get("crag_action")
    internal = [d for d in _retrieved(state, "kb") if grades.get(d.id, {}).get("relevant")]
    if action == "incorrect":
        internal = []
    sources = internal + _retrieved(state, "web")
    strips = to_strips(sources, context.refine_mode)
    with metered() as meter:
        judge = await judge_for(context)
        strip_grades = await judge.grade_documents(question, strips) if strips else []
    _, lower = thresholds(judge, context)
    keep = 3 if context.refine_mode == "passage" else 6
    scored = sorted(
        (
            (grade.score, strip)
            for strip, grade in zip(strips, strip_grades, strict=True)
            if grade.score >= lower
        ),
        key=lambda pair: -pair[0],
    )[:keep]
    refined = [
        Document(
            id=strip.id,
            page_content=strip.page_content,
            metadata={**strip.metadata, "score": round(score, 4)},
        )
        for score, strip in scored
    ]
    origins = sorted({doc.metadata.get("origin", "kb") for doc in refined})
    return {
        "knowledge_strips": refined,
        "steps": step(
            "refine_knowledge",
            f"kept {len(refined)} of {len(strips)} strips from {len(sources)} documents "
            f"({', '.join(origins) or 'none'})",
        ),
        "usage": meter.counts,
    }
