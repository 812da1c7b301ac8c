"""The MCP door driven by the official ``mcp`` client, over streamable HTTP and stdio: every
tool called and its structured output checked against the schema the tool publishes, the
default-scope rule, and descriptions written for a model."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceTemplateReference
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from cairn.auth import (
    PrincipalEntry,
    PrincipalsFile,
    add_key,
    load_principals,
    save_principals,
)
from cairn.doors.mcp_server import MCP_PROMPTS, MCP_TOOLS, build_mcp_server
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.graph.fixtures import example_fixtures, plan_graph
from cairn.memory import Memory
from cairn.model import Principal
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.doors.conftest import Live, wait_embedded
from tests.timeline.events import event_json

pytestmark = pytest.mark.anyio

CURATOR_WORDS = ("approve", "reject", "archive", "publish", "promote", "decide", "transition")
# A decision of the example graph that the agent's role (staff) may ask about.
WHY_ANCHOR = "acme-emea-end-onprem-connector-support-2025"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _http(live: Live, key: str | None, mode: Any = "auto") -> Client:
    client = httpx2.AsyncClient(headers=live.headers(key), timeout=30)
    return Client(streamable_http_client(f"{live.url}/mcp", http_client=client), mode=mode)


async def _protocol_edges(client: Client, record_id: str, tag: str) -> None:
    """Prompts, completions and resource errors: each transport carries the caller's key."""
    assert {p.name for p in (await client.list_prompts()).prompts} == set(MCP_PROMPTS)
    prompt = await client.get_prompt("task_context", {"task": f"stored over {tag}"})
    assert record_id in str(prompt.messages[0].content)
    template = ResourceTemplateReference(uri="cairn://record/{id}")
    done = await client.complete(template, {"name": "id", "value": record_id[:-4]})
    assert done.completion.values == [record_id]
    # Up to protocol 2025-11-25 a missing resource is -32002; from 2026-07-28 on, -32602.
    legacy = client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
    not_found = -32002 if legacy else -32602
    for uri, expected in [
        ("cairn://record/rec_nope", not_found),
        ("cairn://nothing/here", not_found),
        (f"cairn://record/{record_id}@x", -32602),
        (f"cairn://record/{record_id}@9223372036854775808", -32602),
        (f"cairn://record/{record_id}@9999999999999999", -32602),
    ]:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
        assert caught.value.code == expected, (uri, caught.value.error)
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("no_such_prompt")
    assert caught.value.code == -32602


def _load_graph(live: Live) -> None:
    """The example decision graph, for graph_why (a second load writes nothing)."""
    workspace = Workspace(live.store)
    with workspace.open_memory(embedder=None) as memory:
        memory.graph_ingest(
            plan_graph(example_fixtures()), principal=workspace.authenticate(live.curator)
        )


def _append_events(live: Live, tag: str) -> str:
    """A short conversation in acme/mcp, summarised at once; its session id."""
    session = f"mcp-{tag.replace(' ', '-')}"
    events = [
        dict(event_json(f"{session}-{n}", n, text, scope="acme/mcp"), session_id=session)
        for n, text in enumerate(
            [
                f"Which port does the MCP door use over {tag}?",
                "The MCP door listens on port 8765 under /mcp.",
            ]
        )
    ]
    with httpx.Client(base_url=live.url, timeout=30) as http:
        added = http.post(
            "/v1/timeline/events", json={"events": events}, headers=live.headers(live.agent)
        )
        assert added.status_code == 200, added.text
        built = http.post("/v1/timeline/rollup", headers=live.headers(live.curator))
        assert built.status_code == 200, built.text
    return session


