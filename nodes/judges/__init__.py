"""Judges and generators, chosen per run by ``Context.judge_backend`` / ``generator_backend``.

Backends are looked up in ``JUDGE_BACKENDS`` / ``GENERATOR_BACKENDS``; tests register fakes there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reflexrag.nodes.judges.base import (
    Answer,
    AnswerGrade,
    ComplexityVerdict,
    Generator,
    GroundingGrade,
    Judge,
    JudgeConfigurationError,
    RelevanceGrade,
    RetrievalDecision,
    RoundAssessment,
    UsefulnessGrade,
)
from reflexrag.state import Context


def _local_judge(context: Context) -> Judge:
    from reflexrag.nodes.judges.local import LocalJudge
    from reflexrag.providers.embeddings import get_embeddings

    return LocalJudge(get_embeddings(), context.relevance_threshold)


def _llm_judge(context: Context) -> Judge:
    from reflexrag.nodes.judges.llm import LLMJudge
    from reflexrag.providers.models import get_chat_model
    from reflexrag.providers.text import load_language_data

    load_language_data()  # here, in the worker thread the first judge is built in
    local = _local_judge(Context()) if context.llm_judging == "cascade" else None
    return LLMJudge(
        get_chat_model("grader"), context.relevance_threshold, context.llm_judging, local
    )


def _local_generator(context: Context) -> Generator:
    from reflexrag.nodes.judges.local import ExtractiveGenerator
    from reflexrag.providers.embeddings import get_embeddings

    return ExtractiveGenerator(get_embeddings())


def _llm_generator(context: Context) -> Generator:
    from reflexrag.nodes.judges.llm import LLMGenerator
    from reflexrag.providers.models import get_chat_model
    from reflexrag.providers.text import load_language_data

    # The generator finds the passages an answer cites by its terms (jieba, simplemma):
    # their data loads here, in the worker thread the first generator is built in.
    load_language_data()
    # In cascade mode the local reader vouches for a written answer: its confidence is how
    # sure the reader is that the passages answer the question (see LLMGenerator.vouched).
    reader = _local_generator(context) if context.llm_judging == "cascade" else None
    return LLMGenerator(get_chat_model("generator"), reader=reader)


JUDGE_BACKENDS: dict[str, Callable[[Context], Judge]] = {"local": _local_judge, "llm": _llm_judge}
GENERATOR_BACKENDS: dict[str, Callable[[Context], Generator]] = {
    "local": _local_generator,
    "llm": _llm_generator,
}


def _pick(registry: dict[str, Callable[[Context], Any]], name: str, what: str) -> Any:
    if name not in registry:
        raise JudgeConfigurationError(f"unknown {what} backend {name!r}; use {', '.join(registry)}")
    return registry[name]


def get_judge(context: Context) -> Judge:
    return _pick(JUDGE_BACKENDS, context.judge_backend, "judge")(context)


def get_generator(context: Context) -> Generator:
    return _pick(GENERATOR_BACKENDS, context.generator_backend, "generator")(context)


__all__ = [
    "GENERATOR_BACKENDS",
    "JUDGE_BACKENDS",
    "Answer",
    "AnswerGrade",
    "ComplexityVerdict",
    "Generator",
    "GroundingGrade",
    "Judge",
    "RelevanceGrade",
    "RetrievalDecision",
    "RoundAssessment",
    "UsefulnessGrade",
    "get_generator",
    "get_judge",
]
