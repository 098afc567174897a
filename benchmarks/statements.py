"""What a distributed run costs in round trips: SQL statements and HTTP requests a run, counted.

Starts a private Postgres cluster, a Chroma server and ``--replicas`` ``reflexrag serve``
processes as ``benchmarks.replicas`` does, each replica with a ``sitecustomize`` on its path
that counts every ``execute``/``executemany`` of psycopg's cursors (by its statement,
whitespace folded) and every request of httpx's clients (by method and path, ids
folded), and writes its counts to a file every half second. After a warm-up on other
questions, ``--runs`` streamed runs are sent at once, spread over the replicas; the counts
they added, divided by the runs, are printed, the most frequent statements first. A
statement sent by ``executemany`` counts once, however many rows it carries. Counts, not
times: on a busy machine they hold where CPU seconds do not.

    python -m reflexrag.benchmarks.statements [--runs 50] [--replicas 1] [--strategy self_rag]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from reflexrag.benchmarks.replicas import WARMUP, questions, serve, streamed_run
from reflexrag.benchmarks.services import chroma_server, new_database, private_postgres

COUNTER = '''
"""Counts this process's SQL statements (psycopg) and HTTP requests (httpx) into a file."""
import collections, json, os, re, threading, time

COUNTS = collections.Counter()


def _statement(query):
    text = query.as_string(None) if hasattr(query, "as_string") else str(query)
    return re.sub(r"\\s+", " ", text).strip()[:160]


def _count_psycopg():
    import psycopg

    # A connection's execute goes through a cursor's: cursors alone count each once.
    for owner in (psycopg.Cursor, psycopg.AsyncCursor):
        for name in ("execute", "executemany"):
            original = getattr(owner, name, None)
            if original is None or getattr(original, "counted", False):
                continue
            if owner.__name__.startswith("Async"):
                async def counted(self, query, *args, _original=original, _name=name, **kw):
                    COUNTS[f"sql {_name}: {_statement(query)}"] += 1
                    return await _original(self, query, *args, **kw)
            else:
                def counted(self, query, *args, _original=original, _name=name, **kw):
                    COUNTS[f"sql {_name}: {_statement(query)}"] += 1
                    return _original(self, query, *args, **kw)
            counted.counted = True
            setattr(owner, name, counted)


def _count_httpx():
    import httpx

    for owner in (httpx.Client, httpx.AsyncClient):
        original = owner.send
        if getattr(original, "counted", False):
            continue
        def _name(request):
            path = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27,}", "{id}", request.url.path)
            return f"http {request.method} {path}"
        if owner is httpx.AsyncClient:
            async def send(self, request, *args, _original=original, **kw):
                COUNTS[_name(request)] += 1
                return await _original(self, request, *args, **kw)
        else:
            def send(self, request, *args, _original=original, **kw):
                COUNTS[_name(request)] += 1
                return _original(self, request, *args, **kw)
        send.counted = True
        owner.send = send


def _write(path):
    while True:
        time.sleep(0.5)
        for patch in (_count_psycopg, _count_httpx):  # once their modules can be imported
            try:
                patch()
            except ImportError:
                pass
        partial = f"{path}.tmp"
        with open(partial, "w") as file:
            json.dump(dict(COUNTS), file)
        os.replace(partial, path)


if os.environ.get("STATEMENTS_OUT"):
    _out = f"{os.environ['STATEMENTS_OUT']}.{os.getpid()}"
    threading.Thread(target=_write, args=(_out,), daemon=True).start()
'''


def counted(folder: Path) -> collections.Counter[str]:
    """The counts every replica has written so far."""
    total: collections.Counter[str] = collections.Counter()
    for path in folder.glob("counts.*"):
        if path.suffix != ".tmp":
            with contextlib.suppress(ValueError, OSError):
                total.update(json.loads(path.read_text()))
    return total


async def send(urls: list[str], strategy: str, asked: list[str]) -> None:
    await asyncio.gather(
        *(streamed_run(urls[n % len(urls)], strategy, q) for n, q in enumerate(asked))
    )


def main(runs: int, replicas: int, strategy: str, shown: int) -> None:
    with (
        private_postgres() as cluster,
        contextlib.ExitStack() as stack,
        tempfile.TemporaryDirectory() as scratch,
    ):
        folder = Path(scratch)
        (folder / "sitecustomize.py").write_text(COUNTER)
        chroma = stack.enter_context(chroma_server())
        env = {
            "REFLEXRAG_DATABASE_URL": new_database(cluster, "statements"),
            "REFLEXRAG_CHROMA_URL": chroma,
            "PYTHONPATH": os.pathsep.join(filter(None, [scratch, os.environ.get("PYTHONPATH")])),
            "STATEMENTS_OUT": str(folder / "counts"),
        }
        urls, _ = serve(stack, replicas, env)
        asked = questions(runs + WARMUP * replicas)
        asyncio.run(send(urls, strategy, asked[runs:]))
        time.sleep(1.5)  # every replica has written what the warm-up did
        before = counted(folder)
        asyncio.run(send(urls, strategy, asked[:runs]))
        time.sleep(1.5)
        added = counted(folder) - before
    per_run = {name: count / runs for name, count in added.items()}
    sql = sum(count for name, count in per_run.items() if name.startswith("sql"))
    http = sum(count for name, count in per_run.items() if name.startswith("http"))
    print(
        f"{runs} streamed {strategy} runs over {replicas} replica(s): "
        f"{sql:.1f} SQL statements and {http:.1f} HTTP requests a run"
    )
    for name, count in sorted(per_run.items(), key=lambda item: -item[1])[:shown]:
        print(f"{count:7.2f}  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--strategy", default="self_rag")
    parser.add_argument("--shown", type=int, default=40, help="statements listed")
    args = parser.parse_args()
    main(args.runs, args.replicas, args.strategy, args.shown)
