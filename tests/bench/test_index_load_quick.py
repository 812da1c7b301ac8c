"""``bench/index_load.py --quick``: a small store's dense index built, saved and loaded."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick_run import run_quick


def test_index_load_quick_saves_and_loads_the_same_index(tmp_path: Path) -> None:
    figures, printed = run_quick("index_load", tmp_path)
    assert figures["rows"] == 3000
    assert figures["same_answers"] is True  # the loaded index answers as the built one
    assert figures["saved_mb"] > 0  # it saved the index it then loaded
    assert "dense index on opening a store" in printed
