"""Chat models for the LLM backend: ``ChatOpenAI`` against OpenAI or any compatible server.

Every call goes through :func:`call_model`, which caps the calls in flight per process (a CPU
model server answers one or two at a time; thirty parallel grader calls only time out) and
turns a dead, slow or refusing server into one :class:`ModelServerError` with a readable
message instead of a client library's traceback.
"""

from __future__ import annotations

import asyncio
import weakref
from functools import lru_cache
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from reflexrag.providers.settings import get_settings


class ModelConfigurationError(RuntimeError):
    """The LLM backend was chosen but no model server is configured."""


class ModelServerError(RuntimeError):
    """The model server could not be reached, timed out, or refused a call."""


class UnsupportedRequestError(ModelServerError):
    """The server rejected the request's shape (a ``response_format`` or tools it lacks)."""


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _slot() -> asyncio.Semaphore:
    # One semaphore per event loop (asyncio primitives cannot cross loops) and limit.
    loop = asyncio.get_running_loop()
    limit = get_settings().llm_max_concurrency
    if loop not in _slots or _slots[loop][0] != limit:
        _slots[loop] = (limit, asyncio.Semaphore(limit))
    return _slots[loop][1]


def _server_error(exc: Exception) -> ModelServerError | None:
    """The error to raise for a failed call, or None when ``exc`` is not a server failure."""
    import httpx
    import openai

    where = get_settings().openai_base_url or "the OpenAI API"
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        return UnsupportedRequestError(f"the model server at {where} refused the request: {exc}")
    if isinstance(exc, openai.APITimeoutError | asyncio.TimeoutError | httpx.TimeoutException):
        timeout = get_settings().llm_timeout_s
        return ModelServerError(f"the model server at {where} did not answer within {timeout} s")
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        return ModelServerError(f"cannot reach the model server at {where}: {exc}")
    if isinstance(exc, openai.APIStatusError):
        return ModelServerError(
            f"the model server at {where} answered {exc.status_code}: {exc.message}"
        )
    return None


async def call_model(
    model: Runnable[Any, BaseMessage], messages: list[BaseMessage], config: RunnableConfig
) -> AIMessage:
    """One chat-model call, at most ``llm_max_concurrency`` at a time in this process."""
    import openai

    async with _slot():
        try:
            reply = await model.ainvoke(messages, config=config)
        except openai.LengthFinishReasonError as exc:
            # A reply cut at max_tokens is still a reply (the client refuses to hand over a
            # truncated structured one): the caller parses what there is.
            return _truncated_reply(exc.completion)
        except Exception as exc:
            error = _server_error(exc)
            if error is None:
                raise
            raise error from exc
    return reply if isinstance(reply, AIMessage) else AIMessage(str(reply.content))


def _truncated_reply(completion: Any) -> AIMessage:
    usage = completion.usage
    return AIMessage(
        completion.choices[0].message.content or "",
        usage_metadata={
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
        if usage
        else None,
    )


@lru_cache(maxsize=4)
def get_chat_model(role: str) -> BaseChatModel:
    """The chat model for ``role`` ("grader" or "generator")."""
    from langchain_openai import ChatOpenAI

    settings = get_settings()
    if not (settings.openai_api_key or settings.openai_base_url):
        raise ModelConfigurationError(
            "the llm backend needs a model server: set REFLEXRAG_OPENAI_BASE_URL (or "
            "OPENAI_BASE_URL) to an OpenAI-compatible server, or REFLEXRAG_OPENAI_API_KEY (or "
            "OPENAI_API_KEY) for OpenAI's"
        )
    grader = role == "grader"
    return ChatOpenAI(
        model=settings.grader_model if grader else settings.generator_model,
        base_url=settings.openai_base_url,
        # Local OpenAI-compatible servers accept any key; the client insists on one.
        api_key=settings.openai_api_key or "not-needed",
        temperature=0,
        # A verdict is a few words; a runaway judge reply must not cost thousands of tokens.
        max_tokens=settings.judge_max_tokens if grader else settings.generator_max_tokens,
        timeout=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        # Servers that stream report token usage only when asked to.
        stream_usage=True,
    )
