"""Benchmark of the HTTP service on loopback: prints numbers, asserts nothing.

Starts the app in-process on a free port with its own temporary data dir and, by default,
instant fake judges (``--backend fast``) so the numbers show the service's own overhead:
streaming throughput of one run, time to first event, and latency of N concurrent runs.
``--backend local`` measures the real offline judges instead.

Run: ``python -m reflexrag.benchmarks.service [--concurrent 50] [--backend fast|local]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from langchain_core.documents import Document

from reflexrag.benchmarks.services import free_port
from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS
from reflexrag.nodes.judges.base import (
    Answer,
    GroundingGrade,
    RelevanceGrade,
    RetrievalDecision,
    UsefulnessGrade,
    grounded_then_useful,
)

QUESTION = {"question": "What does CRAG do when retrieval is incorrect?"}


class InstantJudge:
    """Says yes to everything at once: isolates the service from judging cost."""

    backend = "fast"
    relevance_threshold = 0.5

    async def needs_retrieval(self, question: str, closest: Sequence[Document] = ()):
        return RetrievalDecision(True, "benchmark")

    async def grade_documents(self, question: str, documents: Sequence[Document]):
        return [RelevanceGrade(1.0, True) for _ in documents]

    async def grade_grounding(self, answer: str, documents: Sequence[Document]):
        return GroundingGrade("fully", 1.0)

    async def grade_usefulness(self, question: str, answer: str):
        return UsefulnessGrade(True, 1.0)

    async def grade_answer(
        self, question: str, answer: str, documents: Sequence[Document], quote: str = ""
    ):
        return await grounded_then_useful(self, question, answer, documents, quote)

    async def rewrite_query(self, question: str, attempt: int, documents: Sequence[Document]):
        return question


class InstantGenerator:
    backend = "fast"

    async def generate(
        self,
        question: str,
        documents: Sequence[Document],
        attempt: int = 1,
        background: Sequence[Document] = (),
    ):
        first = documents[0] if documents else None
        return Answer(
            first.page_content[:200] if first else "",
            "extractive",
            [str(first.id)] if first else [],
        )


async def one_streamed_run(client) -> tuple[int, float, float]:
    """(events, seconds, seconds to first event) of one streamed run."""
    started = time.perf_counter()
    first = None
    events = 0
    async for _ in client.runs.stream(
        None,
        "self_rag",
        input=QUESTION,
        context=CONTEXT,
        stream_mode=["updates", "values", "custom"],
    ):
        if first is None:
            first = time.perf_counter() - started
        events += 1
    return events, time.perf_counter() - started, first or 0.0


CONTEXT: dict[str, str] = {}


async def main(concurrent: int, backend: str) -> None:
    import uvicorn
    from langgraph_sdk import get_client

    from reflexrag.providers.settings import Settings
    from reflexrag.server.app import create_app

    if backend == "fast":
        JUDGE_BACKENDS["fast"] = lambda context: InstantJudge()
        GENERATOR_BACKENDS["fast"] = lambda context: InstantGenerator()
        CONTEXT.update(judge_backend="fast", generator_backend="fast")
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(Settings(data_dir=Path(folder)))
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        client = get_client(url=f"http://127.0.0.1:{port}")
        await one_streamed_run(client)  # warm-up: model load, first embeddings
        singles = [await one_streamed_run(client) for _ in range(10)]
        events = statistics.fmean(e for e, _, _ in singles)
        seconds = statistics.fmean(s for _, s, _ in singles)
        first = statistics.median(f for _, _, f in singles)
        print(
            f"backend={backend}: one streamed run: {events:.0f} events in {seconds * 1000:.1f} ms "
            f"= {events / seconds:.0f} events/s; time to first event (median of 10) "
            f"{first * 1000:.1f} ms"
        )
        started = time.perf_counter()
        results = await asyncio.gather(*(one_streamed_run(client) for _ in range(concurrent)))
        wall = time.perf_counter() - started
        latencies = sorted(s for _, s, _ in results)
        p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        print(
            f"{concurrent} concurrent streamed runs: p50 {statistics.median(latencies):.3f} s, "
            f"p99 {p99:.3f} s, wall {wall:.2f} s ({concurrent / wall:.1f} runs/s)"
        )
        server.should_exit = True
        await serving


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--backend", choices=["fast", "local"], default="fast")
    args = parser.parse_args()
    asyncio.run(main(args.concurrent, args.backend))
