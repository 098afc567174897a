"""A warm ``reflexrag ask`` in a new process: CPU seconds and wall time to its first node event.

One untimed ``reflexrag ask`` fills a fresh data dir (the sample knowledge base, the embedding
cache); then ``--runs`` more, each a new process asking the same question, are timed: the wall
time and the process's CPU seconds (user + system, from ``/proc``) when its first node line
("decide_retrieval: …") is printed, and both at its exit. Also the CPU seconds of the imports
alone (``python -c 'import …'`` of what the command imports). Prints numbers, asserts nothing.

    python -m reflexrag.benchmarks.warm_start [--runs 5] [--strategy self_rag]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reflexrag.benchmarks.replicas import cpu_seconds

QUESTION = "When did Tesla die?"
IMPORTS = "import reflexrag.server.runner, reflexrag.providers.knowledge_base"
"""What ``reflexrag ask`` imports before its graph runs."""


def environment(data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "REFLEXRAG_DATA_DIR": str(data_dir),
        "PYTHONUNBUFFERED": "1",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
    }


def ask(data_dir: Path, strategy: str) -> tuple[float, float, float, float]:
    """One ``reflexrag ask``: wall and CPU seconds at its first node line, then at its exit."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "reflexrag.server.cli", "ask", "--strategy", strategy, QUESTION],
        env=environment(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    first_wall = first_cpu = float("nan")
    for line in process.stdout:
        node, colon, _ = line.partition(":")
        if colon and node.isidentifier():
            first_wall, first_cpu = time.perf_counter() - started, cpu_seconds([process.pid])
            break
    process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"reflexrag ask exited with {process.returncode}")
    return first_wall, first_cpu, time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def import_cpu() -> float:
    """CPU seconds of a new interpreter that only imports what ``reflexrag ask`` imports."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", IMPORTS], check=True, env=environment(Path(".")))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main(runs: int, strategy: str) -> None:
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start; {runs} warm runs")
    with tempfile.TemporaryDirectory(prefix="reflexrag-warm-") as folder:
        ask(Path(folder), strategy)  # fills the data dir: sample KB, embedding cache
        timed = [ask(Path(folder), strategy) for _ in range(runs)]
    imports = statistics.median(import_cpu() for _ in range(runs))
    columns = list(zip(*timed, strict=True))
    median = [statistics.median(column) for column in columns]
    print("| | wall s | CPU s |")
    print("|---|---:|---:|")
    print(f"| imports alone | | {imports:.2f} |")
    print(f"| first node event | {median[0]:.2f} | {median[1]:.2f} |")
    print(f"| answer printed, process ended | {median[2]:.2f} | {median[3]:.2f} |")
    print(f"(medians of {runs}; load {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strategy", default="self_rag")
    args = parser.parse_args()
    main(args.runs, args.strategy)
