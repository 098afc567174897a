"""Corrective RAG: the evaluator's thresholds, strip decomposition, each action path, and web
search failures degrading to "no external knowledge"."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import ClassVar

import pytest
from langchain_core.documents import Document

from reflexrag.graphs.crag import graph as crag_graph
from reflexrag.graphs.self_crag import graph as self_crag_graph
from reflexrag.nodes.crag import crag_action, decompose
from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS
from reflexrag.nodes.judges.base import (
    Answer,
    AnswerGrade,
    GroundingGrade,
    RelevanceGrade,
    RetrievalDecision,
    UsefulnessGrade,
)
from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base
from reflexrag.providers.search import SearchError
from reflexrag.providers.settings import get_settings
from reflexrag.providers.text import split_sentences, word_count
from reflexrag.state import Context


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.60, 0.1], "correct"),  # at the upper threshold
        ([0.5999, 0.1], "ambiguous"),
        ([0.45], "ambiguous"),  # at the lower threshold
        ([0.4499, 0.2], "incorrect"),
        ([], "incorrect"),
    ],
)
def test_any_aggregation_boundaries(scores, expected):
    assert crag_action(scores, upper=0.60, lower=0.45) == expected


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.9, 0.6, 0.3, 0.0], "correct"),  # mean of top 3 = 0.6 = upper
        ([0.9, 0.3, 0.0], "ambiguous"),  # 0.4
        ([0.6, 0.2, 0.1], "ambiguous"),  # 0.3 = lower
        ([0.5, 0.2, 0.1], "incorrect"),  # 0.2667
        ([0.95], "correct"),  # fewer than three documents
    ],
)
def test_mean_top3_aggregation_boundaries(scores, expected):
    assert crag_action(scores, upper=0.6, lower=0.3, aggregation="mean_top3") == expected


ENGLISH = " ".join(f"word{n}" for n in range(120))
CHINESE = "自" * 120


def test_window_strips_in_both_languages():
    english = decompose(ENGLISH, "window")
    assert [word_count(s) for s in english] == [50, 50, 20]
    assert english[0].startswith("word0 ") and english[-1].endswith("word119")
    assert [len(s) for s in decompose(CHINESE, "window")] == [50, 50, 20]


def test_sentence_strips_group_three_and_drop_short_ones():
    text = " ".join(f"Sentence number {n} is here." for n in range(7))
    strips = decompose(text, "sentences")
    assert (
        len(strips) == 3 and strips[0].count("Sentence") == 3 and strips[2].count("Sentence") == 1
    )
    chinese = "今天下雨了。明天是晴天。后天会刮风。大后天下雪。"
    assert decompose(chinese, "sentences") == [
        "今天下雨了。明天是晴天。后天会刮风。",
        "大后天下雪。",
    ]
    assert decompose("Too short. Tiny.", "sentences") == []


def test_a_heading_stays_apart_from_the_sentence_after_it_in_a_strip():
    # Joined by a space, the reader would read the heading into the sentence ("… case The
    # gantry …") and quote the two as one.
    text = "Disinfection after a COVID-19 case\nThe gantry is wiped with ethanol. It dries."
    (strip,) = decompose(text, "sentences")
    assert split_sentences(strip) == [
        "Disinfection after a COVID-19 case",
        "The gantry is wiped with ethanol.",
        "It dries.",
    ]


def test_passage_mode_keeps_the_passage():
    assert decompose("One whole passage of several words.", "passage") == [
        "One whole passage of several words."
    ]


class KeywordJudge:
    """Scores a document by which keyword it contains; everything else is a fixed verdict."""

    backend = "fake"
    relevance_threshold = 0.5
    crag_thresholds: ClassVar[dict[str, tuple[float, float]]] = {
        "any": (0.6, 0.45),
        "mean_top3": (0.6, 0.45),
    }

    def __init__(self, scores: dict[str, float], useful: bool = True) -> None:
        self.scores = scores
        self.useful = useful

    def score(self, text: str) -> float:
        return max((v for k, v in self.scores.items() if k in text), default=0.0)

    async def needs_retrieval(self, question, closest=()):
        return RetrievalDecision(True, "fake")

    async def grade_documents(self, question: str, documents: Sequence[Document]):
        return [
            RelevanceGrade(self.score(d.page_content), self.score(d.page_content) >= 0.5)
            for d in documents
        ]

    async def grade_grounding(self, answer, documents):
        return GroundingGrade("fully", 1.0)

    async def grade_usefulness(self, question, answer):
        return UsefulnessGrade(self.useful, float(self.useful))

    async def grade_answer(self, question, answer, documents, quote=""):
        return AnswerGrade(GroundingGrade("fully", 1.0), UsefulnessGrade(self.useful, 1.0))

    async def rewrite_query(self, question, attempt, documents):
        return question

    async def search_query(self, question):
        return "tesla death"


class FirstStripGenerator:
    """Answers with its first document; keeps the sources of the background it was given."""

    backend = "fake"
    reports_confidence = False

    def __init__(self) -> None:
        self.background: list[str] = []

    async def generate(self, question, documents, rejected=(), background=()):
        self.background = [doc.metadata["doc_id"] for doc in background]
        return Answer(documents[0].page_content, "extractive", [str(documents[0].id)])


@pytest.fixture(scope="module")
def crag_kbs():
    get_knowledge_base("crag-kb").add(
        [
            SourceDocument(
                "tesla-kb",
                "Nikola Tesla was an inventor who lived in New York hotels for most of his life.",
                {"title": "Tesla"},
            ),
            SourceDocument(
                "paris", "Paris is the capital and largest city of France.", {"title": "Paris"}
            ),
        ]
    )
    get_knowledge_base("crag-web").add(
        [
            SourceDocument(
                "tesla-web",
                "Tesla died on 7 January 1943 in room 3327 of the New Yorker Hotel.",
                {"title": "Tesla death"},
            ),
        ]
    )


def fake_context(
    monkeypatch,
    scores: dict[str, float],
    useful: bool = True,
    generator: FirstStripGenerator | None = None,
    **extra,
) -> Context:
    generator = generator or FirstStripGenerator()
    monkeypatch.setitem(JUDGE_BACKENDS, "fake", lambda context: KeywordJudge(scores, useful))
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda context: generator)
    fields = {
        "kb": "crag-kb",
        "web_kb": "crag-web",
        "top_k": 2,
        "judge_backend": "fake",
        "generator_backend": "fake",
        "search_provider": "local",
    }
    return Context(**{**fields, **extra})


def nodes(state) -> list[str]:
    return [entry["node"] for entry in state["steps"]]


async def test_correct_refines_internal_documents_only(crag_kbs, monkeypatch):
    context = fake_context(monkeypatch, {"inventor": 0.9, "Tesla died": 0.9})
    state = await crag_graph.ainvoke({"question": "Where did Tesla live?"}, context=context)
    assert state["crag_action"] == "correct"
    assert nodes(state) == [
        "retrieve",
        "evaluate_retrieval",
        "refine_knowledge",
        "generate",
        "finish",
    ]
    assert {s.metadata["doc_id"] for s in state["knowledge_strips"]} == {"tesla-kb"}
    assert state["sources"][0]["doc_id"] == "tesla-kb" and state["sources"][0]["origin"] == "kb"


async def test_incorrect_searches_the_web_and_cites_it(crag_kbs, monkeypatch):
    context = fake_context(monkeypatch, {"Tesla died": 0.8})
    state = await crag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["crag_action"] == "incorrect"
    assert nodes(state) == [
        "retrieve",
        "evaluate_retrieval",
        "rewrite_for_search",
        "web_fallback",
        "refine_knowledge",
        "generate",
        "finish",
    ]
    assert state["web_query"] == "tesla death" and state["web_searches"] == 1
    assert state["sources"] == [{**state["sources"][0], "doc_id": "tesla-web", "origin": "web"}]
    assert "1943" in state["generation"]


async def test_ambiguous_merges_internal_and_web_strips(crag_kbs, monkeypatch):
    context = fake_context(monkeypatch, {"inventor": 0.5, "Tesla died": 0.9})
    state = await crag_graph.ainvoke({"question": "Tell me about Tesla"}, context=context)
    assert state["crag_action"] == "ambiguous"
    origins = {
        (s.metadata["doc_id"], s.metadata.get("origin", "kb")) for s in state["knowledge_strips"]
    }
    assert origins == {("tesla-kb", "kb"), ("tesla-web", "web")}
    assert state["knowledge_strips"][0].metadata["doc_id"] == "tesla-web", "best strip first"


async def test_the_generator_reads_every_chunk_but_an_incorrect_retrieval(crag_kbs, monkeypatch):
    generator = FirstStripGenerator()
    context = fake_context(monkeypatch, {"inventor": 0.9}, generator=generator)
    state = await crag_graph.ainvoke({"question": "Where did Tesla live?"}, context=context)
    # It quotes the strips and reads beside them every chunk retrieved (what naive RAG reads).
    assert state["sources"][0]["doc_id"] == "tesla-kb"
    assert generator.background == ["tesla-kb", "paris"]
    context = fake_context(monkeypatch, {"Tesla died": 0.8}, generator=generator)
    await crag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    # A retrieval judged incorrect is not read again: only the page the strips came from.
    assert generator.background == ["tesla-web"]


async def test_nothing_relevant_anywhere_gives_up_honestly(crag_kbs, monkeypatch):
    context = fake_context(monkeypatch, {})
    state = await crag_graph.ainvoke({"question": "Who won the 1998 World Cup?"}, context=context)
    assert state["stop_reason"] == "no_relevant_knowledge"
    assert state["answer_kind"] == "not_found" and "on the web" in state["generation"]


async def test_unreachable_search_provider_degrades_to_no_external_knowledge(crag_kbs, monkeypatch):
    settings = get_settings()
    monkeypatch.setattr(settings, "searxng_base_url", "http://127.0.0.1:9")
    context = fake_context(monkeypatch, {"Tesla died": 0.8}, search_provider="searxng")
    events = [
        chunk
        async for chunk in crag_graph.astream(
            {"question": "When did Tesla die?"}, context=context, stream_mode="custom"
        )
    ]
    errors = [e for e in events if e.get("node") == "web_fallback" and "error" in e]
    assert errors and "searxng search failed" in errors[0]["error"]
    state = await crag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert state["stop_reason"] == "no_relevant_knowledge"
    assert any(s["summary"].startswith("no external knowledge") for s in state["steps"])


@pytest.mark.parametrize("graph", [crag_graph, self_crag_graph])
async def test_without_a_web_collection_a_give_up_does_not_claim_the_web(
    crag_kbs, monkeypatch, graph
):
    # The offline default searches a knowledge base as the web; none exists by that name.
    context = fake_context(monkeypatch, {}, web_kb="no-such-web")
    state = await graph.ainvoke({"question": "Who won the 1998 World Cup?"}, context=context)
    searched = next(s["summary"] for s in state["steps"] if s["node"] == "web_fallback")
    assert searched.startswith("no external knowledge (no web collection:")
    assert "'no-such-web' does not exist" in searched
    assert state["stop_reason"] == "no_relevant_knowledge"
    assert state["generation"] == "I could not find an answer in the knowledge base."


async def test_an_ambiguous_retrieval_without_a_web_refines_its_own_chunks(crag_kbs, monkeypatch):
    context = fake_context(monkeypatch, {"inventor": 0.5}, web_kb="no-such-web")
    state = await crag_graph.ainvoke({"question": "Tell me about Tesla"}, context=context)
    assert state["crag_action"] == "ambiguous"
    assert {s.metadata["doc_id"] for s in state["knowledge_strips"]} == {"tesla-kb"}
    assert state["stop_reason"] == "answered"


async def test_search_timeout_degrades_too(crag_kbs, monkeypatch):
    class Hanging:
        name = "hanging"

        async def search(self, query, k):
            await asyncio.sleep(10)

    monkeypatch.setattr("reflexrag.nodes.crag.get_search_provider", lambda name, kb: Hanging())
    monkeypatch.setattr(get_settings(), "search_timeout_s", 0.1)
    context = fake_context(monkeypatch, {"Tesla died": 0.8})
    state = await crag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert any("timed out" in s["summary"] for s in state["steps"])
    assert state["stop_reason"] == "no_relevant_knowledge"


async def test_misconfigured_provider_is_a_search_error():
    from reflexrag.providers.search import get_search_provider

    settings = get_settings()
    if settings.tavily_api_key is None:
        with pytest.raises(SearchError, match="TAVILY"):
            get_search_provider("tavily", "web")


async def test_self_crag_checks_usefulness_and_bounds_web_searches(crag_kbs, monkeypatch):
    context = fake_context(monkeypatch, {"Tesla died": 0.8}, useful=False, max_web_searches=2)
    state = await self_crag_graph.ainvoke({"question": "When did Tesla die?"}, context=context)
    assert nodes(state).count("web_fallback") == 2 and state["web_searches"] == 2
    assert nodes(state)[-1] == "give_up" and state["stop_reason"] == "max_retrieval_attempts"
