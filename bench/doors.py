"""What a request costs through a live ``cairn serve``, on one connection and on new ones.

    .venv/bin/python bench/doors.py [--records 200] [--requests 60] [--json OUT]
    .venv/bin/python bench/doors.py --quick --json OUT      # what make test runs

Starts ``cairn serve`` (the CLI, static embedder) on a throwaway store and a free loopback
port, stores ``--records`` records in one batch, then times whole requests from a client's
side, round by round so that load from elsewhere hits every way alike:

- HTTP, one keep-alive connection (``httpx.Client``, as the Python client and most HTTP
  clients do): ``GET /v1/records/{id}`` and ``POST /v1/search``;
- HTTP, a new connection for every request (the floor a keep-alive connection should beat:
  it saves the TCP handshake);
- MCP, the official client on one streamable-HTTP session: the ``recall`` tool.

Reported: p50 and p95 ms a request, and for each HTTP request the ratio of the keep-alive
p50 to the new-connection p50. A ratio well above 1 means something stalls a connection
between requests (as Nagle's algorithm against a delayed ACK did, ~40 ms a response).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import report
from tests.doors.conftest import free_port, stop_server, wait_ready

from cairn.workspace import Workspace

SCOPE = "acme/bench"
QUERY = "which release moved the connector to the new queue"
WAYS = ("keep-alive", "new connection")


def _serve(store: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cairn", "--store", str(store), "serve"]
    options = ["--port", str(port), "--embedder", "static", "--log-level", "warning"]
    with log.open("ab") as sink:
        return subprocess.Popen([*command, *options], stdout=subprocess.DEVNULL, stderr=sink)


def _seed(url: str, key: str, records: int) -> str:
    """``records`` records in one batch; the id of the first."""
    contents = [
        {
            "kind": "fact",
            "scope": SCOPE,
            "title": f"Release {number} notes",
            "body": f"Release {number} moved connector {number % 17} to queue {number % 5}.",
        }
        for number in range(records)
    ]
    headers = {"Authorization": f"Bearer {key}"}
    done = httpx.post(f"{url}/v1/records:batch", json={"contents": contents}, headers=headers)
    if done.status_code != 200:
        raise SystemExit(f"storing the records failed: {done.status_code} {done.text}")
    first: str = done.json()[0]["record"]["id"]
    return first


def _timed(call: Callable[[], httpx.Response]) -> float:
    start = time.perf_counter()
    answer = call()
    elapsed = (time.perf_counter() - start) * 1000
    answer.raise_for_status()
    return elapsed


async def _mcp_calls(url: str, key: str, calls: int) -> list[float]:
    timings = []
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
        transport = streamable_http_client(f"{url}/mcp", http_client=client)
        async with Client(transport) as session:
            arguments = {"query": QUERY, "scope": SCOPE, "top_k": 5}
            await session.call_tool("recall", arguments)  # the session's first call warms up
            for _ in range(calls):
                start = time.perf_counter()
                answer = await session.call_tool("recall", arguments)
                timings.append((time.perf_counter() - start) * 1000)
                if answer.is_error:
                    raise SystemExit(f"the MCP recall tool failed: {answer.content}")
    return timings


def _http_calls(url: str, key: str, first: str, requests: int) -> dict[str, dict[str, list[float]]]:
    """Each HTTP request ``requests`` times each way, the ways in turns."""
    headers = {"Authorization": f"Bearer {key}"}
    search = {"query": QUERY, "scope": SCOPE, "top_k": 5}
    # "Connection: close" makes the server end each connection after its answer, so the
    # client opens a new one for the next request (a client built anew for each request
    # would time building an SSL context as well).
    closing = {**headers, "Connection": "close"}
    with (
        httpx.Client(base_url=url, headers=headers, timeout=30) as kept,
        httpx.Client(base_url=url, headers=closing, timeout=30) as fresh,
    ):
        calls: dict[str, dict[str, Callable[[], httpx.Response]]] = {
            "GET /v1/records/{id}": {
                WAYS[0]: lambda: kept.get(f"/v1/records/{first}"),
                WAYS[1]: lambda: fresh.get(f"/v1/records/{first}"),
            },
            "POST /v1/search": {
                WAYS[0]: lambda: kept.post("/v1/search", json=search),
                WAYS[1]: lambda: fresh.post("/v1/search", json=search),
            },
        }
        for by_way in calls.values():  # one of each first: imports, caches, the index
            for call in by_way.values():
                _timed(call)
        timings: dict[str, dict[str, list[float]]] = {
            request: {way: [] for way in WAYS} for request in calls
        }
        for _ in range(requests):
            for request, by_way in calls.items():
                for way, call in by_way.items():
                    timings[request][way].append(_timed(call))
    return timings


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": statistics.median(ordered),
        "p95_ms": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
    }


def measure(records: int, requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / ".cairn"
        keys = Workspace(store).init().keys
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = _serve(store, port, Path(folder) / "server.log")
        try:
            wait_ready(url, server, timeout=60)
            first = _seed(url, keys["curator"], records)
            timings = _http_calls(url, keys["agent"], first, requests)
            mcp = asyncio.run(_mcp_calls(url, keys["agent"], requests))
        finally:
            stop_server(server)
    rows = []
    for request, by_way in timings.items():
        figures = {way: _summary(values) for way, values in by_way.items()}
        ratio = figures[WAYS[0]]["p50_ms"] / figures[WAYS[1]]["p50_ms"]
        rows.append({"request": request, **figures, "keep_alive_vs_new_p50": ratio})
    return {"records": records, "requests": requests, "http": rows, "mcp_recall": _summary(mcp)}


def show(results: dict[str, Any], console: Console) -> None:
    table = Table(title="A request through cairn serve, from the client's side (ms)")
    table.add_column("door and request")
    for way in WAYS:
        table.add_column(f"{way} p50", justify="right")
        table.add_column(f"{way} p95", justify="right")
    table.add_column("keep-alive / new p50", justify="right")
    for row in results["http"]:
        cells = [f"{row[way][figure]:.1f}" for way in WAYS for figure in ("p50_ms", "p95_ms")]
        table.add_row(f"HTTP {row['request']}", *cells, f"{row['keep_alive_vs_new_p50']:.2f}")
    mcp = results["mcp_recall"]
    table.add_row("MCP tool recall", f"{mcp['p50_ms']:.1f}", f"{mcp['p95_ms']:.1f}", "", "", "")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=200, help="records stored first")
    parser.add_argument("--requests", type=int, default=60, help="requests of each kind")
    parser.add_argument("--quick", action="store_true", help="50 records, 15 requests")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    records, requests = (50, 15) if args.quick else (args.records, args.requests)
    return report(measure(records, requests), show, Console(), args.json)


if __name__ == "__main__":
    sys.exit(main())
