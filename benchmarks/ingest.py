"""Ingest throughput: ``KnowledgeBase.add`` against the raw encoder on the same chunks.

The corpus (the rag-eval fixture by default) is chunked the way ingest chunks it; the raw
encoder then embeds those chunk texts with nothing around it, and a fresh knowledge base (a
throw-away data dir, so no cached vector helps) ingests the same documents. The ratio is what
reflexrag adds on top of the encoder: chunking, hashing, the vector store, the keyword index.
Run it with ``OMP_NUM_THREADS=1`` and ``=2`` to compare thread settings on a busy or quiet
machine.

    python -m reflexrag.benchmarks.ingest --limit 60
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from reflexrag.providers.embeddings import CachedEmbeddings, E5Embeddings
from reflexrag.providers.knowledge_base import KnowledgeBase, _client, _WriteBatch
from reflexrag.providers.loaders import load_jsonl

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared/rag-eval/fixtures/corpus.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reflexrag.benchmarks.ingest")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="CORPUS.jsonl")
    parser.add_argument("--limit", type=int, default=60, help="documents to ingest")
    args = parser.parse_args(argv)
    documents = load_jsonl(args.corpus)[: args.limit]
    with tempfile.TemporaryDirectory(prefix="reflexrag-ingest-") as tmp:
        directory = Path(tmp)
        encoder = E5Embeddings()
        embeddings = CachedEmbeddings(encoder, E5Embeddings.name, directory / "cache.sqlite")
        kb = KnowledgeBase("bench", _client(str(directory)), embeddings, directory / "lex.sqlite")
        planned = _WriteBatch()
        for doc in documents:
            planned.queue(doc, "", kb.chunk_tokens)
        texts = planned.titled

        encoder.embed_documents(texts[:1])  # load the model outside the timing
        began = time.perf_counter()
        encoder.embed_documents(texts)
        raw_s = time.perf_counter() - began

        began = time.perf_counter()
        report = kb.add(documents)
        ingest_s = time.perf_counter() - began
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"{len(documents)} documents, {len(texts)} chunks, OMP_NUM_THREADS={threads}")
    print("| path | seconds | chunks/s |")
    print("|---|---:|---:|")
    print(f"| raw encoder | {raw_s:.1f} | {len(texts) / raw_s:.2f} |")
    print(f"| reflexrag ingest | {ingest_s:.1f} | {report.added_chunks / ingest_s:.2f} |")
    print(f"ingest / raw encoder time: {ingest_s / raw_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
