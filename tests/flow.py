"""Helpers for control-flow tests: judges and generator backed by scripted fake chat models,
and embeddings that leave the local judges only words to go by.

Each fake replies in call order and raises when it runs out, so a test also pins how many
judge calls every branch makes.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS
from reflexrag.nodes.judges.llm import LLMGenerator, LLMJudge
from reflexrag.state import Context

SELF_RAG_FIRST_PASS = [
    "decide_retrieval",
    "retrieve",
    "grade_documents",
    "generate",
    "grade_generation",
    "finish",
]
"""The steps of a self_rag run that answers on its first pass."""


def scripted(
    monkeypatch: Any,
    grader_replies: list[str],
    generator_replies: list[str],
    top_k: int = 2,
    **overrides: Any,
) -> Context:
    """A context on the ``flow`` KB whose judge and generator reply from these scripts."""
    grader = GenericFakeChatModel(messages=iter([AIMessage(r) for r in grader_replies]))
    generator = GenericFakeChatModel(messages=iter([AIMessage(r) for r in generator_replies]))
    monkeypatch.setitem(JUDGE_BACKENDS, "fake", lambda ctx: LLMJudge(grader))
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda ctx: LLMGenerator(generator))
    return Context(
        kb="flow", top_k=top_k, judge_backend="fake", generator_backend="fake", **overrides
    )


class FakeEmbeddings:
    """Every text embeds to the same vector: scores come from shared words alone, unless the
    languages differ."""

    def embed_query(self, text):
        return [1.0, 0.0]

    def embed_documents(self, texts):
        return [[0.85, (1 - 0.85**2) ** 0.5] for _ in texts]


def nodes(state: dict[str, Any]) -> list[str]:
    return [entry["node"] for entry in state["steps"]]