class _Calls:
    """Calls tools, checks each success against the tool's published output schema and
    remembers which tools were called."""

    def __init__(self, client: Client, schemas: dict[str, dict[str, Any]]) -> None:
        self.client = client
        self.schemas = schemas
        self.called: set[str] = set()

    async def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.called.add(name)
        result = await self.client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
        out = result.structured_content
        assert out is not None, name
        errors = list(Draft202012Validator(self.schemas[name]).iter_errors(out))
        assert not errors, (name, [e.message for e in errors[:3]])
        return out

    async def refused(self, name: str, arguments: dict[str, Any]) -> str:
        self.called.add(name)
        result = await self.client.call_tool(name, arguments)
        assert result.is_error, (name, result.structured_content)
        text: str = result.content[0].text  # type: ignore[union-attr]
        return text


async def _exercise(client: Client, tag: str, live: Live) -> None:
    _load_graph(live)
    session = _append_events(live, tag)
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(MCP_TOOLS)
    for name, tool in tools.items():
        assert tool.description and tool.input_schema and tool.output_schema, name
        assert not any(word in name for word in CURATOR_WORDS)
    calls = _Calls(client, {name: tool.output_schema or {} for name, tool in tools.items()})

    # ---- writes, each decided by the default policy and said in the tool's own words
    # Both transports share one store: unique text keeps the gate's duplicate check quiet.
    stored = await calls.ok(
        "remember",
        {"kind": "episode", "body": f"MCP stored this over {tag}\nbody", "scope": "acme/mcp"},
    )
    assert (stored["status"], stored["record_status"]) == ("approved", "active")
    record_id = stored["id"]
    note = await calls.ok(
        "remember",
        {
            "kind": "fact",
            "title": f"A hand-off note ({tag})",
            "body": "look at db.py",
            "scope": "acme/mcp",
            "paths": ["db.py"],
            "draft": True,
        },
    )
    assert (note["status"], note["record_status"]) == ("approved", "draft")  # drafts-are-notes
    belief = await calls.ok(
        "remember",
        {"kind": "belief", "body": f"Beliefs wait for review ({tag})", "scope": "acme/mcp"},
    )
    assert (belief["status"], belief["id"]) == ("pending", None)  # beliefs-need-review
    skill = await calls.ok(
        "remember",
        {"kind": "skill", "body": f"Deploying the MCP door ({tag})\nrun make", "scope": "acme/mcp"},
    )
    updated = await calls.ok(
        "propose_change",
        {
            "op": "update",
            "record_id": skill["id"],
            "base_version_id": skill["version_id"],
            "patch": {"body": "run make deploy"},
        },
    )
    assert (updated["status"], updated["id"]) == ("approved", skill["id"])  # skills-evolve
    assert updated["version_id"] != skill["version_id"]
    stale = await calls.refused(
        "propose_change",
        {
            "op": "update",
            "record_id": skill["id"],
            "base_version_id": skill["version_id"],
            "patch": {"body": "run make"},
        },
    )
    assert "[stale_proposal]" in stale
    unpinned = await calls.refused(
        "propose_change", {"op": "update", "record_id": skill["id"], "patch": {"body": "x"}}
    )
    assert "[invalid_input] update needs base_version_id" in unpinned
    replaced = await calls.ok(
        "propose_change", {"op": "supersede", "record_id": skill["id"], "by": record_id}
    )
    assert replaced["status"] == "pending"  # no rule lets an agent supersede by itself

    wait_embedded(live)  # reads rank what is stored, not a race with the index worker

    # ---- reads: each names what was just written
    found = await calls.ok("recall", {"query": f"stored over {tag}"})
    items = found["items"]
    assert items and items[0]["record_id"] == record_id
    assert items[0]["citations"][0]["version_id"] == items[0]["version_id"]
    by_path = await calls.ok("recall", {"path": "db.py"})
    assert note["id"] in [i["record_id"] for i in by_path["items"]]
    by_symbol = await calls.ok("recall", {"symbol": "stored", "scope": "acme/mcp", "top_k": 50})
    assert record_id in [i["record_id"] for i in by_symbol["items"]]
    assert by_symbol["mode"] == "keyword"
    nothing = await calls.refused("recall", {"scope": "acme/mcp"})
    assert "[invalid_input] give exactly one of query, path or symbol" in nothing

    got = await calls.ok("read", {"record_id": record_id})
    assert (got["record"]["id"], got["version"]["number"]) == (record_id, 1)
    first = await calls.ok("read", {"record_id": skill["id"], "version": 1})
    assert first["version"]["id"] == skill["version_id"]
    cited = await calls.ok("read", {"record_id": skill["id"], "version_id": updated["version_id"]})
    assert cited["version"]["number"] == 2
    missing = await calls.refused("read", {"record_id": "rec_nope"})
    assert "[not_found]" in missing

    listed = await calls.ok("list", {"scope": "acme/mcp", "limit": 1000})
    assert {record_id, note["id"], skill["id"]} <= {r["id"] for r in listed["records"]}
    assert {r["scope"] for r in listed["records"]} == {"acme/mcp"}
    assert (listed["count"], listed["next_after"]) == (len(listed["records"]), None)
    page = await calls.ok("list", {"scope": "acme/mcp", "kind": ["skill"], "limit": 1})
    assert page["next_after"] == page["records"][0]["id"]
    assert {r["kind"] for r in page["records"]} == {"skill"}
    # an offset past the database's integers is refused by the tool's schema, not a crash
    huge = await calls.refused("list", {"offset": 2**63})
    assert "[invalid_input] offset" in huge
    # so are a version number no record can have, and ids and paths past what HTTP takes
    past = await calls.refused("read", {"record_id": record_id, "version": 2**63})
    assert "[invalid_input] version" in past
    long_id = "rec_" + "x" * 200_000
    for name, arguments, answer in [
        ("check", {"ids": [long_id]}, "[invalid_input] ids"),
        ("check", {"ids": ["rec_\x00"]}, "[invalid_input] ids"),
        ("recall", {"path": "a\x00b"}, "[invalid_input] path"),
        ("recall", {"path": "a/" * 50_000}, "[invalid_input] path"),
        # an id that cannot exist reads as not found, without echoing it back whole
        ("read", {"record_id": long_id}, "[not_found] no record 'rec_xxx"),
        ("timeline_expand", {"grip_id": long_id}, "[not_found] no grip 'rec_xxx"),
    ]:
        said = await calls.refused(name, arguments)
        assert answer in said and len(said) < 2000, (name, said[:300])

    checked = await calls.ok("check", {"ids": ["rec_nope", record_id], "text": "MCP stored this."})
    assert [(c["record_id"], c["valid"]) for c in checked["records"]["records"]] == [
        ("rec_nope", False),
        (record_id, True),
    ]
    (claim,) = checked["claims"]["claims"]
    assert (claim["claim"], claim["verdict"]) == ("MCP stored this.", "supported")

    research = await calls.ok("research", {"question": f"what did MCP store over {tag}?"})
    assert research["items"] and all(
        f"cite ({i['record_id']}, {i['version_id']})" in research["summary"]
        for i in research["items"]
    )

    # ---- the timeline and the graph
    hits = (await calls.ok("timeline_search", {"q": "MCP door port", "scope": "acme/mcp"}))["hits"]
    grip = next(g for h in hits for g in h["grip_ids"])
    expanded = await calls.ok("timeline_expand", {"grip_id": grip, "before": 1, "after": 1})
    assert expanded["events"]
    recent = await calls.ok("timeline_recent", {"scope": "acme/mcp", "max_tokens": 100_000})
    assert "8765" in json.dumps(recent)
    events = await calls.ok("timeline_events", {"session_id": session, "limit": 1})
    assert [e["event_id"] for e in events["events"]] == [f"{session}-0"]
    last = events["events"][-1]
    rest = await calls.ok(
        "timeline_events",
        {
            "session_id": session,
            "after_ts": last["ts"],
            "after_id": last["event_id"],
            "after_scope": last["scope"],
        },
    )
    assert [e["event_id"] for e in rest["events"]] == [f"{session}-1"]
    # the page cursor is bounded like the HTTP door's
    long_scope = {"after_ts": last["ts"], "after_id": last["event_id"], "after_scope": "a" * 5000}
    assert "[invalid_input] after_scope" in await calls.refused("timeline_events", long_scope)
    why = await calls.ok("graph_why", {"anchor": WHY_ANCHOR, "question": "why did it end?"})
    assert why["answer"] and why["_meta"]["request"]["intent"] == "why_decision"

    assert calls.called == set(MCP_TOOLS)
    for uri in (f"cairn://record/{record_id}", f"cairn://record/{record_id}@1"):
        read = await client.read_resource(uri)
        assert record_id in read.contents[0].text  # type: ignore[union-attr]
    # An agent's approve attempt: no such tool, and no write tool takes a curator op.
    approve = await client.call_tool("approve", {"id": record_id})
    assert approve.is_error
    sneaky = await client.call_tool("propose_change", {"op": "transition", "record_id": record_id})
    assert sneaky.is_error
    await _protocol_edges(client, record_id, tag)


