"""bench/vector_index.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_vector_index_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "vector_index.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "vector_index.py"), "--quick", "--json", str(out),
         "--variants", "hnswlib f32", "usearch i8 row-scaled"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["n"] == 5_000 and figures["dim"] == 384
    # usearch is optional (the bench skips it when missing); hnswlib always runs.
    expected = ["hnswlib f32"]
    if importlib.util.find_spec("usearch") is not None:
        expected.append("usearch i8 row-scaled")
    assert [v["variant"] for v in figures["variants"]] == expected
    for variant in figures["variants"]:
        assert variant["build_s"] > 0 and variant["index_rss_mb"] > 0
        for part in variant["by_ef"]["64"].values():
            # clustered data: even the smallest settings find most true neighbours
            assert 0.5 < part["recall"] <= 1.0 and part["p95_ms"] >= part["p50_ms"]
    assert "hnswlib f32" in done.stdout
