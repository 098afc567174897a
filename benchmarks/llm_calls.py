"""LLM calls and prompt tokens per question, per strategy and ``llm_judging`` mode, with
contains-gold, against the LangGraph Self-RAG tutorial's shape.

The model is a counting stand-in that answers every reflexrag prompt as the local judges and
the extractive generator would (a realistic mix of verdicts, reproducible and free), so the
modes differ only in how many calls and tokens they spend. In ``cascade`` the stand-in agrees
with the local judge by construction, so its accuracy here equals ``batched``; what a real
model changes is measured by the LLM-mode eval (README).

    python -m reflexrag.benchmarks.llm_calls --limit 150
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS
from reflexrag.nodes.judges.llm import LLMGenerator, LLMJudge
from reflexrag.nodes.judges.local import ExtractiveGenerator, LocalJudge
from reflexrag.providers.embeddings import get_embeddings
from reflexrag.state import Context

MODES = ("per_call", "batched", "cascade")
STRATEGIES = ("self_rag", "crag", "self_crag")
BASELINE = "tutorial_self_rag"
_PASSAGE_RE = re.compile(r"^\[(\d+)\] (.*?)(?=^\[\d+\] |\Z)", re.M | re.S)


def _between(text: str, start: str, end: str | None = None) -> str:
    head = text.split(start, 1)[1] if start in text else ""
    return (head.split(end, 1)[0] if end and end in head else head).strip()


def _passages(block: str) -> list[Document]:
    return [Document(body.strip(), id=n) for n, body in _PASSAGE_RE.findall(block)]


class MirrorChatModel(BaseChatModel):
    """Replies to reflexrag's prompts as the local backend would decide them."""

    @property
    def _llm_type(self) -> str:
        return "mirror"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content).split("\n\nReply with a single JSON object")[0]
        reply = await _mirror_reply(prompt)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


@functools.cache
def _judge() -> LocalJudge:
    return LocalJudge(get_embeddings())


@functools.cache
def _generator() -> ExtractiveGenerator:
    return ExtractiveGenerator(get_embeddings())


async def _mirror_reply(prompt: str) -> str | dict[str, Any]:
    judge = _judge()
    question = _between(prompt, "\n\nQuestion: ")
    if prompt.startswith("You decide whether"):
        closest = [Document(_between(prompt, "passage: ", "\n\nQuestion"))]
        decision = await judge.needs_retrieval(question, closest)
        return {"retrieve": "yes" if decision.needed else "no"}
    if prompt.startswith("You grade whether"):
        document = Document(_between(prompt, "Document:\n", "\n\nQuestion: "))
        (grade,) = await judge.grade_documents(question, [document])
        return {"binary_score": "yes" if grade.relevant else "no", "score": grade.score}
    if prompt.startswith("You grade retrieved passages"):
        passages = _passages(_between(prompt, "Passages:\n", "\n\nQuestion: "))
        grades = await judge.grade_documents(question, passages)
        return {"scores": [round(grade.score * 10) for grade in grades]}
    if prompt.startswith(("You check whether an answer is grounded", "You check an answer")):
        facts_end = "\n\nQuestion: " if "\n\nQuestion: " in prompt else "\n\nAnswer: "
        facts = _passages(_between(prompt, "Facts:\n", facts_end))
        grade = await judge.grade_answer(question, _between(prompt, "\n\nAnswer: "), facts)
        level = {"none": "no"}.get(grade.grounding.level, grade.grounding.level)
        useful = "yes" if grade.usefulness and grade.usefulness.useful else "no"
        return {"level": level, "answers_question": useful}
    if prompt.startswith("You check whether an answer resolves"):
        question = _between(prompt, "Question: ", "\n\nAnswer: ")
        usefulness = await judge.grade_usefulness(question, _between(prompt, "\n\nAnswer: "))
        return {"binary_score": "yes" if usefulness.useful else "no"}
    if prompt.startswith("You answer questions"):
        context = _passages(_between(prompt, "Context:\n", "\n\nQuestion: "))
        answer = await _generator().generate(question, context)
        cited = " ".join(f"[{n}]" for n, d in enumerate(context, 1) if d.id in answer.used_ids)
        return f"{answer.text} {answer.quote} {cited}".strip()
    if prompt.startswith("Rewrite the question"):
        return await judge.rewrite_query(question, 1, [])
    if prompt.startswith("Turn the question"):
        return await judge.search_query(question)
    return "yes"


def register_mirror() -> None:
    """Add the ``mirror`` judge and generator backends (cascade gets the real local judge,
    and the real local reader vouching for written answers, as the ``llm`` backends do)."""
    mirror = MirrorChatModel()

    def judge(context: Context) -> LLMJudge:
        local = _judge() if context.llm_judging == "cascade" else None
        return LLMJudge(mirror, None, context.llm_judging, local)

    def generator(context: Context) -> LLMGenerator:
        reader = _generator() if context.llm_judging == "cascade" else None
        return LLMGenerator(mirror, reader=reader)

    JUDGE_BACKENDS["mirror"] = judge
    GENERATOR_BACKENDS["mirror"] = generator


def _row(name: str, mode: str, summary: dict[str, Any], baseline: dict[str, Any]) -> str:
    calls, prompt_tokens = summary["llm_calls"], summary["tokens"].get("prompt", 0.0)
    ratio = calls / baseline["llm_calls"] if baseline["llm_calls"] else float("nan")
    token_ratio = prompt_tokens / baseline["tokens"]["prompt"] if baseline["tokens"] else 0.0
    return (
        f"| {name} | {mode} | {calls:.2f} | {ratio:.2f}× | {prompt_tokens:,.0f} | "
        f"{token_ratio:.2f}× | {summary.get('answer_contains', 0):.3f} |"
    )


async def measure(fixtures: Path, limit: int, seed: int, out_dir: Path) -> str:
    from reflexrag.benchmarks.evaluate import run_eval

    register_mirror()
    rows, baseline = [], None
    for mode in MODES:
        strategies = [BASELINE, *STRATEGIES] if mode == "per_call" else list(STRATEGIES)
        report = await run_eval(
            fixtures / "qa.jsonl",
            fixtures / "corpus.jsonl",
            fixtures / "web.jsonl",
            strategies,
            out_dir / mode,
            limit=limit,
            seed=seed,
            context_overrides={
                "judge_backend": "mirror",
                "generator_backend": "mirror",
                "llm_judging": mode,
            },
            progress=False,
        )
        summaries = report["strategies"]
        baseline = baseline or summaries[BASELINE]["overall"]
        if mode == "per_call":
            rows.append(_row(BASELINE, "tutorial", baseline, baseline))
        rows += [_row(s, mode, summaries[s]["overall"], baseline) for s in STRATEGIES]
    header = (
        "| strategy | llm_judging | LLM calls / q | vs tutorial | prompt tokens / q | "
        "vs tutorial | contains gold |\n|---|---|---|---|---|---|---|"
    )
    return "\n".join([header, *sorted(rows, key=lambda r: r.split("|")[1])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reflexrag.benchmarks.llm_calls")
    default = Path(__file__).resolve().parents[1].parent / "shared/rag-eval/fixtures"
    parser.add_argument("--fixtures", type=Path, default=default)
    parser.add_argument("--limit", type=int, default=150, help="questions (stratified sample)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("llm-calls-report"))
    args = parser.parse_args(argv)
    print(asyncio.run(measure(args.fixtures, args.limit, args.seed, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
