"""``reflexrag ask --url``: the CLI as a client of a running ``reflexrag serve``.

The server runs in the test's event loop; the CLI runs in a worker thread (as ``main`` would
in its own process) or, where what it imports matters, in a process of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from reflexrag.benchmarks.services import start_server
from reflexrag.providers.settings import Settings, get_settings
from reflexrag.server import discovery
from reflexrag.server.cli import main
from tests.conftest import REPO, free_port
from tests.server.conftest import running_server


@pytest.fixture(scope="module")
async def url(tmp_path_factory):
    """A server with a data dir of its own, holding the sample knowledge base as a local ask's
    data dir does."""
    async with running_server(tmp_path_factory.mktemp("served")) as base:
        yield base


async def ask(capsys, *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, ["ask", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


RUN_CLI = "import sys; from reflexrag.server.cli import main; sys.exit(main(sys.argv[1:]))"


async def in_a_process(*argv: str, script: str = RUN_CLI) -> str:
    """``reflexrag`` in a process of its own, as a user runs it (``script`` runs its
    ``main``); its output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *argv,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_a_run_on_the_server_answers_as_the_same_run_here(url, capsys):
    question = ["ask", "What is Corrective RAG?", "--strategy", "self_rag", "--json"]
    here = await in_a_process(*question)
    code, there, _ = await ask(capsys, *question[1:], "--url", url)
    assert code == 0
    local, remote = json.loads(here), json.loads(there)
    assert remote["stop_reason"] == local["stop_reason"] == "answered"
    assert remote.pop("thread_id") != local.pop("thread_id")
    remote.pop("elapsed_s"), local.pop("elapsed_s")
    assert remote == local


async def test_the_steps_stream_as_lines_and_the_answer_follows(url, capsys):
    code, out, _ = await ask(capsys, "What is Corrective RAG?", "--url", url)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("decide_retrieval: ") and any(
        line.startswith("grade_documents: ") for line in lines
    )
    assert any(line.startswith("Answer") for line in lines)
    assert lines[-1].startswith("stop_reason: answered")


async def test_a_clarifying_question_pauses_the_run_on_the_server_and_a_reply_resumes_it(
    url, capsys
):
    question = "这个API有什么限制？"
    code, out, _ = await ask(
        capsys, question, "--strategy", "adaptive", "--no-input", "--json", "--url", url
    )
    paused = json.loads(out)
    assert code == 0 and paused["interrupted"] and "这个API" in paused["clarifying_question"]
    thread = paused["thread_id"]
    code, out, _ = await ask(
        capsys,
        "--strategy",
        "adaptive",
        "--thread",
        thread,
        "--reply",
        "Chroma",
        "--json",
        "--url",
        url,
    )
    resumed = json.loads(out)
    assert code == 0 and not resumed.get("interrupted") and resumed["thread_id"] == thread
    assert resumed["stop_reason"] != "needs_clarification"


async def test_a_server_that_is_not_there_is_one_line_and_exit_2(capsys):
    dead = f"http://127.0.0.1:{free_port()}"
    code, out, err = await ask(capsys, "What is CRAG?", "--url", dead)
    assert code == 2 and out == ""
    assert err.startswith(f"reflexrag: error: cannot reach {dead}") and err.count("\n") == 1


async def test_what_the_server_refuses_is_its_message_in_one_line(url, capsys):
    code, _, err = await ask(capsys, "What is CRAG?", "--kb", "no-such-kb", "--url", url)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"reflexrag: error: {url} refused the run: ") and "no-such-kb" in err
    # A bad flag is refused here, before any request.
    code, _, err = await ask(capsys, "What is CRAG?", "--top-k", "0", "--url", url)
    assert code == 2 and "top_k" in err and "refused" not in err


async def test_a_server_with_keys_takes_the_sdk_key_and_refuses_a_run_without(
    tmp_path, capsys, monkeypatch
):
    async with running_server(tmp_path, api_key="key-a") as keyed:
        monkeypatch.delenv("LANGGRAPH_API_KEY", raising=False)
        code, _, err = await ask(capsys, "What is CRAG?", "--url", keyed)
        assert code == 2 and "refused the run: missing or invalid API key" in err
        monkeypatch.setenv("LANGGRAPH_API_KEY", "key-a")
        code, out, _ = await ask(capsys, "What is CRAG?", "--url", keyed)
        assert code == 0 and "stop_reason: " in out


async def test_the_client_loads_neither_langgraph_nor_chroma_nor_the_encoder(url):
    probe = (
        "import sys; from reflexrag.server.cli import main; code = main(sys.argv[1:]); "
        "loaded = [m for m in ('langgraph.graph', 'chromadb', 'onnxruntime', 'torch') "
        "if m in sys.modules]; print('LOADED', loaded); sys.exit(code)"
    )
    out = await in_a_process("ask", "What is Corrective RAG?", "--url", url, script=probe)
    assert "stop_reason: answered" in out
    assert out.splitlines()[-1] == "LOADED []"


