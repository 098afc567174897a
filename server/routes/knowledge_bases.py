"""Knowledge bases: list, inspect, delete, and add documents (JSON, http(s) URLs, uploads).

Over HTTP only http(s) URLs are fetched (never local paths, which stay a CLI feature), each
under a size cap and a total deadline, from a public address unless private ones are allowed.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, UploadFile
from pydantic import ValidationError
from starlette.datastructures import UploadFile as StarletteUploadFile

from reflexrag.providers.knowledge_base import (
    IngestReport,
    IngestStoppedError,
    KnowledgeBaseError,
    SourceDocument,
    delete_knowledge_base,
    get_knowledge_base,
    knowledge_base_owners,
    validate_kb_name,
)
from reflexrag.providers.loaders import check_url_syntax, load_path, load_urls
from reflexrag.server.deps import Owner, check_kb_readable, errors, kb_owner_for_writing
from reflexrag.server.schemas import DocumentsIn

router = APIRouter(prefix="/kb", tags=["knowledge bases"], responses=errors(401, 404, 422))
_WRITES = errors(403, 413, 415, 504)
MAX_FILENAME = 255


def kb_summary(name: str) -> dict[str, Any]:
    kb = get_knowledge_base(name, create=False)
    return {"name": name, "documents": kb.document_count(), "chunks": kb.count()}


@router.get("")
async def list_kbs(owner: Owner) -> list[str]:
    owners = await asyncio.to_thread(knowledge_base_owners)
    return sorted(name for name, by in owners.items() if not owner or by in (None, owner))


@router.get("/{name}")
async def get_kb(name: str, owner: Owner) -> dict[str, Any]:
    await check_kb_readable(owner, validate_kb_name(name))
    return await asyncio.to_thread(kb_summary, name)


@router.delete("/{name}", status_code=204, responses=errors(403))
async def delete_kb(name: str, owner: Owner) -> Response:
    await check_kb_readable(owner, validate_kb_name(name))
    await kb_owner_for_writing(name, owner)
    await asyncio.to_thread(delete_knowledge_base, name)
    return Response(status_code=204)


@router.get("/{name}/documents")
async def list_documents(name: str, owner: Owner) -> list[dict[str, Any]]:
    """Every document: ``doc_id``, ``title``, ``source`` and its number of ``chunks``."""
    await check_kb_readable(owner, validate_kb_name(name))
    kb = await asyncio.to_thread(get_knowledge_base, name, False)
    return await asyncio.to_thread(kb.documents)


@router.delete("/{name}/documents/{doc_id:path}", status_code=204, responses=errors(403))
async def delete_document(name: str, doc_id: str, owner: Owner) -> Response:
    """Remove one document (all its chunks) from the knowledge base; 404 if it is not there."""
    await check_kb_readable(owner, validate_kb_name(name))
    await kb_owner_for_writing(name, owner)
    kb = await asyncio.to_thread(get_knowledge_base, name, False)
    if not await asyncio.to_thread(kb.delete_documents, [doc_id]):
        raise HTTPException(404, f"no document {doc_id!r} in knowledge base {name!r}")
    return Response(status_code=204)


def inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON schema with its ``$defs`` inlined: a ``#/$defs/…`` reference inside an
    OpenAPI document would point at the document's root, where there are none."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref", "")
            if reference.startswith("#/$defs/"):
                return resolve(definitions[reference.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)


def field_errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}"
        for error in exc.errors()
    )


@router.post(
    "/{name}/documents",
    responses=_WRITES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": inline_definitions(DocumentsIn.model_json_schema())},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "required": ["file"],
                    }
                },
            },
        }
    },
)
async def add_documents(request: Request, name: str, owner: Owner) -> dict[str, Any]:
    """JSON ``{"documents": [...], "urls": [...]}``, or a multipart upload of one file."""
    validate_kb_name(name)
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        upload = (await request.form()).get("file")
        if not isinstance(upload, StarletteUploadFile):
            raise HTTPException(422, "send the file in a multipart field named 'file'")
        documents = await uploaded_documents(upload)
        return await ingest(request, name, owner, documents)
    try:
        body = DocumentsIn.model_validate_json(await request.body())
    except ValidationError as exc:
        raise HTTPException(422, f"invalid body: {field_errors(exc)}") from None
    if not body.documents and not body.urls:
        raise HTTPException(422, "send documents and/or urls")
    for url in body.urls:
        try:
            check_url_syntax(url)
        except KnowledgeBaseError as exc:
            raise HTTPException(422, f"urls: {exc}") from None
    creator = await kb_owner_for_writing(name, owner)  # before fetching anything
    documents = [
        SourceDocument(
            doc.doc_id or f"api-{hashlib.sha1(doc.text.encode()).hexdigest()[:12]}",
            doc.text,
            {**doc.metadata, "title": doc.title or doc.doc_id or doc.text[:60]},
        )
        for doc in body.documents
    ]
    settings = request.app.state.settings
    documents += await asyncio.to_thread(
        load_urls, body.urls, settings.allow_private_urls, settings.max_upload_bytes
    )
    return await ingest(request, name, owner, documents, creator)


@router.post("/{name}/files", responses=_WRITES)
async def upload_file(
    request: Request, name: str, file: UploadFile, owner: Owner
) -> dict[str, Any]:
    """The same as a multipart POST to ``/kb/{name}/documents``."""
    validate_kb_name(name)
    return await ingest(request, name, owner, await uploaded_documents(file))


async def uploaded_documents(file: StarletteUploadFile) -> list[SourceDocument]:
    filename = Path(file.filename or "upload.txt").name
    if not filename or len(filename) > MAX_FILENAME or filename in (".", ".."):
        raise HTTPException(422, f"the upload needs a file name of 1-{MAX_FILENAME} characters")
    suffix = Path(filename).suffix
    with tempfile.TemporaryDirectory() as folder:
        # A fixed name inside a private folder: the client's name never becomes a path.
        path = Path(folder) / f"upload{suffix}"
        path.write_bytes(await file.read())
        documents = await asyncio.to_thread(load_path, path, filename)
    # Ids from the upload's name, not the temporary path, so re-uploading is idempotent.
    return [
        SourceDocument(
            doc.doc_id if suffix == ".jsonl" else f"upload:{filename}",
            doc.text,
            {**doc.metadata, "source": filename},
        )
        for doc in documents
    ]


async def ingest(
    request: Request,
    name: str,
    owner: str,
    documents: list[SourceDocument],
    creator: str | None = None,
) -> dict[str, Any]:
    max_chunks = request.app.state.settings.max_ingest_chunks
    if creator is None:
        creator = await kb_owner_for_writing(name, owner)
    kb = await asyncio.to_thread(get_knowledge_base, name, True, creator)
    report = await watched(
        request, lambda stop: kb.add(documents, max_chunks=max_chunks, stop=stop)
    )
    return {"kb": name, **asdict(report), "chunks": await asyncio.to_thread(kb.count)}


async def watched(
    request: Request, add: Callable[[Callable[[], bool]], IngestReport]
) -> IngestReport:
    """Run the ingest ``add(stop)`` in a worker thread, stopping it when its client goes away
    or ``REFLEXRAG_INGEST_DEADLINE_S`` passes (504, saying what was stored)."""
    stop = threading.Event()
    work = asyncio.ensure_future(asyncio.to_thread(add, stop.is_set))
    deadline = asyncio.get_running_loop().time() + request.app.state.settings.ingest_deadline_s
    late = False
    while not work.done():
        await asyncio.wait({work}, timeout=0.25)
        if work.done():
            break
        late = asyncio.get_running_loop().time() > deadline
        if late or await request.is_disconnected():
            stop.set()
    try:
        return work.result()
    except IngestStoppedError as exc:
        if not late:
            raise
        seconds = request.app.state.settings.ingest_deadline_s
        raise HTTPException(
            504,
            f"the ingest took longer than REFLEXRAG_INGEST_DEADLINE_S ({seconds:g} s) and "
            f"was stopped: {len(exc.report.doc_ids)} documents were stored whole, the rest "
            "not at all; send the rest again",
        ) from None
