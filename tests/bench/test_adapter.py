"""The benchmark adapters rank turns and sessions (keyword only: no model needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench._adapter import BlockRetriever, KernelRetriever, Recipe, Retriever, Turn, parse_weights
from bench._cv import Setting, replay

from tests.pg import PgCluster, as_uri

TURNS = [
    Turn("D1:1", "1", "Ana", "I adopted a grey cat called Pixel.", "8 May, 2023"),
    Turn("D1:2", "1", "Ben", "Lovely! How old is she?", "8 May, 2023"),
    Turn("D1:3", "1", "Ana", "Two years old, she loves boxes.", "8 May, 2023"),
    Turn("D2:1", "2", "Ben", "I ran a marathon in Berlin last weekend.", "3 June, 2023"),
    Turn("D2:2", "2", "Ana", "Wow, what was your finishing time?", "3 June, 2023"),
    Turn("D2:3", "2", "Ben", "Three hours and forty minutes.", "3 June, 2023"),
]


def _check(retriever: Retriever) -> None:
    retriever.ingest("conv", TURNS)
    result = retriever.search("conv", "Which city was Ben's marathon in?", mode="keyword", k=3)
    assert result.turns[0] == "D2:1"
    assert result.sessions[0] == "2"
    result = retriever.search("conv", "What is the name of Ana's cat?", mode="keyword", k=3)
    assert result.turns[0] == "D1:1"
    assert result.sessions[0] == "1"
    assert len(result.turns) <= 3


def test_block_retriever_keyword() -> None:
    _check(BlockRetriever(Recipe(keyword_radii={0: 1.0, 1: 1.0}, vector_weights={})))


def test_kernel_retriever_keyword() -> None:
    retriever = KernelRetriever(embedder="")
    try:
        _check(retriever)
        assert retriever.rejected == 0
        # Without an embedder there is no vector signal rather than an error.
        assert retriever.search("conv", "cat", mode="vector", k=3).turns == []
    finally:
        retriever.close()


def test_a_captured_question_replays_to_the_kernels_own_ranking() -> None:
    # The cross-validation replay (bench/_cv.py) ranks what ``capture`` took from
    # ``Memory.recall``: with the kernel's settings it must rank as ``Memory.search`` did.
    retriever = KernelRetriever(embedder="", weights={"keyword": 1.0, "vector": 0.0})
    try:
        retriever.ingest("conv", TURNS)
        for question in ("Which city was Ben's marathon in?", "How old is Ana's cat?"):
            captured = retriever.capture("conv", question)
            assert captured.keyword and not captured.vector
            assert set(captured.scopes.values()) == {"bench/conv"}
            replayed = replay(captured, [Setting(1.0)], mode="keyword", k=retriever.hits)[0]
            assert replayed.turns and replayed.sessions
            assert replayed == retriever.search("conv", question, mode="keyword", k=0)
    finally:
        retriever.close()


def test_kernel_retriever_on_postgres(pg_cluster: PgCluster) -> None:
    # The benches' --db: the same records, ranked by the PostgreSQL store's keyword search.
    url = pg_cluster.new_database()
    retriever = KernelRetriever(embedder="", db=as_uri(url))
    try:
        _check(retriever)
        assert retriever.rejected == 0
        assert retriever.store.schema_version >= 3
        assert type(retriever.store).__name__ == "PostgresStore"
    finally:
        retriever.close()
        pg_cluster.drop_database(url)


def test_a_vector_cache_file_serves_a_second_run_without_embedding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --vector-cache: a run that stopped resumes from the vectors it made, documents included
    # (the kernel's indexer looks through the in-memory cache to the model beneath it).
    from cairn.search.static_embed import StaticEmbedder

    cache = tmp_path / "vectors.sqlite"
    question = "Which city was Ben's marathon in?"
    first = KernelRetriever(embedder="static", vector_cache=cache)
    try:
        first.ingest("conv", TURNS)
        expected = first.search("conv", question, mode="vector", k=3)
    finally:
        first.close()
    assert expected.turns

    def refuse(self: StaticEmbedder, texts: Any) -> Any:
        raise AssertionError(f"embedded {len(texts)} texts again")

    monkeypatch.setattr(StaticEmbedder, "embed", refuse)
    second = KernelRetriever(embedder="static", vector_cache=cache)
    try:
        second.ingest("conv", TURNS)
        assert second.search("conv", question, mode="vector", k=3) == expected
    finally:
        second.close()


def test_parse_weights() -> None:
    assert parse_weights(None) is None
    assert parse_weights("keyword=0.6, vector=0.4") == {"keyword": 0.6, "vector": 0.4}
    with pytest.raises(ValueError):
        parse_weights("keyword=lots")
