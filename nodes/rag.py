"""The async nodes every strategy is built from.

Each node reads the shared :class:`state.RAGState`, asks a judge or the knowledge base, and
returns a partial update that always includes one ``steps`` entry describing its decision.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from langchain_core.documents import Document
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy

from reflexrag.nodes.judges import Answer, Generator, Judge, get_generator, get_judge
from reflexrag.nodes.judges.usage import metered
from reflexrag.nodes.routing import found_nothing_new
from reflexrag.providers.knowledge_base import (
    KnowledgeBase,
    StoreUnavailableError,
    get_knowledge_base,
    search_knowledge_base,
    vector_store_calls,
)
from reflexrag.providers.loaders import ensure_sample_kb
from reflexrag.providers.retriever import external_source, search_external
from reflexrag.providers.settings import get_settings
from reflexrag.providers.text import is_chinese
from reflexrag.state import RESET, Context, DocGrade, RAGState, Reading, Source, Step
from reflexrag.state.context import check_question
from reflexrag.state.schema import sum_counts

NOT_FOUND_ANSWER = "I could not find an answer in the knowledge base."
NOT_FOUND_ANSWER_ZH = "我在知识库中没有找到答案。"
NOT_FOUND_ANYWHERE = "I could not find an answer in the knowledge base or on the web."
NOT_FOUND_ANYWHERE_ZH = "我在知识库和网络搜索中都没有找到答案。"
# A question asking several things, some of which the evidence answers: the give-up names what
# is missing (the parts as asked, joined by "; " / "；").
NOT_FOUND_PART = "I could not find an answer in the knowledge base to part of the question: {parts}"
NOT_FOUND_PART_ZH = "我在知识库中没有找到问题这一部分的答案：{parts}"
NOT_FOUND_PART_ANYWHERE = (
    "I could not find an answer in the knowledge base or on the web to part of the question: "
    "{parts}"
)
NOT_FOUND_PART_ANYWHERE_ZH = "我在知识库和网络搜索中都没有找到问题这一部分的答案：{parts}"
# The question names something no passage found mentions: what was found is about another.
NOT_FOUND_UNMENTIONED = (
    "I could not find an answer in the knowledge base: no passage I found mentions {words}."
)
NOT_FOUND_UNMENTIONED_ZH = "我在知识库中没有找到答案：找到的段落都没有提到{words}。"
NOT_FOUND_UNMENTIONED_ANYWHERE = (
    "I could not find an answer in the knowledge base or on the web: no passage I found "
    "mentions {words}."
)
NOT_FOUND_UNMENTIONED_ANYWHERE_ZH = (
    "我在知识库和网络搜索中都没有找到答案：找到的段落都没有提到{words}。"
)
# The passages found are about the question's subject but say none of what it asks.
NOT_FOUND_UNASKED = (
    "I could not find an answer in the knowledge base: the passages I found say nothing "
    "about {words}."
)
NOT_FOUND_UNASKED_ZH = "我在知识库中没有找到答案：找到的段落都没有说到{words}。"
NOT_FOUND_UNASKED_ANYWHERE = (
    "I could not find an answer in the knowledge base or on the web: the passages I found "
    "say nothing about {words}."
)
NOT_FOUND_UNASKED_ANYWHERE_ZH = (
    "我在知识库和网络搜索中都没有找到答案：找到的段落都没有说到{words}。"
)
# Two documents state the fact asked for with two values: neither is the answer.
NOT_FOUND_DISPUTED = (
    'I could not find an answer the knowledge base agrees on: one source says "{ours}", '
    'another says "{theirs}"'
)
NOT_FOUND_DISPUTED_ZH = (
    "知识库中的来源说法不一，找不到确定的答案：一处说“{ours}”，另一处说“{theirs}”"
)
NO_RETRIEVAL_LOCAL_ANSWER = (
    "This question does not need the knowledge base ({reason}), and the local backend only "
    "answers by quoting documents. Configure an LLM generator to answer it directly."
)


SEARCH_RETRY = RetryPolicy(
    retry_on=StoreUnavailableError,
    initial_interval=1.0,
    backoff_factor=2.0,
    max_interval=8.0,
    max_attempts=5,
)
"""For the nodes that search the knowledge base: a vector store server that is down or
restarting is tried again after about 1, 2, 4 and 8 s (LangGraph re-runs the node from its
input) before the run fails, so a restart of the Chroma server does not fail the runs in
flight."""


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's context; graphs invoked without one get the defaults."""
    context = runtime.context if runtime is not None else None
    if isinstance(context, Context):
        return context
    return Context.from_overrides(context if isinstance(context, dict) else None)


