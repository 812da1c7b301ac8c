"""Server time of the web console's heaviest pages.

    python bench/ui.py [--pending 10000] [--versions 200] [--runs 100] [--json out.json]

Builds a throwaway store with ``--pending`` queued proposals (one batch write by an agent,
so every one waits for a curator) and one record with ``--versions`` versions, signs a
curator in, then times each page in process: the whole server-side request, template
rendering included, timed inside the server (no network, no browser). Prints a table;
never asserts. The goal the console aims at is p95 at or under 150 ms.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from rich.console import Console
from rich.table import Table
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.doors.http import create_app
from cairn.model import Content, ContentPatch
from cairn.workspace import Workspace


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class ServerTime:
    """Times the app from a request's arrival to its last body byte: server time, without
    the test client's own thread hops."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.last_ms = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.last_ms = (time.perf_counter() - start) * 1000


def _time(client: TestClient, timer: ServerTime, path: str, runs: int) -> dict[str, float]:
    client.get(path)  # warm: templates compiled, caches filled
    took: list[float] = []
    for _ in range(runs):
        answer = client.get(path)
        took.append(timer.last_ms)
        if answer.status_code != 200:
            raise SystemExit(f"{path}: {answer.status_code}")
    return {
        "p50_ms": round(statistics.median(took), 1),
        "p95_ms": round(_p(took, 0.95), 1),
        "max_ms": round(max(took), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(Path(tmp) / ".cairn")
        keys = workspace.init().keys
        memory = workspace.open_memory(embedder="static")
        agent = workspace.authenticate(keys["agent"])
        curator = workspace.authenticate(keys["curator"])
        start = time.perf_counter()
        contents = [
            Content(
                kind="belief",
                scope=f"acme/team{n % 20}",
                title=f"Belief number {n}",
                body=f"Belief number {n}: details to review.",
            )
            for n in range(args.pending)
        ]
        memory.store_many(contents, principal=agent)
        seeded = time.perf_counter() - start
        made = memory.remember(
            Content(kind="fact", scope="acme/app", title="Often edited", body="v1"),
            principal=curator,
        )
        assert made.record is not None
        record_id = made.record.id
        for n in range(2, args.versions + 1):
            memory.update(record_id, ContentPatch(body=f"v{n}\nline two"), principal=curator)

        timer = ServerTime(create_app(workspace, memory=memory))
        client = TestClient(timer, follow_redirects=False)
        form = client.get("/ui/signin").text
        token = re.search(r'name="signin_token" value="([^"]+)"', form)
        assert token is not None
        client.post("/ui/signin", data={"key": keys["curator"], "signin_token": token[1]})
        first_page = memory.proposals(principal=curator, limit=50)
        pages = {
            "queue (first page)": "/ui/queue",
            "queue (a later page)": f"/ui/queue?after={first_page[-1].id}",
            "queue (filtered by scope)": "/ui/queue?scope=acme/team7",
            "queue (filtered by kind, author)": "/ui/queue?kind=belief&author=agent",
            f"record ({args.versions} versions)": f"/ui/records/{record_id}",
            "proposal": f"/ui/proposals/{first_page[0].id}",
            "audit log": "/ui/audit",
        }
        results = {name: _time(client, timer, path, args.runs) for name, path in pages.items()}
        memory.close()

    table = Table(title=f"console server time, {args.pending:,} pending, {args.runs} runs each")
    for column in ("page", "p50 ms", "p95 ms", "max ms"):
        table.add_column(column, justify="left" if column == "page" else "right")
    for name, figures in results.items():
        table.add_row(name, *(str(figures[k]) for k in ("p50_ms", "p95_ms", "max_ms")))
    console = Console()
    console.print(f"seeded {args.pending:,} pending proposals in {seeded:.1f} s")
    console.print(table)
    if args.json:
        args.json.write_text(
            json.dumps({"pending": args.pending, "versions": args.versions, "pages": results})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
