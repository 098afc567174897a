"""Turn files and URLs into :class:`SourceDocument` objects for ingestion.

Everything is read and validated before anything is written, so a bad input in a batch
leaves the knowledge base exactly as it was.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import socket
import tempfile
import threading
import time
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import simplemma
import yaml

from reflexrag.providers.knowledge_base import (
    METADATA_TYPES,
    IngestLimitError,
    KnowledgeBase,
    KnowledgeBaseError,
    SourceDocument,
    get_knowledge_base,
)
from reflexrag.providers.settings import get_settings
from reflexrag.providers.text import is_chinese, reason_of

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx", ".jsonl")
_SKIPPED_HTML_TAGS = {
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "head",
    "nav",
    "footer",
}
"""Not the page's text: code, metadata, and the site's navigation and footer (an address or a
copyright line on every page would be retrieved for any question about the site)."""
_BLOCK_HTML_TAGS = {"p", "div", "br", "li", "tr", "section", "pre", "table", "blockquote"}
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_FRONT_MATTER_RE = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
# MkDocs / Docusaurus markers that are layout, not text: admonitions, tabs, fenced divs.
_MARKUP_LINE_RE = re.compile(r'^\s*(!!!|\?\?\?\+?|===\s*"|:::)\S*.*$', re.MULTILINE)

# mkdocstrings' cross-references, ``@[PostgresSaver][PostgresSaver]``: the words they show.
_AUTOREF_RE = re.compile(r"@\[([^\[\]\n]+)\]\[[^\[\]\n]*\]")
_TAB_RE = re.compile(r'^(?P<indent>[ \t]*)===\+?\s*"')

Sections = list[tuple[str, str]]


def first_tabs(markdown: str) -> str:
    """MkDocs Material content tabs (``=== "Python"`` / ``=== "JS"``, each tab's body indented
    under its marker) reduced to the first tab of each group, dedented: the variants say the
    same thing in another language, and kept together they repeat every paragraph."""
    out: list[str] = []
    group_indent: int | None = None  # inside a tab group: its markers' indentation
    keeping = False
    for line in markdown.splitlines():
        tab = _TAB_RE.match(line)
        indent = len(line) - len(line.lstrip())
        if tab:
            keeping = group_indent is None or len(tab["indent"]) != group_indent
            group_indent = len(tab["indent"])
            continue
        if group_indent is not None and line.strip() and indent <= group_indent:
            group_indent, keeping = None, False  # the group ended with this line
        if group_indent is None:
            out.append(line)
        elif keeping:
            out.append(line[group_indent + 4 :] if line.strip() else "")
    return "\n".join(out)


class _Outline:
    """Text gathered under the current heading path, one section per heading."""

    def __init__(self) -> None:
        self.path: list[tuple[int, str]] = []
        self.sections: Sections = []
        self.first_h1 = ""
        self._lines: list[str] = []

    def heading(self, level: int, text: str) -> None:
        self.flush()
        self.path = [(lvl, name) for lvl, name in self.path if lvl < level] + [(level, text)]
        if level == 1 and not self.first_h1:
            self.first_h1 = text

    def add(self, text: str) -> None:
        self._lines.append(text)

    def flush(self) -> None:
        body = "\n\n".join(line for line in self._lines if line.strip())
        if body.strip():
            self.sections.append((" › ".join(name for _, name in self.path), body))
        self._lines = []

    def result(self) -> Sections:
        self.flush()
        return self.sections


class _HTMLText(HTMLParser):
    """Visible text of an HTML page by section (h1-h6), and its <title>."""

    def __init__(self) -> None:
        super().__init__()
        self.outline = _Outline()
        self.title = ""
        self._parts: list[str] = []
        self._heading: tuple[int, list[str]] | None = None
        self._skip_depth = 0
        self._in_title = False
        self._pre_depth = 0
        self._cells = 0

    def _paragraph(self) -> None:
        text = "".join(self._parts)
        self._parts = []
        if self._pre_depth:
            self.outline.add(text.strip("\n"))
        elif text.split():
            self.outline.add(" ".join(text.split()))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIPPED_HTML_TAGS:
            self._skip_depth += 1
        elif tag in _HEADINGS and not self._skip_depth:
            self._paragraph()
            self._heading = (_HEADINGS[tag], [])
        elif tag in _BLOCK_HTML_TAGS:
            self._paragraph()
            self._pre_depth += tag == "pre"
            self._cells = 0
        elif tag in ("td", "th"):
            # A table row reads as one line, its cells apart.
            self._parts.append(" | " if self._cells else "")
            self._cells += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIPPED_HTML_TAGS and self._skip_depth:
            self._skip_depth -= 1
        elif tag in _HEADINGS and self._heading is not None:
            level, parts = self._heading
            self._heading = None
            self.outline.heading(level, " ".join("".join(parts).split()))
        elif tag in _BLOCK_HTML_TAGS:
            self._paragraph()
            self._pre_depth -= tag == "pre" and self._pre_depth > 0

    def close(self) -> None:
        super().close()
        self._paragraph()  # text after the last block tag

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip_depth:
            return
        elif self._heading is not None:
            self._heading[1].append(data)
        else:
            self._parts.append(data)


def html_sections(html: str) -> tuple[str, Sections]:
    """(title, sections) of an HTML document: visible text, one section per heading, code in
    <pre> kept line by line; the first <h1> stands in for a missing <title>."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    sections = parser.outline.result()
    return " ".join(parser.title.split()) or parser.outline.first_h1, sections