async def _simulated_latency() -> None:
    # REFLEXRAG_TEST_DELAY_S stretches runs so tests can kill a server mid-run.
    delay = get_settings().test_delay_s
    if delay > 0:
        await asyncio.sleep(delay)


def _open_knowledge_base(name: str, verify: bool = True) -> KnowledgeBase:
    # The default KB is seeded with the bundled samples wherever a graph runs (CLI, our
    # server, LangGraph Studio), so a fresh install answers questions out of the box.
    return ensure_sample_kb(name, verify) or get_knowledge_base(name, create=False, verify=verify)


T = TypeVar("T")
_built_before: set[tuple[str, str]] = set()


async def _build(role: str, backend: str, factory: Callable[[Context], T], context: Context) -> T:
    """The first judge or generator of a backend is built in a worker thread (models and
    tokenizer files load then); later ones come from the loaded pieces in microseconds, so
    they are built inline instead of paying a thread hop in every node."""
    await _simulated_latency()
    if (role, backend) in _built_before:
        return factory(context)
    built = await asyncio.to_thread(factory, context)
    _built_before.add((role, backend))
    return built


async def judge_for(context: Context) -> Judge:
    return await _build("judge", context.judge_backend, get_judge, context)


async def generator_for(context: Context) -> Generator:
    return await _build("generator", context.generator_backend, get_generator, context)


def step(node: str, summary: str) -> list[Step]:
    return [Step(node=node, summary=summary)]


def original_question(state: RAGState) -> str:
    return state.get("original_question") or state["question"]


def emit(runtime: Runtime[Context] | None, payload: dict[str, Any]) -> None:
    """Send a progress event to ``custom`` stream listeners (a no-op when nobody listens)."""
    if runtime is not None and runtime.stream_writer is not None:
        runtime.stream_writer(payload)


def to_source(doc: Document, score: float | None = None) -> Source:
    meta = doc.metadata
    return Source(
        id=str(doc.id),
        doc_id=str(meta.get("doc_id", doc.id)),
        title=str(meta.get("title", "")),
        score=round(float(meta.get("score", 0.0) if score is None else score), 4),
        origin="web" if meta.get("origin") == "web" else "kb",
    )


def graded_documents(state: RAGState, relevant_only: bool = True) -> list[Document]:
    """Documents of the pool ordered by their grade, best first."""
    grades = state.get("doc_grades") or {}
    documents = [
        doc
        for doc in state.get("documents") or []
        if doc.id in grades and (grades[doc.id]["relevant"] or not relevant_only)
    ]
    return sorted(documents, key=lambda doc: -grades[doc.id]["score"])


def generation_context(
    state: RAGState, context: Context, generator: Generator | None = None
) -> list[Document]:
    """CRAG's refined strips; else the relevant graded documents, best first, followed, for a
    ``generator`` that reads it (see ``Generator.reads_first_retrieval``), by what the first
    retrieval found (what naive RAG would have read: a grade just under the bar must not hide
    the answer from the extractive reader); else the last retrieval (naive)."""
    if state.get("knowledge_strips"):
        return list(state["knowledge_strips"])
    if state.get("doc_grades"):
        return with_first_retrieval(state, context, graded_documents(state), generator)
    wanted = state.get("last_retrieved_ids") or []
    by_id = {doc.id: doc for doc in state.get("documents") or []}
    return [by_id[i] for i in wanted if i in by_id][: context.max_context_docs]


def web_pages(state: RAGState) -> list[Document]:
    """The web search's pages among everything this run retrieved."""
    return [doc for doc in state.get("documents") or [] if doc.metadata.get("origin") == "web"]


def background_context(state: RAGState) -> list[Document]:
    """What the generator reads beside the documents it may quote: every chunk this run
    retrieved. The parts of a yes/no claim, or a shared name's full form, may sit in chunks
    graded under the bar, found by another round, or left out of CRAG's refined strips. A
    knowledge-base retrieval CRAG judged incorrect is left out: only the web's pages count."""
    if state.get("crag_action") == "incorrect":
        return web_pages(state)
    return list(state.get("documents") or [])


