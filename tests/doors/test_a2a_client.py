"""The A2A door driven by the ``a2a-sdk`` client itself, in A2A 0.3 and 1.0.

The SDK picks its transport from the card: the 1.0 JSON-RPC transport (``SendMessage``…,
header ``A2A-Version: 1.0``) or the 0.3 compatibility transport (``message/send``,
``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``). Each test runs
once per version against the live server, with the agent's bearer key.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from tests.doors.conftest import Live

pytestmark = pytest.mark.anyio

VERSIONS = ("0.3", "1.0")
TIMEOUT = 30.0  # every network wait is bounded
FINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Session:
    """One SDK client bound to one protocol version, recording the headers it sent."""

    def __init__(self, client: Client, sent: list[httpx.Request]) -> None:
        self.client = client
        self.sent = sent

    async def send(self, text: str, task_id: str = "", data: dict[str, Any] | None = None) -> Task:
        events = [e async for e in self.stream(text, task_id=task_id, data=data)]
        last = events[-1]
        if last.HasField("task"):  # a blocking send answers with the task itself
            return last.task
        # a stream ends with the final status update: read the whole task back
        assert last.HasField("status_update") and last.status_update.status.state in FINAL, last
        return await self.client.get_task(GetTaskRequest(id=last.status_update.task_id))

    def stream(
        self, text: str, task_id: str = "", data: dict[str, Any] | None = None
    ) -> AsyncIterator[StreamResponse]:
        parts = [new_text_part(text)]
        if data is not None:
            parts.append(new_data_part(data))
        message = Message(
            message_id=f"m-{uuid.uuid4()}", role=Role.ROLE_USER, parts=parts, task_id=task_id
        )
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=False)
        )
        return self.client.send_message(request)


def _only(card: AgentCard, version: str) -> AgentCard:
    """The card as a client that speaks only ``version`` would use it."""
    chosen = AgentCard()
    chosen.CopyFrom(card)
    del chosen.supported_interfaces[:]
    chosen.supported_interfaces.extend(
        i for i in card.supported_interfaces if i.protocol_version == version
    )
    return chosen


@asynccontextmanager
async def session(live: Live, version: str, *, streaming: bool) -> AsyncIterator[Session]:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(
        headers=live.headers(live.agent), timeout=TIMEOUT, event_hooks={"request": [record]}
    ) as http:
        card = await A2ACardResolver(http, live.url).get_agent_card()
        factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
        client = factory.create(_only(card, version))
        try:
            yield Session(client, sent)
        finally:
            await client.close()


def _check_version(sent: list[httpx.Request], version: str) -> None:
    rpc = [r for r in sent if r.method == "POST"]
    assert rpc
    for request in rpc:
        assert request.headers.get("a2a-version") == version, dict(request.headers)


@pytest.mark.parametrize("version", VERSIONS)
async def test_send_then_get_with_history_length(live: Live, version: str) -> None:
    async with session(live, version, streaming=False) as s:
        fact = f"we release on Tuesdays ({version})"
        done = await asyncio.wait_for(
            s.send("remember", data={"skill": "remember", "content": fact}), TIMEOUT
        )
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
        artifact = MessageToDict(done.artifacts[0].parts[0].data)
        assert artifact["status"] == "approved" and artifact["id"].startswith("rec_")

        # Continue an input-required task by id: its history grows, historyLength trims it.
        first = await asyncio.wait_for(s.send("hello"), TIMEOUT)
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        await asyncio.wait_for(s.send("still unclear", task_id=first.id), TIMEOUT)
        full = await s.client.get_task(GetTaskRequest(id=first.id))
        short = await s.client.get_task(GetTaskRequest(id=first.id, history_length=1))
        assert len(full.history) >= 3
        assert len(short.history) == 1
        assert short.history[0].message_id == full.history[-1].message_id
        _check_version(s.sent, version)


@pytest.mark.parametrize("version", VERSIONS)
async def test_stream_recall_cites_the_record(live: Live, version: str) -> None:
    async with session(live, version, streaming=True) as s:
        fact = f"the zebra pipeline deploys nightly ({version})"
        stored = await asyncio.wait_for(
            s.send("remember", data={"skill": "remember", "content": fact}), TIMEOUT
        )
        record_id = MessageToDict(stored.artifacts[0].parts[0].data)["id"]

        states: list[int] = []
        results: list[dict[str, Any]] = []

        async def consume() -> None:
            async for event in s.stream(f"recall: zebra pipeline nightly {version}"):
                if event.HasField("status_update"):
                    states.append(event.status_update.status.state)
                if event.HasField("artifact_update"):
                    results.append(MessageToDict(event.artifact_update.artifact.parts[0].data))

        await asyncio.wait_for(consume(), TIMEOUT)
        assert TaskState.TASK_STATE_WORKING in states
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
        items = results[0]["items"]
        assert items[0]["record_id"] == record_id
        citation = items[0]["citations"][0]
        assert citation["record_id"] == record_id and citation["version_id"]
        _check_version(s.sent, version)


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancel(live: Live, version: str) -> None:
    async with session(live, version, streaming=False) as s:
        waiting = await asyncio.wait_for(s.send("which skill is this?"), TIMEOUT)
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await s.client.cancel_task(CancelTaskRequest(id=waiting.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        again = await s.client.get_task(GetTaskRequest(id=waiting.id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED
        _check_version(s.sent, version)


@pytest.mark.parametrize("version", VERSIONS)
async def test_resubscribe_follows_a_task_to_completion(live: Live, version: str) -> None:
    async with (
        session(live, version, streaming=True) as watcher,
        session(live, version, streaming=False) as sender,
    ):
        waiting = await asyncio.wait_for(sender.send("not sure yet"), TIMEOUT)
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        seen: list[StreamResponse] = []
        subscribed = asyncio.Event()

        async def watch() -> None:
            async for event in watcher.client.subscribe(SubscribeToTaskRequest(id=waiting.id)):
                seen.append(event)
                subscribed.set()
                update = event.status_update if event.HasField("status_update") else None
                if update is not None and update.status.state == TaskState.TASK_STATE_COMPLETED:
                    return

        watching = asyncio.create_task(watch())
        # The subscription's first event is the task itself: only then continue the task.
        await asyncio.wait_for(subscribed.wait(), TIMEOUT)
        assert seen[0].HasField("task") and seen[0].task.id == waiting.id
        follow = await asyncio.wait_for(
            sender.send("recall: release schedule", task_id=waiting.id), TIMEOUT
        )
        assert follow.status.state == TaskState.TASK_STATE_COMPLETED
        await asyncio.wait_for(watching, TIMEOUT)
        states = [e.status_update.status.state for e in seen if e.HasField("status_update")]
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
        _check_version(watcher.sent, version)
