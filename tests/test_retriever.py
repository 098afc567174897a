"""A knowledge base is a LangChain retriever inside someone else's chain."""

from __future__ import annotations

import pytest
from langchain_core.runnables import RunnableLambda

from reflexrag.providers.knowledge_base import UnknownKnowledgeBaseError
from reflexrag.providers.retriever import KnowledgeBaseRetriever


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
