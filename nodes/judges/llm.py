"""The LLM backend: judges and generator on any LangChain chat model (``ChatOpenAI`` by default).

Verdicts are parsed robustly: structured output via function calling first, then a JSON
reply, then keywords in free text. A verdict that cannot be parsed counts as the negative
answer, so a badly behaved model degrades a run but never crashes it. Grader calls carry the
``nostream`` tag so their tokens never reach a ``messages`` stream; generator calls do not.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import ClassVar, Literal, TypeVar

from langchain_core.documents import Document
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, Field, ValidationError

from reflexrag.nodes import prompts
from reflexrag.nodes.judges.base import (
    Answer,
    ComplexityVerdict,
    GroundingGrade,
    RelevanceGrade,
    RetrievalDecision,
    RoundAssessment,
    UsefulnessGrade,
)
from reflexrag.nodes.judges.rules import complexity_features
from reflexrag.nodes.judges.usage import record
from reflexrag.providers.text import count_tokens
from reflexrag.state import QueryKind

NOSTREAM = {"tags": ["nostream"]}
_PARSE_ERRORS = (
    NotImplementedError,
    OutputParserException,
    ValidationError,
    ValueError,
    KeyError,
    TypeError,
)


class BinaryVerdict(BaseModel):
    """A yes/no verdict."""

    binary_score: Literal["yes", "no"] = Field(description="'yes' or 'no'")


class ScoredVerdict(BinaryVerdict):
    """A yes/no verdict with a 0-1 score."""

    score: float | None = Field(default=None, ge=0, le=1, description="relevance from 0 to 1")


class GroundingVerdict(BaseModel):
    """How much of the answer the facts support."""

    level: Literal["fully", "partially", "no"] = Field(description="'fully', 'partially' or 'no'")


class RetrievalVerdict(BaseModel):
    """Whether documents are needed."""

    retrieve: Literal["yes", "no"] = Field(description="'yes' or 'no'")
    reason: str = Field(default="", description="one short sentence")


class ComplexityReply(BaseModel):
    """Adaptive-RAG's classification of a question."""

    level: Literal["no_retrieval", "single_step", "multi_step"] = Field(
        description="'no_retrieval', 'single_step' or 'multi_step'"
    )
    ambiguous: bool = Field(default=False, description="it points at something never named")
    clarifying_question: str = Field(default="", description="asked back when ambiguous")
    reason: str = Field(default="", description="one short sentence")


class RoundReply(BaseModel):
    """Scores of one iterative-retrieval round."""

    completeness: int = Field(ge=1, le=10, description="1-10")
    relevance: int = Field(default=5, ge=0, le=10, description="0-10")
    quality: int = Field(default=5, ge=0, le=10, description="0-10")
    missing: list[str] = Field(default_factory=list, description="search terms still missing")


VerdictT = TypeVar("VerdictT", bound=BaseModel)


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


def parse_verdict(text: str, schema: type[VerdictT]) -> VerdictT | None:
    """JSON object anywhere in the reply, else the first yes/no-style keyword; else None."""
    for match in re.finditer(r"\{.*?\}", text, re.DOTALL):
        try:
            return schema.model_validate(json.loads(match.group(0)))
        except (json.JSONDecodeError, ValidationError):
            continue
    field_name, field = next(iter(schema.model_fields.items()))
    allowed = getattr(field.annotation, "__args__", ())  # a Literal's values
    if not allowed or not all(isinstance(value, str) for value in allowed):
        return None
    lowered = text.lower()
    positions = {
        value: m.start()
        for value in allowed
        if (m := re.search(rf"\b{re.escape(value)}\b", lowered))
    }
    if positions:
        return schema.model_validate({field_name: min(positions, key=positions.get)})
    return None


def _usage(message: BaseMessage, prompt: str) -> tuple[int, int]:
    meta = getattr(message, "usage_metadata", None)
    if meta:
        return meta.get("input_tokens", 0), meta.get("output_tokens", 0)
    return count_tokens(prompt), count_tokens(_text(message))


