"""A warm ``reflexrag ask`` in a new process: CPU seconds and wall time to its first node event.

One untimed ``reflexrag ask`` fills a fresh data dir (the sample knowledge base, the embedding
cache); then ``--runs`` more, each a new process asking the same question, are timed: the wall
time and the process's CPU seconds (user + system, from ``/proc``) when its first node line
("decide_retrieval: …") is printed, and both at its exit. Also the CPU seconds of the imports
alone (``python -c 'import …'`` of what the command imports). Then the same through a
``reflexrag serve`` already running on that data dir (``ask --url``, the run streamed from it),
after one untimed ask warmed the server, with the server's own CPU seconds for each run beside
the client's; and a plain ``reflexrag ask`` while that server runs, which finds it by the note
it leaves in the data dir (``server/discovery.py``). Those runs have keep-alive off
(``REFLEXRAG_KEEP_ALIVE_S=0``). Last, with it on: one plain ask answers in its own process and
leaves a server running, then ``--runs`` plain asks stream from it, with that server's CPU
seconds to start (imports, warm-up: once a keep-alive period) and for each run. Prints numbers,
asserts nothing.

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
from reflexrag.benchmarks.services import free_port, start_server
from reflexrag.providers.settings import Settings
from reflexrag.server.discovery import RunningServer, server_on_data_dir, stop_server

QUESTION = "When did Tesla die?"
IMPORTS = "import reflexrag.server.runner, reflexrag.providers.knowledge_base"
"""What ``reflexrag ask`` imports before its graph runs."""


KEEP_ALIVE_OFF = {"REFLEXRAG_KEEP_ALIVE_S": "0"}


def environment(data_dir: Path, **env: str) -> dict[str, str]:
    return {
        **os.environ,
        "REFLEXRAG_KEEP_ALIVE_S": "300",
        **env,
        "REFLEXRAG_DATA_DIR": str(data_dir),
        "PYTHONUNBUFFERED": "1",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
    }


def ask(
    data_dir: Path, strategy: str, url: str | None = None, **env: str
) -> tuple[float, float, float, float]:
    """One ``reflexrag ask`` (through the server at ``url`` if given, with ``env`` set): wall
    and CPU seconds at its first node line, then at its exit."""
    started = time.perf_counter()
    through = ["--url", url] if url else []
    command = [sys.executable, "-m", "reflexrag.server.cli", "ask", "--strategy", strategy]
    process = subprocess.Popen(
        [*command, *through, QUESTION],
        env=environment(data_dir, **env),
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


def settle(pid: int, timeout_s: float = 120.0) -> None:
    """Wait until process ``pid`` is idle: under 0.02 CPU-s in half a second."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds([pid])
        time.sleep(0.5)
        if cpu_seconds([pid]) - before < 0.02:
            return


def wait_for_server(data_dir: Path, timeout_s: float = 120.0) -> RunningServer:
    """The server an ask left on ``data_dir``, once its note is there."""
    settings = Settings(data_dir=data_dir)
    deadline = time.monotonic() + timeout_s
    while (found := server_on_data_dir(settings)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no server was left on {data_dir}")
        time.sleep(0.1)
    return found[0]


def import_cpu() -> float:
    """CPU seconds of a new interpreter that only imports what ``reflexrag ask`` imports."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", IMPORTS], check=True, env=environment(Path(".")))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main(runs: int, strategy: str) -> None:
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start; {runs} warm runs")
    with tempfile.TemporaryDirectory(prefix="reflexrag-warm-") as folder:
        data_dir = Path(folder)
        ask(data_dir, strategy, **KEEP_ALIVE_OFF)  # fills the data dir: sample KB, cache
        timed = [ask(data_dir, strategy, **KEEP_ALIVE_OFF) for _ in range(runs)]
        port = free_port()
        server = start_server(data_dir, port, **environment(data_dir, **KEEP_ALIVE_OFF))
        try:
            url = f"http://127.0.0.1:{port}"
            ask(data_dir, strategy, url, **KEEP_ALIVE_OFF)  # the server's first run
            settle(server.pid)  # its start-up warm-up runs in the background
            served, found, server_cpu = [], [], []
            for _ in range(runs):
                before = cpu_seconds([server.pid])
                served.append(ask(data_dir, strategy, url, **KEEP_ALIVE_OFF))
                server_cpu.append(cpu_seconds([server.pid]) - before)
                # No --url: ask finds the server by the note it left in the data dir.
                found.append(ask(data_dir, strategy, **KEEP_ALIVE_OFF))
        finally:
            server.terminate()
            server.wait(timeout=60)
        # Keep-alive on: the first plain ask leaves a server, the next ones stream from it.
        leaving = ask(data_dir, strategy)
        left = wait_for_server(data_dir)
        try:
            settle(left.pid)
            start_up_cpu = cpu_seconds([left.pid])
            kept, kept_cpu = [], []
            for _ in range(runs):
                before = cpu_seconds([left.pid])
                kept.append(ask(data_dir, strategy))
                kept_cpu.append(cpu_seconds([left.pid]) - before)
        finally:
            stop_server(left)
    imports = statistics.median(import_cpu() for _ in range(runs))
    print("| | wall s | CPU s |")
    print("|---|---:|---:|")
    print(f"| imports alone | | {imports:.2f} |")
    for label, rows in (
        ("", timed),
        (" (--url, a running serve)", served),
        (" (no --url, the serve found on the data dir)", found),
        (" (keep-alive: the serve a previous ask left)", kept),
    ):
        median = [statistics.median(column) for column in zip(*rows, strict=True)]
        print(f"| first node event{label} | {median[0]:.2f} | {median[1]:.2f} |")
        print(f"| answer printed, process ended{label} | {median[2]:.2f} | {median[3]:.2f} |")
        if rows is served:
            print(f"| the server's CPU for that run | | {statistics.median(server_cpu):.2f} |")
    print(f"| the left serve's CPU for that run | | {statistics.median(kept_cpu):.2f} |")
    wall, cpu = leaving[2], leaving[3]
    print(f"| the ask that left it: answer printed, process ended | {wall:.2f} | {cpu:.2f} |")
    print(f"| the left serve: start-up, once a keep-alive | | {start_up_cpu:.2f} |")
    load = os.getloadavg()[0]
    print(f"(medians of {runs}; load {load:.1f} at the end)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strategy", default="self_rag")
    args = parser.parse_args()
    main(args.runs, args.strategy)