async def test_streamable_http_with_agent_key(live: Live) -> None:
    async with _http(live, live.agent) as client:
        await _exercise(client, "http", live)


# The client itself warns that logging/setLevel is gone from protocol 2026-07-28.
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_streamable_http_legacy_client(live: Live) -> None:
    # Clients of protocol 2025-11-25 and earlier (the conformance suite among them) handshake
    # with initialize and send logging/setLevel.
    async with _http(live, live.agent, mode="legacy") as client:
        assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        assert client.server_capabilities.logging is not None
        await client.set_logging_level("debug")
        stored = await client.call_tool(
            "remember",
            {"kind": "episode", "body": "MCP stored this over legacy http", "scope": "acme/mcp"},
        )
        assert not stored.is_error, stored.content
        wait_embedded(live)
        await _protocol_edges(client, stored.structured_content["id"], "legacy http")


@pytest.mark.parametrize("key", [None, "cairn_wrong"])
def test_streamable_http_refuses_missing_or_wrong_key(live: Live, key: str | None) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**live.headers(key), "accept": "application/json, text/event-stream"}
    response = httpx.post(f"{live.url}/mcp", json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"


# `cairn --store STORE <command>`, as a client would start it: sys.argv[1] is the store.
STDIO = (
    "import sys; from cairn.doors.cli import main\n"
    "sys.argv = ['cairn', '--store', sys.argv[1], *sys.argv[2:]]\n"
    "main()\n"
)


async def test_stdio_server(live: Live) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", STDIO, str(live.store), "mcp"],
        # the stdio server reads its embedder from the environment, as `cairn mcp` does
        env={**os.environ, "CAIRN_API_KEY": live.agent, "CAIRN_EMBEDDER": "static"},
    )
    async with Client(params) as client:
        await _exercise(client, "stdio", live)


