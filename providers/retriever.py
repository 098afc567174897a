"""A reflexrag knowledge base as a LangChain retriever, for use inside any LangChain or
LangGraph app (an LCEL chain, a tool, another agent's retrieval step).

    from reflexrag.providers.retriever import KnowledgeBaseRetriever

    retriever = KnowledgeBaseRetriever(kb="notes", k=6)
    retriever.invoke("When did Tesla die?")       # list[Document], best first
    await retriever.ainvoke("特斯拉哪一年去世？")    # the same, off the event loop

It searches exactly as the strategies' retrieve step does (hybrid by default, the same
filters), and each document's metadata carries its ``score`` (cosine), ``doc_id``, ``title``
and ``kb``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from reflexrag.providers.filters import parse_filters
from reflexrag.providers.knowledge_base import Fusion, RetrievalMode, get_knowledge_base


class KnowledgeBaseRetriever(BaseRetriever):
    """Chunks of a reflexrag knowledge base for a query."""

    kb: str = ""
    """Knowledge base name (default: the settings' ``default_kb``); it must exist."""
    k: int = Field(default=4, ge=1, le=50)
    """Chunks returned."""
    mode: RetrievalMode = "hybrid"
    fusion: Fusion = "score"
    filters: dict[str, Any] | None = None
    """Metadata filters, as a run's ``Context.filters`` takes them."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        knowledge_base = get_knowledge_base(self.kb or None, create=False)
        return knowledge_base.search(
            query, self.k, self.mode, parse_filters(self.filters), self.fusion
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # Embedding and both indexes block: a worker thread keeps the event loop free.
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync()
        )
