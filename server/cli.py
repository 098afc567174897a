"""The ``reflexrag`` command line: ingest documents, ask questions, inspect strategies, evaluate.

Bad input exits with status 2 and one line on stderr; nothing already stored is touched.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reflexrag.providers.knowledge_base import IngestReport, KnowledgeBase, SourceDocument

# Chroma and LangSmith would otherwise try to phone home on an offline machine.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LANGSMITH_TRACING", "false")


LLM_JUDGING_HELP = (
    "how LLM judges spend calls: per_call (the tutorial's), batched, or cascade (local judge "
    "first); default: REFLEXRAG_LLM_JUDGING, else cascade"
)


class CLIError(Exception):
    """A user mistake, reported as one line."""


class UnreachableServerError(CLIError):
    """No request reached the server ``ask`` streams from."""


def _context(args: argparse.Namespace) -> Any:
    """The run's context from the flags, validated; bad values are a one-line error."""
    from reflexrag.state import Context

    overrides = _context_overrides(args)
    try:
        return Context.from_overrides(overrides)
    except (TypeError, ValueError) as exc:
        raise CLIError(str(exc)) from None


def _context_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """What the flags set in the run's context (``kb`` always: empty means the default)."""
    overrides: dict[str, Any] = {"kb": args.kb or ""}
    for name in (
        "top_k",
        "retrieval_mode",
        "max_query_rewrites",
        "max_regenerations",
        "judge_backend",
        "generator_backend",
        "search_provider",
        "web_kb",
        "max_web_searches",
        "fusion",
        "initial_k",
        "max_rounds",
        "iterative_stop",
        "completeness_threshold",
        "min_confidence",
        "best_effort",
        "llm_judging",
    ):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    if getattr(args, "filter", None):
        try:
            overrides["filters"] = merge_filter_expressions(args.filter)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    return overrides


def merge_filter_expressions(expressions: list[str]) -> dict[str, Any]:
    """``--filter`` flags as one filter mapping; conditions on one key combine (AND)."""
    from reflexrag.providers.filters import parse_expression

    merged: dict[str, dict[str, Any]] = {}
    for expression in expressions:
        for key, condition in parse_expression(expression).items():
            merged.setdefault(key, {}).update(condition)
    return merged


def _print_result(result: Any) -> None:
    print()
    if result.interrupted:
        print(f"Needs clarification: {result.clarifying_question}")
        print(
            f"Resume with: reflexrag ask --strategy {result.strategy} --thread "
            f"{result.thread_id} --reply '...'"
        )
        return
    if result.answer_kind == "not_found":
        print(result.answer)
        if result.sources:
            print("Closest evidence:")
    else:
        label = {
            "extractive": " (extractive: from the sources)",
            "best_effort": " (best effort: from the closest evidence, after the loop gave up)",
        }.get(result.answer_kind, "")
        print(f"Answer{label}:\n{result.answer}")
        if result.quote:
            print(f"Quote: “{result.quote}”")
        if result.sources:
            print("Sources:")
    for n, source in enumerate(result.sources, start=1):
        print(
            f"  [{n}] {source['title']} ({source['doc_id']}, {source['origin']}, "
            f"score {source['score']:.2f})"
        )
    confidence = "" if result.confidence is None else f"confidence: {result.confidence:.2f}  ·  "
    print(
        f"stop_reason: {result.stop_reason}  ·  {confidence}{result.elapsed_s:.2f}s  ·  "
        f"llm_calls: {result.llm_calls}"
    )