def front_matter(markdown: str) -> tuple[dict[str, Any], str]:
    """A Markdown document's YAML front matter (empty when it has none or it does not parse)
    and the text after it."""
    front = _FRONT_MATTER_RE.match(markdown)
    if front is None:
        return {}, markdown
    try:
        meta = yaml.safe_load(front.group(1))
    except yaml.YAMLError:
        meta = None
    return (meta if isinstance(meta, dict) else {}), markdown[front.end() :]


def markdown_sections(markdown: str) -> tuple[str, Sections, dict[str, Any]]:
    """(title, sections, front matter) of a Markdown document, parsed by markdown-it-py: front
    matter gives the title (or the first ``#`` heading does), headings become section paths,
    links and emphasis become their text, tables become rows, code blocks stay code, and
    MkDocs-style markers (``!!! note``, ``=== "Python"``, ``:::python``) are dropped."""
    from markdown_it import MarkdownIt

    meta, markdown = front_matter(markdown)
    title = meta["title"].strip() if isinstance(meta.get("title"), str) else ""
    markdown = _AUTOREF_RE.sub(r"\1", first_tabs(markdown))
    html = MarkdownIt("commonmark").enable("table").render(_MARKUP_LINE_RE.sub("", markdown))
    heading_title, sections = html_sections(html)
    return title or heading_title, sections, meta


class _TextBudget:
    """Counts the characters read from one document and stops at the cap, so an input that
    expands (a stream bomb, a zip of one huge text node) is refused before it is all read."""

    def __init__(self, name: str) -> None:
        self.name, self.limit, self.used = name, get_settings().max_document_chars, 0

    def take(self, text: str) -> str:
        self.used += len(text)
        if self.used > self.limit:
            raise IngestLimitError(
                f"{self.name} holds more than {self.limit} characters, the cap per document "
                "(REFLEXRAG_MAX_DOCUMENT_CHARS)"
            )
        return text


def _unreadable(name: str, what: str, exc: Exception) -> KnowledgeBaseError:
    # A parser meeting a malformed or hostile file can raise nearly anything (pypdf's own
    # errors, lxml's XMLSyntaxError for an undefined entity or billion laughs, KeyError,
    # RecursionError): each means the file cannot be read, a 422, never a 500.
    return KnowledgeBaseError(f"{name} is not a readable {what} ({reason_of(exc, 200)})")


