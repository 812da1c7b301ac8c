"""The A2A door over JSON-RPC 0.3 with httpx (the a2a-sdk client test is still to come)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Task, TaskState
from a2a.utils.errors import InvalidParamsError

from cairn.doors.a2a_agent import MAX_TASK_PARTS, PRINCIPAL_STATE, MemoryTaskStore
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.graph.fixtures import example_fixtures, plan_graph
from cairn.memory import MAX_TASK_BYTES, Memory
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.doors.conftest import Live
from tests.factories import CURATOR


def _rpc(live: Live, method: str, params: dict[str, Any], key: str | None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": "t1", "method": method, "params": params}
    return httpx.post(f"{live.url}/", json=body, headers=live.headers(key), timeout=30)


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "message": {
            "kind": "message",
            "messageId": f"m-{text[:12]}",
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            **extra,
        }
    }


def test_card_declares_skills_and_bearer(live: Live) -> None:
    card = httpx.get(f"{live.url}/.well-known/agent-card.json").json()
    assert {s["id"] for s in card["skills"]} == {"research", "remember", "recall", "why"}
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"


def test_refuses_missing_or_wrong_key(live: Live) -> None:
    for key in (None, "cairn_wrong"):
        response = _rpc(live, "tasks/get", {"id": "x"}, key)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_lifecycle_and_error_codes(live: Live) -> None:
    done = _rpc(live, "message/send", _message("remember: we release on Tuesdays"), live.agent)
    task = done.json()["result"]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["kind"] == "data"
    kinds = [p["kind"] for p in task["status"]["message"]["parts"]]
    assert kinds == ["text", "data"]

    unclear = _rpc(live, "message/send", _message("Hello"), live.agent).json()["result"]
    assert unclear["status"]["state"] == "input-required"
    got = _rpc(live, "tasks/get", {"id": unclear["id"], "historyLength": 1}, live.agent).json()
    assert got["result"]["id"] == unclear["id"]
    canceled = _rpc(live, "tasks/cancel", {"id": unclear["id"]}, live.agent).json()
    assert canceled["result"]["status"]["state"] == "canceled"
    again = _rpc(live, "tasks/cancel", {"id": task["id"]}, live.agent).json()
    assert again["error"]["code"] == -32002

    assert _rpc(live, "tasks/get", {"id": "nope"}, live.agent).json()["error"]["code"] == -32001
    bad = _rpc(live, "message/send", {"message": {"kind": "message"}}, live.agent).json()
    assert bad["error"]["code"] == -32602
    assert _rpc(live, "nope/nope", {}, live.agent).json()["error"]["code"] == -32601
    raw = httpx.post(f"{live.url}/", content=b"{", headers=live.headers(live.agent))
    assert raw.json()["error"]["code"] == -32700
    other = httpx.post(f"{live.url}/", json={"id": 1}, headers=live.headers(live.agent))
    assert other.json()["error"]["code"] == -32600


def test_tasks_belong_to_their_principal(live: Live) -> None:
    mine = _rpc(live, "message/send", _message("Hello again"), live.agent).json()["result"]
    theirs = _rpc(live, "tasks/get", {"id": mine["id"]}, live.curator).json()
    assert theirs["error"]["code"] == -32001


def _rpc10(live: Live, method: str, params: dict[str, Any], key: str | None) -> httpx.Response:
    """A JSON-RPC call in A2A 1.0 (``SendMessage``…), which the header selects."""
    body = {"jsonrpc": "2.0", "id": "t1", "method": method, "params": params}
    headers = {**live.headers(key), "A2A-Version": "1.0"}
    return httpx.post(f"{live.url}/", json=body, headers=headers, timeout=30)


def _stored_metadata(live: Live, record_id: str) -> Any:
    got = httpx.get(f"{live.url}/v1/records/{record_id}", headers=live.headers(live.agent))
    assert got.status_code == 200, got.text
    return got.json()["version"]["content"]["metadata"]


# Integers, floats, nesting and lists: what a data part's metadata must store unchanged.
METADATA = {"count": 3, "ratio": 0.5, "big": 2**53, "nested": {"ids": [1, 2.5, {"n": -7}]}}


def _same_json(left: Any, right: Any) -> bool:
    """Equal *and* of the same JSON types (3 == 3.0 in Python, but not for a JSON reader)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_json(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_same_json, left, right))
    return type(left) is type(right) and left == right


