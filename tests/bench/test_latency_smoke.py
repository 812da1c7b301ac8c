"""bench/latency.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_latency_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "latency.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["records"] == 500 and figures["ingest_records_per_s"] > 0
    for mode in ("keyword", "vector", "hybrid", "hybrid_one_scope"):
        assert figures[mode]["p50_ms"] <= figures[mode]["p95_ms"] <= figures[mode]["p99_ms"]
        assert figures[mode]["mean_items"] > 0, f"{mode} reads found nothing"
    assert "hybrid" in done.stdout and "ingest rec/s" in done.stdout
