"""The LLM backend next to the local one, on a seeded slice of the fixture and of each dev set.

Starts the pinned model server (``benchmarks/model_server.py``) unless ``--base-url`` names
one, runs ``reflexrag eval`` once with the local backend and once with LLM judges and
generator on the same questions, and prints one table: accuracy, abstention, LLM calls and
prompt tokens per question, seconds per question.

    python -m reflexrag.benchmarks.llm_eval --limit 12 --out llm-eval
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from reflexrag.benchmarks import model_server
from reflexrag.providers.models import get_chat_model
from reflexrag.providers.settings import get_settings

SHARED = Path(__file__).resolve().parents[1].parent / "shared/rag-eval"
SETS = {
    "fixture": SHARED / "fixtures",
    "CLAPNQ": SHARED / "dev/clapnq_dev",
    "DRCD": SHARED / "dev/drcd",
    "MultiHop-RAG": SHARED / "dev/multihop_rag_500",
    "COVID-QA": SHARED / "dev/covidqa",
}
BACKENDS = {"local": ("local", "local"), "llm": ("llm", "llm")}


def _cell(summary: dict[str, Any], name: str) -> str:
    value = summary.get(name)
    return "–" if value is None else f"{value:.3f}"


def row(name: str, backend: str, strategy: str, summary: dict[str, Any]) -> str:
    return (
        f"| {name} | {backend} | {strategy} | {summary['questions']} | "
        f"{_cell(summary, 'answer_contains')} | {_cell(summary, 'abstain_or_recover')} | "
        f"{_cell(summary, 'wrong_abstention')} | {summary['llm_calls']:.1f} | "
        f"{summary['tokens'].get('prompt', 0):,.0f} | {summary['seconds_mean']:.1f} | "
        f"{summary['errors']} |"
    )


HEADER = (
    "| set | backend | strategy | questions | contains gold | honest on unanswerable | "
    "wrong abstention | LLM calls/q | prompt tokens/q | s/q | errors |\n"
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


async def evaluate(strategies: list[str], limit: int, seed: int, out: Path) -> str:
    from reflexrag.benchmarks.evaluate import run_eval

    rows = []
    for name, folder in SETS.items():
        web = folder / "web.jsonl"
        for backend, (judge, generator) in BACKENDS.items():
            report = await run_eval(
                folder / "qa.jsonl",
                folder / "corpus.jsonl",
                web if web.exists() else None,
                strategies,
                out / name / backend,
                limit=limit,
                seed=seed,
                concurrency=1,
                context_overrides={"judge_backend": judge, "generator_backend": generator},
                progress=False,
            )
            for strategy in strategies:
                rows.append(row(name, backend, strategy, report["strategies"][strategy]["overall"]))
            print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join([HEADER, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reflexrag.benchmarks.llm_eval")
    parser.add_argument("--limit", type=int, default=12, help="questions per set")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--strategies", default="naive,self_rag,crag")
    parser.add_argument("--base-url", help="a running OpenAI-compatible server")
    parser.add_argument("--model", help="its model name")
    parser.add_argument("--out", type=Path, default=Path("llm-eval"))
    args = parser.parse_args(argv)
    settings = get_settings()
    with contextlib.ExitStack() as stack:
        if args.base_url:
            settings.openai_base_url, model = args.base_url, args.model or settings.grader_model
        else:
            log = args.out / "model-server.log"
            args.out.mkdir(parents=True, exist_ok=True)
            server = stack.enter_context(model_server.running(log=log))
            settings.openai_base_url, model = server.base_url, server.model
        settings.grader_model = settings.generator_model = model
        get_chat_model.cache_clear()
        table = asyncio.run(evaluate(args.strategies.split(","), args.limit, args.seed, args.out))
    print(table)
    (args.out / "table.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