def with_first_retrieval(
    state: RAGState,
    context: Context,
    documents: list[Document],
    generator: Generator | None = None,
) -> list[Document]:
    """The best ``max_context_docs`` of ``documents``, then what the first retrieval found
    (what naive RAG reads), each once; the first retrieval only for a ``generator`` that reads
    it (any, when none is given)."""
    reads_first = generator is None or getattr(generator, "reads_first_retrieval", True)
    first = (state.get("documents") or [])[: context.top_k] if reads_first else []
    chosen = [*documents[: context.max_context_docs], *first]
    return list({doc.id: doc for doc in chosen}.values())


# What a new question starts from; prepare writes these back for the fields a run set.
_FRESH_QUESTION: dict[str, Any] = {
    "documents": RESET,
    "last_retrieved_ids": [],
    "new_chunk_ids": [],
    "doc_grades": RESET,
    "generation": "",
    "quote": "",
    "confidence": None,
    "answer_kind": None,
    "sources": [],
    "missing_parts": [],
    "disputed": [],
    "unmentioned": [],
    "unasked": [],
    "stood_on": RESET,
    "grounding": None,
    "useful": None,
    "retrieval_attempts": 0,
    "query_rewrites": 0,
    "generation_attempts": 0,
    "crag_action": None,
    "web_query": "",
    "web_searches": 0,
    "knowledge_strips": [],
    "stop_reason": None,
    "complexity": None,
    "clarifications": 0,
    "query_kind": None,
    "rounds": RESET,
    "reading": RESET,
    "skip_rate": None,
    "steps": RESET,
    "usage": RESET,
}


