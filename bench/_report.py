"""How a benchmark ends: its tables on the console, its figures as JSON when asked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

__all__ = ["report"]


def report(
    results: dict[str, Any],
    show: Callable[[dict[str, Any], Console], None],
    console: Console,
    json_path: Path | None,
) -> int:
    """Print ``results`` with the benchmark's ``show``, write them to ``json_path`` when
    given; the process's exit status (0)."""
    show(results, console)
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=2))
    return 0