async def _ask(args: argparse.Namespace) -> int:
    from reflexrag.providers.settings import get_settings
    from reflexrag.server.discovery import running_server
    from reflexrag.state.context import check_question

    settings = get_settings()
    question = args.question or ""
    if args.reply is not None and not args.thread:
        raise CLIError("--reply resumes a paused run: name its thread with --thread")
    if args.reply is None:
        try:
            question = check_question(question)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    context = _context(args)
    if args.url:
        return await _ask_server(args, question)
    server = None if args.local else running_server(settings)
    api_key = next(iter(settings.api_keys), None)
    if (
        server
        and args.thread
        and not await _holds_thread(server.url, args.thread, api_key, server.headers)
    ):
        server = None  # a thread made here (ask --local, or before the server) goes on here
    if server is not None:
        # A server on this data dir with these settings answers as this process would, and
        # this process then loads neither LangGraph nor Chroma (see server/discovery.py).
        print(
            f"reflexrag: asking the reflexrag serve on this data dir ({server.url}, "
            f"pid {server.pid}); --local answers here",
            file=sys.stderr,
            flush=True,
        )
        args.url, thread = server.url, args.thread
        try:
            return await _ask_server(args, question, api_key=api_key, headers=server.headers)
        except UnreachableServerError as exc:
            # Its note outlived it (a SIGKILL) or it is stopping: answer here, on the thread
            # asked for (not the one named for the server).
            print(f"reflexrag: {exc}; answering here", file=sys.stderr, flush=True)
            args.url, args.thread = None, thread
    # Bad input is refused first, in one line; valid input on a fresh install is told about
    # the sample documents before the heavy imports below, so it shows life within a second.
    first_use = not settings.chroma_dir.exists() and args.kb in (None, settings.default_kb)
    if first_use:
        _announce_sample_kb(settings.default_kb)
    from reflexrag.providers.checkpointer import open_checkpointer
    from reflexrag.providers.knowledge_base import list_knowledge_bases
    from reflexrag.server.runner import NothingToResumeError, run_question

    known = list_knowledge_bases()
    if context.kb != settings.default_kb and context.kb not in known:
        raise CLIError(
            f"unknown knowledge base {context.kb!r}; known: {', '.join(known) or 'none'} "
            "(create one with reflexrag ingest --kb NAME)"
        )
    if context.kb == settings.default_kb and context.kb not in known:
        _seed_sample_kb(context.kb, announced=first_use)

    writing = False

    def show_token(text: str) -> None:
        # An LLM generator's answer as it is written (a CPU model takes seconds).
        nonlocal writing
        if not writing:
            print("writing: ", end="")
            writing = True
        print(text, end="", flush=True)

    def show(node: str, update: dict[str, Any]) -> None:
        nonlocal writing
        if args.json:
            return
        if writing:
            print(flush=True)
            writing = False
        steps = update.get("steps")
        for entry in steps if isinstance(steps, list) else []:
            print(f"{entry['node']}: {entry['summary']}", flush=True)

    reply = args.reply
    async with open_checkpointer() as checkpointer:
        while True:
            try:
                result = await run_question(
                    args.strategy,
                    question if reply is None else None,
                    context,
                    checkpointer=checkpointer,
                    thread_id=args.thread,
                    resume=reply,
                    on_update=show,
                    on_token=None if args.json else show_token,
                )
            except NothingToResumeError as exc:
                raise CLIError(str(exc)) from None
            args.thread = result.thread_id
            if not result.interrupted or args.no_input:
                break
            reply = _prompt(result.clarifying_question or "")
            if reply is None:
                break
    code = _report(args, result)
    if not args.local:
        _leave_server_for_the_next_ask(settings)
    return code


def _leave_server_for_the_next_ask(settings: Any) -> None:
    """Answered here because no server runs on the data dir: start one that the next ``ask``
    streams from, which stops by itself after ``keep_alive_s`` with nothing to do (see
    server/discovery.py). Not beside a server that is there (another settings', or one that
    did not answer), nor for a shared database, where a server would take the queue's runs."""
    from reflexrag.server.discovery import server_on_data_dir, start_server_for_ask

    if settings.keep_alive_s <= 0 or settings.distributed or server_on_data_dir(settings):
        return
    if start_server_for_ask(settings):
        print(
            f"reflexrag: a reflexrag serve stays on this data dir for the next ask; it stops "
            f"after {settings.keep_alive_s:g} s with nothing to do (REFLEXRAG_KEEP_ALIVE_S=0: "
            "never start one)",
            file=sys.stderr,
            flush=True,
        )


def _make_way_for_a_writer(settings: Any) -> None:
    """A server an ``ask`` left on the data dir gives way to a command that writes there: it is
    stopped, and this waits (a minute at most) until it has let go of the data dir. A server
    its user started stays, and the writer is refused beside it as before."""
    import time

    from reflexrag.providers.knowledge_base import DataDirBusyError, knowledge_base_writer
    from reflexrag.server.discovery import server_on_data_dir, stop_server

    found = server_on_data_dir(settings)
    if found is None or not found[0].gives_way:
        return
    server = found[0]
    print(
        f"reflexrag: stopping the reflexrag serve an ask left on this data dir (pid "
        f"{server.pid}): it gives way to this command",
        file=sys.stderr,
        flush=True,
    )
    stop_server(server)
    deadline = time.monotonic() + 60
    while True:
        try:
            with knowledge_base_writer("reflexrag (waiting to write)", settings):
                return
        except DataDirBusyError:
            if time.monotonic() > deadline:
                return  # the writer's own attempt says who holds it
            time.sleep(0.1)


