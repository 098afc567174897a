"""Chat models for the LLM backend: ``ChatOpenAI`` against OpenAI or any compatible server."""

from __future__ import annotations

from functools import lru_cache

from langchain_core.language_models import BaseChatModel

from reflexrag.providers.settings import get_settings


class ModelConfigurationError(RuntimeError):
    """The LLM backend was chosen but no model server is configured."""


@lru_cache(maxsize=4)
def get_chat_model(role: str) -> BaseChatModel:
    """The chat model for ``role`` ("grader" or "generator")."""
    from langchain_openai import ChatOpenAI

    settings = get_settings()
    if not (settings.openai_api_key or settings.openai_base_url):
        raise ModelConfigurationError(
            "the llm backend needs REFLEXRAG_OPENAI_API_KEY or REFLEXRAG_OPENAI_BASE_URL"
        )
    model = settings.grader_model if role == "grader" else settings.generator_model
    return ChatOpenAI(
        model=model,
        base_url=settings.openai_base_url,
        # Local OpenAI-compatible servers accept any key; the client insists on one.
        api_key=settings.openai_api_key or "not-needed",
        temperature=0,
        timeout=settings.llm_timeout_s,
        max_retries=2,
    )
