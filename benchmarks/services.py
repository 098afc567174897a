"""Private backing services on loopback for tests and benchmarks: a Postgres cluster
(``initdb``/``pg_ctl``) and a Chroma server (``chroma run``, from the chromadb package)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_tool(name: str) -> str | None:
    return shutil.which(name) or next(iter(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")), None)


@contextmanager
def private_postgres() -> Iterator[str]:
    """A throw-away cluster on a free loopback port; yields its ``postgresql://`` URL."""
    initdb, pg_ctl = postgres_tool("initdb"), postgres_tool("pg_ctl")
    if not (initdb and pg_ctl):
        raise FileNotFoundError("initdb/pg_ctl not installed")
    # Not under a private (0700, root-owned) temp root: the postgres user must reach it.
    folder = Path(tempfile.mkdtemp(prefix="reflexrag-pg-"))
    data, port = folder / "data", free_port()
    run_as: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*run_as, initdb, "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=300"
    subprocess.run(
        [*run_as, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    start = [*run_as, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w"]
    _clusters[url] = (start, [*run_as, pg_ctl, "-D", str(data), "-w"])
    try:
        yield url
    finally:
        _clusters.pop(url, None)
        subprocess.run(
            [*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)


_clusters: dict[str, tuple[list[str], list[str]]] = {}
"""The start and stop commands of each running :func:`private_postgres` cluster, by URL."""


def restart_postgres(cluster_url: str, down_s: float = 3.0, mode: str = "fast") -> None:
    """Stop a :func:`private_postgres` cluster (``pg_ctl stop -m mode``: every connection is
    closed), keep it down ``down_s`` seconds, and start it again, as a database restart or a
    failover does to the service."""
    start, stop = _clusters[cluster_url]
    subprocess.run([*stop, "-m", mode, "stop"], check=True, capture_output=True)
    time.sleep(down_s)
    subprocess.run([*start, "start"], check=True, capture_output=True)


def new_database(cluster_url: str, name: str) -> str:
    """Create database ``name`` in the cluster; its URL."""
    import psycopg

    with psycopg.connect(cluster_url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return cluster_url.rsplit("/", 1)[0] + f"/{name}"


@contextmanager
def chroma_server() -> Iterator[str]:
    """``chroma run`` on a free loopback port over a temporary directory; yields its URL."""
    folder = Path(tempfile.mkdtemp(prefix="reflexrag-chroma-"))
    url = f"http://127.0.0.1:{free_port()}"
    _chroma[url] = _start_chroma(url, folder)
    try:
        yield url
    finally:
        _chroma.pop(url).kill()
        shutil.rmtree(folder, ignore_errors=True)


class _Chroma:
    def __init__(self, process: subprocess.Popen, folder: Path) -> None:
        self.process, self.folder = process, folder

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def _start_chroma(url: str, folder: Path) -> _Chroma:
    """``chroma run`` at ``url`` over ``folder``, once its heartbeat answers."""
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "chroma"),
            "run",
            "--path",
            str(folder),
            "--host",
            "127.0.0.1",
            "--port",
            str(urlsplit(url).port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                return _Chroma(server, folder)
        except httpx.HTTPError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("chroma run did not start within 60 s") from None
            time.sleep(0.2)


_chroma: dict[str, _Chroma] = {}


def chroma_pid(url: str) -> int:
    """The process id of the :func:`chroma_server` at ``url``."""
    return _chroma[url].process.pid


def postgres_pid(cluster_url: str) -> int:
    """The postmaster's process id of the :func:`private_postgres` cluster at ``cluster_url``
    (the first line of its data dir's ``postmaster.pid``)."""
    start, _ = _clusters[cluster_url]
    data = Path(start[start.index("-D") + 1])
    return int((data / "postmaster.pid").read_text().split()[0])


def kill_chroma(url: str) -> None:
    """SIGKILL the :func:`chroma_server` at ``url``, as a crash of the vector store does."""
    _chroma[url].kill()


def restart_chroma(url: str, down_s: float = 5.0) -> None:
    """SIGKILL the :func:`chroma_server` at ``url``, keep it down ``down_s`` seconds, and
    start it again on the same port and data, as a crash and a supervisor's restart do."""
    folder = _chroma[url].folder
    kill_chroma(url)
    time.sleep(down_s)
    _chroma[url] = _start_chroma(url, folder)


def start_server(
    data_dir: Path, port: int, cwd: Path | None = None, **env: str
) -> subprocess.Popen:
    """``reflexrag serve`` on ``port`` with its own data dir, once it answers ``/ok``."""
    command = [sys.executable, "-m", "reflexrag.server.cli", "serve", "--port", str(port)]
    environment = {**os.environ, "REFLEXRAG_DATA_DIR": str(data_dir), **env}
    return _answering(
        [*command, "--log-level", "warning"], port, cwd, environment, "reflexrag serve", 90
    )


def start_langgraph_dev(
    config: Path, data_dir: Path, port: int, workdir: Path, **env: str
) -> subprocess.Popen:
    """LangGraph's own dev server (``langgraph dev``, what Studio talks to) on ``config``, once
    it answers ``/ok``. It runs from ``workdir``, where it keeps its state (``.langgraph_api``),
    with its own reflexrag data dir; ``env`` is added to its environment."""
    environment = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "REFLEXRAG_DATA_DIR": str(data_dir),
        **env,
    }
    command = [str(Path(sys.executable).parent / "langgraph"), "dev", "--config", str(config)]
    command += ["--no-browser", "--no-reload", "--port", str(port)]
    return _answering(command, port, workdir, environment, "langgraph dev", 300)


def _answering(
    command: list[str],
    port: int,
    cwd: Path | None,
    environment: dict[str, str],
    name: str,
    timeout_s: float,
) -> subprocess.Popen:
    """Start ``command`` and return it once ``/ok`` on ``port`` answers 200."""
    # A file, not a pipe nobody reads: a chatty server would block on a full pipe.
    log_path = Path(tempfile.mkstemp(prefix=f"{name.replace(' ', '-')}-", suffix=".log")[1])
    process = subprocess.Popen(
        command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=log_path.open("wb")
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited: {log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{name} did not start within {timeout_s:.0f} s")


def minimal_pdf(
    lines: list[str], title: str = "", pages: int = 1, stream: bytes | None = None
) -> bytes:
    """A text PDF (Helvetica) of ``pages`` pages showing ``lines``, written by hand so that
    tests and benchmarks need no PDF writer; ``title`` goes in its metadata (the document
    information dictionary); ``stream`` replaces the page content by a FlateDecode-compressed
    one."""
    text = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) '" for line in lines) + " ET"
    content = (
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text.encode())
        if stream is None
        else b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream)
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join([b"3 0 R"] * pages), pages),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        content,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (%s) >>" % title.encode(),
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
