"""Hostile input to the timeline, on every door, as an agent-key holder would send it.

Node and grip ids with odd text (NUL, lone surrogates, 10,000 characters, dots, SQL
fragments), queries that are huge, empty or punctuation only, times without a zone, as
numbers, reversed or a century apart, every limit just out of range, and appends that are
too many, too large, out of time, contradictory or in a scope the caller may not write.

Checked for every case, on the library, HTTP (``/v1/timeline``), MCP (``tools/call`` over
streamable HTTP, raw JSON so that a lone surrogate travels as ``\\ud800``) and the CLI:

- nothing crashes: no 5xx, no internal JSON-RPC error (-32603), no traceback;
- an id that cannot exist is "not found", exactly like an id that could but does not;
- a refusal has the documented shape and names the argument at fault: problem+json 4xx
  over HTTP, a protocol error (-32602) or a tool error ``[code] … field`` over MCP, exit
  code 2 (bad input), 3 (not found) or 4 (not allowed) with a message from the CLI;
- a refused append stores nothing at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import typer.main
import typer.testing
from pydantic import ValidationError
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.auth import PrincipalEntry, add_key, load_principals, save_principals
from cairn.doors.cli import app as cli_app
from cairn.doors.server import build_server_app
from cairn.errors import CairnError
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.limits import MAX_EVENT_BATCH
from cairn.memory import Memory
from cairn.model import AuditQuery, EventDraft, Principal, PrincipalKind
from cairn.store.base import Store
from cairn.store.factory import open_store
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.factories import CURATOR
from tests.pg import PgCluster, as_uri
from tests.security.fuzz_doors import _mcp_reply as mcp_reply
from tests.security.fuzz_doors import open_mcp_session, raw_json
from tests.timeline.events import event_json

AGENT = Principal(id="acme-bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
SCOPED_CURATOR = Principal(
    id="acme-curator", kind=PrincipalKind.HUMAN, roles=("curator",), scopes=("acme/*",)
)
DAY = "2026-03-02"


def _event(event_id: str, minute: int, text: str, scope: str = "acme/app") -> dict[str, Any]:
    return event_json(event_id, minute, text, scope, day=DAY)


OURS = [
    _event("t0", 0, "Why does the nightly deploy fail on Fridays?"),
    _event("t1", 1, "The deploy cron overlaps the weekly backup window."),
    _event("t2", 2, "Move the backup to Saturday night then."),
]
THEIRS = [_event("x0", 0, "The zebraquartz merger closes in May.", scope="other/secret")]


@dataclass
class Stack:
    backend: str
    folder: Path
    db: str | None
    memory: Memory
    store: Store  # the memory's own: what a door's call changed, counted whole
    client: TestClient
    key: str  # the agent's
    mcp_headers: dict[str, str]
    cli: CliRunner
    year: str  # the agent's year node
    segment: str
    grip: str
    keys: dict[str, str]  # by who: "agent", "curator", "scoped curator" (of acme/* only)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", "content-type": "application/json"}

    def event_ids(self) -> set[str]:
        every = self.memory.events(principal=CURATOR, limit=10_000)
        return {e.event_id for e in every}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pg_cluster: PgCluster
) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp(f"timeline-{request.param}") / ".cairn"
    url = pg_cluster.new_database() if request.param == "postgres" else None
    db = as_uri(url) if url else None
    keys = Workspace(folder, db=db).init().keys
    path = folder / "principals.yaml"
    principals = load_principals(path)
    entry = PrincipalEntry(**AGENT.model_dump())
    principals = principals.model_copy(update={"principals": (*principals.principals, entry)})
    principals, key, _ = add_key(principals, AGENT.id)
    scoped = PrincipalEntry(**SCOPED_CURATOR.model_dump())
    principals = principals.model_copy(update={"principals": (*principals.principals, scoped)})
    principals, scoped_key, _ = add_key(principals, SCOPED_CURATOR.id)
    save_principals(path, principals)
    store = open_store(db, folder)
    memory = Memory(
        store, parse_policy(DEFAULT_POLICY_YAML), root=folder.parent, folder=folder,
        embedder=None,
    )  # fmt: skip
    memory.append_events([EventDraft.model_validate(e) for e in OURS], principal=AGENT)
    memory.append_events([EventDraft.model_validate(e) for e in THEIRS], principal=CURATOR)
    memory.rollup(principal=CURATOR)
    (year,) = memory.timeline_root(principal=AGENT)
    node = year
    while node.children:
        node = memory.timeline_node(node.children[0], principal=AGENT)
    command = typer.main.get_command(cli_app)
    try:
        with pytest.MonkeyPatch.context() as patch:
            # No background rollup in the served app: it would build the timeline whenever
            # it woke, inside any test, and these tests count what each door's call changed
            # (the background rollup has tests of its own).
            patch.setenv("CAIRN_TIMELINE__ROLLUP_EVERY_SECONDS", "0")
            app = build_server_app(Workspace(folder, db=db), embedder="static")
            with TestClient(
                app, raise_server_exceptions=False, base_url="http://127.0.0.1:8765"
            ) as client:
                patch.setattr(typer.testing, "_get_command", lambda _app: command)
                session = open_mcp_session(client, key)
                yield Stack(
                    request.param, folder, db, memory, store, client, key, session,
                    CliRunner(), year.node_id, node.node_id, node.bullets[0].grip_ids[0],
                    {"agent": key, "curator": keys["curator"], "scoped curator": scoped_key},
                )  # fmt: skip
    finally:
        memory.close()
        if url:
            pg_cluster.drop_database(url)


# ---- each door, with what it answered ----------------------------------------------------


def library(call: Any) -> tuple[str, str | None, str]:
    """(error code or "ok", the field named, the message)."""
    try:
        call()
    except CairnError as exc:
        return exc.code, exc.field, exc.message
    return "ok", None, ""


def quoted(value: str) -> str:
    """URL-encoded as a hostile client may send it: a lone surrogate as the bytes UTF-8
    would give it (``%ED%A0%80``), which no decoder accepts."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def http_get(stack: Stack, path: str, **params: Any) -> tuple[int, dict[str, Any] | list[Any]]:
    query = "&".join(f"{k}={quoted(str(v))}" for k, v in params.items())
    response = stack.client.get(
        f"/v1/timeline{path}" + (f"?{query}" if query else ""), headers=stack.headers
    )
    return _http(response)