# ---- where a memory goes when no scope is given ---------------------------------------------


def _key_for(live: Live, entry: PrincipalEntry) -> str:
    """A new principal in the live store's principals file, and a key for it."""
    path = live.store / "principals.yaml"
    principals = load_principals(path)
    principals = principals.model_copy(update={"principals": (*principals.principals, entry)})
    principals, key, _ = add_key(principals, entry.id)
    save_principals(path, principals)
    return key


async def test_remember_without_scope_uses_the_principals_default_scope(live: Live) -> None:
    first_plain = _key_for(
        live, PrincipalEntry(id="mcp-team", scopes=("acme/*", "acme/team", "acme/other"))
    )
    chosen = _key_for(
        live,
        PrincipalEntry(id="mcp-notes", scopes=("notes/*",), default_scope="notes/inbox"),
    )
    for key, expected in ((first_plain, "acme/team"), (chosen, "notes/inbox")):
        async with _http(live, key) as client:
            made = await client.call_tool(
                "remember", {"kind": "episode", "body": f"Where does this go? {expected}"}
            )
            assert not made.is_error, made.content
            got = await client.call_tool("read", {"record_id": made.structured_content["id"]})
            assert got.structured_content["record"]["scope"] == expected


async def test_remember_without_scope_is_refused_without_a_default_scope(live: Live) -> None:
    globs = _key_for(live, PrincipalEntry(id="mcp-globs", scopes=("acme/*", "team/*/notes")))
    anywhere = _key_for(live, PrincipalEntry(id="mcp-anywhere", scopes=("*",)))
    for key, scopes in ((globs, "acme/*, team/*/notes"), (anywhere, "*")):
        async with _http(live, key) as client:
            refused = await client.call_tool("remember", {"kind": "episode", "body": "Homeless"})
            assert refused.is_error
            text = refused.content[0].text  # type: ignore[union-attr]
            assert "[invalid_input] no scope given" in text and f"(its scopes are {scopes})" in text
            assert "default" not in [
                r["scope"]
                for r in (await client.call_tool("list", {"limit": 1000})).structured_content[
                    "records"
                ]
            ]


