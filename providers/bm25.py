"""A BM25 index per knowledge base, persisted beside it and updated on every ingest.

Terms come from :func:`providers.text.terms`: folded English words and jieba-segmented Chinese
words, stopwords removed. The index stores each chunk's term frequencies in a JSON file and
keeps postings in memory; corpora here are thousands of chunks, not millions.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from providers.text import terms

K1 = 1.5
B = 0.75
RRF_K = 60


class BM25Index:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._docs: dict[str, dict[str, int]] = {}
        if path.exists():
            self._docs = json.loads(path.read_text(encoding="utf-8"))
        self._rebuild()

    def _rebuild(self) -> None:
        self._postings: dict[str, dict[str, int]] = defaultdict(dict)
        self._lengths = {chunk_id: sum(tf.values()) for chunk_id, tf in self._docs.items()}
        for chunk_id, tf in self._docs.items():
            for term, count in tf.items():
                self._postings[term][chunk_id] = count
        self._average_length = (
            sum(self._lengths.values()) / len(self._lengths) if self._lengths else 0.0
        )

    def __len__(self) -> int:
        return len(self._docs)

    def update(self, add: dict[str, str], remove: Iterable[str] = ()) -> None:
        """Index ``add`` (chunk id → text), drop ``remove``, and save to disk."""
        with self._lock:
            for chunk_id in remove:
                self._docs.pop(chunk_id, None)
            for chunk_id, text in add.items():
                self._docs[chunk_id] = dict(Counter(terms(text, for_search=False)))
            self._rebuild()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".tmp")
            partial.write_text(json.dumps(self._docs, ensure_ascii=False), encoding="utf-8")
            partial.replace(self.path)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best (chunk id, BM25 score) pairs; chunks sharing no term are left out."""
        scores: dict[str, float] = defaultdict(float)
        total = len(self._docs)
        for term in set(terms(query, for_search=False)):
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
            for chunk_id, count in postings.items():
                norm = 1 - B + B * self._lengths[chunk_id] / (self._average_length or 1)
                scores[chunk_id] += idf * count * (K1 + 1) / (count + K1 * norm)
        return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))[:k]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int) -> list[str]:
    """Fuse ranked id lists: each id scores Σ 1 / (60 + rank); ties keep first appearance."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (RRF_K + rank)
    order = {item: n for n, item in enumerate(dict.fromkeys(i for r in rankings for i in r))}
    return sorted(fused, key=lambda item: (-fused[item], order[item]))[:k]
