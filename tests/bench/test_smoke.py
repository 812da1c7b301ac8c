"""Smoke test: each benchmark script runs with ``--quick --json`` and writes the expected keys.

Needs the benchmark files in ``<repo>/../shared/data``; skipped with a message otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"

CASES = {
    "locomo": (
        DATA / "locomo" / "locomo_dev.json",
        [
            "turn_recall@1",
            "turn_recall@5",
            "turn_recall@10",
            "turn_recall@20",
            "session_recall@5",
            "session_recall@10",
            "session_hit@10",
        ],
    ),
    "longmemeval": (
        DATA / "longmemeval" / "longmemeval_s_dev.json.xz",
        [
            "session_recall@5",
            "session_recall@10",
            "session_recall_any@5",
            "session_ndcg@10",
            "turn_recall@10",
        ],
    ),
}


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CASES))
def test_quick_run_writes_json(script: str, tmp_path: Path) -> None:
    path, keys = CASES[script]
    if not path.is_file():
        pytest.skip(f"benchmark data not found at {path} (needs ../shared/data)")
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / f"{script}.py"),
            str(path),
            "--quick",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert {"hybrid", "bm25", "vector", "recipe", "meta"} <= set(figures)
    for system in ("hybrid", "bm25", "vector", "recipe"):
        for key in keys:
            value = figures[system][key]
            assert value is None or 0.0 <= value <= 1.0, (system, key, value)
        assert figures[system]["n"] > 0
        assert figures[system]["by_group"]


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CASES))
def test_quick_cross_validation_writes_json(script: str, tmp_path: Path) -> None:
    path, keys = CASES[script]
    if not path.is_file():
        pytest.skip(f"benchmark data not found at {path} (needs ../shared/data)")
    out = tmp_path / "cv.json"
    command = [sys.executable, str(REPO / "bench" / f"{script}.py"), str(path)]
    proc = subprocess.run(
        [*command, "--quick", "--cv", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(out.read_text())
    procedures = figures["hybrid"]
    assert "defaults (fixed)" in procedures and "fusion knobs" in procedures
    for fold in procedures["fusion knobs"]["folds"]:
        assert fold["chosen"]
        for key in keys:
            value = fold["held_out"]["all"][key]
            assert value is None or 0.0 <= value <= 1.0, (key, value)


def test_missing_data_exits_with_a_clear_message(tmp_path: Path) -> None:
    for script in CASES:
        proc = subprocess.run(
            [sys.executable, str(REPO / "bench" / f"{script}.py"), str(tmp_path / "nope.json")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 2
        assert "not found" in proc.stdout + proc.stderr