async def prepare(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Start a question: reset per-question fields so one thread can hold many questions,
    and copy the run's loop limits onto the state, where the routers read them."""
    question = check_question(state["question"])
    previous = state.get("original_question")
    # Written only when there is something to add, so a subgraph's own prepare (which sees
    # no earlier question) never wipes the thread's history.
    history = {"history": [*(state.get("history") or []), previous][-5:]} if previous else {}
    resets = {
        key: value
        for key, value in _FRESH_QUESTION.items()
        # A subgraph starts with only the question: writing only what is set keeps it from
        # clearing the parent's fields (an adaptive run's route and complexity) on the way out.
        if state.get(key) is not None
    }
    return {
        **history,
        **resets,
        "question": question,
        "original_question": question,
        "needs_retrieval": True,
        "limits": context_of(runtime).limits,
    }


async def decide_retrieval(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Ask the router judge whether the question needs the knowledge base at all."""
    context = context_of(runtime)
    question = original_question(state)
    closest = await search_chunks(context, question, context.top_k)
    with metered() as meter:
        judge = await judge_for(context)
        decision = await judge.needs_retrieval(question, closest)
    verdict = "retrieve" if decision.needed else "answer directly"
    return {
        "needs_retrieval": decision.needed,
        "steps": step("decide_retrieval", f"{verdict} ({decision.reason})"),
        "usage": meter.counts,
    }


async def search_chunks(
    context: Context, query: str, k: int, exclude: Collection[str] = ()
) -> list[Document]:
    """The run's retrieval settings (mode, fusion, filters) applied to one query; or the
    retriever :func:`providers.retriever.use_retriever` gave the run's ``kb`` name."""
    if (source := external_source(context.kb)) is not None:
        return await search_external(source, context.kb, query, k, exclude)
    await _simulated_latency()
    with vector_store_calls():
        # Opening a knowledge base touches disk, and searching it blocks: a worker thread.
        return await asyncio.to_thread(
            search_knowledge_base,
            functools.partial(_open_knowledge_base, context.kb),
            query,
            k,
            context.retrieval_mode,
            context.conditions,
            context.fusion,
            exclude,
        )


async def skip_reading(
    state: RAGState, context: Context, candidates: list[Document], against: str
) -> tuple[list[Document], dict[str, Any]]:
    """Rerank ``initial_k`` candidates with the relevance judge and read only those above the
    bar (up to ``top_k``; at least the best one, so the run still has evidence to judge)."""
    with metered() as meter:
        judge = await judge_for(context)
        grades = await judge.grade_documents(against, candidates)
    bar = judge.relevance_threshold if context.read_threshold is None else context.read_threshold
    ranked = sorted(zip(candidates, grades, strict=True), key=lambda pair: -pair[1].score)
    read = [pair for pair in ranked if pair[1].score >= bar][: context.top_k] or ranked[:1]
    read_ids = {doc.id for doc, _ in read}
    reading = Reading(
        query=against,
        read={str(doc.id): grade.score for doc, grade in read},
        skipped={str(doc.id): grade.score for doc, grade in ranked if doc.id not in read_ids},
    )
    readings = [*(state.get("reading") or []), reading]
    skipped = sum(len(r["skipped"]) for r in readings)
    total = skipped + sum(len(r["read"]) for r in readings)
    update = {
        "reading": [reading],
        "skip_rate": round(skipped / total, 4),
        "doc_grades": {
            str(doc.id): DocGrade(score=grade.score, relevant=grade.relevant, query=against)
            for doc, grade in read
        },
        "usage": meter.counts,
    }
    return [doc for doc, _ in read], update


async def retrieve_chunks(
    state: RAGState,
    runtime: Runtime[Context],
    node: str,
    against: str,
    exclude: Collection[str] = (),
) -> dict[str, Any]:
    context = context_of(runtime)
    query = state["question"]
    k = context.initial_k or context.top_k
    known = {doc.id for doc in state.get("documents") or []}
    documents = await search_chunks(context, query, k, exclude)
    update: dict[str, Any] = {}
    summary = f"{len(documents)} chunks for {query!r}"
    progress = {"node": node, "query": query, "candidates": len(documents)}
    if context.initial_k and documents:
        documents, update = await skip_reading(state, context, documents, against)
        summary = f"read {len(documents)} of {progress['candidates']} candidates for {query!r}"
    # What a later round adds to the run's evidence: a rewrite that finds nothing new has
    # nothing to correct the last answer with (see ``routing.found_nothing_new``).
    new = [str(doc.id) for doc in documents if doc.id not in known]
    if known:
        summary += f", {len(new)} not retrieved before"
    emit(runtime, {**progress, "hits": len(documents)})
    return {
        **update,
        "original_question": original_question(state),
        "documents": documents,
        "last_retrieved_ids": [str(doc.id) for doc in documents],
        "new_chunk_ids": new,
        "retrieval_attempts": state.get("retrieval_attempts", 0) + 1,
        "steps": step(node, summary),
    }


async def retrieve(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Fetch the ``top_k`` chunks best matching the current query (with skip reading, the
    best of ``initial_k`` candidates by the relevance judge)."""
    return await retrieve_chunks(state, runtime, "retrieve", original_question(state))


async def grade_chunks(
    state: RAGState, runtime: Runtime[Context], node: str, against: str
) -> dict[str, Any]:
    context = context_of(runtime)
    wanted = set(state.get("last_retrieved_ids") or [])
    known = state.get("doc_grades") or {}
    retrieved = [doc for doc in state.get("documents") or [] if doc.id in wanted]
    # Skip reading (or an earlier round) may already have graded a chunk for this query.
    documents = [
        doc for doc in retrieved if doc.id not in known or known[doc.id]["query"] != against
    ]
    with metered() as meter:
        judge = await judge_for(context)
        grades = await judge.grade_documents(against, documents) if documents else []
    update: dict[str, DocGrade] = {}
    for doc, grade in zip(documents, grades, strict=True):
        update[str(doc.id)] = DocGrade(score=grade.score, relevant=grade.relevant, query=against)
        emit(
            runtime,
            {"node": node, "id": doc.id, "score": grade.score, "relevant": grade.relevant},
        )
    merged = {**known, **update}
    relevant = sum(merged[doc.id]["relevant"] for doc in retrieved)
    return {
        "doc_grades": update,
        "steps": step(node, f"{relevant}/{len(retrieved)} relevant"),
        "usage": meter.counts,
    }


async def grade_documents(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Grade the chunks just retrieved against the user's question, in one batch."""
    return await grade_chunks(state, runtime, "grade_documents", original_question(state))


async def answer_from(
    state: RAGState,
    context: Context,
    documents: list[Document],
    retry: bool = True,
    generator: Generator | None = None,
) -> dict[str, Any]:
    """Generate an answer from ``documents`` (reading every chunk retrieved beside them) and
    cite the ones it used. With ``retry``, the answers given before were rejected: the new
    one stands on nothing they stood on (a sentence, a deterministic model's prompt).
    ``generator``: the one that chose ``documents``, if the caller has it."""
    question = original_question(state)
    attempt = state.get("generation_attempts", 0) + 1
    rejected = (state.get("stood_on") or []) if retry else []
    with metered() as meter:
        generator = generator or await generator_for(context)
        answer = await generator.generate(
            question,
            documents,
            rejected,
            background_context(state) if documents else [],
        )
    text, kind = answer.text, answer.kind
    if not documents and kind == "extractive":
        reason = state["steps"][-1]["summary"] if state.get("steps") else "no retrieval"
        text, kind = NO_RETRIEVAL_LOCAL_ANSWER.format(reason=reason), "no_retrieval"
    grades = state.get("doc_grades") or {}
    used = [doc for doc in documents if str(doc.id) in set(answer.used_ids)]
    # With nothing new to answer (every sentence, or the very prompt, was a rejected answer's),
    # what those answers showed missing (words no passage said, a part not found) still
    # stands for a give-up.
    shown = (
        {}
        if rejected and not text
        else {
            "missing_parts": missing_parts(
                answer, context.min_confidence, state.get("missing_parts") or []
            ),
            "disputed": answer.disputed,
            "unmentioned": answer.unmentioned,
            "unasked": unsaid(answer, state.get("unasked") or [], first=attempt == 1),
        }
    )
    return {
        **shown,
        "generation": text,
        "quote": answer.quote,
        "confidence": answer_confidence(answer, used, grades),
        "answer_kind": kind,
        "sources": [to_source(doc, grades.get(doc.id, {}).get("score")) for doc in used],
        "stood_on": answer.stands_on if retry else [],
        "generation_attempts": attempt,
        "usage": meter.counts,
    }


def missing_parts(answer: Answer, min_confidence: float, earlier: Sequence[str] = ()) -> list[str]:
    """The parts of a question asking several things that ``answer`` is not sure of, when it is
    sure of at least one. When it is sure of none, the ``earlier`` round's missing parts: what
    an earlier round found stays found, so the search goes on for the rest and a give-up names
    it (a round that reads only the missing part's passages is sure of neither part). A
    question none of whose parts was ever answered is simply not found."""
    parts = answer.part_confidences
    missing = [part for part, sure in parts.items() if sure < min_confidence]
    if len(missing) < len(parts):
        return missing
    return [part for part in earlier if part in parts]


def unsaid(answer: Answer, earlier: Sequence[str], first: bool) -> list[str]:
    """The question's own words that no answer of the run quoted a passage saying: those
    ``answer`` leaves unsaid that every earlier answer left unsaid too (``earlier``). A
    give-up names them as words the passages found say nothing about, and a first answer
    turned down for another reason (its confidence) may well have said them."""
    if first:
        return answer.unasked
    return [word for word in answer.unasked if word in earlier]


def answer_confidence(
    answer: Answer, used: list[Document], grades: dict[str, DocGrade]
) -> float | None:
    """The generator's own confidence, or (an LLM says none) the best relevance grade of the
    documents it cited."""
    if answer.confidence is not None:
        return answer.confidence
    scores = [grades[doc.id]["score"] for doc in used if doc.id in grades]
    return round(max(scores), 4) if scores else None


async def generate(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Write (or, locally, extract) an answer from the relevant documents. Coming back here
    means the judges rejected the answer before (ungrounded, not useful or not sure enough),
    so the new one stands on nothing the rejected ones stood on (sentences, or a deterministic
    model's prompt), over the old evidence and the new alike: the same evidence read afresh
    would only give the same answer."""
    context = context_of(runtime)
    generator = await generator_for(context)
    documents = (
        generation_context(state, context, generator) if state.get("needs_retrieval", True) else []
    )
    update = await answer_from(state, context, documents, True, generator)
    summary = f"{update['answer_kind']} answer #{update['generation_attempts']}"
    summary += f" from {len(documents)} chunks"
    if turned_down := state.get("generation_attempts", 0):
        summary += f", past what {turned_down} rejected answer{'s' * (turned_down > 1)} stood on"
        if not update["generation"]:
            summary += ": nothing new to answer"
    return {**update, "steps": step("generate", summary)}


async def grade_generation(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Check the answer is grounded in its documents, then that it answers the question."""
    context = context_of(runtime)
    if not state.get("generation"):
        # Nothing was said (no sentence left that a rejected answer did not stand on, or the
        # very prompt a deterministic model's rejected answer came from): there is nothing to
        # check, and nothing to regenerate from this evidence.
        summary = "no answer to check: this evidence gives nothing that was not rejected before"
        return {"grounding": None, "useful": False, "steps": step("grade_generation", summary)}
    judge = await judge_for(context)
    # The answer is checked against what its generator read; a written answer against the
    # passages it cites (its claims must hold there), which also spares the judge re-reading
    # every passage the generator was shown.
    documents = generation_context(state, context, await generator_for(context))
    if state.get("answer_kind") == "generative":
        cited = {source["id"] for source in state.get("sources") or []}
        documents = [doc for doc in documents if str(doc.id) in cited] or documents
    answer, quote = state["generation"], state.get("quote") or ""
    with metered() as meter:
        grade = await judge.grade_answer(original_question(state), answer, documents, quote)
    grounding, usefulness = grade.grounding, grade.usefulness
    useful = bool(usefulness and usefulness.useful)
    if grounding.level == "none":
        summary = f"not grounded ({grounding.score:.2f})"
    else:
        summary = f"{grounding.level} grounded, {'useful' if useful else 'not useful'}"
        if usefulness and usefulness.reason:
            summary += f" ({usefulness.reason})"
        confidence = state.get("confidence")
        if confidence is not None and confidence < context.min_confidence:
            summary += f"; {confidence:.2f} sure, under min_confidence {context.min_confidence}"
    return {
        "grounding": grounding.level,
        "useful": useful,
        "steps": step("grade_generation", summary),
        "usage": meter.counts,
    }


async def transform_query(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Rewrite the query for another retrieval round: toward the parts of the question the
    last answer was not sure of, when it was sure of the others, else toward what the
    question names that no passage it was read from mentions."""
    context = context_of(runtime)
    attempt = state.get("query_rewrites", 0) + 1
    closest = graded_documents(state, relevant_only=False)
    question = original_question(state)
    summary = f"rewrite #{attempt}"
    if missing := state.get("missing_parts"):
        # The part first (a search query keeps words in order), then the whole question it
        # belongs to: a part may name its subject only by a pronoun ("how much does it cost?").
        question = f"{' '.join(missing)} ({question})"
        summary += f" for the missing part {' / '.join(missing)!r}"
    elif unmentioned := state.get("unmentioned"):
        # What no passage mentioned yet leads the search for it, in the question it is in.
        question = f"{' '.join(unmentioned)} ({question})"
        summary += f" for {', '.join(unmentioned)}, which no passage mentioned"
    elif unasked := state.get("unasked"):
        # The passages found were about the subject: what the question asks of it leads.
        question = f"{' '.join(unasked)} ({question})"
        summary += f" for {', '.join(unasked)}, which no passage it quoted said"
    with metered() as meter:
        judge = await judge_for(context)
        query = await judge.rewrite_query(question, attempt, closest)
    return {
        "question": query,
        "query_rewrites": attempt,
        "steps": step("transform_query", f"{summary}: {query!r}"),
        "usage": meter.counts,
    }


async def finish(state: RAGState) -> dict[str, Any]:
    """End with the answer."""
    reason = "answered" if state.get("needs_retrieval", True) else "no_retrieval_needed"
    return {"stop_reason": reason, "steps": step("finish", reason)}


def give_up_reason(state: RAGState, context: Context) -> str:
    if not state.get("documents"):
        return "no_matching_documents" if context.filters else "empty_knowledge_base"
    if state.get("crag_action") and not state.get("knowledge_strips"):
        return "no_relevant_knowledge"
    if state.get("grounding") == "none" and (
        state.get("generation_attempts", 0) > context.max_regenerations
    ):
        return "max_generation_attempts"
    if state.get("disputed"):
        return "sources_disagree"
    if found_nothing_new(state):
        return "no_new_evidence"
    return "max_retrieval_attempts"


async def give_up(state: RAGState, runtime: Runtime[Context]) -> dict[str, Any]:
    """End without an answer the judges accepted: an honest "not found" with the closest
    evidence. With ``best_effort`` on, the best evidence seen may still answer, marked
    ``best_effort``, but only with an answer the grounding and usefulness judges accept at
    the run's ``min_confidence``: a run that gives up never quietly becomes naive RAG."""
    context = context_of(runtime)
    reason = give_up_reason(state, context)
    grades = state.get("doc_grades") or {}
    closest = graded_documents(state, relevant_only=False)[:3]
    question = original_question(state)
    # Evidence the judges found too weak may still answer; answers they found ungrounded
    # would only be produced again.
    best_effort = (
        await best_evidence_answer(state, context)
        if context.best_effort
        and reason
        in (
            "max_retrieval_attempts",
            "no_new_evidence",
            "no_relevant_knowledge",
            "sources_disagree",
        )
        else None
    )
    if best_effort is not None:
        confidence = best_effort["confidence"]
        summary = f"{reason}; answering from the best evidence (confidence {confidence:.2f})"
        return {**best_effort, "stop_reason": reason, "steps": step("give_up", summary)}
    return {
        "generation": not_found_text(question, state),
        "quote": "",
        "confidence": None,
        "answer_kind": "not_found",
        "sources": [to_source(doc, grades[doc.id]["score"]) for doc in closest],
        "stop_reason": reason,
        "steps": step("give_up", reason),
    }


# The words a give-up names, by the state's key, with their templates (English, Chinese, and
# both when the web was searched too): a name no passage mentions says more than words of the
# question no passage said, and comes first.
_NOT_FOUND_WORDS = (
    (
        "unmentioned",
        (
            NOT_FOUND_UNMENTIONED,
            NOT_FOUND_UNMENTIONED_ZH,
            NOT_FOUND_UNMENTIONED_ANYWHERE,
            NOT_FOUND_UNMENTIONED_ANYWHERE_ZH,
        ),
    ),
    (
        "unasked",
        (
            NOT_FOUND_UNASKED,
            NOT_FOUND_UNASKED_ZH,
            NOT_FOUND_UNASKED_ANYWHERE,
            NOT_FOUND_UNASKED_ANYWHERE_ZH,
        ),
    ),
)


def not_found_text(question: str, state: RAGState) -> str:
    """Say the answer was not found (in the knowledge base, or on the web too when the run
    read web pages); for a question asking several things of which the latest answer was sure
    of some, name the parts it was not sure of; where two sources disputed the latest answer,
    quote both; where the question names something no passage the latest answer read
    mentions, name it; where no passage the run's answers quoted says the question's own
    words, name those."""
    # "Or on the web" only when web pages were read: a run whose web search failed, or that
    # has no web to search, looked in the knowledge base alone.
    web = bool(web_pages(state))
    chinese = is_chinese(question)

    def template(english: str, zh: str, english_web: str, zh_web: str) -> str:
        return ((english, zh), (english_web, zh_web))[web][chinese]

    def listed(words: list[str]) -> str:
        return ("、" if chinese else ", ").join(f"“{word}”" for word in words)

    if missing := state.get("missing_parts"):
        parts = ("；" if chinese else "; ").join(part.rstrip("?？。.") for part in missing)
        found = template(
            NOT_FOUND_PART, NOT_FOUND_PART_ZH, NOT_FOUND_PART_ANYWHERE, NOT_FOUND_PART_ANYWHERE_ZH
        )
        return found.format(parts=parts) + ("。" if chinese else ".")
    if disputed := state.get("disputed"):
        found = NOT_FOUND_DISPUTED_ZH if chinese else NOT_FOUND_DISPUTED
        ours, theirs = (sentence.strip() for sentence in disputed)
        return found.format(ours=ours, theirs=theirs)
    for key, templates in _NOT_FOUND_WORDS:
        if words := state.get(key):
            return template(*templates).format(words=listed(words))
    if web:
        return NOT_FOUND_ANYWHERE_ZH if chinese else NOT_FOUND_ANYWHERE
    return NOT_FOUND_ANSWER_ZH if chinese else NOT_FOUND_ANSWER


async def best_evidence_answer(state: RAGState, context: Context) -> dict[str, Any] | None:
    """The answer the best evidence gives (the best-graded chunks and what the first
    retrieval found), when the judges find it grounded and useful and it is at least the
    run's ``min_confidence`` sure; None otherwise, or when there is no evidence."""
    evidence = with_first_retrieval(state, context, graded_documents(state, relevant_only=False))
    if not evidence:
        return None
    update = await answer_from(state, context, evidence, retry=False)
    confidence = update.get("confidence")
    if not update["generation"] or (confidence is not None and confidence < context.min_confidence):
        return None
    judge = await judge_for(context)
    with metered() as meter:
        grade = await judge.grade_answer(
            original_question(state), update["generation"], evidence, update["quote"]
        )
    update["usage"] = sum_counts(update["usage"], meter.counts)
    if grade.grounding.level == "none" or not (grade.usefulness and grade.usefulness.useful):
        return None
    return {**update, "answer_kind": "best_effort"}
