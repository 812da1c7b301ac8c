"""``bench/vector_reads.py --quick``: finalist vectors read in one statement and in parts."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick_run import run_quick


def test_vector_reads_quick_reads_the_same_vectors_both_ways(tmp_path: Path) -> None:
    figures, printed = run_quick("vector_reads", tmp_path)
    assert figures["chunks"] == 3000 and figures["rows_per_read"] == 150
    assert figures["same_vectors"] is True  # the parts read what one statement reads
    assert len(figures["ms"]["one read"]) == len(figures["ms"]["side by side"]) == 3
    assert "finalist vectors" in printed