def test_data_part_keeps_integers_v03(live: Live) -> None:
    data = {"skill": "remember", "content": "integers stay integers (0.3)", "metadata": METADATA}
    params = {
        "message": {
            "kind": "message",
            "messageId": "m-ints-03",
            "role": "user",
            "parts": [{"kind": "data", "data": data}],
        }
    }
    task = _rpc(live, "message/send", params, live.agent).json()["result"]
    assert task["status"]["state"] == "completed", task["status"]
    record_id = task["artifacts"][0]["parts"][0]["data"]["id"]
    stored = _stored_metadata(live, record_id)
    assert _same_json(stored, METADATA), stored


def test_data_part_keeps_integers_v10(live: Live) -> None:
    data = {"skill": "remember", "content": "integers stay integers (1.0)", "metadata": METADATA}
    params = {"message": {"messageId": "m-ints-10", "role": "ROLE_USER", "parts": [{"data": data}]}}
    task = _rpc10(live, "SendMessage", params, live.agent).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    record_id = task["artifacts"][0]["parts"][0]["data"]["id"]
    stored = _stored_metadata(live, record_id)
    assert _same_json(stored, METADATA), stored


def test_refuses_an_integer_a_double_cannot_hold(live: Live) -> None:
    """Past 2**53 a protobuf Struct would round the integer: refuse it rather than store
    another number than the caller sent."""
    data = {"skill": "remember", "content": "too big", "metadata": {"n": 2**53 + 1}}
    message = {"kind": "message", "messageId": "m-big", "role": "user"}
    parts = [{"kind": "text", "text": "remember"}, {"kind": "data", "data": data}]
    body = _rpc(live, "message/send", {"message": {**message, "parts": parts}}, live.agent)
    error = body.json()["error"]
    assert error["code"] == -32602 and "parts[1]" in error["message"], error
    params10 = {
        "message": {"messageId": "m-big-10", "role": "ROLE_USER", "parts": [{"data": data}]}
    }
    error10 = _rpc10(live, "SendMessage", params10, live.agent).json()["error"]
    assert error10["code"] == -32602 and "parts[0]" in error10["message"], error10


def test_refuses_a_v03_part_without_kind(live: Live) -> None:
    """In 0.3 ``kind`` is what makes a part text, file or data: a part without it is not a
    text part by default."""
    parts = [
        {"kind": "text", "text": "recall: release schedule"},
        {"type": "unsupported_type", "text": "This should be rejected"},
    ]
    message = {"kind": "message", "messageId": "m-nokind", "role": "user", "parts": parts}
    for method in ("message/send", "message/stream"):
        error = _rpc(live, method, {"message": message}, live.agent).json()["error"]
        assert error["code"] == -32602, error
        assert "parts[1]" in error["message"] and "kind" in error["message"], error


def test_card_provider_url_is_this_server(live: Live) -> None:
    card = httpx.get(f"{live.url}/.well-known/agent-card.json").json()
    provider_url = card["provider"]["url"]
    assert provider_url.startswith(live.url + "/"), provider_url
    assert httpx.get(provider_url, timeout=30).status_code == 200


def test_a_fractional_count_is_refused_not_rounded(live: Live) -> None:
    data = {"skill": "recall", "query": "release schedule", "top_k": 2.5}
    message = {"kind": "message", "messageId": "m-frac", "role": "user"}
    params = {"message": {**message, "parts": [{"kind": "data", "data": data}]}}
    task = _rpc(live, "message/send", params, live.agent).json()["result"]
    assert task["status"]["state"] == "failed", task["status"]
    text = task["status"]["message"]["parts"][0]["text"]
    assert "top_k" in text and "integer" in text, text
    whole = {**data, "top_k": 2}
    parts = [{"kind": "data", "data": whole}]
    params = {"message": {**message, "messageId": "m-whole", "parts": parts}}
    done = _rpc(live, "message/send", params, live.agent).json()["result"]
    assert done["status"]["state"] == "completed", done["status"]


def test_why_answers_for_the_agents_own_role_only(live: Live) -> None:
    workspace = Workspace(live.store)
    with workspace.open_memory(embedder=None) as memory:
        memory.graph_ingest(
            plan_graph(example_fixtures()), principal=workspace.authenticate(live.curator)
        )
    anchor = "acme-emea-end-onprem-connector-support-2025"
    done = _rpc(live, "message/send", _message(f"why: {anchor}"), live.agent).json()["result"]
    assert done["status"]["state"] == "completed", done
    text = done["status"]["message"]["parts"][0]["text"]
    assert text.startswith("VP Customer Success EMEA on 2025-01-15")
    assert text.endswith("Note: Some evidence was withheld due to your permissions.")
    data = done["status"]["message"]["parts"][1]["data"]
    assert data["_meta"]["actor"]["role"] == "staff"
    # the agent's key holds staff: asking as a higher role is refused, nothing answered
    higher = {
        "message": {
            "kind": "message", "messageId": "m-why-higher", "role": "user",
            "parts": [{"kind": "data", "data": {"skill": "why", "anchor": anchor,
                                                 "role": "director"}}],
        }
    }  # fmt: skip
    refused = _rpc(live, "message/send", higher, live.agent).json()["result"]
    assert refused["status"]["state"] == "failed"
    assert "may not ask as director" in str(refused["status"]["message"])


