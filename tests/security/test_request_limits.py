"""Every door refuses oversized and malformed requests with a clear error in one shape.

The attacks this closes: a 20 MB body was stored; deeply nested JSON answered 500; error
bodies quoted pydantic internals and linked to pydantic's documentation; the MCP door's 401
told an HTTP client to pass a CLI flag; JSON nested 100,000 levels reached Python's parser,
whose RecursionError HTTP answered with a refusal that named no limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client
from typer.testing import CliRunner

from cairn.doors.a2a_agent import A2A_MAX_DATA_DEPTH
from cairn.doors.cli import app as cli_app
from cairn.doors.mcp_server import build_mcp_server
from cairn.limits import MAX_BODY_CHARS, MAX_METADATA_DEPTH, MAX_REQUEST_BYTES, MAX_REQUEST_DEPTH
from cairn.memory import Memory
from tests.doors.conftest import running
from tests.factories import CURATOR
from tests.security.conftest import Served

PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def _problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert set(body) >= PROBLEM_KEYS and body["status"] == status and body["code"] == code
    assert "pydantic" not in response.text and "errors.pydantic.dev" not in response.text
    return body


def _records(served: Served) -> int:
    status = served.client.get("/v1/status", headers=served.as_("curator")).json()
    return int(status["records"]) + int(status["proposals"])


def test_a_body_over_the_request_limit_is_413_on_every_door(served: Served) -> None:
    before = _records(served)
    huge = json.dumps(
        {"content": {"kind": "fact", "scope": "acme/big", "title": "t",
                     "body": "x" * (MAX_REQUEST_BYTES + 10)}}
    )  # fmt: skip
    for path in ("/v1/records", "/mcp", "/"):
        response = served.client.post(
            path,
            content=huge,
            headers={**served.as_("curator"), "content-type": "application/json"},
        )
        body = _problem(response, 413, "payload_too_large")
        assert f"{MAX_REQUEST_BYTES:,}" in body["detail"]
    assert _records(served) == before


def _over_the_limit() -> Iterator[bytes]:
    """A body of MAX_REQUEST_BYTES + 1 MB, in pieces: sent chunked, without Content-Length."""
    for _ in range(MAX_REQUEST_BYTES // 1_000_000 + 2):
        yield b"x" * 1_000_000


@pytest.mark.parametrize("path", ["/v1/records", "/mcp", "/"])
def test_a_body_streamed_without_a_length_is_counted_as_it_arrives(
    served: Served, path: str
) -> None:
    before = _records(served)
    streamed = served.client.post(
        path,
        content=_over_the_limit(),
        headers={**served.as_("curator"), "content-type": "application/json",
                 "accept": "application/json, text/event-stream"},
    )  # fmt: skip
    assert "content-length" not in streamed.request.headers
    body = _problem(streamed, 413, "payload_too_large")
    assert f"{MAX_REQUEST_BYTES:,}" in body["detail"]
    assert _records(served) == before


def test_a_real_server_counts_a_chunked_body_on_every_door(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with running(tmp_path_factory, "chunked") as live:
        for path in ("/v1/records", "/mcp", "/"):
            response = httpx.post(
                live.url + path,
                content=_over_the_limit(),
                headers={**live.headers(live.curator), "content-type": "application/json",
                         "accept": "application/json, text/event-stream"},
                timeout=60,
            )  # fmt: skip
            assert response.request.headers.get("transfer-encoding") == "chunked"
            _problem(response, 413, "payload_too_large")


def test_a_record_body_over_its_limit_is_422_naming_the_limit(served: Served) -> None:
    before = _records(served)
    body = {"content": {"kind": "fact", "scope": "acme/big", "title": "t",
                        "body": "x" * (MAX_BODY_CHARS + 1)}}  # fmt: skip
    response = served.client.post("/v1/records", json=body, headers=served.as_("curator"))
    problem = _problem(response, 422, "invalid_input")
    assert f"{MAX_BODY_CHARS:,}" in problem["detail"] and "body" in problem["detail"]
    assert _records(served) == before


@pytest.mark.parametrize("depth", [MAX_METADATA_DEPTH + 1, 250, 300, 900, 20_000])
def test_deep_json_is_refused_not_crashed_on(served: Served, depth: int) -> None:
    before = _records(served)
    metadata = '{"k":' * depth + "1" + "}" * depth
    raw = (
        '{"content": {"kind": "fact", "scope": "acme/deep", "title": "deep", "metadata": '
        + metadata
        + "}}"
    )
    response = served.client.post(
        "/v1/records",
        content=raw,
        headers={**served.as_("curator"), "content-type": "application/json"},
    )
    assert response.status_code in (400, 422), response.text
    problem = _problem(response, response.status_code, response.json()["code"])
    assert "nested" in problem["detail"]
    assert _records(served) == before
    # the store still answers everyone afterwards
    assert served.client.get("/v1/records", headers=served.as_("agent")).status_code == 200


def test_the_mcp_door_refuses_a_missing_key_in_http_terms(served: Served) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = served.client.post(
        "/mcp", json=request, headers={"accept": "application/json, text/event-stream"}
    )
    problem = _problem(response, 401, "unauthenticated")
    assert "Authorization: Bearer" in problem["detail"] and "--key" not in problem["detail"]
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.anyio
async def test_the_mcp_door_refuses_deep_metadata_and_big_bodies(memory: Memory) -> None:
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_METADATA_DEPTH + 5):
        deep = {"k": deep}
    server = build_mcp_server(memory, lambda _ctx: CURATOR)
    async with Client(server) as client:
        for arguments in (
            {"kind": "fact", "body": "deep", "scope": "acme/t", "metadata": deep},
            {"kind": "fact", "body": "x" * (MAX_BODY_CHARS + 1), "scope": "acme/t"},
        ):
            result = await client.call_tool("remember", arguments)
            assert result.is_error
            text = str(result.content)
            assert "[invalid_input]" in text and "pydantic" not in text
    assert memory.status(principal=CURATOR)["records"] == 0


def test_the_a2a_door_refuses_deep_metadata(served: Served) -> None:
    before = _records(served)
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_METADATA_DEPTH + 5):
        deep = {"k": deep}
    message = {
        "jsonrpc": "2.0",
        "id": "deep-1",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "deep-message-1",
                "role": "user",
                "parts": [
                    {
                        "kind": "data",
                        "data": {
                            "skill": "remember",
                            "content": "deep",
                            "type": "episode",
                            "metadata": deep,
                        },
                    }
                ],
            }
        },
    }
    response = served.client.post("/", json=message, headers=served.as_("curator"))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["error"]["code"] == -32602  # invalid params, not an internal error
    assert "nested more than" in answer["error"]["message"] and "Traceback" not in response.text
    assert _records(served) == before


def _a2a_send(
    served: Served, parts: list[dict[str, Any]], metadata: Any = None, *, raw: str = ""
) -> dict[str, Any]:
    """message/send with ``parts`` and message ``metadata``; ``raw`` is spliced in as the
    text of the metadata (for numbers no JSON encoder writes)."""
    message: dict[str, Any] = {"kind": "message", "messageId": "m-limits", "role": "user",
                               "parts": parts}  # fmt: skip
    if metadata is not None:
        message["metadata"] = metadata
    request = {"jsonrpc": "2.0", "id": "limits", "method": "message/send",
               "params": {"message": message}}  # fmt: skip
    text = json.dumps(request).replace('"@RAW@"', raw)
    response = served.client.post(
        "/", content=text, headers={**served.as_("curator"), "content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


REMEMBER = {"kind": "data", "data": {"skill": "remember", "content": "limits", "type": "episode"}}


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1E400"])
def test_a2a_refuses_a_number_too_large_for_json_by_name(served: Served, number: str) -> None:
    before = _records(served)
    for parts, metadata in (
        ([REMEMBER], {"ratio": "@RAW@"}),  # the message's metadata
        ([{**REMEMBER, "metadata": {"ratio": "@RAW@"}}], None),  # a part's metadata
        ([{"kind": "data", "data": {**REMEMBER["data"], "metadata": {"r": "@RAW@"}}}], None),
    ):
        error = _a2a_send(served, parts, metadata, raw=number).get("error")
        assert error is not None and error["code"] == -32602, error
        assert number in error["message"] and "not a finite number" in error["message"]
    assert _records(served) == before


def test_a2a_refuses_an_integer_a_double_cannot_hold_in_metadata(served: Served) -> None:
    before = _records(served)
    huge = "1" + "0" * 400
    for parts, metadata in (
        ([REMEMBER], {"count": "@RAW@"}),
        ([{**REMEMBER, "metadata": {"count": "@RAW@"}}], None),
    ):
        error = _a2a_send(served, parts, metadata, raw=huge).get("error")
        assert error is not None and error["code"] == -32602, error
        assert "2**53" in error["message"] and "metadata" in error["message"], error
    assert _records(served) == before


def test_a2a_refuses_message_metadata_deeper_than_it_can_carry_by_name(
    served: Served,
) -> None:
    before = _records(served)
    for depth in (A2A_MAX_DATA_DEPTH + 1, MAX_METADATA_DEPTH + 2):
        for parts, metadata, where in (
            ([REMEMBER], _nested(depth), "params.message.metadata"),
            ([{**REMEMBER, "metadata": _nested(depth)}], None, "params.message.parts[0].metadata"),
        ):
            error = _a2a_send(served, parts, metadata).get("error")
            assert error is not None and error["code"] == -32602, (depth, where, error)
            assert where in error["message"], error["message"]
            assert f"nested more than {A2A_MAX_DATA_DEPTH} levels" in error["message"]
    assert _records(served) == before
    # as deep as A2A carries is fine
    answer = _a2a_send(served, [REMEMBER], _nested(A2A_MAX_DATA_DEPTH))
    assert answer["result"]["status"]["state"] == "completed", answer
    assert _records(served) > before


# JSON nested far past any parser's reach: 100,000 levels.
ABYSS = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def guarded_parser(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """``json.loads`` that fails the test when handed text nested 1,000 levels or more (where
    Python's parser would raise RecursionError); yields how often that happened."""
    handed_deep: list[int] = []
    parse = json.loads

    def guarded(text: str | bytes, **options: Any) -> Any:
        if ("[" * 1000 if isinstance(text, str) else b"[" * 1000) in text:
            handed_deep.append(len(text))
            raise AssertionError("the JSON parser was handed text nested 1,000 levels deep")
        return parse(text, **options)

    monkeypatch.setattr(json, "loads", guarded)
    yield handed_deep


def test_http_refuses_json_nested_past_the_request_limit_before_parsing_it(
    served: Served, guarded_parser: list[int]
) -> None:
    before = _records(served)
    for body in (ABYSS, '{"content": ' + "[" * (MAX_REQUEST_DEPTH + 1)):
        response = served.client.post(
            "/v1/records",
            content=body,
            headers={**served.as_("curator"), "content-type": "application/json"},
        )
        problem = _problem(response, 422, "invalid_input")
        assert f"nested more than {MAX_REQUEST_DEPTH} levels" in problem["detail"], problem
    assert not guarded_parser
    assert _records(served) == before


def test_a2a_refuses_json_nested_past_the_request_limit_before_parsing_it(
    served: Served, guarded_parser: list[int]
) -> None:
    response = served.client.post(
        "/", content=ABYSS, headers={**served.as_("curator"), "content-type": "application/json"}
    )
    error = response.json()["error"]
    assert error["code"] == -32602, error
    assert f"nested more than {MAX_REQUEST_DEPTH} levels" in error["message"]
    assert not guarded_parser


def test_the_cli_refuses_metadata_nested_past_its_limit_before_parsing_it(
    served: Served, guarded_parser: list[int]
) -> None:
    before = _records(served)
    refused = CliRunner().invoke(
        cli_app,
        ["remember", "--kind", "fact", "--scope", "acme/deep", "--title", "deep",
         f"--metadata={ABYSS}", "--store", str(served.folder), "--key", served.keys["curator"]],
    )  # fmt: skip
    assert refused.exit_code == 2, (refused.output, refused.exception)
    assert f"--metadata is nested more than {MAX_METADATA_DEPTH} levels" in refused.stderr
    assert not guarded_parser
    assert _records(served) == before


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