def http_post(stack: Stack, path: str, body: str) -> tuple[int, dict[str, Any] | list[Any]]:
    response = stack.client.post(
        f"/v1/timeline{path}", content=body.encode(), headers=stack.headers
    )
    return _http(response)


def _http(response: Any) -> tuple[int, dict[str, Any] | list[Any]]:
    assert response.status_code < 500, (response.request.url, response.text[:2000])
    assert "Traceback" not in response.text, response.text[:2000]
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert {"code", "detail", "status"} <= set(problem), problem
        return response.status_code, problem
    return response.status_code, response.json()


def mcp(stack: Stack, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """("ok", structured JSON), ("tool error", its text) or ("protocol <code>", message)."""
    body = (
        f'{{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{raw_json(arguments)}}}}}'
    ).encode()
    response = stack.client.post("/mcp", content=body, headers=stack.mcp_headers)
    assert response.status_code < 500 and "Traceback" not in response.text, response.text[:2000]
    reply = mcp_reply(response.text)
    error = reply.get("error")
    if error is not None:
        assert error["code"] != -32603, error
        return f"protocol {error['code']}", f"{error['message']} {json.dumps(error.get('data'))}"
    result = reply["result"]
    text = " ".join(part.get("text", "") for part in result["content"])
    if result.get("isError"):
        return "tool error", text
    return "ok", json.dumps(result.get("structuredContent"))


def cli(stack: Stack, *args: str, key: str | None = None) -> tuple[int, str]:
    where = ["--store", str(stack.folder), *(["--db", stack.db] if stack.db else [])]
    # the key right after the command: after a "--" everything is an argument
    argv = [*where, "timeline", args[0], "--key", key or stack.key, *args[1:]]
    result = stack.cli.invoke(cli_app, argv)
    crash = result.exception if not isinstance(result.exception, SystemExit) else None
    assert crash is None, f"{type(crash).__name__}: {crash}"
    return result.exit_code, result.stdout + result.stderr


def _refused_naming(answer: tuple[str, str], field: str) -> bool:
    kind, said = answer
    return kind != "ok" and field in said


# ---- ids that cannot exist ---------------------------------------------------------------

ODD_IDS = [
    "\x00",
    "tl_\x00.year.2026",
    "\ud800",
    "grp_\udfff",
    "x" * 10_000,
    "..",
    ".",
    "tl_%",
    "grp_%",
    "' OR 1=1 --",
    "x'); DROP TABLE toc_nodes; --",
    " ",
    "\t",
    "a/b",
    "\u202e",
]
NEVER_NODE = "tl_00000000000000000000.year.2026"
NEVER_GRIP = "grp_000000000000000000000000"


def test_odd_node_and_grip_ids_are_not_found_in_the_library(stack: Stack) -> None:
    m = stack.memory
    for odd in [*ODD_IDS, NEVER_NODE]:
        for call in (
            lambda i: m.timeline_node(i, principal=AGENT),
            lambda i: m.timeline_node(i, principal=AGENT, version=2),
            lambda i: m.timeline_browse(i, principal=AGENT),
            lambda i: m.timeline_scan("backup", node_id=i, principal=AGENT),
        ):
            code, field, _ = library(lambda c=call, i=odd: c(i))
            assert (code, field) == ("not_found", "node_id"), repr(odd[:20])
        code, field, _ = library(lambda i=odd: m.expand_grip(i, principal=AGENT))
        assert (code, field) == ("not_found", "grip_id"), repr(odd[:20])
        after = library(lambda i=odd: m.timeline_browse(stack.year, after=i, principal=AGENT))
        assert after[:2] == ("invalid_input", "after"), repr(odd[:20])
    # a version no node can have
    for version in (0, -1, 2**53 + 1, 10**20):
        code, field, _ = library(
            lambda v=version: m.timeline_node(stack.segment, principal=AGENT, version=v)
        )
        assert (code, field) == ("not_found", "version"), version


def test_odd_node_and_grip_ids_are_not_found_over_http(stack: Stack) -> None:
    for odd in [*ODD_IDS, NEVER_NODE, NEVER_GRIP]:
        url = quoted(odd)
        for path in (f"/nodes/{url}", f"/nodes/{url}/children", f"/grips/{url}"):
            status, problem = http_get(stack, path)
            assert status in (404, 422), (repr(odd[:20]), path, problem)
        status, _ = http_get(stack, "/scan", q="backup", node_id=odd)
        assert status in (404, 422), repr(odd[:20])
        status, _ = http_get(stack, f"/nodes/{stack.year}/children", after=odd)
        assert status == 422, repr(odd[:20])
    for version in ("0", "-1", str(2**53 + 1), "1" + "0" * 20, "1.5", "x"):
        status, problem = http_get(stack, f"/nodes/{stack.segment}", version=version)
        assert status in (404, 422), (version, problem)
        assert "version" in json.dumps(problem), problem


def test_odd_grip_ids_are_not_found_over_mcp(stack: Stack) -> None:
    for odd in [*ODD_IDS, NEVER_GRIP]:
        kind, said = mcp(stack, "timeline_expand", {"grip_id": odd})
        if kind == "protocol -32700":  # the SDK's JSON parser refuses a lone surrogate
            assert any(0xD800 <= ord(c) <= 0xDFFF for c in odd), said
            continue
        assert kind == "tool error" and "[not_found] no grip" in said, (repr(odd[:20]), said)


def test_odd_node_and_grip_ids_are_not_found_from_the_cli(stack: Stack) -> None:
    for odd in ["\x01", "x" * 10_000, "..", "' OR 1=1 --", "grp_%", NEVER_NODE]:
        for args in (["node", "--", odd], ["browse", "--", odd], ["expand", "--", odd],
                     ["scan", "backup", "--node", odd]):  # fmt: skip
            code, said = cli(stack, *args)
            assert code == 3, (args[0], repr(odd[:20]), said)
    code, said = cli(stack, "node", stack.segment, "--version", "1" + "0" * 20)
    assert code == 3, said


# ---- queries, times and limits -----------------------------------------------------------

HUGE = "backup " * 1_500  # 10,500 characters: over the 10,000 a query may have
NO_WORDS = ["", " ", "!!!", "*", '"', "((", "-", "^", "%_"]


def test_queries_huge_empty_or_without_words(stack: Stack) -> None:
    m = stack.memory
    since, until = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC)
    # too long, a NUL, a lone surrogate: refused naming the query, on every door
    for bad in (HUGE, "back\x00up", "back\ud800up"):
        assert library(lambda q=bad: m.timeline_search(q, principal=AGENT))[:2] == (
            "invalid_input", "query",
        )  # fmt: skip
        scanned = library(
            lambda q=bad: m.timeline_scan(q, since=since, until=until, principal=AGENT)
        )
        assert scanned[:2] == ("invalid_input", "query")
        for path in ("/search", "/scan"):
            status, problem = http_get(
                stack, path, q=bad, since=since.isoformat(), until=until.isoformat()
            )
            if "\ud800" in bad and status == 200:
                continue  # the URL decoder made the lone surrogate U+FFFD: a plain query
            assert status == 422 and "q" in json.dumps(problem), (path, problem)
        answer = mcp(stack, "timeline_search", {"q": bad})
        assert answer[0] == "protocol -32700" or _refused_naming(answer, "query"), answer
    code, said = cli(stack, "search", "--", HUGE)
    assert code == 2 and "query" in said, said
    # no words to look for: a search answers (keyword recall finds nothing; vectors may
    # still offer the nearest summaries), a scan says why it cannot
    for empty in NO_WORDS:
        assert library(lambda q=empty: m.timeline_search(q, principal=AGENT)) == ("ok", None, "")
        status, hits = http_get(stack, "/search", q=empty)
        assert status == 200 and isinstance(hits, dict), (empty, hits)
        assert isinstance(hits["hits"], list), (empty, hits)
        assert mcp(stack, "timeline_search", {"q": empty})[0] == "ok"
        scanned = library(
            lambda q=empty: m.timeline_scan(q, since=since, until=until, principal=AGENT)
        )
        assert scanned[:2] == ("invalid_input", "query"), empty
        status, problem = http_get(
            stack, "/scan", q=empty, since=since.isoformat(), until=until.isoformat()
        )
        assert status == 422 and problem["field"] == "query", problem  # type: ignore[call-overload]


