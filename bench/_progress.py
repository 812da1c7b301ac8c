"""The progress bar every benchmark shows while it works: what it does, how far, how long."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

__all__ = ["bar"]


def bar(console: Console) -> Progress:
    """A transient bar (gone once done, so the tables that follow stand alone)."""
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