async def _ask_server(
    args: argparse.Namespace,
    question: str,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
) -> int:
    """``ask`` through a running ``reflexrag serve`` (``--url``, or the one on this data dir):
    the run streams from the server, and this process loads neither LangGraph nor Chroma nor
    the encoder, which cost a new process about 2 CPU-seconds before its first step. Raises
    ``UnreachableServerError`` when no request reached the server."""
    import time
    import uuid

    import httpx

    from reflexrag.server.results import RunResult, pause, result_from_state

    overrides = {key: value for key, value in _context_overrides(args).items() if value != ""}
    client = _sdk_client(args.url, api_key, headers)
    # A run on a thread of its own, as in this process, so a clarifying question can be
    # answered by resuming it.
    args.thread = args.thread or str(uuid.uuid4())
    reply = args.reply
    while True:
        started = time.perf_counter()
        values: dict[str, Any] = {}
        paused: list[Any] = []
        inside: set[str] = set()
        failure: str | None = None
        writing = False
        stream = client.runs.stream(
            args.thread,
            args.strategy,
            input={"question": question} if reply is None else None,
            command={"resume": reply} if reply is not None else None,
            context=overrides,
            stream_mode=["updates", "values", *([] if args.json else ["messages-tuple"])],
            stream_subgraphs=True,
            if_not_exists="create",
        )
        try:
            async for part in stream:
                mode, _, namespace = part.event.partition("|")
                if mode == "values" and not namespace:
                    values = part.data
                elif mode == "messages" and not args.json:
                    content = part.data[0].get("content") if part.data else None
                    if isinstance(content, str) and content:
                        print("" if writing else "writing: ", content, sep="", end="", flush=True)
                        writing = True
                elif mode == "updates":
                    if namespace:
                        inside.add(namespace.split(":")[0])
                    for node, update in (part.data or {}).items():
                        if node == "__interrupt__":
                            paused.extend(update)
                        elif not args.json and not (not namespace and node in inside):
                            if writing:
                                print(flush=True)
                                writing = False
                            steps = (update or {}).get("steps")  # "delete": a reset
                            for entry in steps if isinstance(steps, list) else []:
                                print(f"{entry['node']}: {entry['summary']}", flush=True)
                elif mode == "error":
                    failure = part.data.get("message") or str(part.data)
        except httpx.HTTPError as exc:
            # The SDK's errors are httpx's; one that got no response never reached the server.
            response = getattr(exc, "response", None)
            if response is None:
                raise UnreachableServerError(
                    f"cannot reach {args.url}: {exc or type(exc).__name__}"
                ) from None
            raise CLIError(f"{args.url} refused the run: {_server_message(response)}") from None
        result = result_from_state(values, args.strategy, time.perf_counter() - started, None)
        result.thread_id = args.thread
        if failure is not None:
            result = RunResult.failed(args.strategy, failure)
        if paused:
            pause(result, paused[0].get("value"))
        if not result.interrupted or args.no_input:
            break
        reply = _prompt(result.clarifying_question or "")
        if reply is None:
            break
    return _report(args, result)


def _sdk_client(url: str, api_key: str | None, headers: dict[str, str] | None = None) -> Any:
    """The LangGraph SDK's client of ``url``, sending ``headers`` too; without a key of its
    own it reads LANGGRAPH_API_KEY."""
    from langgraph_sdk import get_client

    return get_client(url=url, headers=headers, **({"api_key": api_key} if api_key else {}))


async def _holds_thread(
    url: str, thread_id: str, api_key: str | None, headers: dict[str, str] | None = None
) -> bool:
    """Whether the server at ``url`` holds the thread (a run paused there is resumed there; one
    paused in a process of its own has no run waiting on the server)."""
    import httpx

    try:
        await _sdk_client(url, api_key, headers).threads.get(thread_id)
    except httpx.HTTPError:
        return False  # not there (404), not this key's, or no server: answer here
    return True


def _server_message(response: Any) -> str:
    """The message of a server's JSON error body (FastAPI's ``detail``, a string or a list of
    validation errors), else its status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):
        detail = "; ".join(str(item.get("msg", item)) for item in detail if isinstance(item, dict))
    return str(detail) if detail else f"HTTP {response.status_code}"


def _report(args: argparse.Namespace, result: Any) -> int:
    """Print a run's result (one JSON object with ``--json``); 1 when the run failed."""
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    elif result.error is None:
        _print_result(result)
    if result.error is not None:
        print(f"reflexrag: error: {result.error}", file=sys.stderr)
        return 1
    return 0


def _announce_sample_kb(name: str) -> None:
    print(f"First use: adding the bundled sample documents to {name!r}…", file=sys.stderr)


def _seed_sample_kb(name: str, announced: bool = False) -> None:
    """First use: embed the bundled sample documents into the default knowledge base, saying
    so at once (it takes a while on a slow machine) instead of sitting silent."""
    from reflexrag.providers.knowledge_base import get_knowledge_base
    from reflexrag.providers.loaders import sample_kb_documents

    if not announced:
        _announce_sample_kb(name)
    _add_with_progress(get_knowledge_base(name), sample_kb_documents(), "sample KB")


