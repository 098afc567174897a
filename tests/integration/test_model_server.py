"""Every strategy against a real OpenAI-compatible model server: llama.cpp's ``llama-server``
with SmolLM2-135M-Instruct (see ``benchmarks/model_server.py``), on loopback.

A 135M model answers badly and writes plenty of malformed output, which is the point: runs
must still end with a stop reason, a written answer, sources (or an answer marked as standing
on none) and real token counts; verdicts asked with a JSON schema must parse; a server that
dies or is too slow must end the run with one clear error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reflexrag.benchmarks import model_server
from reflexrag.benchmarks.fixture import load_qa
from reflexrag.graphs import compile_strategy
from reflexrag.nodes.judges.llm import LLMJudge
from reflexrag.nodes.judges.usage import metered
from reflexrag.providers.knowledge_base import get_knowledge_base
from reflexrag.providers.loaders import load_jsonl
from reflexrag.providers.models import get_chat_model
from reflexrag.providers.settings import get_settings
from reflexrag.server.runner import run_question
from reflexrag.state import Context

pytestmark = pytest.mark.integration
KB = "llm-fixture"
STRATEGIES = ["naive", "self_rag", "crag", "self_crag", "iterative", "adaptive"]
CLI = [sys.executable, "-m", "reflexrag.server.cli"]
QUESTIONS = {
    "en": "xquad-en:56dfa0d84a1a83140091ebb7",  # What year did Tesla die?
    "zh": "xquad-zh:56dfa0d84a1a83140091ebb7",  # 特斯拉是哪一年去世的？
    "unanswerable": "xquad-en:56e1254ae3433e1400422c66",  # What article was published in 1937?
}


@pytest.fixture(scope="module")
def questions(fixtures_dir: Path) -> dict[str, str]:
    by_id = {item.qid: item.question for item in load_qa(fixtures_dir / "qa.jsonl")}
    return {name: by_id[qid] for name, qid in QUESTIONS.items()}


@pytest.fixture(scope="module")
def llm_kb(fixtures_dir: Path):
    """The gold passages of the questions and their neighbours in the corpus."""
    corpus = load_jsonl(fixtures_dir / "corpus.jsonl")
    wanted = [d for d in corpus if d.doc_id.startswith(("xquad-en:3:", "xquad-zh:3:"))][:4]
    others = [d for d in corpus if d not in wanted][:8]
    kb = get_knowledge_base(KB)
    kb.add(wanted + others)
    return kb


def _point_at(monkeypatch: pytest.MonkeyPatch, base_url: str, **settings: object) -> None:
    current = get_settings()
    monkeypatch.setattr(current, "openai_base_url", base_url)
    monkeypatch.setattr(current, "grader_model", model_server.MODEL_NAME)
    monkeypatch.setattr(current, "generator_model", model_server.MODEL_NAME)
    # Generous: on a loaded 2-core machine a call took over 120 s beside another model server.
    monkeypatch.setattr(current, "llm_timeout_s", 300.0)
    for name, value in settings.items():
        monkeypatch.setattr(current, name, value)
    get_chat_model.cache_clear()


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with model_server.running(log=log) as server, pytest.MonkeyPatch.context() as patch:
        _point_at(patch, server.base_url)
        yield server
    get_chat_model.cache_clear()


def test_the_model_file_is_the_pinned_one():
    path = model_server.default_model()
    assert path.suffix == ".gguf"
    assert model_server.sha256_of(path) == model_server.MODEL_SHA256


COMBINATIONS = [("llm", "llm"), ("llm", "local"), ("local", "llm")]


@pytest.mark.parametrize(
    ("strategy", "judge", "generator"),
    [(s, "llm", "llm") for s in STRATEGIES]
    + [(s, j, g) for s in ("self_rag", "crag") for j, g in COMBINATIONS[1:]],
)
async def test_every_strategy_runs_end_to_end(
    llm_server, llm_kb, questions, strategy, judge, generator
):
    context = Context(kb=KB, judge_backend=judge, generator_backend=generator, ask_back=False)
    result = await run_question(strategy, questions["en"], context)
    print(f"{strategy} {judge}/{generator}: {result.stop_reason} {result.usage} {result.answer!r}")
    assert result.error is None and result.stop_reason not in (None, "error")
    assert result.answer.strip()
    # The sources are the passages the answer stands on: none only for a written answer that
    # cites none and says no word of them, which is then sure of nothing (the gated strategies
    # do not keep it; naive and crag have no answer check) while it read passages all the same.
    assert result.sources or (result.confidence == 0.0 and result.context_doc_ids)
    assert result.llm_calls >= 1
    # Token counts are the server's own (usage in the reply), not estimates of ours, and
    # no reply runs past its cap (judges 256 tokens, the generator 512).
    usage = result.usage
    assert usage["tokens.prompt"] > 0 and usage["tokens.completion"] > 0
    generated = usage.get("llm.generator", 0)
    assert usage["tokens.completion"] <= 256 * (result.llm_calls - generated) + 512 * generated
    if strategy != "naive":
        # A question about facts goes to the knowledge base, whatever a model would guess.
        assert any(s["node"].startswith("retrieve") for s in result.steps)


async def test_chinese_and_unanswerable_questions_end_with_a_stop_reason(
    llm_server, llm_kb, questions
):
    context = Context(kb=KB, judge_backend="llm", generator_backend="llm")
    for name in ("zh", "unanswerable"):
        result = await run_question("self_rag", questions[name], context)
        assert result.error is None and result.stop_reason and result.answer.strip(), name


async def test_generator_tokens_stream_and_grader_tokens_never(llm_server, llm_kb, questions):
    graph = compile_strategy("self_rag")
    # min_confidence 0: whatever the graders say, the run ends with a generated answer.
    context = Context(
        kb=KB,
        judge_backend="llm",
        generator_backend="llm",
        llm_judging="per_call",
        min_confidence=0.0,
    )
    nodes = []
    async for message, metadata in graph.astream(
        {"question": questions["en"]}, context=context, stream_mode="messages"
    ):
        if message.content:
            nodes.append(metadata["langgraph_node"])
    assert nodes.count("generate") > 1, nodes  # many tokens, not one message at the end
    assert set(nodes) == {"generate"}


async def test_schema_constrained_verdicts_parse_and_loose_ones_never_crash(
    llm_server, llm_kb, questions, monkeypatch
):
    documents = llm_kb.search(questions["en"], 4)
    judge = LLMJudge(get_chat_model("grader"), mode="per_call")
    with metered() as meter:
        await judge.grade_documents(questions["en"], documents)
        await judge.grade_answer(questions["en"], "Tesla died in 1943.", documents)
        await judge.assess_round(questions["en"], "1943", documents, documents)
    assert meter.counts["llm.grader"] == 6 and meter.counts["llm.assessor"] == 1
    assert meter.counts.get("llm_parse_failures", 0) == 0, meter.counts
    # JSON described only in the prompt: a 135M model often fumbles it; never a crash.
    _point_at(monkeypatch, llm_server.base_url, structured_output="prompt")
    judge = LLMJudge(get_chat_model("grader"), mode="per_call")
    with metered() as meter:
        grades = await judge.grade_documents(questions["en"], documents)
        assessment = await judge.assess_round(questions["en"], "1943", documents, documents)
    assert len(grades) == 4 and 1 <= assessment.completeness <= 10
    print("prompt-only parse failures:", meter.counts.get("llm_parse_failures", 0), "of 5")


async def test_a_server_killed_mid_run_ends_it_with_an_error(
    llm_kb, questions, monkeypatch, tmp_path
):
    with model_server.running(log=tmp_path / "server.log") as server:
        _point_at(monkeypatch, server.base_url)

        def kill_after_retrieval(node: str, update: dict) -> None:
            if node == "retrieve":
                server.process.kill()
                server.process.wait()

        context = Context(kb=KB, judge_backend="llm", generator_backend="llm")
        result = await run_question(
            "self_rag", questions["en"], context, on_update=kill_after_retrieval
        )
    get_chat_model.cache_clear()
    assert result.stop_reason == "error" and result.answer_kind == "error"
    assert result.error.startswith("cannot reach the model server"), result.error
    assert [s["node"] for s in result.steps][-1] == "retrieve"


async def test_a_server_slower_than_the_timeout_ends_the_run_with_an_error(
    llm_server, llm_kb, questions, monkeypatch
):
    _point_at(monkeypatch, llm_server.base_url, llm_timeout_s=0.001, llm_max_retries=1)
    context = Context(kb=KB, judge_backend="llm", generator_backend="llm")
    result = await run_question("naive", questions["en"], context)
    get_chat_model.cache_clear()
    assert result.stop_reason == "error"
    assert "did not answer within 0.001 s" in result.error


def test_ask_against_a_dead_server_prints_one_line_and_exits_1(llm_kb, isolated_data_dir, flow_kb):
    env = {
        **os.environ,
        "REFLEXRAG_DATA_DIR": str(isolated_data_dir),
        "REFLEXRAG_OPENAI_BASE_URL": f"http://127.0.0.1:{model_server.free_port()}/v1",
        "REFLEXRAG_JUDGE_BACKEND": "llm",
        "REFLEXRAG_GENERATOR_BACKEND": "llm",
        "REFLEXRAG_LLM_MAX_RETRIES": "0",
    }
    command = [sys.executable, "-m", "reflexrag.server.cli", "ask", "When did Tesla die?"]
    command += ["--kb", "flow", "--strategy", "crag"]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 1
    errors = [line for line in plain.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("reflexrag: error: cannot reach the model")
    assert "Traceback" not in plain.stderr
    as_json = subprocess.run(
        [*command, "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert as_json.returncode == 1
    reply = json.loads(as_json.stdout)
    assert reply["stop_reason"] == "error" and reply["error"].startswith("cannot reach")


def test_ask_shows_the_answer_as_it_is_written(llm_server, llm_kb, isolated_data_dir):
    env = {
        **os.environ,
        "REFLEXRAG_DATA_DIR": str(isolated_data_dir),
        "REFLEXRAG_OPENAI_BASE_URL": llm_server.base_url,
        "REFLEXRAG_GRADER_MODEL": llm_server.model,
        "REFLEXRAG_GENERATOR_MODEL": llm_server.model,
        "REFLEXRAG_JUDGE_BACKEND": "local",
        "REFLEXRAG_GENERATOR_BACKEND": "llm",
    }
    command = [sys.executable, "-m", "reflexrag.server.cli", "ask", "When did Tesla die?"]
    done = subprocess.run(
        [*command, "--kb", KB, "--strategy", "naive"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # The answer appears as it streams, before the node's step line, then in full.
    before, _, after = done.stdout.partition("\ngenerate:")
    streamed = before.partition("writing: ")[2].strip()
    assert streamed, done.stdout
    assert after.partition("Answer:\n")[2].startswith(streamed)


def test_model_serve_serves_under_the_file_s_name_and_stops_with_its_server(tmp_path):
    """``reflexrag model serve``: the model answers under an alias taken from its file, the
    server's own log is shown, and SIGTERM stops the command and llama-server with it."""
    import shutil
    import signal

    import httpx

    model = tmp_path / "my-model.gguf"
    shutil.copy(model_server.default_model(), model)
    port = model_server.free_port()
    command = [*CLI, "model", "serve", "--model"]
    command += [str(model), "--port", str(port), "--sha256", model_server.MODEL_SHA256]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The command says where it serves once the server answers (stdout holds only that;
        # the server's log goes to stderr).
        said = [process.stdout.readline() for _ in range(4)]
        assert said[0].startswith(b"serving my-model at http://127.0.0.1:"), said
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30).json()
        assert [entry["id"] for entry in models["data"]] == ["my-model"]
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 1, "llama-server runs as the command's child"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err.decode()[-2000:]
    assert f"REFLEXRAG_OPENAI_BASE_URL=http://127.0.0.1:{port}/v1".encode() in b"".join(said)
    assert b"llama_server" in err and b"model server stopped" in err
    assert not os.path.exists(f"/proc/{children[0]}"), "llama-server outlived the command"


def test_model_serve_refuses_a_file_with_another_checksum(tmp_path):
    model = tmp_path / "other.gguf"
    model.write_bytes(b"GGUF not really")
    done = subprocess.run(
        [*CLI, "model", "serve", "--model", str(model), "--sha256", model_server.MODEL_SHA256],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("reflexrag: error: ")
    assert "expected " + model_server.MODEL_SHA256 in done.stderr