LOADED_PROBE = (
    "import sys; from reflexrag.server.cli import main; code = main(sys.argv[1:]); "
    "print('LOADED', [m for m in ('langgraph.graph', 'chromadb') if m in sys.modules]); "
    "sys.exit(code)"
)


def cli_process(data_dir: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``reflexrag`` on ``data_dir`` in a process of its own, reporting what it loaded."""
    return subprocess.run(
        [sys.executable, "-c", LOADED_PROBE, *argv],
        cwd=REPO,
        env={**os.environ, "REFLEXRAG_DATA_DIR": str(data_dir), **env},
        capture_output=True,
        text=True,
        check=True,
    )


def test_ask_streams_from_the_serve_running_on_its_data_dir_until_it_stops(tmp_path):
    question = ["ask", "What is Corrective RAG?", "--json"]
    server = start_server(tmp_path, free_port())
    try:
        note = tmp_path / "serve.json"
        for _ in range(200):  # left once it listens, just after its /ok first answers
            if note.exists():
                break
            time.sleep(0.05)
        assert json.loads(note.read_text())["pid"] == server.pid
        found = cli_process(tmp_path, *question)
        assert "asking the reflexrag serve on this data dir" in found.stderr
        assert found.stdout.splitlines()[-1] == "LOADED []"
        here = cli_process(tmp_path, *question, "--local")
        assert "asking" not in here.stderr and "langgraph.graph" in here.stdout
        remote, local = (json.loads(run.stdout.split("\nLOADED")[0]) for run in (found, here))
        assert remote["stop_reason"] == local["stop_reason"] == "answered"
        for run in (remote, local):
            run.pop("thread_id"), run.pop("elapsed_s")
        assert remote == local
        # A thread goes on where it was made: a run paused here is resumed here, one paused
        # on the server is resumed there.
        paused = ["ask", "这个API有什么限制？", "--strategy", "adaptive", "--no-input", "--json"]
        for where in ("--local", None):
            made = cli_process(tmp_path, *paused, *([where] if where else []))
            thread = json.loads(made.stdout.split("\nLOADED")[0])["thread_id"]
            reply = ["ask", "--strategy", "adaptive", "--thread", thread, "--reply", "Chroma"]
            resumed = cli_process(tmp_path, *reply, "--json")
            assert ("asking the reflexrag serve" in resumed.stderr) is (where is None)
            answer = json.loads(resumed.stdout.split("\nLOADED")[0])
            assert answer["thread_id"] == thread and answer["stop_reason"] != "needs_clarification"
    finally:
        server.terminate()
        server.wait(timeout=60)
    # A server that stops takes its note with it, and ask answers here again.
    assert not note.exists()
    after = cli_process(tmp_path, *question)
    assert "asking" not in after.stderr and "langgraph.graph" in after.stdout


def wait_for(condition, seconds: float = 180.0) -> None:
    """Wait until ``condition()`` holds (generous: a loaded machine starts a server slowly)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "waited in vain"
        time.sleep(0.1)


def test_an_ask_leaves_a_serve_for_the_next_ask_which_gives_way_to_a_writer(tmp_path):
    try:
        leave_and_find_a_serve(tmp_path)
    finally:  # not left running for ten minutes when an assertion failed
        if found := discovery.server_on_data_dir(Settings(data_dir=tmp_path)):
            discovery.stop_server(found[0])


def leave_and_find_a_serve(tmp_path: Path) -> None:
    question = ["ask", "What is Corrective RAG?", "--json"]
    keep = {"REFLEXRAG_KEEP_ALIVE_S": "600"}
    first = cli_process(tmp_path, *question, **keep)
    assert "langgraph.graph" in first.stdout and "stays on this data dir" in first.stderr
    note_file = tmp_path / "serve.json"
    wait_for(note_file.exists)
    note = json.loads(note_file.read_text())
    assert note["gives_way"] is True and len(note["token"]) >= 32
    assert oct(note_file.stat().st_mode & 0o777) == "0o600"
    # A loopback port is open to every user of the machine: only the note's token gets in.
    assert httpx.get(f"{note['url']}/ok", timeout=60).status_code == 401
    owner = {discovery.OWNER_HEADER: note["token"]}
    assert httpx.get(f"{note['url']}/ok", headers=owner, timeout=60).status_code == 200
    second = cli_process(tmp_path, *question, **keep)
    assert "asking the reflexrag serve on this data dir" in second.stderr
    assert second.stdout.splitlines()[-1] == "LOADED []" and "stays on" not in second.stderr
    here, there = (json.loads(run.stdout.split("\nLOADED")[0]) for run in (first, second))
    for run in (here, there):
        run.pop("thread_id"), run.pop("elapsed_s")
    assert here == there and here["stop_reason"] == "answered"
    # A command that writes the data dir stops it instead of being refused.
    document = tmp_path / "note.txt"
    document.write_text("The reflexrag test note says the sky is green on Tuesdays.")
    ingest = subprocess.run(
        [sys.executable, "-c", RUN_CLI, "ingest", str(document), "--kb", "notes"],
        cwd=REPO,
        env={**os.environ, "REFLEXRAG_DATA_DIR": str(tmp_path), **keep},
        capture_output=True,
        text=True,
    )
    assert ingest.returncode == 0, ingest.stderr
    assert f"stopping the reflexrag serve an ask left on this data dir (pid {note['pid']})" in (
        ingest.stderr
    )
    assert "notes: 1 added" in ingest.stdout and not note_file.exists()


def test_the_serve_an_ask_left_stops_by_itself_with_nothing_to_do(tmp_path):
    document = tmp_path / "note.txt"
    document.write_text("The reflexrag test note says the sky is green on Tuesdays.")
    cli_process(tmp_path, "ingest", str(document), "--kb", "notes")
    question = ["ask", "What colour is the sky on Tuesdays?", "--kb", "notes"]
    asked = cli_process(tmp_path, *question, REFLEXRAG_KEEP_ALIVE_S="1")
    assert "it stops after 1 s with nothing to do" in asked.stderr
    log = tmp_path / "serve.log"
    wait_for(lambda: "stopping after 1 s with nothing to do" in log.read_text())
    wait_for(lambda: not (tmp_path / "serve.json").exists())
    # It made no default knowledge base its user never asked: only "notes" is there.
    listed = cli_process(tmp_path, "kb", "list")
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()[:-1]] == ["notes"]
    # With keep-alive off no server is started.
    off = cli_process(tmp_path, *question, REFLEXRAG_KEEP_ALIVE_S="0")
    assert "stays on" not in off.stderr and not (tmp_path / "serve.json").exists()


