"""The MCP door's protocol edges, driven in-process by the official ``mcp`` client.

Resource errors and their JSON-RPC codes, prompts, completions, ``logging/setLevel`` and the
text of validation errors. One store holds records the agent may read and records it may
not (another scope; a label it lacks): no answer may name or quote the hidden ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server.mcpserver import Context
from mcp_types import PromptReference, ResourceTemplateReference, TextContent

from cairn.doors.mcp_server import MCP_PROMPTS, build_mcp_server
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, ContentPatch, Principal, PrincipalKind
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR

pytestmark = pytest.mark.anyio

AGENT = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
RESOURCE_NOT_FOUND = -32002  # up to protocol 2025-11-25
INVALID_PARAMS = -32602
SECRET_WORDS = ("Vault", "combination", "Salary", "payroll")
RECORD = "cairn://record/{id}"
RECORD_AT = "cairn://record/{id}@{version}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Door:
    memory: Memory
    seen: str  # acme/app, two versions
    other: str  # acme/ops
    hidden_scope: str  # secret/vault: outside the agent's scopes
    hidden_label: str  # acme/hr, in the agent's scopes, but needs a label the agent lacks
    server: Any

    def hidden(self) -> tuple[str, str]:
        return (self.hidden_scope, self.hidden_label)


def _create(memory: Memory, title: str, scope: str, **fields: Any) -> str:
    content = Content(kind="fact", scope=scope, title=title, body=f"{title}. More.", **fields)
    outcome = memory.remember(content, principal=CURATOR)
    assert outcome.record is not None, outcome
    return outcome.record.id


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    memory = Memory(SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML))
    seen = _create(memory, "Deploys run on Tuesdays", "acme/app")
    head = memory.get(seen, principal=CURATOR).version.id
    memory.update(
        seen,
        ContentPatch(body="Deploys run on Tuesdays after the freeze."),
        principal=CURATOR,
        base_version_id=head,
    )
    other = _create(memory, "The on-call rota lives in the wiki", "acme/ops")
    hidden_scope = _create(memory, "Vault combination is kept offline", "secret/vault")
    hidden_label = _create(
        memory,
        "Salary bands for deploy engineers are in payroll",
        "acme/hr",
        acl=Acl(labels=("hr",)),
    )

    def principal_for(_ctx: Context) -> Principal:
        return AGENT

    server = build_mcp_server(memory, principal_for)
    yield Door(memory, seen, other, hidden_scope, hidden_label, server)
    memory.close()


def _no_leak(door: Door, text: str) -> None:
    for record_id in door.hidden():
        assert record_id not in text
    for word in SECRET_WORDS:
        assert word not in text
    assert "secret" not in text


# ---- resources ---------------------------------------------------------------------------


async def test_resource_reads_the_chosen_version(door: Door) -> None:
    async with Client(door.server) as client:
        head = await client.read_resource(RECORD.format(id=door.seen))
        first = await client.read_resource(RECORD_AT.format(id=door.seen, version=1))
    assert '"number":2' in head.contents[0].text.replace(" ", "")  # type: ignore[union-attr]
    assert '"number":1' in first.contents[0].text.replace(" ", "")  # type: ignore[union-attr]


@pytest.mark.parametrize("version", ["abc", "", "1x", "-1", "1.0", "two"])
async def test_resource_version_must_be_a_number(door: Door, version: str) -> None:
    # The plain template's {id} also matches "rec@abc": it must not fall back to the head.
    async with Client(door.server) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(f"cairn://record/{door.seen}@{version}")
    assert caught.value.code == INVALID_PARAMS
    assert "version" in caught.value.message
    assert "Traceback" not in caught.value.message


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_missing_and_invisible_records_read_alike(door: Door, mode: Any) -> None:
    # Up to protocol 2025-11-25 "resource not found" is -32002; 2026-07-28 retired that code
    # for -32602. Either way a hidden record answers exactly like one that does not exist.
    expected = RESOURCE_NOT_FOUND if mode == "legacy" else INVALID_PARAMS
    answers: list[tuple[int, str]] = []
    async with Client(door.server, mode=mode) as client:
        for record_id in ("rec_01NOSUCHRECORD0000000000", *door.hidden()):
            for uri in (RECORD.format(id=record_id), RECORD_AT.format(id=record_id, version=1)):
                with pytest.raises(MCPError) as caught:
                    await client.read_resource(uri)
                error = caught.value
                assert error.code == expected, (uri, error.error)
                assert error.data == {"uri": uri}
                answers.append((error.code, error.message.replace(record_id, "ID")))
        with pytest.raises(MCPError) as caught:
            await client.read_resource(RECORD_AT.format(id=door.seen, version=9))
        assert caught.value.code == expected
    assert len(set(answers)) == 1, answers
    assert answers[0][1] == "[not_found] no record 'ID'"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_uri_matching_no_template_is_not_found(door: Door, mode: Any) -> None:
    expected = RESOURCE_NOT_FOUND if mode == "legacy" else INVALID_PARAMS
    async with Client(door.server, mode=mode) as client:
        for uri in ("cairn://nothing/here", "test://static-text"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert caught.value.code == expected, caught.value.error
            assert caught.value.data == {"uri": uri}


# ---- prompts -----------------------------------------------------------------------------


async def test_prompts_are_listed_with_their_arguments(door: Door) -> None:
    async with Client(door.server) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == set(MCP_PROMPTS)
    for prompt in prompts.values():
        assert prompt.description and prompt.arguments, prompt.name
        assert "spec" not in prompt.description.lower()
        assert any(a.required for a in prompt.arguments), prompt.name


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_unknown_prompt_is_invalid_params(door: Door, mode: Any) -> None:
    async with Client(door.server, mode=mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("no_such_prompt", {"task": "x"})
    assert caught.value.code == INVALID_PARAMS
    assert "no_such_prompt" in caught.value.message
    assert "Traceback" not in caught.value.message


async def test_prompt_missing_argument_is_invalid_params(door: Door) -> None:
    async with Client(door.server) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("task_context", {"scope": "acme/*"})
    assert caught.value.code == INVALID_PARAMS
    assert "task" in caught.value.message


def _text(result: Any) -> str:
    parts = [m.content.text for m in result.messages if isinstance(m.content, TextContent)]
    assert parts and len(parts) == len(result.messages)
    return "\n".join(parts)


async def test_task_context_prompt_cites_only_readable_records(door: Door) -> None:
    async with Client(door.server) as client:
        result = await client.get_prompt("task_context", {"task": "deploy schedule"})
    text = _text(result)
    version = door.memory.get(door.seen, principal=AGENT).version.id
    assert f"[{door.seen}@{version}]" in text
    assert "after the freeze" in text
    _no_leak(door, text)


async def test_task_context_prompt_in_an_empty_scope_says_so(door: Door) -> None:
    async with Client(door.server) as client:
        empty = await client.get_prompt(
            "task_context", {"task": "deploy schedule", "scope": "acme/nothing-here"}
        )
        # An empty string is how many clients send an optional argument they were not given.
        unscoped = await client.get_prompt("task_context", {"task": "deploy", "scope": ""})
    text = _text(empty)
    assert "No readable memory" in text
    assert door.seen not in text
    assert door.seen in _text(unscoped)


async def test_propose_memory_prompt_shows_possible_duplicates(door: Door) -> None:
    async with Client(door.server) as client:
        result = await client.get_prompt(
            "propose_memory", {"memory": "Deploys run on Tuesdays", "scope": "acme/app"}
        )
    text = _text(result)
    version = door.memory.get(door.seen, principal=AGENT).version.id
    assert door.seen in text and version in text
    assert "propose_change" in text and "base_version_id" in text
    _no_leak(door, text)


async def test_check_claims_prompt_reports_each_claim(door: Door) -> None:
    async with Client(door.server) as client:
        result = await client.get_prompt(
            "check_claims", {"text": "Deploys run on Tuesdays. The moon is cheese."}
        )
    text = _text(result)
    assert "Deploys run on Tuesdays." in text and "The moon is cheese." in text
    assert door.seen in text
    _no_leak(door, text)


async def test_prompt_kernel_error_is_invalid_params(door: Door) -> None:
    async with Client(door.server) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("check_claims", {"text": "   "})
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.message.startswith("[invalid_input]")


# ---- logging -----------------------------------------------------------------------------


# The client itself warns that the logging feature is gone from protocol 2026-07-28.
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_logging_set_level_is_accepted(door: Door) -> None:
    # logging/setLevel exists up to protocol 2025-11-25: a legacy client must be able to send it.
    async with Client(door.server, mode="legacy") as client:
        assert client.server_capabilities.logging is not None
        for level in ("debug", "info", "emergency"):
            await client.set_logging_level(level)  # type: ignore[arg-type]
        with pytest.raises(MCPError) as caught:
            await client.session.send_request(  # an unknown level is the caller's mistake
                _set_level("loud"), _empty_result()
            )
    assert caught.value.code == INVALID_PARAMS


def _set_level(level: str) -> Any:
    from mcp_types import SetLevelRequest, SetLevelRequestParams

    return SetLevelRequest(params=SetLevelRequestParams.model_construct(level=level))


def _empty_result() -> Any:
    from mcp_types import EmptyResult

    return EmptyResult


# ---- completions -------------------------------------------------------------------------


async def _complete(
    client: Client,
    ref: ResourceTemplateReference | PromptReference,
    argument: str,
    value: str,
    context: dict[str, str] | None = None,
) -> Any:
    result = await client.complete(ref, {"name": argument, "value": value}, context)
    return result.completion


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_complete_record_ids_only_readable(door: Door, mode: Any) -> None:
    async with Client(door.server, mode=mode) as client:
        assert client.server_capabilities.completions is not None
        for template in (RECORD, RECORD_AT):
            ref = ResourceTemplateReference(uri=template)
            everything = await _complete(client, ref, "id", "")
            assert sorted(everything.values) == sorted([door.seen, door.other])
            assert everything.total == 2 and not everything.has_more
            for record_id in door.hidden():
                # The hidden id's own prefix finds nothing, not even a count.
                hidden = await _complete(client, ref, "id", record_id)
                assert hidden.values == [] and not hidden.total
        prefix = door.seen[: len(door.seen) - 3]
        narrowed = await _complete(client, ResourceTemplateReference(uri=RECORD), "id", prefix)
        assert narrowed.values == [door.seen]


async def test_complete_versions_of_a_readable_record(door: Door) -> None:
    ref = ResourceTemplateReference(uri=RECORD_AT)
    async with Client(door.server) as client:
        versions = await _complete(client, ref, "version", "", {"id": door.seen})
        assert versions.values == ["1", "2"]
        assert (await _complete(client, ref, "version", "2", {"id": door.seen})).values == ["2"]
        for record_id in (door.hidden_scope, "rec_nope"):
            hidden = await _complete(client, ref, "version", "", {"id": record_id})
            assert hidden.values == []
        assert (await _complete(client, ref, "version", "")).values == []


async def test_complete_record_ids_is_capped(door: Door) -> None:
    for n in range(105):
        _create(door.memory, f"Bulk fact number {n}", "acme/bulk")
    async with Client(door.server) as client:
        found = await _complete(client, ResourceTemplateReference(uri=RECORD), "id", "rec")
    assert len(found.values) == 100
    assert found.has_more and found.total is None  # one bounded query: the rest is not counted
    _no_leak(door, " ".join(found.values))


async def test_complete_scopes_only_readable(door: Door) -> None:
    async with Client(door.server) as client:
        for name in MCP_PROMPTS:
            scopes = await _complete(client, PromptReference(name=name), "scope", "")
            assert scopes.values == ["acme/app", "acme/ops"], name
        narrowed = await _complete(client, PromptReference(name="task_context"), "scope", "acme/o")
        assert narrowed.values == ["acme/ops"]
        for prefix in ("secr", "acme/h"):  # a scope out of reach; one holding only hidden records
            hidden = await _complete(client, PromptReference(name="task_context"), "scope", prefix)
            assert hidden.values == [] and not hidden.total
        # Glob characters in the typed prefix are matched literally.
        starred = await _complete(client, PromptReference(name="task_context"), "scope", "*")
        assert starred.values == []


async def test_complete_unknown_references(door: Door) -> None:
    async with Client(door.server) as client:
        with pytest.raises(MCPError) as caught:
            await _complete(client, PromptReference(name="no_such_prompt"), "scope", "")
        assert caught.value.code == INVALID_PARAMS
        assert "no_such_prompt" in caught.value.message
        with pytest.raises(MCPError) as caught:
            await _complete(client, ResourceTemplateReference(uri="cairn://nope/{x}"), "x", "")
        assert caught.value.code == INVALID_PARAMS
        # A known reference with an argument that has no completions answers an empty list.
        none = await _complete(client, PromptReference(name="task_context"), "task", "dep")
        assert none.values == []


async def test_descriptions_are_sent_without_source_indentation(door: Door) -> None:
    async with Client(door.server) as client:
        tools = (await client.list_tools()).tools
        prompts = (await client.list_prompts()).prompts
    described = [(t.name, t.description) for t in tools] + [
        (p.name, p.description) for p in prompts
    ]
    for name, description in described:
        assert description and "\n " not in description, name


# ---- validation errors -------------------------------------------------------------------


def _tool_error(result: Any) -> str:
    assert result.is_error
    text: str = result.content[0].text
    assert "http" not in text and "pydantic" not in text and "input_value" not in text
    assert "Traceback" not in text
    return text


async def test_validation_errors_name_fields_without_urls_or_input(door: Door) -> None:
    async with Client(door.server) as client:
        # Refused by the kernel's own models (inside the tool).
        stored = await client.call_tool(
            "remember", {"kind": "fact", "body": "hello", "scope": "acme//x"}
        )
        text = _tool_error(stored)
        assert "[invalid_input] scope: scope must be a path" in text
        assert "acme//x" not in text
        blank = await client.call_tool(
            "remember", {"kind": "fact", "body": " \n ", "scope": "acme/app"}
        )
        assert "[invalid_input] body must not be blank" in _tool_error(blank)
        # Refused by the tool's input schema (before the tool runs).
        got = await client.call_tool("read", {"record_id": door.seen, "version": "zzz-typed"})
        text = _tool_error(got)
        assert "[invalid_input] version: " in text and "zzz-typed" not in text
        proposed = await client.call_tool(
            "propose_change",
            {
                "op": "supersede",
                "record_id": door.seen,
                "content": {"kind": "fact", "scope": "acme//x", "title": "t", "acl": 7},
            },
        )
        text = _tool_error(proposed)
        assert "content.scope: scope must be a path" in text
        assert "content.acl: " in text and "; " in text
        assert "acme//x" not in text
