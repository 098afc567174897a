"""Concurrent streamed runs on ``reflexrag serve`` against ``langgraph dev``: prints numbers.

Both servers serve the same graph from the repository's ``langgraph.json`` (``self_rag`` by
default, the real local judges over the sample knowledge base), each with its own data dir,
started side by side. Each round sends ``--runs`` streamed runs at once to one server, then to
the other (the order alternates by round, so a busy spell of the machine falls on both), each
run on a new thread as Studio makes them (reflexrag checkpoints them to SQLite durably,
``langgraph dev`` to memory) and each asking a different question. Both first answer
``WARMUP`` untimed runs. Per server it prints the runs per second, p50/p95 latency and CPU
seconds a run (the server's processes, user + system, from ``/proc``), and reflexrag's ratios
to ``langgraph dev``; only the ratios and CPU seconds mean much on a loaded machine.

    python -m reflexrag.benchmarks.concurrency [--runs 50] [--rounds 3] [--strategy self_rag]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from reflexrag.benchmarks.replicas import percentile, questions, tree_cpu_seconds
from reflexrag.benchmarks.services import free_port, start_langgraph_dev, start_server

REPO = Path(__file__).resolve().parents[1]
WARMUP = 10
"""Untimed runs per server before the first round."""


async def run_on_thread(url: str, strategy: str, question: str) -> float:
    """One streamed run on a new thread: its latency from the run's request to its end."""
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=900)
    thread = await client.threads.create()
    started = time.perf_counter()
    async for chunk in client.runs.stream(
        thread["thread_id"], strategy, input={"question": question}, stream_mode="updates"
    ):
        if chunk.event == "error":
            raise RuntimeError(f"run failed: {chunk.data}")
    return time.perf_counter() - started


@dataclass(frozen=True)
class Round:
    wall: float
    latencies: list[float]
    cpu: float
    """The server's CPU seconds over the round."""


async def one_round(url: str, pid: int, strategy: str, asked: list[str]) -> Round:
    cpu = tree_cpu_seconds([pid])
    started = time.perf_counter()
    latencies = await asyncio.gather(*(run_on_thread(url, strategy, q) for q in asked))
    wall = time.perf_counter() - started
    return Round(wall, list(latencies), tree_cpu_seconds([pid]) - cpu)


async def measure(
    servers: dict[str, tuple[str, int]], strategy: str, runs: int, rounds: int
) -> dict[str, list[Round]]:
    asked = questions(WARMUP + runs * rounds)
    for url, _ in servers.values():
        await asyncio.gather(*(run_on_thread(url, strategy, q) for q in asked[:WARMUP]))
    results: dict[str, list[Round]] = {name: [] for name in servers}
    names = list(servers)
    for number in range(rounds):
        batch = asked[WARMUP + number * runs : WARMUP + (number + 1) * runs]
        for name in names if number % 2 == 0 else names[::-1]:
            url, pid = servers[name]
            results[name].append(await one_round(url, pid, strategy, batch))
    return results


def summary(rounds: list[Round]) -> dict[str, float]:
    latencies = [s for r in rounds for s in r.latencies]
    return {
        "runs_per_s": len(latencies) / sum(r.wall for r in rounds),
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 0.95),
        "cpu_per_run": sum(r.cpu for r in rounds) / len(latencies),
    }


def main(runs: int, rounds: int, strategy: str) -> None:
    load = os.getloadavg()[0]
    print(
        f"{os.cpu_count()} CPUs, load {load:.1f} at the start; {rounds} rounds of {runs} "
        f"concurrent streamed {strategy} runs a server, each on a new thread, local judges"
    )
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reflexrag-conc-")))
        ours_dir, dev_dir, workdir = root / "serve", root / "dev-data", root / "dev"
        for folder in (ours_dir, dev_dir, workdir):
            folder.mkdir()
        servers: dict[str, tuple[str, int]] = {}
        for name, start in (
            ("reflexrag serve", lambda port: start_server(ours_dir, port)),
            (
                "langgraph dev",
                lambda port: start_langgraph_dev(REPO / "langgraph.json", dev_dir, port, workdir),
            ),
        ):
            port = free_port()
            process = start(port)
            stack.callback(process.wait)
            stack.callback(process.terminate)
            servers[name] = (f"http://127.0.0.1:{port}", process.pid)
        results = asyncio.run(measure(servers, strategy, runs, rounds))
    rows = {name: summary(done) for name, done in results.items()}
    theirs = rows["langgraph dev"]
    print("| server | runs/s | p50 s | p95 s | CPU s/run | throughput vs dev | CPU/run vs dev |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['runs_per_s']:.2f} | {row['p50']:.2f} | {row['p95']:.2f} "
            f"| {row['cpu_per_run']:.3f} | {row['runs_per_s'] / theirs['runs_per_s']:.2f}× "
            f"| {row['cpu_per_run'] / theirs['cpu_per_run']:.2f}× |"
        )
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="concurrent runs a round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server")
    parser.add_argument("--strategy", default="self_rag")
    args = parser.parse_args()
    main(args.runs, args.rounds, args.strategy)
