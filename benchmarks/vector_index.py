"""How well Chroma's HNSW graph finds a question's nearest chunks, by index configuration.

Embeds the corpora of the shared sets (the fixture and the dev split) into one knowledge base
(the embedding cache makes a second run fast), then, for each configuration, builds a new
collection from those vectors twice, written as the knowledge base writes them (1,000 chunks
a write), and asks every question of the sets. Prints, per configuration and build: how many
questions get the exact nearest chunk first, recall@16 against an exact cosine search, the
build and query time, and how many questions the two builds answer with the same top 16.
Prints numbers, asserts nothing.

    python -m reflexrag.benchmarks.vector_index [--shared ../shared/rag-eval]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import chromadb
import numpy as np

from reflexrag.benchmarks.fixture import load_qa
from reflexrag.providers.knowledge_base import (
    VECTOR_INDEX,
    WRITE_BATCH,
    SourceDocument,
    get_knowledge_base,
)

SETS = ("fixtures", "dev/clapnq_dev", "dev/drcd", "dev/multihop_rag_500", "dev/covidqa")
CONFIGURATIONS = {
    "Chroma's defaults (16 links, ef 100)": {"space": "cosine"},
    "32 links, ef 200": {
        "space": "cosine",
        "max_neighbors": 32,
        "ef_construction": 200,
        "ef_search": 200,
    },
    "VECTOR_INDEX (32 links, ef 400)": VECTOR_INDEX,
}
DEPTH = 16


def shared_vectors(shared: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Chunk ids, chunk vectors and question vectors of every shared set."""
    documents, questions = [], []
    for name in SETS:
        folder = shared / name
        rows = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8")]
        documents += [
            SourceDocument(r["doc_id"], r["text"], {"title": r.get("title", "")}) for r in rows
        ]
        questions += [item.question for item in load_qa(folder / "qa.jsonl")]
    kb = get_knowledge_base("vector-index-benchmark")
    kb.add(documents)
    stored = kb._collection.get(include=["embeddings"])
    asked = np.array([kb.embeddings.embed_query(q) for q in questions], dtype=np.float32)
    return list(stored["ids"]), np.array(stored["embeddings"], dtype=np.float32), asked


def main(shared: Path) -> None:
    ids, chunks, questions = shared_vectors(shared)
    unit = chunks / np.linalg.norm(chunks, axis=1, keepdims=True)
    exact = [[ids[j] for j in np.argsort(-(unit @ q), kind="stable")[:DEPTH]] for q in questions]
    print(f"{len(ids)} chunks, {len(questions)} questions")
    print("| index | build | nearest chunk found | recall@16 | build s | query ms |")
    print("|---|---:|---:|---:|---:|---:|")
    client = chromadb.PersistentClient(tempfile.mkdtemp(prefix="reflexrag-index-"))
    for number, (name, configuration) in enumerate(CONFIGURATIONS.items()):
        builds = []
        for build in range(2):
            collection = client.create_collection(
                f"index-{number}-{build}",
                embedding_function=None,
                configuration={"hnsw": configuration},
            )
            started = time.perf_counter()
            for start in range(0, len(ids), WRITE_BATCH):
                window = slice(start, start + WRITE_BATCH)
                collection.upsert(ids=ids[window], embeddings=chunks[window].tolist())
            built = time.perf_counter() - started
            started = time.perf_counter()
            found = [
                collection.query(query_embeddings=[q.tolist()], n_results=DEPTH, include=[])["ids"][
                    0
                ]
                for q in questions
            ]
            query_ms = (time.perf_counter() - started) / len(questions) * 1000
            first = sum(f[0] == e[0] for f, e in zip(found, exact, strict=True))
            recall = np.mean(
                [len(set(f) & set(e)) / DEPTH for f, e in zip(found, exact, strict=True)]
            )
            print(
                f"| {name} | {build + 1} | {first} / {len(questions)} | {recall:.4f} "
                f"| {built:.2f} | {query_ms:.2f} |"
            )
            builds.append(found)
        agree = sum(a == b for a, b in zip(*builds, strict=True))
        print(f"| {name} | both agree on the top {DEPTH} | {agree} / {len(questions)} | | | |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--shared",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared/rag-eval",
        help="the shared rag-eval folder",
    )
    main(parser.parse_args().shared)
