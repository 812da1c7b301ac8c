"""The optional endpoint summarizer: the model writes bullets and says which events each
comes from; grips are made from those events (quoting their own text); anything that fails or
does not hold together falls back to the extractive summary and says so."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx

from cairn.model import Acl, Event, EventRole
from cairn.timeline.chat_summarizer import ChatSummarizer
from cairn.timeline.summarize import ExtractiveSummarizer
from tests.timeline.events import T0

TEXTS = (
    "Why does the nightly deploy fail on Fridays?",
    "The deploy cron overlaps the weekly backup window.",
    "Move the backup to Saturday night then.",
    "Done, the backup job now runs on Saturdays.",
)


def _events() -> list[Event]:
    return [
        Event(
            event_id=f"e{i}",
            ts=T0 + timedelta(minutes=i),
            session_id="s1",
            scope="acme/app",
            role=EventRole.USER if i % 2 == 0 else EventRole.ASSISTANT,
            kind="user_message" if i % 2 == 0 else "assistant_message",
            text=text,
            acl=Acl(),
            appended_at=T0,
            appended_by="bot",
        )
        for i, text in enumerate(TEXTS)
    ]


def _endpoint(answer: Any, status: int = 200) -> tuple[httpx.MockTransport, list[dict[str, Any]]]:
    asked: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(json.loads(request.content))
        assert request.url.path == "/v1/chat/completions"
        content = answer if isinstance(answer, str) else json.dumps(answer)
        return httpx.Response(status, json={"choices": [{"message": {"content": content}}]})

    return httpx.MockTransport(handle), asked


def _summarizer(transport: httpx.MockTransport) -> ChatSummarizer:
    return ChatSummarizer(
        base_url="http://model.local/v1", model="tiny", timeout=5, transport=transport
    )


def test_bullets_come_from_the_model_and_grips_from_the_events_it_cites() -> None:
    answer = {
        "title": "Friday deploys",
        "bullets": [
            {"text": "The deploy fails because it overlaps the backup.", "events": [1, 2]},
            {"text": "The backup moved to Saturday.", "events": [3, 4]},
        ],
        "keywords": ["Deploy", "backup"],
    }
    transport, asked = _endpoint("```json\n" + json.dumps(answer) + "\n```")
    summary = _summarizer(transport).summarize_events(_events(), ())
    assert summary.summarizer == "openai:tiny"
    assert summary.title == "Friday deploys"
    assert [b.text for b in summary.bullets] == [
        "The deploy fails because it overlaps the backup.",
        "The backup moved to Saturday.",
    ]
    first, second = summary.grips
    assert (first.event_id_start, first.event_id_end) == ("e0", "e1")
    assert (second.event_id_start, second.event_id_end) == ("e2", "e3")
    # a grip quotes its event's own text, never the model's words
    assert first.excerpt in TEXTS[int(first.event_id[1:])]
    assert summary.keywords == ("deploy", "backup")
    assert asked[0]["model"] == "tiny" and "[1] user" in asked[0]["messages"][1]["content"]


def test_an_answer_that_does_not_hold_together_falls_back() -> None:
    extractive = ExtractiveSummarizer().summarize_events(_events(), ())
    for answer in (
        {"title": "x", "bullets": [{"text": "made up", "events": [9]}]},  # no such event
        {"title": "x", "bullets": []},
        "not json at all",
        {"title": "x", "bullets": [{"text": "   ", "events": [1]}]},
    ):
        transport, _ = _endpoint(answer)
        summary = _summarizer(transport).summarize_events(_events(), ())
        assert summary.summarizer.startswith("extractive (endpoint failed")
        assert (summary.bullets, summary.grips) == (extractive.bullets, extractive.grips)


def test_a_failing_endpoint_falls_back() -> None:
    transport, _ = _endpoint({"error": "overloaded"}, status=503)
    summary = _summarizer(transport).summarize_events(_events(), ())
    assert summary.summarizer == "extractive (endpoint failed: HTTPStatusError)"

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    summary = _summarizer(httpx.MockTransport(refuse)).summarize_events(_events(), ())
    assert summary.summarizer == "extractive (endpoint failed: ConnectTimeout)"
    assert summary.bullets