def test_a_default_scope_outside_the_principals_scopes_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the principal's scopes"):
        Principal(id="p", scopes=("acme/*",), default_scope="other/inbox")
    assert Principal(id="p", scopes=("acme/*",)).home_scope() is None
    assert Principal(id="p", scopes=("*", "acme/app")).home_scope() == "acme/app"


def test_the_principals_file_names_a_default_scope_only_when_there_is_one(
    tmp_path: Path,
) -> None:
    # A file cairn rewrites (a new key, say) still reads in a cairn from before default scopes.
    path = tmp_path / "principals.yaml"
    save_principals(
        path,
        PrincipalsFile(
            principals=(
                PrincipalEntry(id="a", scopes=("*",)),
                PrincipalEntry(id="b", scopes=("acme/*",), default_scope="acme/app"),
            )
        ),
    )
    assert path.read_text().count("default_scope") == 1
    a, b = load_principals(path).principals
    assert (a.principal().home_scope(), b.principal().home_scope()) == (None, "acme/app")


# ---- what a model reads -----------------------------------------------------------------------

# The MCP Inspector's schema portability check (`inspector --cli --strict --method
# tools/list`, see docs/doors.md), restated: a bare true/false where a schema belongs (an
# error), a `type` array, a `$ref` outside the document, and a schema that constrains
# nothing (warnings). It walks `$defs` too, which the Inspector leaves alone.
_CONSTRAINING = frozenset((
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "contentMediaType",
    "contentEncoding", "contentSchema", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "allOf",
    "anyOf", "oneOf", "not", "items", "prefixItems", "contains", "additionalItems",
    "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
    "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref",
    "$dynamicRef", "$recursiveRef",
))  # fmt: skip
_BOOLEAN_ALLOWED = frozenset(
    ("additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems")
)
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies", "$defs")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "contains", "not", "propertyNames", "if", "then", "else",
               *_BOOLEAN_ALLOWED, "contentSchema")  # fmt: skip


def _portability_problems(node: Any, path: str = "", keyword: str | None = None) -> list[str]:
    if isinstance(node, bool):
        return [] if keyword in _BOOLEAN_ALLOWED else [f"{path}: bare {node}"]
    if not isinstance(node, dict):
        return []
    found = []
    if isinstance(node.get("type"), list):
        found.append(f"{path}: type is an array")
    ref = node.get("$ref")
    if isinstance(ref, str) and ref and not ref.startswith("#"):
        found.append(f"{path}: remote $ref {ref}")
    paired = "if" in node and ("then" in node or "else" in node)
    if keyword != "not" and not (_CONSTRAINING & set(node) or paired):
        found.append(f"{path}: constrains nothing")
    children: list[tuple[str, Any, str]] = []
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            children += [(f"{path}.{key}.{n}", sub, key) for n, sub in node[key].items()]
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            children += [(f"{path}.{key}[{i}]", sub, key) for i, sub in enumerate(node[key])]
    children += [(f"{path}.{key}", node[key], key) for key in _SCHEMA_ONE if key in node]
    for where, sub, key in children:
        found += _portability_problems(sub, where, key)
    return found


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML)) as opened:
        yield opened


