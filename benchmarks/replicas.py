"""Throughput of 1 and 2 replicas sharing Postgres and a Chroma server: prints numbers.

Starts a private Postgres cluster and a Chroma server on loopback, then for each replica count
starts that many ``reflexrag serve`` processes (the real local judges) and sends ``--runs``
streamed stateless runs at once, spread over the replicas in turn as a load balancer would; any
replica's worker may execute any of them. Each replica first answers ``WARMUP`` other questions
untimed, so the numbers are a warm service's. Each run asks a different question (the fixture's
English questions, over the sample knowledge base), so no cache answers for it. Every replica
count starts from a new database and vector store. Prints, per replica count, the wall time,
runs per second, p50/p99 latency, and the CPU seconds a run of the replicas and of every process
(Postgres with its backends and the Chroma server too), against one replica on the embedded
default (SQLite, Chroma in its process) measured the same way first.

    python -m reflexrag.benchmarks.replicas [--runs 50] [--replicas 1,2] [--strategy self_rag]
                                            [--repeat N]

``--repeat N`` measures N times and then prints each setup's mean and range: on two cores one
measurement's ratio moves by about a tenth.

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
    chroma_pid,
    chroma_server,
    free_port,
    new_database,
    postgres_pid,
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


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``langgraph dev`` may serve from a child process, Postgres
    forks a backend per connection)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending += children.get(current, [])
    return found


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds of the processes under ``roots``: each live one's own and that of its
    children that have exited (a Postgres backend whose connection closed), so a difference of
    two readings counts every process that ran in between."""
    total = 0
    for root in roots:
        for pid in process_tree(root):
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += sum(int(field) for field in fields[11:15])  # u/s time, cu/cs time
    return total / os.sysconf("SC_CLK_TCK")


async def measure(
    urls: list[str], replicas: list[int], services: list[int], strategy: str, runs: int
) -> tuple[float, list[float], float, float]:
    """Wall time, each run's latency, and the CPU seconds of the ``replicas`` and of every
    process (the ``services`` too: Postgres and its backends, the Chroma server) for ``runs``
    runs."""
    # Warm-up, untimed: the first replica seeds the sample KB, and every replica loads its
    # encoder, segmenters and judges (about 9 CPU seconds in a new process) on questions
    # other than the timed ones.
    asked = questions(runs + WARMUP * len(urls))
    warmup, asked = asked[runs:], asked[:runs]
    await asyncio.gather(
        *(streamed_run(urls[n % len(urls)], strategy, q) for n, q in enumerate(warmup))
    )
    ours, everything = tree_cpu_seconds(replicas), tree_cpu_seconds(replicas + services)
    started = time.perf_counter()
    latencies = await asyncio.gather(
        *(streamed_run(urls[n % len(urls)], strategy, asked[n]) for n in range(runs))
    )
    wall = time.perf_counter() - started
    ours = tree_cpu_seconds(replicas) - ours
    return wall, list(latencies), ours, tree_cpu_seconds(replicas + services) - everything


def serve(
    stack: contextlib.ExitStack, count: int, env: dict[str, str]
) -> tuple[list[str], list[int]]:
    """``count`` replicas of ``reflexrag serve`` with ``env``: their URLs and process ids."""
    urls, pids = [], []
    for _ in range(count):
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        port = free_port()
        server = start_server(Path(folder), port, **env)
        stack.callback(server.wait)
        stack.callback(server.terminate)
        urls.append(f"http://127.0.0.1:{port}")
        pids.append(server.pid)
    return urls, pids


def main(runs: int, counts: list[int], strategy: str, slots: int, repeat: int = 1) -> None:
    """Measure ``repeat`` times; past one, also the mean and range of each setup's ratios."""
    ratios: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeat):
        for setup, count, ratio in measure_all(runs, counts, strategy, slots):
            ratios.setdefault((setup, count), []).append(ratio)
    if repeat > 1:
        print(f"CPU/run vs embedded over {repeat} measurements: mean (range)")
        for (setup, count), values in ratios.items():
            print(
                f"- {setup}, {count} replica(s): {statistics.mean(values):.2f}× "
                f"({min(values):.2f}–{max(values):.2f})"
            )


def measure_all(
    runs: int, counts: list[int], strategy: str, slots: int
) -> list[tuple[str, int, float]]:
    """One measurement of every setup, printed as a table; each setup's CPU a run against
    the embedded one's."""
    print(
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start; {runs} concurrent "
        f"streamed {strategy} runs, local judges, {slots} worker slots per replica"
    )
    rows = []
    # The reference: one replica on the embedded default (SQLite, Chroma in its process).
    with contextlib.ExitStack() as stack:
        urls, pids = serve(stack, 1, {"REFLEXRAG_WORKER_SLOTS": str(slots)})
        rows.append(("embedded", 1, *asyncio.run(measure(urls, pids, [], strategy, runs))))
    with private_postgres() as cluster:
        for count in counts:
            # Each replica count starts from the same point: a new database and vector store,
            # seeded by its first replica (which so has the sample's vectors cached).
            with contextlib.ExitStack() as stack:
                chroma = stack.enter_context(chroma_server())
                env = {
                    "REFLEXRAG_DATABASE_URL": new_database(cluster, f"bench_{count}"),
                    "REFLEXRAG_CHROMA_URL": chroma,
                    "REFLEXRAG_WORKER_SLOTS": str(slots),
                }
                urls, pids = serve(stack, count, env)
                services = [postgres_pid(cluster), chroma_pid(chroma)]
                measured = asyncio.run(measure(urls, pids, services, strategy, runs))
            rows.append(("distributed", count, *measured))
    embedded_rate, embedded_cpu = runs / rows[0][2], rows[0][5] / runs
    print(
        "| setup | replicas | wall s | runs/s | p50 s | p99 s | throughput vs embedded "
        "| replicas' CPU s/run | all processes' CPU s/run | CPU/run vs embedded |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for setup, count, wall, latencies, ours, everything in rows:
        print(
            f"| {setup} | {count} | {wall:.1f} | {runs / wall:.2f} "
            f"| {statistics.median(latencies):.2f} | {percentile(latencies, 0.99):.2f} "
            f"| {runs / wall / embedded_rate:.2f}× | {ours / runs:.3f} "
            f"| {everything / runs:.3f} | {everything / runs / embedded_cpu:.2f}× |"
        )
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    return [
        (setup, count, everything / runs / embedded_cpu) for setup, count, *_, everything in rows
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--replicas", default="1,2", help="replica counts, comma-separated")
    parser.add_argument("--strategy", default="self_rag")
    parser.add_argument("--slots", type=int, default=8, help="REFLEXRAG_WORKER_SLOTS")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measurements; on two cores one moves by a tenth"
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    main(args.runs, counts, args.strategy, args.slots, args.repeat)
