"""A knowledge base is a LangChain retriever inside someone else's chain."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from reflexrag.graphs import STRATEGIES
from reflexrag.providers.embeddings import get_embeddings
from reflexrag.providers.knowledge_base import UnknownKnowledgeBaseError
from reflexrag.providers.retriever import KnowledgeBaseRetriever, use_retriever
from reflexrag.server.runner import run_question
from reflexrag.state import Context


async def test_the_retriever_finds_what_the_knowledge_base_holds_in_a_chain(flow_kb):
    retriever = KnowledgeBaseRetriever(kb="flow", k=2)
    found = retriever.invoke("When did Tesla die?")
    assert len(found) == 2 and "1943" in found[0].page_content
    assert found[0].metadata["kb"] == "flow" and "score" in found[0].metadata
    # Composed with LCEL, asynchronously, as a LangChain app would use it.
    chain = retriever | RunnableLambda(lambda docs: docs[0].metadata["title"])
    assert await chain.ainvoke("When did Tesla die?") == found[0].metadata["title"]
    only_paris = KnowledgeBaseRetriever(kb="flow", k=4, filters={"title": "Paris"})
    assert {d.metadata["title"] for d in only_paris.invoke("capital")} == {"Paris"}


def test_an_unknown_knowledge_base_is_a_clear_error():
    with pytest.raises(UnknownKnowledgeBaseError, match="never-made"):
        KnowledgeBaseRetriever(kb="never-made").invoke("anything")


class FixedRetriever(BaseRetriever):
    """An app's own retriever: whatever it is asked, these documents."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents


async def test_every_strategy_runs_over_the_vector_store_an_app_already_has(isolated_data_dir):
    store = InMemoryVectorStore(get_embeddings())
    store.add_documents(
        [
            Document("Nikola Tesla died on 7 January 1943 in New York.", metadata={"source": "t"}),
            Document("Paris is the capital of France.", metadata={"source": "paris.md"}),
        ]
    )
    use_retriever("app-store", store)
    try:
        for strategy in STRATEGIES:
            result = await run_question(strategy, "When did Tesla die?", Context(kb="app-store"))
            assert "7 January 1943" in result.answer, (strategy, result.answer)
            assert result.sources[0]["doc_id"] == "t", strategy
    finally:
        use_retriever("app-store", None)


async def test_a_strategy_over_an_app_retriever_says_not_found_when_it_holds_no_answer(
    isolated_data_dir,
):
    off_topic = FixedRetriever(documents=[Document("Paris is the capital of France.")])
    use_retriever("app-retriever", off_topic)
    try:
        honest = await run_question("self_rag", "When did Tesla die?", Context(kb="app-retriever"))
        assert honest.answer_kind == "not_found", honest.answer
        naive = await run_question("naive", "When did Tesla die?", Context(kb="app-retriever"))
        assert naive.sources and naive.sources[0]["doc_id"].startswith("app-retriever-")
    finally:
        use_retriever("app-retriever", None)
    with pytest.raises(TypeError, match="BaseRetriever or a VectorStore"):
        use_retriever("x", lambda query: [])


async def test_the_python_api_in_the_readme(isolated_data_dir):
    from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base

    kb = get_knowledge_base("notes")
    kb.add([SourceDocument("tesla", "Nikola Tesla died on 7 January 1943.", {"title": "Tesla"})])
    assert kb.search("When did Tesla die?", 4)[0].metadata["doc_id"] == "tesla"
    result = (await run_question("self_rag", "When did Tesla die?", Context(kb="notes"))).to_json()
    assert "7 January 1943" in result["answer"] and result["sources"][0]["doc_id"] == "tesla"
    assert {"answer", "answer_kind", "confidence", "sources", "stop_reason"} <= set(result)
    assert kb.delete_documents(["tesla"]) == ["tesla"] and kb.documents() == []


@pytest.mark.parametrize("strategy", ["naive", "self_rag", "crag", "iterative"])
async def test_a_vector_store_down_for_a_moment_is_waited_for_not_a_failed_run(
    flow_kb, monkeypatch, strategy
):
    """Its first two searches meet a Chroma server that refuses connections (restarting): the
    searching node is run again after 1 and 2 s and the run answers; one that stays down ends
    the run with the reason."""
    import httpx

    from reflexrag.providers.knowledge_base import KnowledgeBase

    search, refusals = KnowledgeBase.search, [0]

    def restarting(self, *args, **kwargs):
        if refusals[0] < 2:
            refusals[0] += 1
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return search(self, *args, **kwargs)

    monkeypatch.setattr(KnowledgeBase, "search", restarting)
    result = await run_question(strategy, "When did Tesla die?", Context(kb="flow"))
    assert refusals == [2] and result.error is None
    assert "1943" in result.answer


async def test_a_vector_store_that_stays_down_fails_the_run_with_the_reason(flow_kb, monkeypatch):
    """After five tries over about 15 s."""
    import httpx

    from reflexrag.providers.knowledge_base import KnowledgeBase

    def down(self, *args, **kwargs):
        raise httpx.ConnectError("[Errno 111] Connection refused")

    monkeypatch.setattr(KnowledgeBase, "search", down)
    result = await run_question("naive", "When did Tesla die?", Context(kb="flow"))
    assert "cannot be reached" in (result.error or "") and "Connection refused" in result.error
