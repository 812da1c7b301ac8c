"""bench/vector_cache.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick_run import run_quick


def test_vector_cache_quick_writes_json(tmp_path: Path) -> None:
    figures, printed = run_quick("vector_cache", tmp_path)
    assert (figures["entries"], figures["writes"]) == (2_000, 100)
    assert figures["write_ms"] > 0 and figures["read_ms"] > 0 and figures["write_and_count_ms"] > 0
    # The file stays within its bound after 100 writes to a full one.
    assert figures["entries_after"] <= figures["entries"]
    assert "write a query vector ms" in printed
