"""The embedding cache: a vector is computed once per text, kept in the database every process
(or replica) shares, and held in memory by the process that used it last."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from reflexrag.providers.embeddings import CachedEmbeddings


class CountingModel(Embeddings):
    """A stand-in model whose vectors say which text they are for, counting what it embeds."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def _vector(self, text: str) -> list[float]:
        self.embedded.append(text)
        return [float(len(text)), 0.1, 1 / 3]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def counting_lookups(cache: CachedEmbeddings) -> list[list[str]]:
    asked: list[list[str]] = []
    lookup = cache._vectors.lookup

    def counted(keys: list[str]) -> list[tuple[str, bytes]]:
        asked.append(keys)
        return lookup(keys)

    cache._vectors.lookup = counted  # type: ignore[method-assign]
    return asked


def test_a_vector_is_computed_once_and_then_read_from_memory(tmp_path):
    model = CountingModel()
    cache = CachedEmbeddings(model, "counting", tmp_path / "cache.sqlite")
    asked = counting_lookups(cache)
    first = cache.embed_documents(["alpha", "beta", "alpha"])
    assert model.embedded == ["alpha", "beta"]
    assert len(asked) == 1
    again = [*cache.embed_documents(["beta", "alpha"]), cache.embed_query("gamma")]
    assert again[:2] == [first[1], first[0]]
    assert model.embedded == ["alpha", "beta", "gamma"], "a query is not a passage"
    assert len(asked) == 2, "only gamma, unseen, was looked up"
    cache.embed_query("gamma")
    assert len(asked) == 2


def test_another_process_reads_the_same_vectors_from_the_shared_file(tmp_path):
    first = CachedEmbeddings(CountingModel(), "counting", tmp_path / "cache.sqlite")
    computed = first.embed_documents(["alpha", "beta"])
    model = CountingModel()
    second = CachedEmbeddings(model, "counting", tmp_path / "cache.sqlite")
    assert second.embed_documents(["alpha", "beta"]) == computed
    assert model.embedded == [], "read, not computed again"


def test_memory_keeps_only_the_vectors_used_last(tmp_path, monkeypatch):
    monkeypatch.setattr(CachedEmbeddings, "recent_size", 2)
    cache = CachedEmbeddings(CountingModel(), "counting", tmp_path / "cache.sqlite")
    asked = counting_lookups(cache)
    cache.embed_documents(["alpha", "beta", "gamma"])
    cache.embed_documents(["beta", "gamma"])
    assert len(asked) == 1
    cache.embed_documents(["alpha"])
    assert len(asked) == 2, "alpha had been dropped from memory, and came from the file"


def test_replicas_share_the_vectors_through_postgres(fresh_database):
    computed = CachedEmbeddings(CountingModel(), "counting", fresh_database).embed_query("delta")
    model = CountingModel()
    other = CachedEmbeddings(model, "counting", fresh_database)
    assert other.embed_query("delta") == computed
    assert model.embedded == []
