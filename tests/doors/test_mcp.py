"""The MCP door driven by the official ``mcp`` client, over streamable HTTP and stdio."""

from __future__ import annotations

import os
import sys
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceTemplateReference
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from cairn.doors.mcp_server import MCP_PROMPTS, MCP_TOOLS
from tests.doors.conftest import Live, wait_embedded

pytestmark = pytest.mark.anyio

CURATOR_WORDS = ("approve", "reject", "archive", "publish", "promote", "decide", "transition")

ARGS: dict[str, dict[str, Any]] = {
    "memory_store": {"type": "episode", "content": "MCP stored this\nbody", "scope": "acme/mcp"},
    "memory_retrieve": {"query": "stored"},
    "memory_search": {"query": "stored", "mode": "keyword"},
    "memory_list": {"scope": "acme/mcp", "limit": 100},
    "memory_validate": {"ids": ["rec_nope"]},
    "memory_get_context": {"scope": "acme/mcp", "query": "stored", "selector": "head"},
    "memory_propose": {
        "op": "create",
        "content": {"kind": "belief", "scope": "acme/mcp", "title": "Beliefs wait for review"},
    },
    "memory_record_candidate": {
        "title": "A hand-off note",
        "body": "look at db.py",
        "scope": "acme/mcp",
        "paths": ["db.py"],
    },
    "memory_get_relevant": {"query": "hand-off"},
    "memory_for_path": {"path": "db.py"},
    "memory_for_symbol": {"symbol": "stored"},
    "memory_validate_claims": {"text": "MCP stored this."},
    "memory_research": {"question": "what did MCP store?"},
}


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
    ]:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
        assert caught.value.code == expected, (uri, caught.value.error)
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("no_such_prompt")
    assert caught.value.code == -32602


WRITES = ("memory_store", "memory_propose", "memory_record_candidate")


async def _exercise(client: Client, tag: str, live: Live) -> None:
    # Both transports share one store: unique content keeps the gate's duplicate check quiet.
    args = {name: dict(value) for name, value in ARGS.items()}
    args["memory_store"]["content"] = f"MCP stored this over {tag}\nbody"
    args["memory_propose"] = {
        "op": "create",
        "content": {
            "kind": "belief",
            "scope": "acme/mcp",
            "title": f"Beliefs wait for review ({tag})",
        },
    }
    args["memory_record_candidate"]["title"] = f"A hand-off note ({tag})"
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(MCP_TOOLS)
    for name, tool in tools.items():
        assert tool.description and tool.input_schema and tool.output_schema, name
        assert not any(word in name for word in CURATOR_WORDS)
    out: dict[str, Any] = {}

    async def call(name: str) -> None:
        result = await client.call_tool(name, args[name])
        assert not result.is_error, (name, result.content)
        assert result.structured_content is not None, name
        out[name] = result.structured_content

    for name in WRITES:
        await call(name)
    wait_embedded(live)  # reads rank what is stored, not a race with the index worker
    for name in args:
        if name not in WRITES:
            await call(name)

    # Writes: the gate's decision under the default policy, in the tool's own words.
    record_id = out["memory_store"]["id"]
    assert (out["memory_store"]["status"], out["memory_store"]["record_status"]) == (
        "approved",
        "active",
    )  # episodes-are-history
    assert (out["memory_propose"]["status"], out["memory_propose"]["id"]) == ("pending", None)
    note = out["memory_record_candidate"]
    assert (note["status"], note["record_status"]) == ("approved", "draft")  # drafts-are-notes
    # Reads: each names what was just written.
    assert record_id in [i["record_id"] for i in out["memory_retrieve"]["items"]]
    assert record_id in [h["record_id"] for h in out["memory_search"]["hits"]]
    listed = out["memory_list"]
    assert record_id in [r["id"] for r in listed["records"]]
    assert {r["scope"] for r in listed["records"]} == {"acme/mcp"}
    assert listed["count"] == len(listed["records"])
    assert [
        (c["record_id"], c["valid"], c["problems"]) for c in out["memory_validate"]["records"]
    ] == [("rec_nope", False, ["not_found"])]
    assert record_id in [i["record_id"] for i in out["memory_get_context"]["items"]]
    assert note["id"] in [i["record_id"] for i in out["memory_get_relevant"]["items"]]
    assert note["id"] in [i["record_id"] for i in out["memory_for_path"]["items"]]
    assert record_id in [i["record_id"] for i in out["memory_for_symbol"]["items"]]
    (claim,) = out["memory_validate_claims"]["claims"]
    assert (claim["claim"], claim["verdict"]) == ("MCP stored this.", "supported")
    research = out["memory_research"]
    assert research["items"] and all(
        f"cite ({i['record_id']}, {i['version_id']})" in research["summary"]
        for i in research["items"]
    )

    got = await client.call_tool("memory_get", {"id": record_id})
    assert got.structured_content["record"]["id"] == record_id
    missing = await client.call_tool("memory_get", {"id": "rec_nope"})
    assert missing.is_error and "[not_found]" in str(missing.content)
    found = await client.call_tool("memory_retrieve", {"query": f"stored over {tag}"})
    items = found.structured_content["items"]
    assert items and items[0]["record_id"] == record_id
    assert items[0]["citations"][0]["version_id"] == items[0]["version_id"]
    for uri in (f"cairn://record/{record_id}", f"cairn://record/{record_id}@1"):
        read = await client.read_resource(uri)
        assert record_id in read.contents[0].text  # type: ignore[union-attr]
    # An agent's approve attempt: no such tool, and no write tool takes a curator op.
    approve = await client.call_tool("memory_approve", {"id": record_id})
    assert approve.is_error
    sneaky = await client.call_tool("memory_propose", {"op": "transition", "record_id": record_id})
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
            "memory_store", {"type": "episode", "content": "MCP stored this over legacy http"}
        )
        assert not stored.is_error, stored.content
        await _protocol_edges(client, stored.structured_content["id"], "legacy http")


@pytest.mark.parametrize("key", [None, "cairn_wrong"])
def test_streamable_http_refuses_missing_or_wrong_key(live: Live, key: str | None) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**live.headers(key), "accept": "application/json, text/event-stream"}
    response = httpx.post(f"{live.url}/mcp", json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"


STDIO = (
    "import sys, typer; from pathlib import Path; from cairn.doors.cli_server import register\n"
    "app = typer.Typer()\n"
    "@app.callback()\n"
    "def main(ctx: typer.Context) -> None:\n"
    "    ctx.obj = {'store': Path(sys.argv[1]), 'json': True}\n"
    "register(app)\n"
    "app(sys.argv[2:])\n"
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
