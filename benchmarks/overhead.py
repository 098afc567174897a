"""Per-node cost of a reflexrag graph against a bare LangGraph graph of the same length.

self_rag runs with instant judges and a fixed retrieval (no embedding, no store), so what is
left is reflexrag's own work per node (context checks, step records, usage meters, custom
events) and LangGraph's. The bare graph is a chain of as many no-op nodes over a two-field
state. Both run without a checkpointer and with a SQLite one at ``durability="sync"`` (what
the service uses, so a run survives SIGKILL). Prints numbers, asserts nothing.

    python -m reflexrag.benchmarks.overhead --runs 200
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.documents import Document
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from reflexrag.benchmarks.service import InstantGenerator, InstantJudge
from reflexrag.graphs import compile_strategy
from reflexrag.nodes import rag
from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS

DOCUMENTS = [
    Document(f"Passage {n} about corrective retrieval.", id=f"p{n}#0", metadata={"doc_id": f"p{n}"})
    for n in range(4)
]
CONTEXT = {"judge_backend": "fast", "generator_backend": "fast"}
QUESTION = {"question": "What does CRAG do when retrieval is incorrect?"}


class ChainState(TypedDict, total=False):
    question: str
    steps: Annotated[list[str], operator.add]


def bare_chain(length: int) -> StateGraph:
    builder = StateGraph(ChainState)
    previous = START
    for n in range(length):
        name = f"node{n}"

        async def node(state: ChainState, name: str = name) -> dict[str, Any]:
            return {"steps": [name]}

        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


async def fixed_retrieval(context: Any, query: str, k: int, exclude: Sequence[str] = ()):
    return DOCUMENTS[:k]


async def per_node_ms(graph: Any, payload: dict, runs: int, **kwargs: Any) -> tuple[float, int]:
    """(milliseconds per node, nodes per run), the median over ``runs`` runs."""
    samples, nodes = [], 0
    for n in range(runs):
        config = {"configurable": {"thread_id": f"t{n}"}}
        began = time.perf_counter()
        nodes = 0
        async for _ in graph.astream(payload, config, stream_mode="updates", **kwargs):
            nodes += 1
        samples.append((time.perf_counter() - began) / max(1, nodes))
    return statistics.median(samples) * 1000, nodes


async def main(runs: int) -> None:
    JUDGE_BACKENDS["fast"] = lambda context: InstantJudge()
    GENERATOR_BACKENDS["fast"] = lambda context: InstantGenerator()
    rag.search_chunks = fixed_retrieval
    rows = []
    with tempfile.TemporaryDirectory(prefix="reflexrag-overhead-") as tmp:
        ours = compile_strategy("self_rag")
        ours_ms, length = await per_node_ms(ours, QUESTION, runs, context=CONTEXT)
        bare = bare_chain(length).compile()
        bare_ms, _ = await per_node_ms(bare, QUESTION, runs)
        rows.append(("no checkpointer", ours_ms, bare_ms))
        async with AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "cp.sqlite")) as saver:
            ours = compile_strategy("self_rag", saver)
            ours_ms, _ = await per_node_ms(ours, QUESTION, runs, context=CONTEXT, durability="sync")
            bare = bare_chain(length).compile(checkpointer=saver)
            bare_ms, _ = await per_node_ms(bare, QUESTION, runs, durability="sync")
            rows.append(("SQLite, durability sync", ours_ms, bare_ms))
    print(f"self_rag with instant judges: {length} nodes a run; median of {runs} runs")
    print("| checkpointer | reflexrag ms/node | bare LangGraph ms/node | ratio |")
    print("|---|---:|---:|---:|")
    for name, ours_ms, bare_ms in rows:
        print(f"| {name} | {ours_ms:.2f} | {bare_ms:.2f} | {ours_ms / bare_ms:.1f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m reflexrag.benchmarks.overhead")
    parser.add_argument("--runs", type=int, default=200, help="runs per measurement")
    asyncio.run(main(parser.parse_args().runs))
    sys.exit(0)