def test_times_naive_numeric_reversed_and_far_apart(stack: Stack) -> None:
    m = stack.memory
    naive = datetime(2026, 3, 2, 9)
    for call, field in (
        (lambda: m.timeline_search("backup", since=naive, principal=AGENT), "since"),
        (lambda: m.timeline_search("backup", until=naive, principal=AGENT), "until"),
        (lambda: m.timeline_scan("backup", since=naive, until=naive, principal=AGENT), "since"),
        (lambda: m.events(since=naive, principal=AGENT), "since"),
    ):
        assert library(call)[:2] == ("invalid_input", field)
    for value in ("2026-03-02T09:00:00", "1700000000", "0", "1.5", "yesterday",
                  "10000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00"):  # fmt: skip
        for path in ("/search", "/scan", "/events"):
            status, problem = http_get(stack, path, q="backup", since=value, until=value)
            assert status == 422 and "since" in json.dumps(problem), (path, value, problem)
        answer = mcp(stack, "timeline_search", {"q": "backup", "since": value})
        assert _refused_naming(answer, "since"), (value, answer)
        code, said = cli(stack, "search", "backup", "--since", value)
        assert code == 2 and "since" in said, (value, said)
    late, early = "2026-03-04T00:00:00Z", "2026-03-01T00:00:00Z"
    # reversed: a search finds nothing, a scan says which end is wrong
    assert http_get(stack, "/search", q="backup", since=late, until=early) == (
        200,
        {"hits": [], "warnings": []},
    )
    status, problem = http_get(stack, "/scan", q="backup", since=late, until=early)
    assert status == 422 and problem["field"] == "until", problem  # type: ignore[call-overload]
    # a century: a search looks through it, a scan reads at most a year
    status, hits = http_get(
        stack, "/search", q="backup", since="1970-01-01T00:00:00Z", until="2070-01-01T00:00:00Z"
    )
    assert status == 200 and isinstance(hits, dict) and hits["hits"], hits
    status, problem = http_get(
        stack, "/scan", q="backup", since="1970-01-01T00:00:00Z", until="2070-01-01T00:00:00Z"
    )
    assert status == 422 and problem["field"] == "until", problem  # type: ignore[call-overload]
    # the ends of time are fine
    for since, until in (
        (datetime(1, 1, 1, tzinfo=UTC), datetime(1, 1, 2, tzinfo=UTC)),
        (datetime(9999, 12, 31, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
        (datetime(9999, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    ):
        report = m.timeline_scan("backup", since=since, until=until, principal=AGENT)
        assert report.scanned == 0
        status, _ = http_get(
            stack, "/scan", q="backup", since=since.isoformat(), until=until.isoformat()
        )
        assert status == 200


# (library call, HTTP path and parameter, MCP tool and argument, CLI arguments, the field)
def _limits(stack: Stack) -> list[tuple[Any, str, str, dict[str, Any] | None, list[str], str]]:
    m, a = stack.memory, AGENT
    span = {"since": datetime(2026, 3, 1, tzinfo=UTC), "until": datetime(2026, 3, 4, tzinfo=UTC)}
    cases: list[tuple[Any, str, str, dict[str, Any] | None, list[str], str]] = []
    for k in (0, -1, 101, 10**20):
        cases += [
            (lambda k=k: m.timeline_search("backup", k=k, principal=a), "/search",
             f"q=backup&k={k}", {"tool": "timeline_search", "q": "backup", "k": k},
             ["search", "backup", "-k", str(k)], "k"),
            (lambda k=k: m.timeline_scan("backup", k=k, principal=a, **span), "/scan",
             f"q=backup&k={k}&since=2026-03-01T00:00:00Z&until=2026-03-04T00:00:00Z", None,
             ["scan", "backup", "--node", stack.year, "-k", str(k)], "k"),
        ]  # fmt: skip
    for limit in (0, -1, 1001, 10**20):
        cases.append(
            (lambda n=limit: m.timeline_browse(stack.year, limit=n, principal=a),
             f"/nodes/{stack.year}/children", f"limit={limit}", None,
             ["browse", stack.year, "--limit", str(limit)], "limit")
        )  # fmt: skip
    for limit in (0, -1, 10_001, 10**20):
        cases.append(
            (lambda n=limit: m.events(limit=n, principal=a), "/events", f"limit={limit}",
             {"tool": "timeline_events", "limit": limit}, ["events", "--limit", str(limit)],
             "limit")
        )  # fmt: skip
    for side in ("before", "after"):
        for n in (-1, 51, 10**20):
            cases.append(
                (lambda n=n, s=side: m.expand_grip(stack.grip, principal=a, **{s: n}),
                 f"/grips/{stack.grip}", f"{side}={n}",
                 {"tool": "timeline_expand", "grip_id": stack.grip, side: n},
                 ["expand", stack.grip, f"--{side}", str(n)], side)
            )  # fmt: skip
    for tokens in (0, 49, 100_001, 10**20):
        cases.append(
            (lambda n=tokens: m.timeline_recent(max_tokens=n, principal=a), "/recent",
             f"max_tokens={tokens}", {"tool": "timeline_recent", "max_tokens": tokens},
             ["recent", "--max-tokens", str(tokens)], "max_tokens")
        )  # fmt: skip
    return cases


def test_limits_out_of_range_are_refused_by_name(stack: Stack) -> None:
    for call, path, query, tool, args, field in _limits(stack):
        assert library(call)[:2] == ("invalid_input", field), (path, query)
        response = stack.client.get(f"/v1/timeline{path}?{query}", headers=stack.headers)
        status, problem = _http(response)
        assert status == 422 and field in json.dumps(problem), (path, query, problem)
        if tool is not None:
            arguments = dict(tool)
            name = arguments.pop("tool")
            answer = mcp(stack, name, arguments)
            # the tools take the HTTP routes' parameter names, so the same field is named
            assert _refused_naming(answer, field), (name, arguments, answer)
        code, said = cli(stack, *args)
        assert code == 2 and said, (args, said)


# ---- appends -----------------------------------------------------------------------------


def _batch(prefix: str, count: int, **changes: Any) -> list[dict[str, Any]]:
    return [
        {**_event(f"{prefix}{n}", n % 60, f"note {n}"), "ts": f"{DAY}T10:00:{n % 60:02d}Z",
         **changes}
        for n in range(count)
    ]  # fmt: skip


def _bad_batches() -> dict[str, tuple[list[dict[str, Any]], str, int]]:
    """Batches no door may store any of: (events, the field named, HTTP status)."""
    good = _batch("ok-", 3)

    def bad(event_id: str, **changes: Any) -> list[dict[str, Any]]:
        return [*good, {**_event(event_id, 5, "x"), **changes}]

    deep = json.loads('{"k":' * 34 + "1" + "}" * 34)
    fat = {f"k{n}": "v" * 1000 for n in range(2000)}
    return {
        "10,001 events": (_batch("many-", MAX_EVENT_BATCH + 1), "events", 422),
        "text over 1,000,000 characters": (bad("big", text="x" * 1_000_001), "text", 422),
        "metadata nested too deep": (bad("deep", metadata=deep), "metadata", 422),
        "metadata too large": (bad("fat", metadata=fat), "metadata", 422),
        "year 0 in UTC": (bad("y0", ts="0001-01-01T00:30:00+01:00"), "ts", 422),
        "year 10000 in UTC": (bad("y1", ts="9999-12-31T23:30:00-01:00"), "ts", 422),
        "a time without a zone": (bad("nz", ts="2026-03-02T09:00:00"), "ts", 422),
        "a Unix time": (bad("ux", ts=1_700_000_000), "ts", 422),
        "one id twice, other content": (
            [*good, _event("twice", 5, "first"), _event("twice", 6, "second")], "event_id", 409,
        ),
        "an id stored with other content": ([*good, _event("t0", 0, "rewritten")], "event_id", 409),
        "a scope the agent may not write": (bad("out", scope="other/secret"), "scope", 403),
        "a NUL in the text": (bad("nul", text="a\x00b"), "text", 422),
        "an unknown role": (bad("role", role="root"), "role", 422),
    }  # fmt: skip


def test_bad_appends_store_nothing_on_any_door(stack: Stack, tmp_path: Path) -> None:
    before = stack.event_ids()
    for name, (events, field, status) in _bad_batches().items():
        # the library
        try:
            drafts = [EventDraft.model_validate(e) for e in events]
        except ValidationError as exc:
            assert field in str(exc), (name, str(exc)[:500])
        else:
            code, named, said = library(
                lambda d=drafts: stack.memory.append_events(d, principal=AGENT)
            )
            assert code != "ok" and named == field, (name, code, named, said)
        # HTTP
        response = stack.client.post(
            "/v1/timeline/events", content=raw_json({"events": events}).encode(),
            headers=stack.headers,
        )  # fmt: skip
        got, problem = _http(response)
        assert got == status and field in json.dumps(problem), (name, got, problem)
        # the CLI (a JSON Lines file: of any length, appended 1,000 lines at a time)
        if name == "10,001 events":
            continue
        path = tmp_path / f"{len(events)}.jsonl"
        path.write_text("\n".join(raw_json(e) for e in events) + "\n", encoding="utf-8")
        code, said = cli(stack, "append", str(path))
        assert code in (2, 4, 5) and field.replace("_", "") in said.replace("_", ""), (name, said)
        assert stack.event_ids() == before, f"{name}: something was stored"


def test_an_append_file_is_checked_whole_before_anything_is_stored(
    stack: Stack, tmp_path: Path
) -> None:
    """The CLI appends a file in batches; a bad line anywhere in it stores no batch."""
    before = stack.event_ids()
    lines = _batch("file-", 2_500)
    for bad, field in (
        (_event("out", 5, "x", scope="other/secret"), "scope"),
        ({**_event("file-7", 7, "not what line 8 says")}, "event_id"),
        (_event("t1", 1, "rewritten"), "event_id"),
    ):
        path = tmp_path / "file.jsonl"
        path.write_text("\n".join(raw_json(e) for e in [*lines, bad]) + "\n", encoding="utf-8")
        code, said = cli(stack, "append", str(path))
        assert code in (4, 5) and field in said, said
        assert stack.event_ids() == before


# ---- building and counting: curators only ------------------------------------------------


def _state(stack: Stack) -> tuple[int, dict[str, int], int]:
    """What a build would change: the events waiting, the nodes, the audit entries."""
    store = stack.store
    audit = stack.memory.audit(AuditQuery(limit=10_000), principal=CURATOR)
    return store.outbox_lag("timeline"), store.toc_counts(), len(audit)


def test_building_and_counting_are_for_curators_on_every_door(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = stack.memory
    m.append_events([EventDraft.model_validate(_event("late", 30, "Late news."))], principal=AGENT)
    before = _state(stack)
    assert before[0] == 1
    # a door must not count before the kernel has said who may: the CLI read the store's
    # lag for its progress bar before the rollup refused the caller
    lag_reads: list[str] = []
    # (with no background rollup in the served app, every read of the lag is a door's)
    assert "cairn-rollup" not in {thread.name for thread in threading.enumerate()}

    def reading(real: Any) -> Any:
        def outbox_lag(store: Any, consumer: str) -> int:
            lag_reads.append(consumer)
            return int(real(store, consumer))

        return outbox_lag

    for store_class in {type(stack.store), SqliteStore}:
        monkeypatch.setattr(store_class, "outbox_lag", reading(store_class.outbox_lag))
    agent = stack.keys["agent"]
    refused: list[Any] = [
        ("library rollup", library(lambda: m.rollup(principal=AGENT))[0]),
        ("library rebuild", library(lambda: m.rebuild_timeline(principal=AGENT))[0]),
        ("library compact", library(lambda: m.compact(principal=AGENT))[0]),
    ]
    routes = {"rollup": ("POST", "/rollup"), "rebuild": ("POST", "/rebuild"),
              "status": ("GET", "/status")}  # fmt: skip
    for name, (method, path) in routes.items():
        response = stack.client.request(
            method, f"/v1/timeline{path}", headers={"Authorization": f"Bearer {agent}"}
        )
        refused.append((f"HTTP {name}", _http(response)[0]))
    for command in ("rollup", "rebuild-toc", "compact", "status"):
        code, said = cli(stack, command, key=agent)
        refused.append((f"CLI {command}", (code, "curator" in said)))
    assert lag_reads == [], "the store's lag was read for a caller who may not build"
    # the status counts every scope: a curator of some scopes may not read it either
    for who, principal in (("agent", AGENT), ("scoped curator", SCOPED_CURATOR)):
        status = library(lambda p=principal: m.timeline_status(principal=p))
        refused.append((f"library status ({who})", status[0]))
        response = stack.client.get(
            "/v1/timeline/status", headers={"Authorization": f"Bearer {stack.keys[who]}"}
        )
        refused.append((f"HTTP status ({who})", _http(response)[0]))
        code, said = cli(stack, "status", key=stack.keys[who])
        refused.append((f"CLI status ({who})", (code, "curator" in said)))
    wrong = [
        (name, got) for name, got in refused
        if got not in ("permission_denied", 403, (4, True))
    ]  # fmt: skip
    assert wrong == [], wrong
    assert _state(stack) == before
    # and MCP offers no tool that builds or counts
    listed = stack.client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=stack.mcp_headers
    )
    tools = {t["name"] for t in mcp_reply(listed.text)["result"]["tools"]}
    assert {t for t in tools if t.startswith("timeline_")} == {
        "timeline_search", "timeline_recent", "timeline_expand", "timeline_events",
    }  # fmt: skip
    # a curator of every scope builds and counts
    response = stack.client.post(
        "/v1/timeline/rollup", headers={"Authorization": f"Bearer {stack.keys['curator']}"}
    )
    assert _http(response)[0] == 200
    response = stack.client.get(
        "/v1/timeline/status", headers={"Authorization": f"Bearer {stack.keys['curator']}"}
    )
    status, counted = _http(response)
    assert status == 200 and isinstance(counted, dict)
    assert (counted["lag"], counted["nodes"]) == (0, stack.store.toc_counts())


def test_event_pages_over_http_name_the_scope_of_the_last_event(stack: Stack) -> None:
    first = http_get(stack, "/events", limit=1)[1]
    assert isinstance(first, list) and len(first) == 1
    last = first[0]
    status, rest = http_get(
        stack, "/events", limit=100, after_ts=last["ts"], after_id=last["event_id"],
        after_scope=last["scope"],
    )  # fmt: skip
    assert status == 200 and isinstance(rest, list)
    assert last["event_id"] not in {e["event_id"] for e in rest if e["scope"] == last["scope"]}
    status, problem = http_get(stack, "/events", after_ts=last["ts"], after_id="x",
                               after_scope="\x00")  # fmt: skip
    assert status == 422 and "after_scope" in json.dumps(problem)
