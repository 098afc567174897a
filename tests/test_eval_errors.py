"""An evaluation whose runs fail: counted apart from abstentions, stopped early, and a non-zero
exit unless errors are allowed."""

from __future__ import annotations

import json

from reflexrag.benchmarks import evaluate
from reflexrag.providers.models import ModelServerError
from reflexrag.server.cli import main


def _fixture(tmp_path, questions: int = 6):
    corpus, qa = tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"
    row = {"doc_id": "paris", "title": "Paris", "text": "Paris is the capital of France."}
    corpus.write_text(json.dumps(row) + "\n")
    qa.write_text(
        "\n".join(
            json.dumps({"qid": f"q{n}", "question": f"What is the capital {n}?", "answers": ["x"]})
            for n in range(questions)
        )
    )
    return qa, corpus


def _dead_server(monkeypatch) -> list[str]:
    asked: list[str] = []

    async def unreachable(strategy, question, *args, **kwargs):
        asked.append(question)
        raise ModelServerError("cannot reach the model server at http://127.0.0.1:9/v1")

    monkeypatch.setattr(evaluate, "run_question", unreachable)
    return asked


async def test_failed_runs_are_errors_not_abstentions_and_a_dead_server_is_asked_no_more(
    tmp_path, monkeypatch
):
    qa, corpus = _fixture(tmp_path)
    asked = _dead_server(monkeypatch)
    report = await evaluate.run_eval(
        qa, corpus, None, ["naive"], tmp_path / "out", concurrency=1, progress=False,
        max_consecutive_errors=2,
    )  # fmt: skip
    assert len(asked) == 2, "after two failures in a row the rest are not run"
    records = report["records"]
    assert all("cannot reach" in r["error"] for r in records[:2])
    assert all(r["error"].startswith("not run") for r in records[2:])
    overall = report["strategies"]["naive"]["overall"]
    assert overall["failed_runs"] == 6 and overall["errors"] == 6
    assert overall["wrong_abstention"] == 0.0 and overall["truthfulness"] == 0.0
    assert report["failed_runs"]["count"] == 6
    assert "**6 runs failed**" in (tmp_path / "out" / "report.md").read_text()


def test_the_eval_command_exits_non_zero_when_runs_failed(tmp_path, monkeypatch, capsys):
    qa, corpus = _fixture(tmp_path, questions=2)
    _dead_server(monkeypatch)
    argv = ["eval", "--qa", str(qa), "--corpus", str(corpus), "--strategies", "naive"]
    argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 1
    assert "2 of 2 runs failed: ModelServerError: cannot reach" in capsys.readouterr().err
    assert main([*argv, "--allow-errors"]) == 0
    assert "2 of 2 runs failed" in capsys.readouterr().err