async def test_every_tool_is_described_for_a_model(memory: Memory) -> None:
    server = build_mcp_server(memory, lambda _ctx: Principal(id="bot", scopes=("acme/*",)))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == list(MCP_TOOLS)
    for tool in tools:
        text = tool.description or ""
        lines = text.splitlines()
        # no docstring indentation and no blank padding: what a model reads is the text
        assert lines and all(line == line.strip() for line in lines), (tool.name, text)
        assert "\n\n\n" not in text and text == text.strip(), tool.name
        assert tool.title and "Use it" in text, tool.name
        # exactly one example, the last paragraph, and it is a valid call of this tool
        examples = [line for line in lines if line.startswith("Example: ")]
        assert len(examples) == 1 and lines[-1] == examples[0], tool.name
        example = json.loads(examples[0].removeprefix("Example: "))
        errors = list(Draft202012Validator(tool.input_schema).iter_errors(example))
        assert not errors and set(example) <= set(tool.input_schema["properties"]), tool.name
        # every argument says what it is; the result has a schema of its own
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), (tool.name, name)
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        assert tool.output_schema.get("properties"), tool.name
        for schema in (tool.input_schema, tool.output_schema):
            assert _portability_problems(schema) == [], tool.name
    kinds = ", ".join(memory.record_kinds())
    for tool in tools:
        if tool.name in ("remember", "recall", "list"):
            assert f"Kinds this store takes: {kinds}." in (tool.description or "")


async def test_the_stock_agent_writes_into_its_projects_scope(live: Live) -> None:
    """`cairn init` gives its agent a default scope: the project's, as capture names it."""
    expected = f"code/{live.store.resolve().parent.name}"
    async with _http(live, live.agent) as client:
        made = await client.call_tool("remember", {"kind": "episode", "body": "Homed"})
        assert not made.is_error, made.content
        got = await client.call_tool("read", {"record_id": made.structured_content["id"]})
        assert got.structured_content["record"]["scope"] == expected


def test_a_session_is_its_openers_alone(live: Live) -> None:
    """Another key naming a session is answered as if the session did not exist, for a call
    and for ending it; its owner goes on using it."""
    accept = {"Accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}

    def post(key: str, body: dict[str, Any], *sessions: str) -> httpx.Response:
        headers = [*live.headers(key).items(), *accept.items()]
        headers += [("mcp-session-id", session) for session in sessions]
        return httpx.post(f"{live.url}/mcp", json=body, headers=headers, timeout=30)

    def delete(key: str, *sessions: str) -> httpx.Response:
        headers = [*live.headers(key).items(), *accept.items()]
        headers += [("mcp-session-id", session) for session in sessions]
        return httpx.delete(f"{live.url}/mcp", headers=headers, timeout=30)

    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "owner", "version": "1"}}  # fmt: skip

    def opened(key: str) -> str:
        made = post(key, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        session = made.headers["mcp-session-id"]
        ready = post(key, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        assert ready.status_code == 202, ready.text
        return session

    session, own = opened(live.agent), opened(live.curator)
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    never = post(live.curator, listing, "0" * 32)
    assert never.status_code == 404
    # the agent's session, alone or first of two (the server reads the first)
    for sessions in [(session,), (session, own)]:
        taken = post(live.curator, listing, *sessions)
        assert (taken.status_code, taken.text) == (never.status_code, never.text), sessions
        assert delete(live.curator, *sessions).status_code == 404, sessions
    mine = post(live.agent, listing, session)
    assert mine.status_code == 200 and "remember" in mine.text
    assert post(live.curator, listing, own).status_code == 200