def pdf_sections(path: Path, name: str) -> tuple[str, Sections]:
    """(title, one section per page ``page N``) of a text PDF, read by pypdf: the title is
    the PDF's own (its metadata), and each page's text is :func:`clean_pdf_text`. At most
    ``max_pdf_pages`` pages and ``max_document_chars`` characters are read."""
    from pypdf import PdfReader

    budget = _TextBudget(name)
    try:
        reader = PdfReader(path)
        if (count := len(reader.pages)) > (most := get_settings().max_pdf_pages):
            raise IngestLimitError(
                f"{name} has {count} pages, over the cap of {most} (REFLEXRAG_MAX_PDF_PAGES)"
            )
        pages = [clean_pdf_text(budget.take(page.extract_text() or "")) for page in reader.pages]
        title = (reader.metadata.title if reader.metadata else None) or ""
    except IngestLimitError:
        raise
    except Exception as exc:
        raise _unreadable(name, "PDF", exc) from None
    sections = [(f"page {n}", text) for n, text in enumerate(pages, start=1) if text]
    title = clean_pdf_text(str(title)).replace("\n", " ")
    return title or (first_heading(sections[0][1]) if sections else ""), sections


def first_heading(page: str) -> str:
    """The first line of a page when it reads as a heading: a line of its own (the layout
    did not wrap it into the next), of at most 12 words, ending no sentence."""
    first, _, rest = page.partition("\n")
    if not rest or _SENTENCE_END_RE.search(first) or len(first.split()) > 12:
        return ""
    return first if len(first) <= 120 else ""


# Code points PDF fonts map glyphs to that are not the characters a reader types: Kangxi
# radicals (⼀ for 一), CJK compatibility ideographs, Latin ligatures (ﬁ for fi). Their
# compatibility decomposition (NFKC) is the character meant; other text is left as it is,
# since NFKC would also turn Chinese full-width punctuation into ASCII.
_PDF_LOOKALIKE_RE = re.compile("[\u2f00-\u2fdf\uf900-\ufaff\ufb00-\ufb06]")
_SENTENCE_END_RE = re.compile(r"[.!?:;。！？：；)\]）」』”\"']$")
_WRAPPED_SHARE = 0.6
"""A line at least this share of a full line's length (the page's 75th percentile), not
ending a sentence, was wrapped by the layout: the next line continues it."""


_BROKEN_WORD_RE = re.compile(r"([A-Za-z]+)-$")
_WORD_START_RE = re.compile(r"[a-z]+")


def _split_word(previous: str, line: str) -> bool:
    """Whether the hyphen ending ``previous`` only split a word at the line's end
    ("biode-" + "gradable"): its first part is no English word and the two together are one,
    in simplemma's lexicon. A compound whose first part is a word keeps its hyphen
    ("self-" + "cleaning", "well-" + "known")."""
    head, tail = _BROKEN_WORD_RE.search(previous), _WORD_START_RE.match(line)
    if head is None or tail is None:
        return False
    first = head.group(1).lower()
    return not simplemma.is_known(first, lang="en") and simplemma.is_known(
        first + tail.group(), lang="en"
    )


