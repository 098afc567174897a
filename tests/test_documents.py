"""Real documents: Markdown, HTML, PDF and Word files become clean text by section, and their
chunks carry the section heading (tests make their own small files)."""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import docx
import pytest

from reflexrag.benchmarks.services import minimal_pdf
from reflexrag.providers.knowledge_base import (
    VECTOR_INDEX,
    IngestLimitError,
    KnowledgeBaseError,
    SourceDocument,
    get_knowledge_base,
)
from reflexrag.providers.loaders import clean_pdf_text, load_path
from reflexrag.providers.settings import get_settings

LANGGRAPH_STYLE = """---
title: Persistence
search:
  boost: 2
---
# Persistence in LangGraph

LangGraph has a built-in persistence layer, implemented through **checkpointers**. See the
[how-to guide](../how-tos/persistence.md) for details.

!!! note "Storage"
    Checkpoints are saved to a thread.

## Threads

=== "Python"

    A thread is a unique ID assigned to each checkpoint, passed to `.invoke` in the config.

=== "JavaScript"

    A thread is a unique ID assigned to each checkpoint, passed to `.invoke` in the config.

Save them with @[PostgresSaver][PostgresSaver] or `MemorySaver`.

| Saver | Package |
|---|---|
| SQLite | langgraph-checkpoint-sqlite |

```python
graph.compile(checkpointer=saver)
```
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_markdown_is_parsed_to_clean_text_with_sections(tmp_path):
    (doc,) = load_path(write(tmp_path / "persistence.md", LANGGRAPH_STYLE))
    assert doc.metadata["title"] == "Persistence"
    headings = [heading for heading, _ in doc.sections]
    assert headings == ["Persistence in LangGraph", "Persistence in LangGraph › Threads"]
    for markup in ("search:", "boost", "**", "](", "!!!", '=== "', "|---|", "```"):
        assert markup not in doc.text, markup
    assert "implemented through checkpointers. See the how-to guide for details." in doc.text
    assert "SQLite | langgraph-checkpoint-sqlite" in doc.text  # a table row per line
    assert "graph.compile(checkpointer=saver)" in doc.text  # code stays code
    # One tab of each group (the variants repeat each other); inline code and the words of
    # a cross-reference kept.
    assert doc.text.count("A thread is a unique ID") == 1
    assert "passed to .invoke in the config." in doc.text
    assert "Save them with PostgresSaver or MemorySaver." in doc.text


def test_markdown_front_matter_gives_the_byline(tmp_path):
    page = write(
        tmp_path / "post.md",
        "---\ntitle: Search deals\nauthor: Jane Roe\ndate: 2023-10-07\n---\n# Search\n\nText.\n",
    )
    (doc,) = load_path(page)
    assert doc.metadata["title"] == "Search deals"
    # YAML reads the unquoted date as a date; it is spoken as a question would say it.
    assert doc.metadata["byline"] == "Jane Roe, October 7, 2023"
    (plain,) = load_path(write(tmp_path / "plain.md", "# Plain\n\nText.\n"))
    assert "byline" not in plain.metadata


def test_html_sections_follow_its_headings_and_skip_navigation(tmp_path):
    page = write(
        tmp_path / "guide.html",
        "<html><head><title>Guide</title><script>x=1</script></head><body>"
        "<nav>Home | Docs</nav><h1>Install</h1><p>Run pip.</p>"
        "<h2>On Linux</h2><p>Use a venv.</p><pre>python3 -m venv .venv\npip install x</pre>"
        "<footer>© Example Ltd, 12 River Street</footer></body></html>",
    )
    (doc,) = load_path(page)
    assert doc.metadata["title"] == "Guide"
    assert doc.sections == [
        ("Install", "Run pip."),
        ("Install › On Linux", "Use a venv.\n\npython3 -m venv .venv\npip install x"),
    ]
    assert "Home" not in doc.text and "x=1" not in doc.text and "River" not in doc.text


def test_a_docx_file_is_read_by_its_headings_and_tables(tmp_path):
    document = docx.Document()
    document.add_paragraph("Quarterly report", style="Title")
    document.add_heading("Revenue", level=1)
    document.add_paragraph("Revenue grew 12 percent.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Q1", "4.2M"
    path = tmp_path / "report.docx"
    document.save(str(path))
    (doc,) = load_path(path)
    assert doc.metadata["title"] == "Quarterly report"
    assert doc.sections == [("Revenue", "Revenue grew 12 percent.\n\nQ1 | 4.2M")]


def test_a_text_pdf_is_read_page_by_page(tmp_path):
    path = tmp_path / "tesla.pdf"
    path.write_bytes(minimal_pdf(["Nikola Tesla died on 7 January 1943.", "He lived in New York."]))
    (doc,) = load_path(path)
    assert doc.metadata["title"] == "tesla"
    assert [heading for heading, _ in doc.sections] == ["page 1"]
    assert "Nikola Tesla died on 7 January 1943." in doc.text


def test_pdf_lines_wrapped_by_the_layout_are_sentences_again_under_the_pdf_s_title(tmp_path):
    path = tmp_path / "manual-v3-final.pdf"
    lines = [
        "Maintenance",
        "The engine must be serviced every 10,000 kilometres or once a",
        "year, whichever comes first. Use only the oil grade shown in the self-",
        "cleaning table on the next page.",
        "Tyres",
        "Check the tyre pressure every month when the tyres are cold.",
    ]
    path.write_bytes(minimal_pdf(lines, title="Owner's Manual"))
    (doc,) = load_path(path)
    assert doc.metadata["title"] == "Owner's Manual"
    assert doc.text.splitlines() == [
        "Maintenance",
        "The engine must be serviced every 10,000 kilometres or once a year, whichever comes "
        "first. Use only the oil grade shown in the self-cleaning table on the next page.",
        "Tyres",
        "Check the tyre pressure every month when the tyres are cold.",
    ]
    untitled = tmp_path / "scan0042.pdf"
    untitled.write_bytes(minimal_pdf(lines))
    assert load_path(untitled)[0].metadata["title"] == "Maintenance"


def test_a_hyphen_that_split_a_word_at_a_line_end_goes_a_compound_s_stays():
    # simplemma's English lexicon tells a fragment ("biode") from a word ("self", "well").
    wrapped = (
        "Clean a dirty chain with a biode-\ngradable degreaser, as the mainte-\n"
        "nance guide says, with the self-\ncleaning brush of a well-\nknown brand, and oil it."
    )
    assert clean_pdf_text(wrapped) == (
        "Clean a dirty chain with a biodegradable degreaser, as the maintenance guide says, "
        "with the self-cleaning brush of a well-known brand, and oil it."
    )


def test_pdf_look_alike_code_points_become_the_characters_meant():
    # Kangxi radicals and ligatures, as PDF fonts map glyphs; Chinese punctuation is kept.
    assert clean_pdf_text("⼀般每年保养⼀次，请使⽤原⼚机油。\nﬁlter") == (
        "一般每年保养一次，请使用原厂机油。\nfilter"
    )


def test_a_broken_pdf_or_docx_is_a_clear_error(tmp_path):
    for name in ("broken.pdf", "broken.docx"):
        path = tmp_path / name
        path.write_bytes(b"not really " + name.encode())
        with pytest.raises(KnowledgeBaseError, match=rf"{name} is not a readable"):
            load_path(path)


def rewritten_docx(path: Path, body: bytes, prolog: bytes = b"") -> Path:
    """A Word file whose one paragraph says ``body`` (raw XML), after ``prolog`` (a DOCTYPE)."""
    document = docx.Document()
    document.add_paragraph("PLACEHOLDER")
    plain = path.with_suffix(".plain.docx")
    document.save(str(plain))
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "word/document.xml":
                declaration, rest = data.split(b"?>", 1)
                data = declaration + b"?>" + prolog + rest.replace(b"PLACEHOLDER", body)
            target.writestr(item, data)
    return path


BILLION_LAUGHS = (
    b'<!DOCTYPE d [<!ENTITY l0 "lol">'
    + b"".join(b'<!ENTITY l%d "%s">' % (n, b"&l%d;" % (n - 1) * 10) for n in range(1, 10))
    + b"]>"
)


def stream_bomb(size: int) -> bytes:
    """``size`` zero bytes, deflated (a few hundred bytes per megabyte)."""
    packer = zlib.compressobj(9)
    block = bytes(1 << 20)
    return b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()


def test_hostile_pdf_and_docx_files_are_clear_errors_not_crashes(tmp_path):
    cases = {
        "laughs.docx": rewritten_docx(tmp_path / "laughs.docx", b"&l9;", BILLION_LAUGHS),
        "entity.docx": rewritten_docx(tmp_path / "entity.docx", b"&undefined;"),
    }
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(minimal_pdf([], stream=stream_bomb(80 << 20)))
    cases["bomb.pdf"] = bomb
    assert bomb.stat().st_size < 200_000  # small on the wire, 80 MB inflated
    for name, path in cases.items():
        with pytest.raises(KnowledgeBaseError, match=rf"{name} is not a readable"):
            load_path(path)


def test_what_one_document_expands_to_is_capped(tmp_path, monkeypatch):
    monkeypatch.setenv("REFLEXRAG_MAX_PDF_PAGES", "3")
    monkeypatch.setenv("REFLEXRAG_MAX_DOCUMENT_CHARS", "100")
    get_settings.cache_clear()
    try:
        pdf = tmp_path / "long.pdf"
        pdf.write_bytes(minimal_pdf(["One line."], pages=4))
        with pytest.raises(IngestLimitError, match=r"4 pages, over the cap of 3 .*MAX_PDF_PAGES"):
            load_path(pdf)
        pdf.write_bytes(minimal_pdf(["One line."], pages=3))
        assert len(load_path(pdf)[0].sections) == 3
        wordy = rewritten_docx(tmp_path / "wordy.docx", b"word " * 30)
        with pytest.raises(IngestLimitError, match=r"more than 100 characters.*DOCUMENT_CHARS"):
            load_path(wordy)
        with pytest.raises(IngestLimitError, match="more than 100 characters"):
            load_path(write(tmp_path / "long.md", "# Long\n\n" + "word " * 30))
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_a_document_id_given_twice_in_one_ingest_is_the_last_one(isolated_data_dir):
    kb = get_knowledge_base("twice")
    report = kb.add(
        [SourceDocument("d", "Herons eat fish.", {}), SourceDocument("d", "Herons fly.", {})]
    )
    assert (report.added_documents, report.replaced_documents) == (1, 0)
    assert [doc.page_content for doc in kb.search("herons", 4)] == ["Herons fly."]


def test_a_new_collection_gets_the_wider_index_and_one_made_before_it_still_answers(
    isolated_data_dir,
):
    built = get_knowledge_base("wide-index")._collection.configuration["hnsw"]
    assert {key: built[key] for key in VECTOR_INDEX} == VECTOR_INDEX
    # A knowledge base made by an earlier version (cosine set in the collection's metadata)
    # is opened with the index it has, and still measures by cosine.
    client = get_knowledge_base("wide-index")._client
    client.create_collection(
        "kb__made-before", embedding_function=None, metadata={"hnsw:space": "cosine"}
    )
    old = get_knowledge_base("made-before")
    assert old._collection.configuration["hnsw"]["max_neighbors"] == 16
    old.add([SourceDocument("h", "Herons eat fish.", {}), SourceDocument("p", "Paris.", {})])
    found = old.search("What do herons eat?", 2, mode="vector")
    assert found[0].page_content == "Herons eat fish." and 0.5 < found[0].metadata["score"] <= 1


def test_over_the_chunk_cap_nothing_is_stored(isolated_data_dir):
    kb = get_knowledge_base("capped")
    many = [SourceDocument(f"d{n}", f"Fact number {n}.", {}) for n in range(5)]
    with pytest.raises(IngestLimitError, match="make 5 chunks, over the cap of 4"):
        kb.add(many, max_chunks=4)
    assert kb.count() == 0
    assert kb.add(many[:4], max_chunks=4).added_documents == 4


def test_chunks_carry_their_section_and_never_straddle_two(tmp_path, isolated_data_dir):
    kb = get_knowledge_base("sections-test")
    kb.add(load_path(write(tmp_path / "persistence.md", LANGGRAPH_STYLE)))
    (hit,) = kb.search("What is a thread in LangGraph persistence?", 1)
    assert hit.metadata["section"] == "Persistence in LangGraph › Threads"
    assert "unique ID" in hit.page_content and "built-in persistence" not in hit.page_content


def test_without_a_title_the_first_top_heading_names_the_page(tmp_path):
    page = write(
        tmp_path / "notes.html",
        "<h1>First</h1><p>One.</p><h2>Inner</h2><p>Two.</p><h1>Second</h1><p>Three.</p>",
    )
    (doc,) = load_path(page)
    assert doc.metadata["title"] == "First"
    assert doc.sections[-1] == ("Second", "Three.")


NEWS = [
    {
        "doc_id": f"news-{n}",
        "title": "Google defends its search deals",
        "text": "Google said its default search deals were fair to users and rivals.",
        "source": "news-sample",
        "meta": {"source": publisher, "published_at": published, "tags": ["ignored"]},
    }
    for n, (publisher, published) in enumerate(
        [("The Verge", "2023-09-26T17:01:22+00:00"), ("TechCrunch", "2023-11-06")]
    )
]


def test_a_rows_nested_metadata_is_kept_and_its_byline_read_with_the_title(
    tmp_path, isolated_data_dir
):
    rows = write(tmp_path / "news.jsonl", "\n".join(json.dumps(row) for row in NEWS))
    verge, techcrunch = load_path(rows)
    assert verge.metadata["meta.source"] == "The Verge" and "meta.tags" not in verge.metadata
    assert verge.metadata["source"] == "news-sample"  # the collection, not the publisher
    assert verge.metadata["byline"] == "The Verge, September 26, 2023"
    assert techcrunch.metadata["byline"] == "TechCrunch, November 6, 2023"
    kb = get_knowledge_base("bylines-test")
    kb.add([verge, techcrunch])
    # Same title and text: only the byline tells the two reports apart.
    for publisher, doc_id in (("TechCrunch", "news-1"), ("The Verge", "news-0")):
        (hit,) = kb.search(f"What did {publisher} report about Google's search deals?", 1)
        assert hit.metadata["doc_id"] == doc_id


def test_a_new_byline_re_embeds_a_document_an_unchanged_one_is_skipped(isolated_data_dir):
    kb = get_knowledge_base("byline-updates")
    row = NEWS[0]
    plain = SourceDocument(row["doc_id"], row["text"], {"title": row["title"]})
    assert kb.add([plain]).added_documents == 1
    assert kb.add([plain]).unchanged_documents == 1
    bylined = SourceDocument(row["doc_id"], row["text"], {"title": row["title"], "byline": "X"})
    assert kb.add([bylined]).replaced_documents == 1


def test_a_url_is_read_as_what_its_content_type_says(tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from reflexrag.providers.loaders import load_url

    pages = {
        "/manual": ("application/pdf", minimal_pdf(["Check the tyres monthly."], "Manual")),
        "/notes.md": ("text/plain", b"# Notes\n\nHerons **eat** fish.\n"),
        "/plain": ("text/plain; charset=utf-8", "Reiher fressen gern Fisch, täglich.".encode()),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            kind, body = pages[self.path]
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        (pdf,) = load_url(f"{base}/manual", allow_private=True)
        (markdown,) = load_url(f"{base}/notes.md", allow_private=True)
        (plain,) = load_url(f"{base}/plain", allow_private=True)
    finally:
        server.shutdown()
    assert pdf.metadata["title"] == "Manual" and pdf.text == "Check the tyres monthly."
    assert markdown.metadata["title"] == "Notes" and markdown.text == "Herons eat fish."
    assert plain.text == "Reiher fressen gern Fisch, täglich."


def test_a_stopped_ingest_loses_nothing_it_was_replacing(isolated_data_dir):
    from reflexrag.providers.knowledge_base import IngestStoppedError

    kb = get_knowledge_base("stopped")
    kb.add([SourceDocument("d", "Herons eat fish.", {})])
    with pytest.raises(IngestStoppedError, match="after storing 0 of its documents"):
        kb.add([SourceDocument("d", "Herons fly south.", {})], stop=lambda: True)
    assert [doc.page_content for doc in kb.search("herons", 4)] == ["Herons eat fish."]


async def test_every_strategy_answers_from_each_kind_of_file(tmp_path, isolated_data_dir):
    """The real-documents benchmark's folder (Markdown in English and Chinese, HTML with a
    footer, a PDF whose layout hyphenated a word, Word with a table): a fact from each file is
    answered by every strategy, the hyphenated word whole, a time of day for "when"."""
    from reflexrag.benchmarks import real_documents
    from reflexrag.graphs import STRATEGIES

    verdicts = await real_documents.run(list(STRATEGIES), tmp_path)
    asked = [question.question for question in real_documents.QUESTIONS]
    from_each_file = [
        asked.index("How many items can a member borrow at a time?"),  # Markdown
        asked.index("How much do late returns cost?"),  # a Markdown admonition
        asked.index("What should a dirty bicycle chain be cleaned with?"),  # "biode-" + "gradable"
        asked.index("图书的借期是多长时间？"),  # Chinese Markdown
        asked.index("自习室在几楼？"),
        # HTML: the page's own sentence, not its footer; "10:00" is a time, which "when" asks.
        asked.index("When does the library open on Saturdays?"),
    ]
    # Word: "Volunteers must be at least 16 years old." holds neither "minimum" nor "age", so
    # a strategy that checks its answer is not sure of it and says not found (the reader's
    # rule for sentences holding none of the question's own words, README); none answers
    # wrongly, and those that do not check answer it.
    word = asked.index("What is the minimum age for volunteers?")
    for strategy, found in verdicts.items():
        assert [found[n] for n in from_each_file] == ["right"] * 6, (strategy, found)
        assert found[word] in ("right", "not found"), (strategy, found)
    assert verdicts["naive"][word] == verdicts["crag"][word] == "right"