def _add_with_progress(
    kb: KnowledgeBase, documents: list[SourceDocument], desc: str, quiet: bool = False
) -> IngestReport:
    """``kb.add`` with a progress bar in chunks (rate, ETA). The work runs in a thread so that
    Ctrl-C is heard at once, not after the encoder's current batch: it says what is stored
    and how to resume, and exits 130 (stopping mid-write is as safe as a crash: the next
    ingest repairs and completes it)."""
    from tqdm import tqdm

    from reflexrag.providers.knowledge_base import IngestReport

    report = IngestReport()
    outcome: dict[str, Any] = {}
    with tqdm(desc=desc, unit="chunk", file=sys.stderr, disable=quiet) as bar:

        def work() -> None:
            try:
                # The plan (total chunks) arrives before any progress: reset sets the total.
                kb.add(documents, progress=bar.update, planned=bar.reset, report=report)
            except BaseException as exc:  # re-raised in the main thread
                outcome["error"] = exc

        worker = threading.Thread(target=work, name="ingest", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except KeyboardInterrupt:
            bar.close()
            print(
                f"reflexrag: interrupted: {len(report.doc_ids)} documents "
                f"({report.added_chunks} chunks) were stored in {kb.name!r} before the "
                "interruption; run the same command again to add the rest (stored documents "
                "are skipped)",
                file=sys.stderr,
                flush=True,
            )
            sys.stdout.flush()
            os._exit(130)
    if "error" in outcome:
        raise outcome["error"]
    return report


def _prompt(question: str) -> str | None:
    """Ask the user in the terminal; None when there is nobody to answer (end of input)."""
    try:
        reply = input(f"\n{question}\n> ")
    except EOFError:
        return None
    return reply.strip() or None


def _ingest(args: argparse.Namespace) -> int:
    from reflexrag.providers.knowledge_base import (
        get_knowledge_base,
        knowledge_base_writer,
        validate_kb_name,
    )
    from reflexrag.providers.loaders import load_sources, sample_kb_documents
    from reflexrag.providers.settings import get_settings

    if not args.paths and not args.sample:
        raise CLIError("name at least one PATH or URL, or --sample")
    settings = get_settings()
    validate_kb_name(args.kb or settings.default_kb)
    # Every input is read and checked before the embedding model loads or anything is stored.
    documents = load_sources(args.paths, settings.allow_private_urls)
    documents += sample_kb_documents() if args.sample else []
    folders = [Path(path).resolve() for path in args.paths if Path(path).is_dir()]
    if args.sync and not folders:
        raise CLIError("--sync needs a folder among the paths")
    _make_way_for_a_writer(settings)
    with knowledge_base_writer("reflexrag ingest"):
        kb = get_knowledge_base(args.kb)
        report = _add_with_progress(kb, documents, f"ingest → {kb.name}", args.quiet)
        gone = _gone_from(folders, kb.documents(), documents) if args.sync else []
        removed = kb.delete_documents(gone)
    synced = f", {len(removed)} removed" if args.sync else ""
    print(
        f"{kb.name}: {report.added_documents} added, {report.replaced_documents} replaced, "
        f"{report.unchanged_documents} unchanged{synced} ({report.added_chunks} new chunks; "
        f"{kb.count()} chunks in total)"
    )
    return 0


def _gone_from(folders: list[Path], stored: list[dict[str, Any]], loaded: list[Any]) -> list[str]:
    """Stored documents whose source file lies inside one of ``folders`` but was not among
    the documents just loaded from them (the file was deleted or moved)."""
    present = {doc.doc_id for doc in loaded}
    return [
        doc["doc_id"]
        for doc in stored
        if doc["doc_id"] not in present
        and doc["source"].startswith("/")
        and any(Path(doc["source"]).is_relative_to(folder) for folder in folders)
    ]


def _kb(args: argparse.Namespace) -> int:
    from reflexrag.providers.knowledge_base import (
        delete_knowledge_base,
        get_knowledge_base,
        knowledge_base_owners,
        knowledge_base_writer,
    )
    from reflexrag.providers.settings import get_settings

    owners = knowledge_base_owners()
    if args.kb_command == "list":
        for name, owner in sorted(owners.items()):
            # Shared: made with the CLI, every API key reads it; else one key's own.
            shared = "shared (CLI)" if owner is None else "an API key's"
            count = get_knowledge_base(name, create=False).count()
            print(f"{name}\t{count} chunks\t{shared}")
        if not owners:
            print(f"no knowledge bases in {get_settings().data_dir}", file=sys.stderr)
        return 0
    if args.name not in owners:
        known = ", ".join(sorted(owners)) or "none"
        raise CLIError(f"unknown knowledge base {args.name!r}; known: {known}")
    if args.kb_command == "documents":
        for doc in get_knowledge_base(args.name, create=False).documents():
            print(f"{doc['doc_id']}\t{doc['chunks']} chunks\t{doc['title']}\t{doc['source']}")
        return 0
    if args.kb_command in ("rm", "delete"):
        _make_way_for_a_writer(get_settings())
    if args.kb_command == "rm":
        with knowledge_base_writer("reflexrag kb rm"):
            kb = get_knowledge_base(args.name, create=False)
            unknown = sorted(doc_id for doc_id in set(args.doc_ids) if not kb.has_document(doc_id))
            if unknown:  # nothing is removed unless every id is there
                raise CLIError(f"no document {', '.join(map(repr, unknown))} in {args.name!r}")
            removed = kb.delete_documents(args.doc_ids)
        print(f"{args.name}: removed {len(removed)} documents ({kb.count()} chunks left)")
        return 0
    with knowledge_base_writer("reflexrag kb delete"):
        delete_knowledge_base(args.name)
    print(f"deleted {args.name}")
    return 0


def _graphs(args: argparse.Namespace) -> int:
    from reflexrag.graphs import STRATEGIES

    width = max(len(name) for name in STRATEGIES)
    for strategy in STRATEGIES.values():
        print(f"{strategy.name:<{width}}  {strategy.description}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    from reflexrag.graphs import compile_strategy

    print(compile_strategy(args.name).get_graph().draw_mermaid())
    return 0


def _eval(args: argparse.Namespace) -> int:
    from reflexrag.benchmarks.evaluate import headline_table, resolve_strategies, run_eval
    from reflexrag.benchmarks.fixture import FixtureError

    for path in (args.qa, args.corpus, args.web):
        if path is not None and not path.is_file():
            raise CLIError(f"no such file: {path}")
    try:
        strategies = resolve_strategies(args.strategies)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    overrides = {
        k: v
        for k, v in (
            ("judge_backend", args.judge_backend),
            ("generator_backend", args.generator_backend),
            ("top_k", args.top_k),
            ("retrieval_mode", args.retrieval_mode),
            ("min_confidence", args.min_confidence),
            ("best_effort", args.best_effort),
            ("llm_judging", args.llm_judging),
        )
        if v is not None
    }
    try:
        report = asyncio.run(
            run_eval(
                args.qa,
                args.corpus,
                args.web,
                strategies,
                args.out,
                limit=args.limit,
                seed=args.sample_seed,
                concurrency=args.concurrency,
                context_overrides=overrides,
                max_consecutive_errors=args.max_consecutive_errors,
            )
        )
    except FixtureError as exc:
        raise CLIError(str(exc)) from None
    print(headline_table(report))
    print(f"wall time {report['wall_seconds']} s; report in {args.out}/report.md")
    failed = report["failed_runs"]
    if failed["count"]:
        total = len(report["records"])
        print(
            f"reflexrag: {failed['count']} of {total} runs failed: {failed['first_errors'][0]}",
            file=sys.stderr,
        )
        if not args.allow_errors:
            return 1
    return 0


def _serve(args: argparse.Namespace) -> int:
    import secrets

    import uvicorn

    from reflexrag.providers.settings import get_settings
    from reflexrag.server.app import create_app
    from reflexrag.server.discovery import OWNER_HEADER, announce, local_url, withdraw
    from reflexrag.server.serving import Activity, OwnerOnly, server_config

    class AnnouncedServer(uvicorn.Server):
        """Leaves a note in the data dir once it listens, so ``ask`` streams from it; started
        for ``ask``, it stops after ``keep_alive_s`` with nothing to do."""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers:
                port = self.servers[0].sockets[0].getsockname()[1]
                url = local_url(args.host, port)
                if not announce(settings, url, token, gives_way=args.for_ask):
                    print(
                        f"reflexrag: cannot write {settings.data_dir}: a plain ask there will "
                        "not find this server (ask --url will)",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.should_exit = self.should_exit or args.for_ask  # of no use then
                if args.for_ask:  # (kept on self: a task nothing refers to may be collected)
                    self.idle_watch = asyncio.create_task(self.exit_when_idle())

        async def exit_when_idle(self) -> None:
            keep_alive_s = settings.keep_alive_s
            while not self.should_exit:
                await asyncio.sleep(min(1.0, keep_alive_s))
                if activity.idle_s() >= keep_alive_s and not app.state.runs.running():
                    print(
                        f"reflexrag: stopping after {keep_alive_s:g} s with nothing to do",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.should_exit = True

        async def shutdown(self, sockets: Any = None) -> None:
            # First, so no new ``ask`` streams from a server on its way out. (uvicorn re-raises
            # the signal that stopped it once it has shut down: code after ``run`` is not
            # reached then.)
            withdraw(settings)
            await super().shutdown(sockets)

    settings = get_settings()
    token = None
    if args.for_ask:
        # Started by ``ask`` (server/discovery.py): on a loopback port of its own, for its
        # owner's processes only, quiet but for warnings.
        if settings.distributed or settings.keep_alive_s <= 0:
            raise CLIError("--for-ask is for a data dir of its own, with REFLEXRAG_KEEP_ALIVE_S")
        token = secrets.token_urlsafe(32)
        args.host, args.port, args.log_level = "127.0.0.1", 0, "warning"
    else:
        _make_way_for_a_writer(settings)
    print(f"reflexrag: data in {settings.data_dir}", file=sys.stderr, flush=True)
    app = create_app(seed_sample_kb=not args.for_ask)
    activity = Activity(app)
    served = app if token is None else OwnerOnly(activity, OWNER_HEADER, token)
    config = server_config(served, args.host, args.port, settings, log_level=args.log_level)
    try:
        AnnouncedServer(config).run()
    finally:
        withdraw(settings)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from reflexrag.providers.settings import get_settings
    from reflexrag.server.app import run_worker

    settings = get_settings()
    if not settings.distributed:
        raise CLIError(
            "a worker takes runs from the shared run queue: set REFLEXRAG_DATABASE_URL to a "
            "postgresql:// URL (and REFLEXRAG_CHROMA_URL to share knowledge bases)"
        )
    if settings.worker_slots < 1:
        raise CLIError("REFLEXRAG_WORKER_SLOTS is 0: this worker would take no runs")
    asyncio.run(run_worker(settings))
    print("reflexrag worker: stopped; its runs went to the other workers", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from reflexrag.graphs import STRATEGIES
    from reflexrag.providers.settings import get_settings

    parser = argparse.ArgumentParser(
        prog="reflexrag",
        description="Self-correcting retrieval-augmented generation.",
        epilog=f"Data (knowledge bases, checkpoints): {get_settings().data_dir} "
        "(REFLEXRAG_DATA_DIR moves it).",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    ask = commands.add_parser("ask", help="answer a question, streaming each step")
    ask.add_argument("question", nargs="?", default="", help="the question (2,000 chars at most)")
    ask.add_argument(
        "--strategy", default="self_rag", choices=list(STRATEGIES), help="default: self_rag"
    )
    ask.add_argument("--kb", help="knowledge base name (default: the settings' default_kb)")
    ask.add_argument("--thread", help="thread id, to keep the run in a checkpointed thread")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    ask.add_argument(
        "--no-input",
        action="store_true",
        help="never prompt: a clarifying question ends the run (needs_clarification)",
    )
    ask.add_argument("--reply", help="answer a paused run's clarifying question (with --thread)")
    ask.add_argument("--top-k", type=int, help="chunks retrieved per query (1-50, default 4)")
    ask.add_argument(
        "--retrieval-mode", choices=["vector", "bm25", "hybrid"], help="default: hybrid"
    )
    ask.add_argument("--fusion", choices=["score", "rrf"], help="how hybrid mode fuses")
    ask.add_argument(
        "--initial-k", type=int, help="skip reading: candidates reranked before reading top-k"
    )
    ask.add_argument("--max-rounds", type=int, help="iterative: rounds at most")
    ask.add_argument(
        "--iterative-stop",
        choices=["completeness", "fixed"],
        help="iterative: stop when complete (default) or always run --max-rounds",
    )
    ask.add_argument("--completeness-threshold", type=int, help="iterative: 1-10")
    ask.add_argument(
        "--filter",
        action="append",
        metavar="EXPR",
        help="metadata filter, repeatable: lang=zh, 'year>=2020', 'source in a,b'",
    )
    ask.add_argument(
        "--min-confidence",
        type=float,
        help="self-correcting strategies: the lowest confidence they answer with (0-1)",
    )
    ask.add_argument(
        "--best-effort",
        action="store_true",
        default=None,
        help="when a loop gives up, answer from the best evidence if the judges accept it",
    )
    ask.add_argument(
        "--max-query-rewrites", type=int, help="rewrites before giving up (0-10, default 3)"
    )
    ask.add_argument(
        "--max-regenerations", type=int, help="retries of an ungrounded answer (0-10, default 2)"
    )
    ask.add_argument("--judge-backend", choices=["local", "llm"], help="default: settings")
    ask.add_argument(
        "--llm-judging", choices=["per_call", "batched", "cascade"], help=LLM_JUDGING_HELP
    )
    ask.add_argument("--generator-backend", choices=["local", "llm"], help="default: settings")
    ask.add_argument(
        "--search-provider",
        choices=["local", "tavily", "duckduckgo", "searxng"],
        help="CRAG's web search (default: settings)",
    )
    ask.add_argument(
        "--url",
        default=os.environ.get("REFLEXRAG_URL") or None,
        help="ask a running reflexrag serve at this URL instead of running here "
        "(default: REFLEXRAG_URL; its API key from LANGGRAPH_API_KEY)",
    )
    ask.add_argument(
        "--local",
        action="store_true",
        help="answer in this process even when a reflexrag serve runs on this data dir "
        "(by default ask streams from it: same answers, no start-up imports)",
    )
    ask.add_argument("--web-kb", help="collection the 'local' web search reads (default: web)")
    ask.add_argument("--max-web-searches", type=int, help="CRAG: 0-5 (default 1)")
    ask.set_defaults(handler=_ask)

    ingest = commands.add_parser("ingest", help="add files, folders or URLs to a knowledge base")
    ingest.add_argument(
        "paths", nargs="*", metavar="PATH", help="files, folders, .jsonl or http(s) URLs"
    )
    ingest.add_argument("--sample", action="store_true", help="the bundled sample documents")
    ingest.add_argument("--kb", help="knowledge base name")
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="also remove the documents ingested from these folders whose files are gone",
    )
    ingest.set_defaults(handler=_ingest)

    kb = commands.add_parser("kb", help="list or delete knowledge bases, list or remove documents")
    kb_commands = kb.add_subparsers(
        dest="kb_command", required=True, help="list, delete, documents or rm"
    )
    kb_commands.add_parser(
        "list",
        help="every knowledge base with its chunk count, shared (made with the CLI, read by "
        "every API key) or an API key's own",
    )
    delete = kb_commands.add_parser("delete", help="delete a knowledge base and its index")
    delete.add_argument("name", help="the knowledge base")
    documents = kb_commands.add_parser("documents", help="the documents of a knowledge base")
    documents.add_argument("name", help="the knowledge base")
    remove = kb_commands.add_parser("rm", help="remove documents from a knowledge base")
    remove.add_argument("name", help="the knowledge base")
    remove.add_argument("doc_ids", nargs="+", metavar="DOC_ID", help="as `kb documents` lists")
    kb.set_defaults(handler=_kb)

    listing = commands.add_parser("graphs", help="list the strategies")
    listing.set_defaults(handler=_graphs)

    show = commands.add_parser("graph", help="print a strategy's graph as Mermaid")
    show.add_argument("name", choices=list(STRATEGIES), help="the strategy to draw")
    show.set_defaults(handler=_graph)
    serve = commands.add_parser("serve", help="run the HTTP service (LangGraph Server API)")
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1 (loopback)")
    serve.add_argument("--port", type=int, default=8080, help="default: 8080")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="server log detail (default: info)",
    )
    # How a plain ``ask`` starts the server it leaves for the next one (server/discovery.py).
    serve.add_argument("--for-ask", action="store_true", help=argparse.SUPPRESS)
    serve.set_defaults(handler=_serve)
    worker = commands.add_parser(
        "worker", help="execute runs from the shared Postgres run queue, without HTTP"
    )
    worker.set_defaults(handler=_worker)

    model = commands.add_parser("model", help="serve a local GGUF chat model (llama-server)")
    model_commands = model.add_subparsers(dest="model_command", required=True, help="serve")
    serving = model_commands.add_parser(
        "serve",
        help="serve a GGUF chat model with llama.cpp's llama-server, OpenAI-compatible, until "
        "Ctrl-C or SIGTERM",
    )
    serving.add_argument(
        "--model", type=Path, help="a GGUF file (default: the pinned SmolLM2-135M test model)"
    )
    serving.add_argument("--sha256", help="refuse to serve --model unless it has this SHA-256")
    serving.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1 (loopback)")
    serving.add_argument("--port", type=int, default=8090, help="default: 8090")
    serving.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads (default 1: measured far faster than 2 when anything else uses the "
        "cores, about half as fast on an idle machine)",
    )
    serving.add_argument(
        "--ctx-size", type=int, default=8192, help="context tokens, shared by --parallel slots"
    )
    serving.add_argument("--parallel", type=int, default=2, help="requests served at once")
    serving.set_defaults(handler=_model_serve)

    evaluate = commands.add_parser("eval", help="compare strategies on a QA fixture")
    evaluate.add_argument("--qa", type=Path, required=True, help="QA.jsonl")
    evaluate.add_argument("--corpus", type=Path, required=True, help="CORPUS.jsonl")
    evaluate.add_argument("--web", type=Path, help="WEB.jsonl, the offline web snapshot")
    evaluate.add_argument(
        "--strategies", default="all", help="comma list (naive,self_rag,tutorial_self_rag) or all"
    )
    evaluate.add_argument("--limit", type=int, help="stratified sample of N questions")
    evaluate.add_argument(
        "--sample-seed", type=int, default=0, help="seed of the stratified --limit sample"
    )
    evaluate.add_argument("--concurrency", type=int, default=2, help="questions in flight")
    evaluate.add_argument(
        "--out", type=Path, default=Path("eval-out"), help="report folder (default: eval-out)"
    )
    evaluate.add_argument("--top-k", type=int, help="chunks retrieved per query")
    evaluate.add_argument(
        "--retrieval-mode", choices=["vector", "bm25", "hybrid"], help="default: hybrid"
    )
    evaluate.add_argument("--min-confidence", type=float, help="abstention level (0-1)")
    evaluate.add_argument(
        "--best-effort",
        action="store_true",
        default=None,
        help="loops that give up answer from the best evidence the judges accept",
    )
    evaluate.add_argument("--judge-backend", choices=["local", "llm"], help="default: settings")
    evaluate.add_argument(
        "--llm-judging", choices=["per_call", "batched", "cascade"], help=LLM_JUDGING_HELP
    )
    evaluate.add_argument("--generator-backend", choices=["local", "llm"], help="default: settings")
    evaluate.add_argument(
        "--allow-errors", action="store_true", help="exit 0 even when runs failed"
    )
    evaluate.add_argument(
        "--max-consecutive-errors",
        type=int,
        default=5,
        help="after this many failed runs in a row, record the rest as failed without running "
        "them (0: never; default 5)",
    )
    evaluate.set_defaults(handler=_eval)
    return parser


def _stop_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM (a service manager, ``kill``) stops as Ctrl-C does: the server goes too."""
    raise KeyboardInterrupt


def _model_serve(args: argparse.Namespace) -> int:
    import signal

    from reflexrag.benchmarks import model_server

    if args.sha256 and not args.model:
        raise CLIError("--sha256 checks a --model file; the default model is always checked")
    for name in ("threads", "ctx_size", "parallel", "port"):
        if getattr(args, name) < 1:
            raise CLIError(f"--{name.replace('_', '-')} must be at least 1")
    try:
        model = args.model or model_server.default_model()
        if args.sha256:
            print(f"checking the SHA-256 of {model}…", file=sys.stderr, flush=True)
            model_server.verified(model, args.sha256.lower())
        elif not model.is_file():
            raise CLIError(f"model file not found: {model}")
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        with model_server.running(
            model,
            args.port,
            parallel=args.parallel,
            context_size=args.ctx_size,
            threads=args.threads,
            host=args.host,
            show_log=True,
        ) as server:
            print(
                f"serving {server.model} at {server.base_url} (Ctrl-C stops it); use it with\n"
                f"  export REFLEXRAG_OPENAI_BASE_URL={server.base_url}\n"
                f"  export REFLEXRAG_GRADER_MODEL={server.model} "
                f"REFLEXRAG_GENERATOR_MODEL={server.model}\n"
                "  export REFLEXRAG_JUDGE_BACKEND=llm REFLEXRAG_GENERATOR_BACKEND=llm",
                flush=True,
            )
            server.process.wait()
            if server.process.returncode:
                raise CLIError(f"llama-server exited with {server.process.returncode}")
    except model_server.ModelServerSetupError as exc:
        raise CLIError(str(exc).splitlines()[0]) from None
    except KeyboardInterrupt:
        print("model server stopped", file=sys.stderr)
    return 0


def _user_errors() -> tuple[type[Exception], ...]:
    """Mistakes the user fixes (one line, exit 2). Imported only once one happens: a run
    should not wait for langgraph and Chroma to load before it can say anything."""
    from reflexrag.graphs import UnknownStrategyError
    from reflexrag.nodes.judges.base import JudgeConfigurationError
    from reflexrag.providers.knowledge_base import KnowledgeBaseError
    from reflexrag.providers.models import ModelConfigurationError

    return (
        CLIError,
        KnowledgeBaseError,
        UnknownStrategyError,
        ModelConfigurationError,
        JudgeConfigurationError,
    )


def main(argv: Sequence[str] | None = None) -> int:
    from pydantic import ValidationError

    from reflexrag.providers.settings import describe_invalid_settings, get_settings

    try:
        get_settings()
    except ValidationError as exc:
        print(f"reflexrag: error: {describe_invalid_settings(exc)}", file=sys.stderr)
        return 2
    # Parsed first: --help and usage errors answer before langgraph and Chroma load.
    args = build_parser().parse_args(argv)
    try:
        result = args.handler(args)
        return asyncio.run(result) if asyncio.iscoroutine(result) else result
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if not isinstance(exc, _user_errors()):
            raise
        print(f"reflexrag: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
