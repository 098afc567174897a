"""Turn files and URLs into :class:`SourceDocument` objects for ingestion.

Everything is read and validated before anything is written, so a bad input in a batch
leaves the knowledge base exactly as it was.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

from providers.knowledge_base import (
    IngestReport,
    KnowledgeBaseError,
    SourceDocument,
    get_knowledge_base,
)
from providers.settings import get_settings

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".jsonl")
_SKIPPED_HTML_TAGS = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK_HTML_TAGS = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "section"}


class _HTMLText(HTMLParser):
    """Collects visible text and the <title> of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.title = ""
        self._skip_depth = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIPPED_HTML_TAGS:
            self._skip_depth += 1
        elif tag in _BLOCK_HTML_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIPPED_HTML_TAGS and self._skip_depth:
            self._skip_depth -= 1
        elif tag in _BLOCK_HTML_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip_depth:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """Return (title, text) of an HTML document, one paragraph per line."""
    parser = _HTMLText()
    parser.feed(html)
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return parser.title.strip(), "\n\n".join(line for line in lines if line)


def markdown_title(markdown: str) -> tuple[str, str]:
    """Split a leading ``# Heading`` off as the title; the body keeps everything else."""
    lines = markdown.lstrip().splitlines()
    if lines and lines[0].startswith("# "):
        return lines[0][2:].strip(), "\n".join(lines[1:]).strip()
    return "", markdown


def _stable_id(prefix: str, key: str) -> str:
    return f"{prefix}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"


def load_jsonl(path: Path) -> list[SourceDocument]:
    """Rows with ``text`` (required), ``doc_id``, ``title``, ``lang``, ``source``, other scalars."""
    documents = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError as exc:
            raise KnowledgeBaseError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        text = row.get("text") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise KnowledgeBaseError(f"{path}:{number}: a row needs a non-empty 'text' field")
        doc_id = str(row.get("doc_id") or _stable_id(path.stem, text))
        metadata = {k: v for k, v in row.items() if k not in {"text", "doc_id"}}
        metadata.setdefault("title", doc_id)
        documents.append(SourceDocument(doc_id, text, metadata))
    return documents


def load_path(path: Path) -> list[SourceDocument]:
    """Load one file; raises :class:`KnowledgeBaseError` with a one-line reason."""
    if not path.exists():
        raise KnowledgeBaseError(f"no such file: {path}")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in SUPPORTED_SUFFIXES)
        return [doc for file in files for doc in load_path(file)]
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise KnowledgeBaseError(
            f"unsupported file type {suffix or '(none)'} for {path}: "
            f"use {', '.join(SUPPORTED_SUFFIXES)}"
        )
    if suffix == ".jsonl":
        return load_jsonl(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KnowledgeBaseError(f"{path} is not UTF-8 text") from None
    if suffix in {".html", ".htm"}:
        title, text = html_to_text(raw)
    elif suffix in {".md", ".markdown"}:
        title, text = markdown_title(raw)
    else:
        title, text = "", raw
    if not text.strip():
        raise KnowledgeBaseError(f"{path} has no text")
    source = str(path.resolve())
    metadata = {"title": title or path.stem, "source": source}
    return [SourceDocument(_stable_id(path.stem, source), text, metadata)]


def check_public_url(url: str) -> None:
    """Refuse URLs that resolve to loopback, private, link-local or reserved addresses."""
    parsed = urlparse(url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise KnowledgeBaseError(f"not an http(s) URL: {url}")
    try:
        infos = socket.getaddrinfo(parsed.hostname, parsed.port or 443, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise KnowledgeBaseError(f"could not resolve {parsed.hostname}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global or address.is_multicast:
            raise KnowledgeBaseError(
                f"refusing to fetch {url}: {parsed.hostname} is a private address "
                "(set REFLEXRAG_ALLOW_PRIVATE_URLS=true to allow it)"
            )


def load_url(
    url: str, allow_private: bool = False, timeout_s: float = 20.0
) -> list[SourceDocument]:
    """Fetch a web page (HTML or plain text) as one document, following up to 5 redirects."""
    target = url
    try:
        for _ in range(6):
            if not allow_private:
                check_public_url(target)
            response = httpx.get(target, timeout=timeout_s, follow_redirects=False)
            if not response.is_redirect:
                break
            target = str(response.next_request.url) if response.next_request else target
        else:
            raise KnowledgeBaseError(f"too many redirects fetching {url}")
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise KnowledgeBaseError(f"could not fetch {url}: {exc}") from None
    content_type = response.headers.get("content-type", "")
    if "html" in content_type:
        title, text = html_to_text(response.text)
    else:
        title, text = "", response.text
    if not text.strip():
        raise KnowledgeBaseError(f"{url} has no text")
    return [SourceDocument(_stable_id("url", url), text, {"title": title or url, "source": url})]


def load_sources(sources: list[str], allow_private_urls: bool = False) -> list[SourceDocument]:
    """Load every file, directory or URL; fails on the first bad one before anything is stored."""
    documents: list[SourceDocument] = []
    for source in sources:
        if source.startswith(("http://", "https://")):
            documents.extend(load_url(source, allow_private_urls))
        else:
            documents.extend(load_path(Path(source)))
    return documents


def sample_kb_documents() -> list[SourceDocument]:
    """The small bilingual knowledge base shipped with the package (it explains reflexrag).

    Ids come from the file names, not the install path, so every install shares them.
    """
    folder = Path(__file__).parent / "sample_kb"
    return [
        SourceDocument(f"sample:{path.stem}", doc.text, {**doc.metadata, "source": path.name})
        for path in sorted(folder.glob("*.md"))
        for doc in load_path(path)
    ]


def ensure_sample_kb(kb_name: str) -> IngestReport | None:
    """Fill the default knowledge base with the bundled sample documents the first time."""
    if kb_name != get_settings().default_kb:
        return None
    kb = get_knowledge_base(kb_name)
    if kb.count():
        return None
    return kb.add(sample_kb_documents())
