"""Each door's ``create`` and ``search``, driven with raw input, and what it answered.

The JSON doors (HTTP, MCP over streamable HTTP, A2A) get hand-built JSON bytes, so that a
lone surrogate travels as a ``\\ud800`` escape, a non-finite number as a ``NaN`` literal and
metadata nested 10,000 levels deep as text no encoder would produce. The library and the
CLI get the same values as Python strings.

Every answer is sorted into stored (with the record id), refused (with the message to read)
or crashed (a 5xx, an internal JSON-RPC error, a traceback), with what the door said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.doors.cli import app as cli_app
from cairn.errors import CairnError
from cairn.limits import MAX_REQUEST_BYTES
from cairn.memory import Memory
from cairn.model import Content
from tests.factories import CURATOR

DOORS = ("library", "http", "mcp", "a2a", "cli")
MCP_PROTOCOL = "2025-06-18"


@dataclass(frozen=True)
class Deep:
    """Metadata nested ``depth`` levels deep: ``{"k": {"k": … {"leaf": 1}}}``."""

    depth: int

    def python(self) -> dict[str, Any]:
        value: dict[str, Any] = {"leaf": 1}
        for _ in range(self.depth - 1):
            value = {"k": value}
        return value

    def raw(self) -> str:
        return '{"k":' * (self.depth - 1) + '{"leaf":1}' + "}" * (self.depth - 1)


def python(value: Any) -> Any:
    """``value`` with every ``Deep`` built out."""
    if isinstance(value, Deep):
        return value.python()
    if isinstance(value, dict):
        return {k: python(v) for k, v in value.items()}
    return value


def raw_json(value: Any) -> str:
    """JSON text as a hostile client may send it: ``ensure_ascii`` escapes a lone surrogate
    as ``\\ud800``, non-finite floats become ``NaN``/``Infinity`` literals, and ``Deep``
    values are written out without recursion."""
    if isinstance(value, Deep):
        return value.raw()
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{raw_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(raw_json(v) for v in value) + "]"
    return json.dumps(value)


@dataclass(frozen=True)
class Answer:
    door: str
    stored: bool
    record_id: str | None
    message: str  # what a refusal or a crash said (empty when stored)
    too_large: bool = False  # refused for the size of the whole request (HTTP 413)
    crashed: bool = False


def _crash(door: str, what: str) -> Answer:
    return Answer(door, False, None, what, crashed=True)


@dataclass
class Stack:
    """One store, served by every door: the library memory also counts what is stored."""

    backend: str
    folder: Path
    db: str | None
    memory: Memory
    client: TestClient
    key: str
    mcp_headers: dict[str, str]
    cli: CliRunner

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", "content-type": "application/json"}


def open_mcp_session(client: TestClient, key: str) -> dict[str, str]:
    """Initialize an MCP session over streamable HTTP; the headers every call then sends."""
    headers = {
        "Authorization": f"Bearer {key}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": MCP_PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    }
    started = client.post("/mcp", json=init, headers=headers)
    assert started.status_code == 200, started.text
    session = {
        **headers,
        "mcp-session-id": started.headers["mcp-session-id"],
        "mcp-protocol-version": MCP_PROTOCOL,
    }
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post("/mcp", json=ready, headers=session).status_code == 202
    return session


# ---- create ------------------------------------------------------------------------------


def create(stack: Stack, door: str, fields: dict[str, Any]) -> Answer:
    """``fields``: kind, scope, title, body, metadata and valid_from, as the door takes them
    (``valid_from`` is left out where it is None)."""
    return _CREATE[door](stack, fields)


def _library_create(stack: Stack, fields: dict[str, Any]) -> Answer:
    try:
        content = Content.model_validate(python(_without_none(fields)))
        outcome = stack.memory.remember(content, principal=CURATOR)
    except (CairnError, ValidationError) as exc:
        return Answer("library", False, None, str(exc))
    assert outcome.record is not None, outcome
    return Answer("library", True, outcome.record.id, "")


def _http_create(stack: Stack, fields: dict[str, Any]) -> Answer:
    body = f'{{"content":{raw_json(_without_none(fields))}}}'.encode()
    response = stack.client.post("/v1/records", content=body, headers=stack.auth)
    if _server_error(response.status_code, response.text):
        return _crash("http", f"HTTP {response.status_code}: {response.text[:1000]}")
    if response.status_code == 200:
        return Answer("http", True, response.json()["record"]["id"], "")
    problem = response.json()
    assert {"code", "detail", "status"} <= set(problem), problem
    message = f"{problem['code']}: {problem['detail']}"
    return Answer("http", False, None, message, too_large=response.status_code == 413)


def _mcp_create(stack: Stack, fields: dict[str, Any]) -> Answer:
    arguments: dict[str, Any] = {
        "kind": fields["kind"],
        "scope": fields["scope"],
        "title": fields["title"],
        "body": fields["body"],
    }
    if fields.get("metadata") is not None:
        arguments["metadata"] = fields["metadata"]
    if fields.get("valid_from") is not None:
        arguments["valid_from"] = fields["valid_from"]
    return _mcp_call(stack, "remember", arguments, stored=lambda s: s["id"])


def _a2a_create(stack: Stack, fields: dict[str, Any]) -> Answer:
    data: dict[str, Any] = {
        "skill": "remember",
        "type": fields["kind"],
        "scope": fields["scope"],
        "title": fields["title"],
        "content": fields["body"],
    }
    if fields.get("metadata") is not None:
        data["metadata"] = fields["metadata"]
    return _a2a_call(stack, data, stored=lambda d: d["id"])


def _cli_create(stack: Stack, fields: dict[str, Any]) -> Answer:
    # --name=value: a value that starts with a dash stays a value.
    args = ["remember", f"--kind={fields['kind']}", f"--scope={fields['scope']}"]
    args += [f"--title={fields['title']}", f"--body={fields['body']}"]
    if fields.get("metadata") is not None:
        args.append(f"--metadata={raw_json(fields['metadata'])}")
    if fields.get("valid_from") is not None:
        args.append(f"--valid-from={fields['valid_from']}")
    return _cli_call(stack, args, stored=lambda out: out["record"]["id"])


# ---- search ------------------------------------------------------------------------------


def search(stack: Stack, door: str, query: str) -> Answer:
    """A keyword search; ``stored`` here means it answered (a search stores nothing)."""
    return _SEARCH[door](stack, query)


def _library_search(stack: Stack, query: str) -> Answer:
    try:
        stack.memory.search(query, principal=CURATOR, mode="keyword")
    except CairnError as exc:
        return Answer("library", False, None, str(exc))
    return Answer("library", True, None, "")


def _http_search(stack: Stack, query: str) -> Answer:
    body = raw_json({"query": query, "mode": "keyword"}).encode()
    response = stack.client.post("/v1/search", content=body, headers=stack.auth)
    if _server_error(response.status_code, response.text):
        return _crash("http", f"HTTP {response.status_code}: {response.text[:1000]}")
    if response.status_code == 200:
        return Answer("http", True, None, "")
    problem = response.json()
    message = f"{problem['code']}: {problem['detail']}"
    return Answer("http", False, None, message, too_large=response.status_code == 413)


def _mcp_search(stack: Stack, query: str) -> Answer:
    return _mcp_call(stack, "recall", {"query": query, "mode": "keyword"})


def _a2a_search(stack: Stack, query: str) -> Answer:
    return _a2a_call(stack, {"skill": "recall", "query": query, "mode": "keyword"})


def _cli_search(stack: Stack, query: str) -> Answer:
    # "--" ends the options: a query that starts with a dash is still the query.
    return _cli_call(stack, ["search", "--mode", "keyword", "--embedder", "static", "--", query])


# ---- the doors' plumbing -----------------------------------------------------------------


def _server_error(status: int, text: str) -> bool:
    return status >= 500 or "Traceback" in text


def _mcp_call(stack: Stack, tool: str, arguments: dict[str, Any], stored: Any = None) -> Answer:
    body = (
        f'{{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{raw_json(arguments)}}}}}'
    ).encode()
    response = stack.client.post("/mcp", content=body, headers=stack.mcp_headers)
    if _server_error(response.status_code, response.text):
        return _crash("mcp", f"HTTP {response.status_code}: {response.text[:1000]}")
    if response.status_code == 413:
        # cairn's own limit answers problem JSON; the MCP SDK's (4 MiB) plain text.
        said = maybe_detail(response.text)
        return Answer("mcp", False, None, said, too_large=True)
    reply = _mcp_reply(response.text)
    error = reply.get("error")
    if error is not None:
        # A protocol error: the SDK refused the JSON before any tool ran (-32700 for a lone
        # surrogate or nesting its parser will not follow). An internal error is a crash.
        said = f"{error['code']} {error['message']}"
        if error["code"] == -32603:
            return _crash("mcp", said)
        return Answer("mcp", False, None, said)
    result = reply["result"]
    text = " ".join(part.get("text", "") for part in result["content"])
    if result.get("isError"):
        return Answer("mcp", False, None, text)
    record_id = stored(result["structuredContent"]) if stored else None
    return Answer("mcp", True, record_id, "")


def maybe_detail(text: str) -> str:
    try:
        detail: str = json.loads(text)["detail"]
    except (ValueError, KeyError, TypeError):
        return text
    return detail


def _mcp_reply(text: str) -> dict[str, Any]:
    """The JSON-RPC reply in a streamable HTTP answer: plain JSON, or one SSE message."""
    # SSE ends lines with CR, LF or CRLF only: str.splitlines would also cut the JSON at
    # a U+2028 or U+0085 it carries raw.
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.startswith("data: "):
            reply: dict[str, Any] = json.loads(line.removeprefix("data: "))
            return reply
    plain: dict[str, Any] = json.loads(text)
    return plain


def a2a_request(data: dict[str, Any]) -> bytes:
    """A2A 0.3 ``message/send`` of one data part, as raw JSON."""
    part = f'{{"kind":"data","data":{raw_json(data)}}}'
    message = f'{{"kind":"message","messageId":"m-fuzz","role":"user","parts":[{part}]}}'
    body = f'{{"jsonrpc":"2.0","id":"f","method":"message/send","params":{{"message":{message}}}}}'
    return body.encode()


def _a2a_call(stack: Stack, data: dict[str, Any], stored: Any = None) -> Answer:
    response = stack.client.post("/", content=a2a_request(data), headers=stack.auth)
    if _server_error(response.status_code, response.text):
        return _crash("a2a", f"HTTP {response.status_code}: {response.text[:1000]}")
    if response.status_code == 413:
        return Answer("a2a", False, None, response.json()["detail"], too_large=True)
    reply = response.json()
    error = reply.get("error")
    if error is not None:
        said = f"{error['code']} {error['message']}"
        return _crash("a2a", said) if error["code"] == -32603 else Answer("a2a", False, None, said)
    task = reply["result"]
    state = task["status"]["state"]
    said = " ".join(p.get("text", "") for p in task["status"]["message"]["parts"])
    if state == "failed":
        return Answer("a2a", False, None, said)
    assert state == "completed", (state, said)
    record_id = stored(task["artifacts"][0]["parts"][0]["data"]) if stored else None
    return Answer("a2a", True, record_id, "")


def _cli_call(stack: Stack, args: list[str], stored: Any = None) -> Answer:
    where = ["--store", str(stack.folder), *(["--db", stack.db] if stack.db else [])]
    # The key goes before any "--": after it everything is the query.
    command, _, rest = _split_at_dashes(args)
    argv = [*where, *command, "--json", "--key", stack.key, *rest]
    result = stack.cli.invoke(cli_app, argv)
    crash = result.exception if not isinstance(result.exception, SystemExit) else None
    if crash is not None:
        return _crash("cli", f"{type(crash).__name__}: {str(crash)[:500]}")
    if result.exit_code == 0:
        record_id = stored(json.loads(result.stdout)) if stored else None
        return Answer("cli", True, record_id, "")
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)  # bad input
    return Answer("cli", False, None, result.stderr)


def _split_at_dashes(args: list[str]) -> tuple[list[str], bool, list[str]]:
    if "--" not in args:
        return args, False, []
    at = args.index("--")
    return args[:at], True, args[at:]


def _without_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def request_bytes(door: str, fields: dict[str, Any]) -> int:
    """About how many bytes a JSON door's create request takes (for the 8 MiB limit)."""
    return len(raw_json(_without_none(fields)).encode()) if door in ("http", "mcp", "a2a") else 0


def over_request_limit(door: str, fields: dict[str, Any]) -> bool:
    return request_bytes(door, fields) > MAX_REQUEST_BYTES


_CREATE = {
    "library": _library_create,
    "http": _http_create,
    "mcp": _mcp_create,
    "a2a": _a2a_create,
    "cli": _cli_create,
}
_SEARCH = {
    "library": _library_search,
    "http": _http_search,
    "mcp": _mcp_search,
    "a2a": _a2a_search,
    "cli": _cli_search,
}