def _numbered(documents: Sequence[Document]) -> str:
    return "\n\n".join(f"[{n}] {doc.page_content}" for n, doc in enumerate(documents, start=1))


class LLMJudge:
    """Reflection judges backed by a chat model; calls are counted as ``llm.<role>``."""

    backend = "llm"
    crag_thresholds: ClassVar[dict[str, tuple[float, float]]] = {
        "any": (0.7, 0.3),
        "mean_top3": (0.7, 0.3),
    }

    def __init__(self, grader: BaseChatModel, relevance_threshold: float | None = None) -> None:
        self.grader = grader
        self.relevance_threshold = 0.5 if relevance_threshold is None else relevance_threshold

    async def _verdict(self, prompt: str, schema: type[VerdictT], role: str) -> VerdictT | None:
        messages = [HumanMessage(prompt)]
        try:
            structured = self.grader.with_structured_output(
                schema, method="function_calling", include_raw=True
            )
            result = await structured.ainvoke(messages, config=NOSTREAM)
            raw = result.get("raw")
            record(self.backend, role, *(_usage(raw, prompt) if raw else (count_tokens(prompt), 0)))
            if isinstance(result.get("parsed"), schema):
                return result["parsed"]
        except _PARSE_ERRORS:
            pass
        fields = ", ".join(schema.model_fields)
        fallback = prompt + prompts.JSON_FALLBACK_SUFFIX.format(fields=fields)
        reply = await self.grader.ainvoke([HumanMessage(fallback)], config=NOSTREAM)
        record(self.backend, role, *_usage(reply, fallback))
        return parse_verdict(_text(reply), schema)

    async def needs_retrieval(
        self, question: str, closest: Sequence[Document] = ()
    ) -> RetrievalDecision:
        excerpt = closest[0].page_content[:400] if closest else "(empty)"
        prompt = prompts.RETRIEVAL_DECISION_PROMPT.format(question=question, best_match=excerpt)
        verdict = await self._verdict(prompt, RetrievalVerdict, "router")
        if verdict is None:
            # Retrieving is the safe default when the router's answer is unreadable.
            return RetrievalDecision(True, "unparseable router verdict; retrieving")
        return RetrievalDecision(verdict.retrieve == "yes", verdict.reason or "llm router")

    async def grade_documents(
        self, question: str, documents: Sequence[Document]
    ) -> list[RelevanceGrade]:
        verdicts = await asyncio.gather(
            *(
                self._verdict(
                    prompts.DOCUMENT_GRADER_PROMPT.format(
                        document=doc.page_content, question=question
                    ),
                    ScoredVerdict,
                    "grader",
                )
                for doc in documents
            )
        )
        grades = []
        for verdict in verdicts:
            if verdict is None:
                grades.append(RelevanceGrade(0.0, False))
                continue
            relevant = verdict.binary_score == "yes"
            score = verdict.score if verdict.score is not None else float(relevant)
            grades.append(RelevanceGrade(round(score, 4), relevant))
        return grades

    async def grade_grounding(self, answer: str, documents: Sequence[Document]) -> GroundingGrade:
        prompt = prompts.GROUNDING_GRADER_PROMPT.format(
            documents=_numbered(documents), answer=answer
        )
        verdict = await self._verdict(prompt, GroundingVerdict, "grader")
        level = {"fully": "fully", "partially": "partially"}.get(
            verdict.level if verdict else "", "none"
        )
        return GroundingGrade(level, {"fully": 1.0, "partially": 0.5}.get(level, 0.0))

    async def grade_usefulness(self, question: str, answer: str) -> UsefulnessGrade:
        prompt = prompts.USEFULNESS_GRADER_PROMPT.format(question=question, answer=answer)
        verdict = await self._verdict(prompt, BinaryVerdict, "grader")
        useful = verdict is not None and verdict.binary_score == "yes"
        return UsefulnessGrade(useful, float(useful), "llm grader" if verdict else "unparseable")

    async def rewrite_query(
        self, question: str, attempt: int, documents: Sequence[Document]
    ) -> str:
        prompt = prompts.REWRITE_PROMPT.format(question=question, attempt=attempt)
        reply = await self.grader.ainvoke([HumanMessage(prompt)], config=NOSTREAM)
        record(self.backend, "rewriter", *_usage(reply, prompt))
        rewritten = _text(reply).strip().strip('"').strip()
        return rewritten.splitlines()[0] if rewritten else question

    async def search_query(self, question: str) -> str:
        prompt = prompts.SEARCH_QUERY_PROMPT.format(question=question)
        reply = await self.grader.ainvoke([HumanMessage(prompt)], config=NOSTREAM)
        record(self.backend, "rewriter", *_usage(reply, prompt))
        words = _text(reply).strip().strip('"').split()
        return " ".join(words[:3]) or question

    async def classify_complexity(
        self, question: str, history: Sequence[str] = ()
    ) -> ComplexityVerdict:
        prompt = prompts.COMPLEXITY_PROMPT.format(
            question=question, history=" | ".join(history) or "(none)"
        )
        reply = await self._verdict(prompt, ComplexityReply, "classifier")
        features = complexity_features(question)
        if reply is None:
            # Single-step retrieval is the safe middle when the verdict is unreadable.
            return ComplexityVerdict("single_step", "unparseable classifier verdict", features)
        ambiguous = reply.ambiguous and not history and bool(reply.clarifying_question)
        return ComplexityVerdict(
            reply.level,
            reply.reason or "llm classifier",
            features,
            ambiguous,
            reply.clarifying_question if ambiguous else "",
        )

    async def assess_round(
        self,
        question: str,
        draft: str,
        round_documents: Sequence[Document],
        context: Sequence[Document],
    ) -> RoundAssessment:
        prompt = prompts.ROUND_ASSESSMENT_PROMPT.format(
            round_documents=_numbered(round_documents) or "(none)",
            context=_numbered(context) or "(none)",
            draft=draft or "(none)",
            question=question,
        )
        reply = await self._verdict(prompt, RoundReply, "assessor")
        if reply is None:
            # Unreadable: neither stop early nor claim the round failed; the round limit ends it.
            return RoundAssessment(5, 5, 5)
        return RoundAssessment(reply.relevance, reply.completeness, reply.quality, reply.missing)

    async def next_query(
        self, question: str, draft: str, kind: QueryKind, missing: Sequence[str]
    ) -> str:
        prompt = prompts.NEXT_QUERY_PROMPTS[kind].format(
            question=question, draft=draft, missing=", ".join(missing) or "(unknown)"
        )
        reply = await self.grader.ainvoke([HumanMessage(prompt)], config=NOSTREAM)
        record(self.backend, "rewriter", *_usage(reply, prompt))
        query = _text(reply).strip().strip('"').strip()
        return query.splitlines()[0] if query else question


class LLMGenerator:
    """Writes a cited answer with a chat model; its tokens stream to ``messages`` listeners."""

    backend = "llm"
    reports_confidence = False

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    async def generate(
        self, question: str, documents: Sequence[Document], attempt: int = 1
    ) -> Answer:
        if documents:
            prompt = prompts.GENERATE_PROMPT.format(context=_numbered(documents), question=question)
        else:
            prompt = prompts.DIRECT_ANSWER_PROMPT.format(question=question)
        reply: AIMessage = await self.model.ainvoke([HumanMessage(prompt)])
        record(self.backend, "generator", *_usage(reply, prompt))
        text = _text(reply).strip()
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
        used = [str(doc.id) for n, doc in enumerate(documents, start=1) if n in cited]
        kind = "generative" if documents else "no_retrieval"
        return Answer(text, kind, used or [str(doc.id) for doc in documents])
