"""Faults a two-replica deployment meets, injected while runs are going: prints what survived.

Starts a private Postgres cluster, a Chroma server and two ``reflexrag serve`` replicas on
loopback (every judge call stretched by ``REFLEXRAG_TEST_DELAY_S`` so runs are in flight
when the fault comes), answers the question once undisturbed for reference, then for each
fault starts ``--runs`` background runs of that question spread over the replicas, injects
the fault, and waits for every run to end:

- ``kill``: SIGKILL the replica executing the most runs (it is started again afterwards);
- ``pause``: SIGSTOP it for twice the run lease, then SIGCONT (its leases lapse meanwhile);
- ``postgres-fast`` / ``postgres-immediate``: stop the database (``pg_ctl -m fast`` closes
  every connection cleanly, ``-m immediate`` as a crash does), keep it down, start it again;
- ``chroma``: as soon as the runs are claimed, while they search, SIGKILL the Chroma server,
  keep it down ``CHROMA_DOWN_S``, and start it again on the same port and data.

Per fault it prints the runs that ended ``success``, those that ended otherwise, those lost
(not ended within ``--timeout``), duplicate node executions (updates in a run's stream beyond
the reference run's, which with local judges takes the same steps every time; must be 0),
answers that differ from the reference, and the recovery time (from the fault until the
last run ended).

    python -m reflexrag.benchmarks.faults [--runs 8] [--faults kill,pause,postgres-fast]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from reflexrag.benchmarks.services import (
    chroma_server,
    free_port,
    new_database,
    private_postgres,
    restart_chroma,
    restart_postgres,
    start_server,
)

QUESTION = {"question": "What is Corrective RAG?"}
STRATEGY = "self_rag"
LEASE_S = 6
FAULTS = ("kill", "pause", "postgres-fast", "postgres-immediate", "chroma")
CHROMA_DOWN_S = 5.0


class Deployment:
    """Two replicas on one database and vector store; replicas can be killed and restarted."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder = env, folder
        self.servers: dict[str, subprocess.Popen] = {}
        for _ in range(2):
            self.start()

    def start(self) -> str:
        port = free_port()
        data = Path(tempfile.mkdtemp(dir=self.folder))
        url = f"http://127.0.0.1:{port}"
        self.servers[url] = start_server(data, port, **self.env)
        return url

    def stop(self) -> None:
        for server in self.servers.values():
            server.kill()
            server.wait()


async def updates_of(url: str, thread_id: str, run_id: str) -> tuple[list[str], dict[str, Any]]:
    """The node names of the run's ``updates`` events (every attempt's), and its result."""
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=120)
    nodes = [
        node
        async for chunk in client.runs.join_stream(thread_id, run_id)
        if chunk.event == "updates"
        for node in chunk.data
    ]
    return nodes, await client.runs.join(thread_id, run_id)


async def reference(url: str) -> tuple[list[str], dict[str, Any]]:
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=120)
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], STRATEGY, input=QUESTION, stream_mode=["updates"]
    )
    return await updates_of(url, thread["thread_id"], run["run_id"])


async def executing_replica(deployment: Deployment, database: str, run_ids: list[str]) -> str:
    """The replica holding the most of ``run_ids`` (once they have been claimed)."""
    import psycopg

    for _ in range(200):
        with psycopg.connect(database) as connection:
            workers = [
                row[0]
                for row in connection.execute(
                    "SELECT worker FROM run_queue WHERE run_id = ANY(%s)", (run_ids,)
                ).fetchall()
                if row[0]
            ]
        if len(workers) == len(run_ids):
            break
        await asyncio.sleep(0.1)
    counts = {
        url: sum(f":{server.pid}:" in worker for worker in workers)
        for url, server in deployment.servers.items()
    }
    return max(counts, key=lambda url: counts[url])


async def end_of(
    urls: list[str], thread_id: str, run_id: str, timeout: float
) -> dict[str, Any] | None:
    """The run's record once it has ended, asking any replica that answers; None if it
    had not ended by ``timeout``."""
    from langgraph_sdk import get_client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for url in urls:
            try:
                run = await get_client(url=url, timeout=10).runs.get(thread_id, run_id)
            except Exception:  # a replica down, or a 503: ask another
                continue
            if run["status"] not in ("pending", "running"):
                return run
            break
        await asyncio.sleep(0.5)
    return None


