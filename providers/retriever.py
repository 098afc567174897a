"""A reflexrag knowledge base as a LangChain retriever, for use inside any LangChain or
LangGraph app (an LCEL chain, a tool, another agent's retrieval step).

    from reflexrag.providers.retriever import KnowledgeBaseRetriever

    retriever = KnowledgeBaseRetriever(kb="notes", k=6)
    retriever.invoke("When did Tesla die?")       # list[Document], best first
    await retriever.ainvoke("特斯拉哪一年去世？")    # the same, off the event loop

It searches exactly as the strategies' retrieve step does (hybrid by default, the same
filters), and each document's metadata carries its ``score`` (cosine), ``doc_id``, ``title``
and ``kb``.

The reverse, a strategy over your own retrieval: :func:`use_retriever` names a LangChain
retriever or vector store as a knowledge base, and a run whose context names it retrieves
through it instead of a reflexrag knowledge base.

    use_retriever("docs", my_vector_store)          # or my_vector_store.as_retriever(...)
    await graph.ainvoke({"question": "…"}, context={"kb": "docs"})
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Collection
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import Field

from reflexrag.providers.filters import parse_filters
from reflexrag.providers.knowledge_base import (
    Fusion,
    RetrievalMode,
    get_knowledge_base,
    search_knowledge_base,
    validate_kb_name,
)


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
        return search_knowledge_base(
            lambda verify: get_knowledge_base(self.kb or None, create=False, verify=verify),
            query,
            self.k,
            self.mode,
            parse_filters(self.filters),
            self.fusion,
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # Embedding and both indexes block: a worker thread keeps the event loop free.
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync()
        )


_external: dict[str, BaseRetriever | VectorStore] = {}
_external_lock = threading.Lock()


def use_retriever(name: str, source: BaseRetriever | VectorStore | None) -> None:
    """Runs whose context's ``kb`` is ``name`` retrieve through ``source`` (a LangChain
    retriever, or a vector store, searched for ``top_k`` chunks with their scores), in this
    process; None forgets it. Every strategy judges, answers from and cites what it returns
    as it would a knowledge base's chunks; a retriever decides its own ranking, so
    ``retrieval_mode``, ``fusion`` and ``filters`` do not apply to it."""
    validate_kb_name(name)
    if source is not None and not isinstance(source, BaseRetriever | VectorStore):
        raise TypeError(f"use_retriever needs a BaseRetriever or a VectorStore, not {source!r}")
    with _external_lock:
        if source is None:
            _external.pop(name, None)
        else:
            _external[name] = source


def external_source(name: str) -> BaseRetriever | VectorStore | None:
    """The retriever or vector store :func:`use_retriever` named ``name``, if any."""
    with _external_lock:
        return _external.get(name)


async def search_external(
    source: BaseRetriever | VectorStore, kb: str, query: str, k: int, exclude: Collection[str]
) -> list[Document]:
    """The first ``k`` documents ``source`` finds for ``query`` (not ``exclude``'s), as the
    strategies read chunks: each with a stable ``id`` and ``doc_id`` (its own, else its
    ``source``, else a digest of its text), a ``title`` and a ``score``."""
    if isinstance(source, VectorStore):
        scored = await source.asimilarity_search_with_score(query, k=k + len(exclude))
    else:
        scored = [(doc, None) for doc in await source.ainvoke(query)]
    found = []
    for doc, score in scored:
        chunk = as_chunk(doc, kb, score)
        if chunk.id not in exclude:
            found.append(chunk)
    return found[:k]


def as_chunk(doc: Document, kb: str, score: float | None) -> Document:
    metadata = dict(doc.metadata)
    digest = hashlib.sha1(doc.page_content.encode()).hexdigest()[:12]
    doc_id = str(metadata.get("doc_id") or metadata.get("source") or doc.id or f"{kb}-{digest}")
    metadata.setdefault("doc_id", doc_id)
    metadata.setdefault("title", str(metadata.get("source") or doc_id))
    metadata.setdefault("kb", kb)
    if score is not None:
        metadata["score"] = round(float(score), 4)
    metadata.setdefault("score", 0.0)
    return Document(
        id=str(doc.id) if doc.id else f"{doc_id}#{digest}",
        page_content=doc.page_content,
        metadata=metadata,
    )
