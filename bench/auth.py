"""What authenticating one request costs: the principals file read and checked per request.

    .venv/bin/python bench/auth.py [--principals 3,100] [--calls 100] [--repeats 3] [--json OUT]
    .venv/bin/python bench/auth.py --quick --json OUT      # what make test runs

Every HTTP, MCP, A2A and gRPC request, and every CLI command, authenticates against the
principals file as it is at that moment (so that a revoked key stops at once). Three ways of
doing so take turns, repeat by repeat, on the same file and key:

- ``pure-Python YAML, every call``: parse and validate the file on every request with
  PyYAML's pure-Python loader (how cairn did it before);
- ``libyaml, every call``: the same with libyaml's parser;
- ``cairn``: ``Workspace.authenticate`` as shipped (the file read each time, parsed again
  only when its text changed).

With ``--principals 3,100`` the file holds the three principals ``cairn init`` makes, then
97 more with a key each. Reported: the median µs a call over the repeats, and each way's
ratio to cairn's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import report

from cairn.auth import (
    PrincipalEntry,
    PrincipalsFile,
    add_key,
    authenticate,
    load_principals,
    save_principals,
)
from cairn.governance.policy import load_yaml
from cairn.workspace import Workspace

WAYS = ("pure-Python YAML, every call", "libyaml, every call", "cairn")


def _parse_with(parse: Callable[[str], Any]) -> Callable[[Path, str], object]:
    def call(path: Path, key: str) -> object:
        text = path.read_text(encoding="utf-8")
        return authenticate(PrincipalsFile.model_validate(parse(text) or {}), key)

    return call


def _workspace(folder: Path, principals: int) -> tuple[Workspace, str]:
    """A store with ``principals`` principals (the three of init, then agents with a key
    each); the key of the last one."""
    workspace = Workspace(folder / ".cairn")
    key = workspace.init().keys["agent"]
    path = workspace.principals_path
    file = load_principals(path)
    for number in range(principals - len(file.principals)):
        entry = PrincipalEntry(id=f"agent-{number}", kind="agent", roles=("agent",))
        file = file.model_copy(update={"principals": (*file.principals, entry)})
        file, key, _ = add_key(file, entry.id)
    save_principals(path, file)
    return workspace, key


def measure(principals: int, calls: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        workspace, key = _workspace(Path(folder), principals)
        path = workspace.principals_path
        ways: dict[str, Callable[[], object]] = {
            WAYS[0]: lambda: _parse_with(yaml.safe_load)(path, key),
            WAYS[1]: lambda: _parse_with(load_yaml)(path, key),
            WAYS[2]: lambda: workspace.authenticate(key),
        }
        timings: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(repeats):
            for name, call in ways.items():  # in turns: load from elsewhere hits all alike
                call()
                start = time.perf_counter()
                for _ in range(calls):
                    call()
                timings[name].append((time.perf_counter() - start) / calls * 1e6)
        size = path.stat().st_size
    medians = {name: statistics.median(values) for name, values in timings.items()}
    return {
        "principals": principals,
        "file_bytes": size,
        "median_us": medians,
        "vs_cairn": {name: medians[name] / medians[WAYS[2]] for name in ways},
    }


def show(results: dict[str, Any], console: Console) -> None:
    table = Table(title="Authenticating one request (median µs a call)")
    table.add_column("principals", justify="right")
    table.add_column("file bytes", justify="right")
    for name in WAYS:
        table.add_column(name, justify="right")
    for row in results["runs"]:
        cells = [f"{row['median_us'][name]:,.1f} ({row['vs_cairn'][name]:.1f}x)" for name in WAYS]
        table.add_row(str(row["principals"]), f"{row['file_bytes']:,}", *cells)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--principals", default="3,100", help="sizes of the principals file")
    parser.add_argument("--calls", type=int, default=100, help="calls a repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="3 principals, 20 calls, 1 repeat")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    sizes = [3] if args.quick else [int(size) for size in args.principals.split(",")]
    calls, repeats = (20, 1) if args.quick else (args.calls, args.repeats)
    runs = [measure(size, calls, repeats) for size in sizes]
    results = {"calls": calls, "repeats": repeats, "runs": runs}
    return report(results, show, Console(), args.json)


if __name__ == "__main__":
    sys.exit(main())
