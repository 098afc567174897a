"""Throughput of 1 and 2 replicas sharing Postgres and a Chroma server: prints numbers.

Starts a private Postgres cluster and a Chroma server on loopback, then for each replica count
starts that many ``reflexrag serve`` processes (the real local judges) and sends ``--runs``
streamed stateless runs at once, spread over the replicas in turn as a load balancer would; any
replica's worker may execute any of them. Each replica first answers ``WARMUP`` other questions
untimed, so the numbers are a warm service's. Each run asks a different question (the fixture's
English questions, over the sample knowledge base), so no cache answers for it. Every replica
count starts from a new database and vector store. Prints, per replica count, the wall time,
runs per second, p50/p99 latency, the ratio to one replica and the servers' CPU seconds a run.

    python -m reflexrag.benchmarks.replicas [--runs 50] [--replicas 1,2] [--strategy self_rag]

On one machine the replicas share its cores: the ratio shows what a second process buys there
(and that the run queue costs little); on separate machines each brings its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from reflexrag.benchmarks.services import (
    chroma_server,
    free_port,
    new_database,
    private_postgres,
    start_server,
)

FIXTURES = Path(__file__).resolve().parents[2] / "shared/rag-eval/fixtures"


WARMUP = 10
"""Untimed runs per replica before the measurement."""


def questions(count: int) -> list[str]:
    path = Path(os.environ.get("REFLEXRAG_FIXTURES", FIXTURES)) / "qa.jsonl"
    found: list[str] = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("lang") == "en" and row.get("question"):
                found.append(row["question"])
    found = found or ["What does CRAG do when retrieval is incorrect?"]
    return [found[n % len(found)] + ("" if n < len(found) else f" ({n})") for n in range(count)]


async def streamed_run(url: str, strategy: str, question: str) -> float:
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=600)
    started = time.perf_counter()
    async for chunk in client.runs.stream(
        None, strategy, input={"question": question}, stream_mode="updates"
    ):
        if chunk.event == "error":
            raise RuntimeError(f"run failed: {chunk.data}")
    return time.perf_counter() - started


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used (Linux ``/proc``)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


async def measure(
    urls: list[str], pids: list[int], strategy: str, runs: int
) -> tuple[float, list[float], float]:
    """Wall time, each run's latency, and the replicas' CPU seconds for ``runs`` runs."""
    # Warm-up, untimed: the first replica seeds the sample KB, and every replica loads its
    # encoder, segmenters and judges (about 9 CPU seconds in a new process) on questions
    # other than the timed ones.
    asked = questions(runs + WARMUP * len(urls))
    warmup, asked = asked[runs:], asked[:runs]
    await asyncio.gather(
        *(streamed_run(urls[n % len(urls)], strategy, q) for n, q in enumerate(warmup))
    )
    cpu = cpu_seconds(pids)
    started = time.perf_counter()
    latencies = await asyncio.gather(
        *(streamed_run(urls[n % len(urls)], strategy, asked[n]) for n in range(runs))
    )
    return time.perf_counter() - started, list(latencies), cpu_seconds(pids) - cpu


def main(runs: int, counts: list[int], strategy: str, slots: int) -> None:
    print(
        f"{os.cpu_count()} CPUs; {runs} concurrent streamed {strategy} runs, local judges, "
        f"{slots} worker slots per replica"
    )
    rows = []
    with private_postgres() as cluster:
        for count in counts:
            # Each replica count starts from the same point: a new database and vector store,
            # seeded by its first replica (which so has the sample's vectors cached).
            with contextlib.ExitStack() as stack:
                env = {
                    "REFLEXRAG_DATABASE_URL": new_database(cluster, f"bench_{count}"),
                    "REFLEXRAG_CHROMA_URL": stack.enter_context(chroma_server()),
                    "REFLEXRAG_WORKER_SLOTS": str(slots),
                }
                urls, pids = [], []
                for _ in range(count):
                    folder = stack.enter_context(tempfile.TemporaryDirectory())
                    port = free_port()
                    server = start_server(Path(folder), port, **env)
                    stack.callback(server.wait)
                    stack.callback(server.terminate)
                    urls.append(f"http://127.0.0.1:{port}")
                    pids.append(server.pid)
                wall, latencies, cpu = asyncio.run(measure(urls, pids, strategy, runs))
            rows.append((count, wall, latencies, cpu))
    base = runs / rows[0][1]
    print("| replicas | wall s | runs/s | p50 s | p99 s | throughput vs 1 | server CPU s/run |")
    print("|---|---|---|---|---|---|---|")
    for count, wall, latencies, cpu in rows:
        print(
            f"| {count} | {wall:.1f} | {runs / wall:.2f} | {statistics.median(latencies):.2f} "
            f"| {percentile(latencies, 0.99):.2f} | {runs / wall / base:.2f}× "
            f"| {cpu / runs:.2f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--replicas", default="1,2", help="replica counts, comma-separated")
    parser.add_argument("--strategy", default="self_rag")
    parser.add_argument("--slots", type=int, default=8, help="REFLEXRAG_WORKER_SLOTS")
    args = parser.parse_args()
    main(args.runs, [int(n) for n in args.replicas.split(",")], args.strategy, args.slots)
