"""bench/waiting_count.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick_run import run_quick


def test_waiting_count_quick_writes_json(tmp_path: Path) -> None:
    figures, printed = run_quick("waiting_count", tmp_path)
    assert (figures["records"], figures["scan"]) == (2_000, 500)
    counts = {(c["reader"], c["range"]): c["count"] for c in figures["counts"]}
    # The whole backlog is more than the bound: never counted, for any reader.
    assert [counts[(r, "whole backlog")] for r in ("every scope", "one scope of ten",
            "no ACL admits")] == [None, None, None]  # fmt: skip
    # A range of exactly the bound is counted, and only what each reader may see: every
    # chunk, the tenth in one team of ten, none.
    assert counts[("every scope", "one bound")] == 500
    assert counts[("one scope of ten", "one bound")] == 50
    assert counts[("no ACL admits", "one bound")] == 0
    assert figures["keyword_read_ms"] > 0
    assert all(c["ms"] > 0 for c in figures["counts"])
    assert "counting waiting chunks" in printed
