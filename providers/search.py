"""Web search providers for CRAG's fallback, behind one interface.

``local`` (the offline default) searches a separate knowledge base as if it were a web index;
``reflexrag ingest --kb web`` fills it. ``tavily``, ``duckduckgo`` and ``searxng`` call the
network with a timeout. Every provider returns documents tagged ``origin="web"``; any failure
raises :class:`SearchError`, which the ``web_fallback`` node turns into "no external knowledge".
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
from typing import Protocol

import httpx
from langchain_core.documents import Document

from reflexrag.providers.knowledge_base import UnknownKnowledgeBaseError, get_knowledge_base
from reflexrag.providers.settings import get_settings


class SearchError(RuntimeError):
    """A search that failed or timed out."""


class SearchProvider(Protocol):
    name: str

    async def search(self, query: str, k: int) -> list[Document]: ...


def web_document(url: str, title: str, text: str, score: float = 0.0) -> Document:
    doc_id = f"web:{hashlib.sha1(url.encode()).hexdigest()[:12]}"
    return Document(
        id=doc_id,
        page_content=text,
        metadata={"doc_id": doc_id, "title": title, "source": url, "origin": "web", "score": score},
    )


class LocalWebSearch:
    """A knowledge base searched like a web index (offline stand-in for the internet); when
    that knowledge base does not exist there is no web to search (a :class:`SearchError`, so
    nothing claims the web was searched)."""

    name = "local"

    def __init__(self, kb_name: str) -> None:
        self.kb_name = kb_name

    async def search(self, query: str, k: int) -> list[Document]:
        try:
            kb = await asyncio.to_thread(get_knowledge_base, self.kb_name, False)
        except UnknownKnowledgeBaseError:
            raise SearchError(
                f"no web collection: knowledge base {self.kb_name!r} does not exist; "
                f"reflexrag ingest --kb {self.kb_name} FILES fills it"
            ) from None
        documents = await asyncio.to_thread(kb.search, query, k)
        for doc in documents:
            doc.metadata["origin"] = "web"
        return documents


class _HTTPSearch:
    name = "http"

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def _request(self, method: str, url: str, **kwargs: object) -> httpx.Response:
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=True) as http:
                response = await http.request(method, url, **kwargs)
                response.raise_for_status()
                return response
        except (httpx.HTTPError, OSError) as exc:
            raise SearchError(f"{self.name} search failed: {exc!r}") from None


class TavilySearch(_HTTPSearch):
    name = "tavily"

    def __init__(self, api_key: str, timeout_s: float) -> None:
        super().__init__(timeout_s)
        self.api_key = api_key

    async def search(self, query: str, k: int) -> list[Document]:
        response = await self._request(
            "POST",
            "https://api.tavily.com/search",
            json={"api_key": self.api_key, "query": query, "max_results": k},
        )
        return [
            web_document(
                r.get("url", ""),
                r.get("title", ""),
                r.get("content", ""),
                float(r.get("score") or 0.0),
            )
            for r in response.json().get("results", [])
            if r.get("content")
        ][:k]


class SearxngSearch(_HTTPSearch):
    name = "searxng"

    def __init__(self, base_url: str, timeout_s: float) -> None:
        super().__init__(timeout_s)
        self.base_url = base_url.rstrip("/")

    async def search(self, query: str, k: int) -> list[Document]:
        response = await self._request(
            "GET", f"{self.base_url}/search", params={"q": query, "format": "json"}
        )
        return [
            web_document(r.get("url", ""), r.get("title", ""), r.get("content", ""))
            for r in response.json().get("results", [])
            if r.get("content")
        ][:k]


_DDG_RESULT_RE = re.compile(
    r'class="result__a"[^>]*href="(?P<url>[^"]+)"[^>]*>(?P<title>.*?)</a>.*?'
    r'class="result__snippet"[^>]*>(?P<snippet>.*?)</a>',
    re.DOTALL,
)


class DuckDuckGoSearch(_HTTPSearch):
    name = "duckduckgo"

    async def search(self, query: str, k: int) -> list[Document]:
        response = await self._request(
            "POST",
            "https://html.duckduckgo.com/html/",
            data={"q": query},
            headers={"User-Agent": "reflexrag"},
        )

        def clean(fragment: str) -> str:
            return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()

        return [
            web_document(match["url"], clean(match["title"]), clean(match["snippet"]))
            for match in _DDG_RESULT_RE.finditer(response.text)
        ][:k]


def get_search_provider(name: str, web_kb: str) -> SearchProvider:
    """The configured provider; a network one without its settings is a clear error."""
    settings = get_settings()
    if name == "local":
        return LocalWebSearch(web_kb)
    if name == "tavily":
        if not settings.tavily_api_key:
            raise SearchError("search_provider=tavily needs REFLEXRAG_TAVILY_API_KEY")
        return TavilySearch(settings.tavily_api_key, settings.search_timeout_s)
    if name == "searxng":
        if not settings.searxng_base_url:
            raise SearchError("search_provider=searxng needs REFLEXRAG_SEARXNG_BASE_URL")
        return SearxngSearch(settings.searxng_base_url, settings.search_timeout_s)
    if name == "duckduckgo":
        return DuckDuckGoSearch(settings.search_timeout_s)
    raise SearchError(f"unknown search provider {name!r}")


async def search_with_timeout(provider: SearchProvider, query: str, k: int) -> list[Document]:
    """Run a search bounded by the configured timeout; failures become :class:`SearchError`."""
    try:
        return await asyncio.wait_for(provider.search(query, k), get_settings().search_timeout_s)
    except TimeoutError:
        raise SearchError(f"{provider.name} search timed out") from None