async def inject(fault: str, deployment: Deployment, cluster: str, target: str) -> None:
    if fault == "kill":
        deployment.servers[target].send_signal(signal.SIGKILL)
        deployment.servers.pop(target).wait()
    elif fault == "pause":
        deployment.servers[target].send_signal(signal.SIGSTOP)
        await asyncio.sleep(2 * LEASE_S)
        deployment.servers[target].send_signal(signal.SIGCONT)
    elif fault == "chroma":
        await asyncio.to_thread(
            restart_chroma, deployment.env["REFLEXRAG_CHROMA_URL"], CHROMA_DOWN_S
        )
    else:
        mode = fault.removeprefix("postgres-")
        await asyncio.to_thread(restart_postgres, cluster, 3.0 if mode == "fast" else 8.0, mode)


async def one_fault(
    fault: str,
    deployment: Deployment,
    cluster: str,
    database: str,
    runs: int,
    expected: tuple[list[str], dict[str, Any]],
    timeout: float,
) -> dict[str, Any]:
    from langgraph_sdk import get_client

    urls = list(deployment.servers)
    started = []
    for n in range(runs):
        client = get_client(url=urls[n % len(urls)], timeout=60)
        thread = await client.threads.create()
        run = await client.runs.create(
            thread["thread_id"], STRATEGY, input=QUESTION, stream_mode=["updates"]
        )
        started.append((thread["thread_id"], run["run_id"]))
    target = await executing_replica(deployment, database, [run_id for _, run_id in started])
    # Inside the runs; the vector store at once, while they are still searching.
    await asyncio.sleep(0.0 if fault == "chroma" else 1.0)
    fault_at = time.monotonic()
    await inject(fault, deployment, cluster, target)
    ends = await asyncio.gather(
        *(end_of(list(deployment.servers), t, r, timeout) for t, r in started)
    )
    recovery = time.monotonic() - fault_at
    report = {"fault": fault, "runs": runs, "success": 0, "other": 0, "lost": 0}
    report.update(duplicates=0, different=0, recovery_s=recovery)
    survivor = next(iter(deployment.servers))
    for (thread_id, run_id), end in zip(started, ends, strict=True):
        if end is None:
            report["lost"] += 1
            continue
        report["success" if end["status"] == "success" else "other"] += 1
        nodes, result = await updates_of(survivor, thread_id, run_id)
        report["duplicates"] += max(0, len(nodes) - len(expected[0]))
        report["different"] += result.get("generation") != expected[1].get("generation")
    if fault == "kill":
        deployment.start()
    return report


async def measure(
    deployment: Deployment,
    cluster: str,
    database: str,
    faults: list[str],
    runs: int,
    timeout: float,
) -> list[dict[str, Any]]:
    from langgraph_sdk import get_client

    for url in deployment.servers:  # every replica warm: the encoder and judges loaded
        for _ in range(600):
            try:
                await get_client(url=url).runs.wait(None, STRATEGY, input=QUESTION)
                break
            except Exception:  # still starting
                await asyncio.sleep(0.5)
    expected = await reference(next(iter(deployment.servers)))
    return [
        await one_fault(fault, deployment, cluster, database, runs, expected, timeout)
        for fault in faults
    ]


def main(faults: list[str], runs: int, timeout: float) -> None:
    print(
        f"{os.cpu_count()} CPUs; 2 replicas, {runs} background {STRATEGY} runs per fault "
        f"(judge calls stretched 0.3 s, run lease {LEASE_S} s)"
    )
    with (
        private_postgres() as cluster,
        chroma_server() as chroma,
        tempfile.TemporaryDirectory() as folder,
    ):
        database = new_database(cluster, "faults")
        env = {
            "REFLEXRAG_DATABASE_URL": database,
            "REFLEXRAG_CHROMA_URL": chroma,
            "REFLEXRAG_TEST_DELAY_S": "0.3",
            "REFLEXRAG_RUN_LEASE_S": str(LEASE_S),
        }
        deployment = Deployment(env, Path(folder))
        try:
            reports = asyncio.run(measure(deployment, cluster, database, faults, runs, timeout))
        finally:
            deployment.stop()
    print(
        "| fault | runs | success | other end | lost | duplicate nodes | answer differs "
        "| recovery s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in reports:
        print(
            f"| {r['fault']} | {r['runs']} | {r['success']} | {r['other']} | {r['lost']} "
            f"| {r['duplicates']} | {r['different']} | {r['recovery_s']:.1f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds a run may take")
    args = parser.parse_args()
    main(args.faults.split(","), args.runs, args.timeout)