def clean_pdf_text(text: str) -> str:
    """A PDF page's extracted text as a reader sees it: look-alike code points replaced by
    the characters meant, and lines the layout wrapped joined back into their sentence (with
    a space, or nothing between Chinese characters, or by dropping the hyphen that split a
    word); a short line or one ending a sentence keeps its break (a heading, a paragraph's
    last line)."""
    text = _PDF_LOOKALIKE_RE.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    lines = [line.strip() for line in text.splitlines()]
    lengths = sorted(len(line) for line in lines if line)
    if not lengths:
        return ""
    typical = lengths[(3 * len(lengths)) // 4]  # a full line's length: wrapped lines fill it
    out: list[str] = []
    for line in lines:
        previous = out[-1] if out else ""
        wrapped = (
            line
            and previous
            and len(previous) >= _WRAPPED_SHARE * typical
            and not _SENTENCE_END_RE.search(previous)
        )
        if wrapped:
            # Nothing between Chinese characters, nor after a hyphen the line broke at
            # ("self-" + "correcting"); a space elsewhere.
            joined_tight = previous.endswith("-") or (
                is_chinese(previous[-1]) and is_chinese(line[0])
            )
            between = "" if joined_tight else " "
            if _split_word(previous, line):
                previous = previous[:-1]
            out[-1] = previous + between + line
        else:
            out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def docx_sections(path: Path, name: str) -> tuple[str, Sections]:
    """(title, sections) of a Word document: its "Title" paragraph, paragraphs by their
    Heading styles, and its tables' rows (python-docx)."""
    import docx

    budget = _TextBudget(name)
    try:
        document = docx.Document(str(path))
        outline, title = _Outline(), ""
        for paragraph in document.paragraphs:
            style = paragraph.style.name if paragraph.style is not None else ""
            level = re.fullmatch(r"Heading (\d)", style)
            text = budget.take(paragraph.text.strip())
            if style == "Title":
                title = title or text
            elif level:
                outline.heading(int(level.group(1)), text)
            elif text:
                outline.add(text)
        for table in document.tables:
            for row in table.rows:
                outline.add(budget.take(" | ".join(cell.text.strip() for cell in row.cells)))
    except IngestLimitError:
        raise
    except Exception as exc:
        raise _unreadable(name, ".docx file", exc) from None
    return title, outline.result()


def sectioned_document(
    doc_id: str, sections: Sections, metadata: dict[str, Any], name: str
) -> SourceDocument:
    """A document from its sections (kept only when some have a heading); ``name`` says
    which input had no text."""
    text = "\n\n".join(body for _, body in sections)
    if not text.strip():
        raise KnowledgeBaseError(f"{name} has no text")
    structured = sections if any(heading for heading, _ in sections) else []
    return SourceDocument(doc_id, text, metadata, structured)


def _stable_id(prefix: str, key: str) -> str:
    return f"{prefix}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"


_BYLINE_WHO = ("author", "publisher")
_BYLINE_WHEN = ("published_at", "published", "date")


def spoken_date(value: Any) -> str:
    """An ISO date or timestamp as a reader (and a question) says it: "2023-10-22T18:00:00Z"
    → "October 22, 2023"; anything else as it is."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return f"{when:%B} {when.day}, {when.year}"


def byline(row: Mapping[str, Any]) -> str:
    """Who published a document and when ("The Verge, September 26, 2023"), from a JSONL
    row's (or Markdown front matter's) fields or a nested metadata object's, where ``source``
    names the publisher (at the top level it says which collection the row came from)."""
    nested = [value for value in row.values() if isinstance(value, dict)]
    named = [(row, _BYLINE_WHO), *((fields, (*_BYLINE_WHO, "source")) for fields in nested)]
    who = _first(fields.get(key) for fields, keys in named for key in keys)
    when = _first(fields.get(key) for fields in (row, *nested) for key in _BYLINE_WHEN)
    return ", ".join(part for part in (who, when and spoken_date(when)) if part)


def _first(values: Iterable[Any]) -> str:
    # YAML front matter reads ``date: 2023-10-07`` as a date, not a string.
    given = (v for v in values if isinstance(v, str | int | date) and not isinstance(v, bool))
    return next((text for text in map(str.strip, map(str, given)) if text), "")


def load_jsonl(path: Path) -> list[SourceDocument]:
    """Rows with ``text`` (required), ``doc_id``, ``title``, ``lang``, ``source``, other
    scalars, and nested metadata objects (kept as ``meta.source`` …). Who published a
    document and when becomes its ``byline``, read with its title."""
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
        _TextBudget(f"{path}:{number}").take(text)
        doc_id = str(row.get("doc_id") or _stable_id(path.stem, text))
        metadata: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, dict):
                metadata.update(
                    {f"{key}.{k}": v for k, v in value.items() if isinstance(v, METADATA_TYPES)}
                )
            elif key not in {"text", "doc_id"}:
                metadata[key] = value
        metadata.setdefault("title", doc_id)
        if said := byline(row):
            metadata["byline"] = said
        documents.append(SourceDocument(doc_id, text, metadata))
    return documents


def load_path(path: Path, display_name: str | None = None) -> list[SourceDocument]:
    """Load one file, or every supported file under a folder; raises
    :class:`KnowledgeBaseError` with a one-line reason. ``display_name`` stands for the file's
    name in titles (uploads are read from a temporary path)."""
    if not path.exists():
        raise KnowledgeBaseError(f"no such file: {path}")
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.suffix.lower() in SUPPORTED_SUFFIXES and p.is_file()
        )
        return [doc for file in files for doc in load_path(file)]
    if not path.is_file():
        # A FIFO or a device would block or never end.
        raise KnowledgeBaseError(f"{path} is not a regular file")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise KnowledgeBaseError(
            f"unsupported file type {suffix or '(none)'} for {path}: "
            f"use {', '.join(SUPPORTED_SUFFIXES)}"
        )
    if suffix == ".jsonl":
        return load_jsonl(path)
    name = display_name or str(path)
    title, sections, said = "", [], ""
    if suffix == ".pdf":
        title, sections = pdf_sections(path, name)
    elif suffix == ".docx":
        title, sections = docx_sections(path, name)
    else:
        try:
            raw = _TextBudget(name).take(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise KnowledgeBaseError(f"{name} is not UTF-8 text") from None
        if suffix in {".html", ".htm"}:
            title, sections = html_sections(raw)
        elif suffix in {".md", ".markdown"}:
            title, sections, front = markdown_sections(raw)
            said = byline(front)
        elif raw.strip():
            sections = [("", raw)]
    source = display_name or str(path.resolve())
    metadata = {"title": title or Path(display_name or path).stem, "source": source}
    if said:
        metadata["byline"] = said
    return [sectioned_document(_stable_id(path.stem, source), sections, metadata, name)]


# IPv6 forms that carry an IPv4 address: NAT64 (RFC 6052) and 6to4 (RFC 3056).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
# Local-use NAT64 (RFC 8215): translated inside one operator's network, so never public.
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Globally routable, counting the IPv4 address inside NAT64, 6to4 and mapped forms."""
    if address.is_multicast or not address.is_global or address in _LOCAL_NAT64:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        elif address in _SIX_TO_FOUR and embedded is None:
            return False
        if embedded is not None:
            return is_public_address(embedded)
    return True


