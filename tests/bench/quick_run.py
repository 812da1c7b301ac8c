"""A benchmark script run as a user runs it: its own process, ``--quick``, its figures
written to a JSON file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_quick(
    script: str, folder: Path, *options: str, output: str = "--json", timeout: int = 300
) -> tuple[dict[str, Any], str]:
    """``bench/<script>.py --quick <options> <output> FILE``, run in ``folder``: the figures
    it wrote to FILE and what it printed."""
    out = folder / f"{script}.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / f"{script}.py"),
            "--quick",
            *options,
            output,
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures, done.stdout
