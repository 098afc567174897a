"""The CLI on the adaptive and iterative strategies: routes, rounds, asking back, skip reading.

These run the real local backend over the bundled sample knowledge base.
"""

from __future__ import annotations

import json

import pytest

from reflexrag.server.cli import main


def ask(capsys, *argv: str) -> dict:
    assert main(["ask", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("question", "route"),
    [
        ("hello", "no_retrieval"),
        ("What is Self-RAG?", "single_step"),
        ("Compare Self-RAG and CRAG: how does each handle irrelevant documents?", "multi_step"),
    ],
)
def test_adaptive_json_shows_its_route(capsys, question, route):
    result = ask(capsys, question, "--strategy", "adaptive")
    assert result["route"] == route
    assert result["complexity"]["level"] == route
    assert bool(result.get("rounds")) == (route == "multi_step")
    if route == "no_retrieval":
        assert result["stop_reason"] == "no_retrieval_needed"
    elif route == "single_step":
        assert result["stop_reason"] == "answered" and result["sources"]
    else:
        # No one sentence compares two methods: the extractive reader is never sure enough
        # of one, so the rounds run out and the run says not found, with the closest
        # evidence it gathered.
        assert result["stop_reason"] in ("answered", "max_retrieval_attempts")
        assert result["sources"]


def test_iterative_json_lists_its_rounds(capsys):
    result = ask(
        capsys, "How does CRAG refine documents?", "--strategy", "iterative", "--max-rounds", "2"
    )
    assert 1 <= len(result["rounds"]) <= 2
    first = result["rounds"][0]
    assert first["query"] == "How does CRAG refine documents?"
    assert {"relevance", "completeness", "quality", "retrieved_ids"} <= set(first)


def test_no_input_ends_with_the_clarifying_question_and_reply_resumes(capsys):
    paused = ask(capsys, "这个API有什么限制？", "--strategy", "adaptive", "--no-input")
    assert paused["stop_reason"] == "needs_clarification" and paused["interrupted"]
    assert "这个API" in paused["clarifying_question"]
    thread = paused["thread_id"]

    resumed = ask(capsys, "--strategy", "adaptive", "--thread", thread, "--reply", "Chroma")
    assert resumed["thread_id"] == thread and not resumed["interrupted"]
    assert resumed["stop_reason"] != "needs_clarification"
    nodes = [step["node"] for step in resumed["steps"]]
    assert nodes[:3] == ["classify_complexity", "clarify", "classify_complexity"]


def test_the_terminal_prompt_resumes_the_same_run(capsys, monkeypatch):
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "Self-RAG")
    assert main(["ask", "What does it do?", "--strategy", "adaptive"]) == 0
    out = capsys.readouterr().out
    assert len(asked) == 1 and '"it"' in asked[0]
    assert "clarify: " in out and "→ 'Self-RAG'" in out
    assert "stop_reason: answered" in out


def test_end_of_input_leaves_the_run_paused(capsys, monkeypatch):
    def no_terminal(prompt):
        raise EOFError

    monkeypatch.setattr("builtins.input", no_terminal)
    assert main(["ask", "What does it do?", "--strategy", "adaptive"]) == 0
    out = capsys.readouterr().out
    assert "Needs clarification:" in out and "--reply" in out


def test_reply_needs_a_thread_with_a_paused_run(capsys):
    assert main(["ask", "--strategy", "adaptive", "--reply", "Chroma"]) == 2
    assert "--thread" in capsys.readouterr().err
    assert main(["ask", "--strategy", "adaptive", "--thread", "never-made", "--reply", "x"]) == 2
    assert "no run waiting for a reply" in capsys.readouterr().err
    done = ask(capsys, "What is Self-RAG?", "--strategy", "adaptive")
    argv = ["ask", "--strategy", "adaptive", "--thread", done["thread_id"], "--reply", "x"]
    assert main(argv) == 2
    assert "no run waiting for a reply" in capsys.readouterr().err


def test_skip_reading_reports_its_skip_rate(capsys):
    result = ask(capsys, "What is Self-RAG?", "--initial-k", "8", "--top-k", "2")
    assert 0 < result["skip_rate"] < 1
    assert len(result["sources"]) <= 2