def check_url_syntax(url: str) -> httpx.URL:
    """An absolute http(s) URL with a host and a valid port, or a one-line reason."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise KnowledgeBaseError(f"only http(s) URLs can be fetched, not {str(url)[:200]!r}")
    try:
        parsed = httpx.URL(url)
        parsed.port  # noqa: B018 - raises on a bad port
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise KnowledgeBaseError(f"not a valid URL: {url[:200]!r} ({exc})") from None
    if not parsed.host:
        raise KnowledgeBaseError(f"not a valid URL (no host): {url[:200]!r}")
    if len(parsed.host) > 253 or any(len(label) > 63 for label in parsed.host.split(".")):
        raise KnowledgeBaseError(f"not a valid URL (host name too long): {url[:200]!r}")
    return parsed


def resolve_public_address(url: httpx.URL) -> str:
    """Resolve the URL's host once and return an address to connect to; every address the
    name has must be public, so no answer can point the fetch at a private one."""
    try:
        infos = socket.getaddrinfo(
            url.host, url.port or (443 if url.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except (socket.gaierror, UnicodeError, OSError):
        raise KnowledgeBaseError(f"could not resolve {url.host}") from None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not addresses or not all(is_public_address(a) for a in addresses):
        raise KnowledgeBaseError(
            f"refusing to fetch {url}: {url.host} is a private address "
            "(set REFLEXRAG_ALLOW_PRIVATE_URLS=true to allow it)"
        )
    return str(addresses[0])


def fetch_url(
    url: str,
    allow_private: bool = False,
    max_bytes: int = 10_000_000,
    deadline_s: float = 20.0,
    transport: httpx.BaseTransport | None = None,
) -> tuple[str, bytes, str]:
    """GET ``url`` (following up to 5 redirects) and return (content type, body, charset to
    decode it with). Without ``allow_private`` each hop connects to the address that was
    checked, not to a second resolution of the name (DNS rebinding). The body is capped at
    ``max_bytes`` and the whole fetch, headers included, at ``deadline_s`` (reads of at
    most 5 s each)."""
    deadline = time.monotonic() + deadline_s
    target = check_url_syntax(url)
    with httpx.Client(transport=transport, follow_redirects=False) as client:
        # httpx times each read, not the whole: a server sending its headers a byte at a time
        # never trips a read timeout. At the deadline the client is closed under the fetch,
        # which fails the read in progress.
        watchdog = threading.Timer(deadline_s, client.close)
        watchdog.daemon = True
        watchdog.start()
        try:
            return _fetch(client, target, url, allow_private, max_bytes, deadline)
        except (httpx.HTTPError, RuntimeError) as exc:
            if time.monotonic() >= deadline:
                raise KnowledgeBaseError(f"fetching {url} took longer than allowed") from None
            if isinstance(exc, RuntimeError):
                raise
            raise KnowledgeBaseError(f"could not fetch {url}: {exc}") from None
        finally:
            watchdog.cancel()


def _fetch(
    client: httpx.Client,
    target: httpx.URL,
    url: str,
    allow_private: bool,
    max_bytes: int,
    deadline: float,
) -> tuple[str, bytes, str]:
    for _ in range(6):
        request = client.build_request("GET", target, timeout=_remaining(deadline, url))
        if not allow_private:
            address = resolve_public_address(target)
            request.url = target.copy_with(host=address)
            request.headers["Host"] = target.netloc.decode("ascii")
            request.extensions["sni_hostname"] = target.host
        response = client.send(request, stream=True)
        try:
            if response.is_redirect:
                location = response.headers.get("location", "")
                target = check_url_syntax(str(target.join(location)))
                continue
            if response.status_code >= 400:
                raise KnowledgeBaseError(f"could not fetch {url}: HTTP {response.status_code}")
            body = _read_capped(response, url, max_bytes, deadline)
            charset = response.charset_encoding or "utf-8"
            return response.headers.get("content-type", ""), body, charset
        finally:
            response.close()
    raise KnowledgeBaseError(f"too many redirects fetching {url}")


def _read_capped(response: httpx.Response, url: str, max_bytes: int, deadline: float) -> bytes:
    body = bytearray()
    for part in response.iter_bytes():
        body += part
        if len(body) > max_bytes:
            raise KnowledgeBaseError(f"{url} is larger than {max_bytes} bytes")
        _remaining(deadline, url)
    return bytes(body)


def _remaining(deadline: float, url: str) -> httpx.Timeout:
    left = deadline - time.monotonic()
    if left <= 0:
        raise KnowledgeBaseError(f"fetching {url} took longer than allowed")
    return httpx.Timeout(min(5.0, left))


def load_url(
    url: str, allow_private: bool = False, max_bytes: int = 10_000_000
) -> list[SourceDocument]:
    """A web page as one document, read by what its content type says it is: a PDF, HTML,
    Markdown, or plain text."""
    deadline = get_settings().url_fetch_deadline_s
    content_type, body, charset = fetch_url(url, allow_private, max_bytes, deadline)
    kind = content_type.split(";")[0].strip().lower()
    path = urlsplit(url).path.lower()
    if kind == "application/pdf" or (kind == "application/octet-stream" and path.endswith(".pdf")):
        with tempfile.TemporaryDirectory() as folder:
            pdf = Path(folder) / "fetched.pdf"
            pdf.write_bytes(body)
            title, sections = pdf_sections(pdf, url)
    elif "html" in kind:
        title, sections = html_sections(body.decode(charset, "replace"))
    elif kind in ("text/markdown", "text/x-markdown") or path.endswith((".md", ".markdown")):
        title, sections, _ = markdown_sections(body.decode(charset, "replace"))
    else:
        title, sections = "", [("", body.decode(charset, "replace"))]
    metadata = {"title": title or url, "source": url}
    return [sectioned_document(_stable_id("url", url), sections, metadata, url)]


def load_urls(
    urls: list[str], allow_private: bool = False, max_bytes: int = 10_000_000
) -> list[SourceDocument]:
    """Fetch every URL (http/https only); the first failure stops before anything is stored."""
    return [doc for url in urls for doc in load_url(url, allow_private, max_bytes)]


def load_sources(sources: list[str], allow_private_urls: bool = False) -> list[SourceDocument]:
    """Load every file, directory or URL (the CLI's inputs); fails on the first bad one
    before anything is stored."""
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


def ensure_sample_kb(kb_name: str, verify: bool = True) -> KnowledgeBase | None:
    """The default knowledge base, filled with the bundled sample documents the first time
    it is opened empty; None for any other name. ``verify``: as :func:`get_knowledge_base`."""
    if kb_name != get_settings().default_kb:
        return None
    kb = get_knowledge_base(kb_name, verify=verify)
    if not kb.holds_chunks():
        kb.add(sample_kb_documents())
    return kb
