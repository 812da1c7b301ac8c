"""bench/auth.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick_run import run_quick


def test_auth_quick_writes_json(tmp_path: Path) -> None:
    figures, printed = run_quick("auth", tmp_path)
    (run,) = figures["runs"]
    assert run["principals"] == 3 and run["file_bytes"] > 0
    times = run["median_us"]
    assert set(times) == {"pure-Python YAML, every call", "libyaml, every call", "cairn"}
    # Not parsing an unchanged file again must show, as a ratio within the run (parsing
    # took ~100 times longer than a cached check; 2 leaves room for a noisy machine).
    assert run["vs_cairn"]["pure-Python YAML, every call"] > 2
    assert "Authenticating one request" in printed