ANNOUNCE = (
    "import sys, time; from pathlib import Path; from reflexrag.providers.settings import "
    "Settings; from reflexrag.server.discovery import announce; "
    "assert announce(Settings(data_dir=Path(sys.argv[1])), sys.argv[2]); "
    "print('announced', flush=True); time.sleep(120)"
)


def announcing(data_dir: Path, url: str, **env: str) -> subprocess.Popen:
    """A process that leaves its note in ``data_dir`` as ``reflexrag serve`` does, and holds
    it until it ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", ANNOUNCE, str(data_dir), url],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "announced"
    return process


def test_a_note_of_other_settings_or_of_a_gone_server_is_passed_over(tmp_path):
    settings = Settings(data_dir=tmp_path)
    note = tmp_path / "serve.json"
    url = "http://127.0.0.1:9"
    other = announcing(tmp_path, url, REFLEXRAG_DEFAULT_KB="other-kb")
    try:
        assert discovery.running_server(settings) is None, "other settings"
    finally:
        other.kill()
        other.wait()
    server = announcing(tmp_path, url)
    try:
        assert discovery.running_server(settings) == discovery.RunningServer(url, server.pid)
    finally:
        server.kill()  # as SIGKILL leaves it: the note stays, nobody holds it
        server.wait()
    assert note.exists() and discovery.running_server(settings) is None
    # Its process id given to another process since, which holds no note: still gone.
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        body = json.loads(note.read_text()) | {"pid": unrelated.pid}
        note.write_text(json.dumps(body))
        assert discovery.running_server(settings) is None
    finally:
        unrelated.kill()
        unrelated.wait()


def test_a_data_dir_that_cannot_be_written_gets_no_note_and_raises_nothing(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    settings = Settings(data_dir=blocked / "data")
    assert discovery.announce(settings, "http://127.0.0.1:9") is False
    assert list(tmp_path.iterdir()) == [blocked] and discovery.running_server(settings) is None


async def test_a_note_naming_a_port_nobody_answers_on_is_answered_here(capsys):
    settings = get_settings()
    dead = f"http://127.0.0.1:{free_port()}"
    server = announcing(settings.data_dir, dead)
    try:
        code, out, err = await ask(capsys, "What is Corrective RAG?")
    finally:
        server.kill()
        server.wait()
        (settings.data_dir / "serve.json").unlink()
    assert code == 0 and out.splitlines()[-1].startswith("stop_reason: answered")
    assert f"cannot reach {dead}" in err and "answering here" in err
