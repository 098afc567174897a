"""How ``reflexrag ask`` finds a ``reflexrag serve`` already running on its data dir.

A new process that answers a question itself spends about 2 CPU-seconds, nearly all of it
importing LangGraph, LangChain's tracers and Chroma, before its first step; one that streams
the run from a running server needs only the SDK (about 0.5; ``benchmarks.warm_start``). So
``reflexrag serve`` leaves a note in its data dir (``serve.json``: its URL, its process id, and
a digest of its settings), and ``ask`` routes through that server when the note is there, its
process is alive and the settings are the same as the caller's (so the answer is the one
``ask`` would give itself). It also keeps two processes from opening the embedded Chroma store
of one data dir at once. The server holds a lock on its note (``flock``) while it lives, which
the kernel releases when the process ends however it ends: a note nobody holds was left by a
killed server, even when its process id names another process since. ``ask`` then runs in its
own process, as without a server, and so it does when the server's port does not answer.
``ask --local`` always does.

With no server there, a plain ``ask`` answers in its own process and leaves one running for the
next (as ``ollama run`` does with its server, or gradle with its daemon): ``serve --for-ask``,
on a loopback port, that stops by itself after ``keep_alive_s`` with nothing to do. Two things
set it apart from a server its user started. It answers only its owner's processes: it
requires a random token, which only its note (readable by its owner only) holds, since a port
on loopback is open to every user of the machine. And it gives way to writers: ``ingest``,
``kb rm``, ``kb delete`` and ``serve`` stop it (it holds the data dir's writer lock) instead of
being refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from reflexrag.providers.settings import Settings

try:
    import fcntl
except ImportError:  # Windows: a note's process id is all there is to go by
    fcntl = None  # type: ignore[assignment]

NOTE_NAME = "serve.json"
LOG_NAME = "serve.log"
"""Where a server that ``ask`` started writes what it says (it has no terminal)."""
OWNER_HEADER = "x-reflexrag-owner"
"""The header that carries the token a server started by ``ask`` requires."""

_held_note: int | None = None
"""The descriptor through which this process holds the lock on its note."""


@dataclass(frozen=True)
class RunningServer:
    """A ``reflexrag serve`` on this data dir, as its note says."""

    url: str
    pid: int
    token: str | None = None
    """The token the server requires in ``OWNER_HEADER``; None: it requires none."""
    gives_way: bool = False
    """Started by ``ask``: writers stop it instead of being refused."""

    @property
    def headers(self) -> dict[str, str]:
        """What a request to this server carries besides its own headers."""
        return {OWNER_HEADER: self.token} if self.token else {}


def settings_digest(settings: Settings) -> str:
    """What must match for a server to answer as this process would: every setting (API keys
    included, hashed, never written) but how long a server ``ask`` started stays up."""
    dumped = settings.model_dump_json(exclude={"keep_alive_s"})
    return hashlib.sha256(dumped.encode()).hexdigest()


def local_url(host: str, port: int) -> str:
    """The URL a process on this machine reaches a server bound to ``host`` at: a wildcard
    address is reached on loopback."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def note_path(settings: Settings) -> Path:
    return settings.data_dir / NOTE_NAME


def announce(
    settings: Settings, url: str, token: str | None = None, gives_way: bool = False
) -> bool:
    """Leave the note for this process's server (readable by its owner only; replaced whole),
    with the ``token`` it requires and whether it ``gives_way`` to writers. False when the
    data dir cannot be written (a read-only one beside a shared database): the server serves
    all the same, and ``ask`` runs in its own process."""
    global _held_note
    path = note_path(settings)
    body = {
        "url": url,
        "pid": os.getpid(),
        "settings": settings_digest(settings),
        "token": token,
        "gives_way": gives_way,
    }
    partial = path.with_name(f".{NOTE_NAME}.{os.getpid()}")
    descriptor = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(descriptor, json.dumps(body).encode())
        if fcntl is not None:  # locked before it is there to be read
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(partial, path)
    except OSError:
        if descriptor is not None:
            os.close(descriptor)
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    if _held_note is not None:  # announced again: the note before this one is gone
        os.close(_held_note)
    _held_note = descriptor
    return True


def withdraw(settings: Settings) -> None:
    """Remove the note if this process left it (another server may have replaced it since)."""
    global _held_note
    path = note_path(settings)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    if _held_note is not None:
        os.close(_held_note)
        _held_note = None


def _held(path: Path, pid: int) -> bool:
    """Whether the server that left the note still holds it (without ``flock``: whether a
    process of its id is alive)."""
    if fcntl is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # someone else's process: alive, though not ours to signal
        return True
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)  # and with it the lock, had it been free to take
    return False


def server_on_data_dir(settings: Settings) -> tuple[RunningServer, str] | None:
    """The server whose note is in the data dir and the digest of its settings, if its process
    is alive (and is not this one); else None."""
    try:
        note = json.loads(note_path(settings).read_text())
        token = note.get("token")
        server = RunningServer(
            str(note["url"]),
            int(note["pid"]),
            None if token is None else str(token),
            note.get("gives_way") is True,
        )
        digest = str(note["settings"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if server.pid == os.getpid() or not _held(note_path(settings), server.pid):
        return None
    return server, digest


def running_server(settings: Settings) -> RunningServer | None:
    """The server whose note is in the data dir, if its process is alive and it runs with the
    same settings as this one; else None."""
    found = server_on_data_dir(settings)
    if found is None or found[1] != settings_digest(settings):
        return None
    return found[0]


def start_server_for_ask(settings: Settings) -> bool:
    """Start ``reflexrag serve --for-ask`` on the data dir, detached from this process (its own
    session, no terminal, its output in ``serve.log``), so that the next ``ask`` streams from
    it; False where that cannot be (no ``flock`` to tell a live note, a data dir that cannot be
    written). This process does not wait for it: the server starts while the answer is read."""
    if fcntl is None:
        return False
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with open(settings.data_dir / LOG_NAME, "wb") as log:
            subprocess.Popen(
                [sys.executable, "-m", "reflexrag.server.cli", "serve", "--for-ask"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal is the ask's, not its
            )
    except OSError:
        return False
    return True


def stop_server(server: RunningServer) -> None:
    """Ask ``server`` to stop as Ctrl-C would: it finishes the requests it is answering, then
    lets go of its note and of the data dir."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(server.pid, signal.SIGTERM)