def test_refuses_a_message_of_too_many_parts(live: Live) -> None:
    """Each part costs the SDK a conversion on the server's event loop: a message of a
    hundred thousand empty parts is refused before it gets there, in both versions."""
    parts = [{"kind": "data", "data": {}}] * 100_000
    message = {"kind": "message", "messageId": "m-many", "role": "user", "parts": parts}
    error = _rpc(live, "message/send", {"message": message}, live.agent).json()["error"]
    assert error["code"] == -32602 and "at most 256" in error["message"], error
    params10 = {
        "message": {"messageId": "m-many-10", "role": "ROLE_USER", "parts": [{"data": {}}] * 257}
    }
    error10 = _rpc10(live, "SendMessage", params10, live.agent).json()["error"]
    assert error10["code"] == -32602 and "257 parts" in error10["message"], error10


def test_a_message_that_would_grow_its_task_past_the_limit_is_invalid_params(live: Live) -> None:
    """Messages that each fit a request could together grow a task past what a task holds:
    the one that would not fit is refused as the caller's error (-32602) before it runs,
    and the task is left as it was."""
    first = _rpc(live, "message/send", _message("Hello"), live.agent).json()["result"]
    assert first["status"]["state"] == "input-required"
    bulk = "x" * (5 * 1024 * 1024)

    def follow(index: int) -> dict[str, Any]:
        message = _message(bulk, taskId=first["id"], contextId=first["contextId"])
        message["message"]["messageId"] = f"m-bulk-{index}"
        return _rpc(live, "message/send", message, live.agent).json()  # type: ignore[no-any-return]

    assert follow(1)["result"]["status"]["state"] == "input-required"
    error = follow(2)["error"]
    assert error["code"] == -32602, error
    assert "start a new task" in error["message"]
    kept = _rpc(live, "tasks/get", {"id": first["id"]}, live.agent).json()["result"]
    assert [m["messageId"] for m in kept["history"] if m["role"] == "user"] == [
        "m-Hello",
        "m-bulk-1",
    ]


def test_a_reply_that_grows_its_task_past_the_limit_is_invalid_params(tmp_path: Path) -> None:
    """Should a reply itself take a task past its limit, saving it fails as the caller's
    error (the SDK answers -32602), not as the server's."""
    memory = Memory(SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML))
    store = MemoryTaskStore(memory)
    context = ServerCallContext(state={PRINCIPAL_STATE: CURATOR})
    task = Task(id="t-big", context_id="c-big")
    task.artifacts.add().parts.add().text = "x" * (MAX_TASK_BYTES + 1)
    with pytest.raises(InvalidParamsError, match="at most"):
        asyncio.run(store.save(task, context))
    task.artifacts[0].parts[0].text = "fits"
    asyncio.run(store.save(task, context))
    assert asyncio.run(store.get("t-big", context)) == task
    # and so is a task of too many parts, however they came (a reply's own included)
    many = Task(id="t-many", context_id="c-big")
    for _ in range(MAX_TASK_PARTS + 1):
        many.artifacts.add().parts.add().text = "x"
    with pytest.raises(InvalidParamsError, match="parts"):
        asyncio.run(store.save(many, context))
    assert asyncio.run(store.get("t-many", context)) is None
    memory.close()


def test_a_record_with_the_most_metadata_a_record_holds_goes_through(live: Live) -> None:
    """The limit on values carried as Structs leaves room for a record's whole metadata."""
    metadata = {f"k{i}": i for i in range(1000)}
    data = {"skill": "remember", "content": "a record of wide metadata", "metadata": metadata}
    message = {"kind": "message", "messageId": "m-wide-ok", "role": "user",
               "parts": [{"kind": "data", "data": data}]}  # fmt: skip
    task = _rpc(live, "message/send", {"message": message}, live.agent).json()["result"]
    assert task["status"]["state"] == "completed", task["status"]
    record_id = task["artifacts"][0]["parts"][0]["data"]["id"]
    assert _stored_metadata(live, record_id) == metadata


