"""Per-node accounting of judge/model calls and tokens, without threading it through every call.

A node opens ``with metered() as meter:``; backends call :func:`record`, which finds the meter
through a context variable (copied into ``asyncio`` tasks and ``to_thread`` calls, and the meter
itself is shared), and the node returns ``meter.counts`` as its ``usage`` update.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[Meter | None] = ContextVar("reflexrag_meter", default=None)


class Meter:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, key: str, amount: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + amount


@contextmanager
def metered() -> Iterator[Meter]:
    meter = Meter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def record(backend: str, role: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
    """Count one call of ``role`` (grader, generator, rewriter, router) on ``backend``."""
    meter = _current.get()
    if meter is None:
        return
    meter.add(f"{backend}.{role}")
    if prompt_tokens:
        meter.add("tokens.prompt", prompt_tokens)
    if completion_tokens:
        meter.add("tokens.completion", completion_tokens)


def tally(key: str, amount: int = 1) -> None:
    """Count something that is not a call: ``llm_parse_failures``, chunks a cascade decided."""
    meter = _current.get()
    if meter is not None and amount:
        meter.add(key, amount)