@pytest.mark.parametrize("where", ["data", "metadata", "nested", "params"])
def test_refuses_data_of_too_many_values(live: Live, where: str) -> None:
    """A data part or metadata of a few hundred thousand keys fits a request but cost the
    SDK seconds on the event loop that every door shares: refused by count first."""
    wide: dict[str, Any] = {f"k{i}": 0 for i in range(5000)}
    message: dict[str, Any] = {"kind": "message", "messageId": f"m-wide-{where}", "role": "user",
                               "parts": [{"kind": "text", "text": "hello"}]}  # fmt: skip
    if where == "data":
        message["parts"].append({"kind": "data", "data": wide})
    elif where == "metadata":
        message["metadata"] = wide
    elif where == "nested":  # many small lists spread over parts: the count is of it all
        message["parts"] += [{"kind": "data", "data": {"x": [0] * 100}}] * 50
    params: dict[str, Any] = {"message": message}
    if where == "params":  # the request's own metadata, of a send and of any other method
        params["metadata"] = wide
        cancel = {"id": "t-none", "metadata": wide}
        error = _rpc10(live, "CancelTask", cancel, live.agent).json()["error"]
        assert error["code"] == -32602 and "4,096 values" in error["message"], error
    error = _rpc(live, "message/send", params, live.agent).json()["error"]
    assert error["code"] == -32602 and "4,096 values" in error["message"], error


@pytest.mark.parametrize("task_key", ["taskId", "task_id"])
def test_a_task_gathers_a_bounded_number_of_parts(live: Live, task_key: str) -> None:
    """Every part a task gathers is converted each time it is read: past the bound a message
    is refused, and the task stays as it was (however the task's id is spelt)."""
    first = _rpc(live, "message/send", _message("Hello"), live.agent).json()["result"]
    sent = 0
    for index in range(10):
        message = {"kind": "message", "messageId": f"m-parts-{task_key}-{index}",
                   "role": "user", task_key: first["id"], "contextId": first["contextId"],
                   "parts": [{"kind": "text", "text": "hi"}] * 256}  # fmt: skip
        answer = _rpc(live, "message/send", {"message": message}, live.agent).json()
        if "error" in answer:
            break
        sent += 1
    assert sent == 3, sent
    assert answer["error"]["code"] == -32602 and "at most 1,024" in answer["error"]["message"]
    kept = _rpc(live, "tasks/get", {"id": first["id"]}, live.agent).json()["result"]
    assert sum(len(m["parts"]) for m in kept["history"]) <= 1024
    assert f"m-parts-{task_key}-3" not in {m["messageId"] for m in kept["history"]}


def test_bad_page_tokens_and_history_lengths_are_invalid_params(live: Live) -> None:
    for token in ("9" * 30, "\u00b2", "-1", "1e3"):
        error = _rpc10(live, "ListTasks", {"pageToken": token}, live.agent).json()["error"]
        assert error["code"] == -32602 and "pageToken" in error["message"], (token, error)
    listed = _rpc10(live, "ListTasks", {"pageToken": "0"}, live.agent).json()
    assert "result" in listed, listed
    task = _rpc(live, "message/send", _message("Hello there"), live.agent).json()["result"]
    for length in (2**31, -1):
        got = _rpc(live, "tasks/get", {"id": task["id"], "historyLength": length}, live.agent)
        error = got.json()["error"]
        assert error["code"] == -32602 and "historyLength" in error["message"], (length, error)
    sent = _message("Hello once more", taskId=task["id"])
    sent["configuration"] = {"historyLength": 2**31}
    error = _rpc(live, "message/send", sent, live.agent).json()["error"]
    assert error["code"] == -32602 and "configuration.historyLength" in error["message"], error


def test_two_servers_on_one_task_cannot_unfinish_it(tmp_path: Path) -> None:
    """Two servers on one store: one completes a task while the other, behind, saves it as
    still working, then cancels it. The task stays completed, as the first server left it."""
    one, two = (
        MemoryTaskStore(
            Memory(SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML))
        )
        for _ in range(2)
    )
    context = ServerCallContext(state={PRINCIPAL_STATE: CURATOR})

    def task(state: TaskState.ValueType) -> Task:
        made = Task(id="t-race", context_id="c-race")
        made.status.state = state
        return made

    asyncio.run(one.save(task(TaskState.TASK_STATE_WORKING), context))
    asyncio.run(one.save(task(TaskState.TASK_STATE_COMPLETED), context))
    asyncio.run(two.save(task(TaskState.TASK_STATE_WORKING), context))
    asyncio.run(two.save(task(TaskState.TASK_STATE_CANCELED), context))
    for server in (one, two):
        kept = asyncio.run(server.get("t-race", context))
        assert kept is not None and kept.status.state == TaskState.TASK_STATE_COMPLETED
        server.memory.close()
