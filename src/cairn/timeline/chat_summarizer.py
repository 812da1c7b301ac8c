"""Segment summaries from an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

Optional and never required: whenever the endpoint fails, times out or answers with
something that does not hold together (a bullet citing no event, or one outside the
segment), the segment gets the extractive summary and says so (``summarizer`` names
``extractive`` with the reason). Grips are always made here from the events a bullet
cites, never taken from the model, so every grip points at real events and quotes their
own text. Rollups above segments keep their children's bullets (as the extractive
summarizer does), so no model output reaches a grip.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Unpack

import httpx

from cairn.model import Bullet, Event, Grip, TocNode
from cairn.openai_compat import ChatEndpoint, ChatEndpointOptions
from cairn.timeline.summarize import (
    MAX_BULLETS,
    MAX_EXCERPT_CHARS,
    MAX_KEYWORDS,
    MAX_TITLE_CHARS,
    ExtractiveSummarizer,
    Summary,
    clip,
    grip_for,
    sentences,
)

__all__ = ["ChatSummarizer"]

# The most of a segment sent to the endpoint: events past it are summarised extractively.
MAX_PROMPT_EVENTS = 200
MAX_EVENT_CHARS = 1000

_INSTRUCTIONS = (
    "Summarise this part of a conversation between a user, an assistant and tools. "
    'Answer with JSON only: {"title": short title, "bullets": [{"text": one line, '
    '"events": [numbers of the events it comes from]}], "keywords": [words]}. '
    "Give 3 to 7 bullets; every bullet cites at least one event number."
)


class ChatSummarizer(ChatEndpoint):
    """``base`` is ``URL#model``; the key, if any, comes from ``CAIRN_SUMMARIZER_KEY``."""

    def __init__(self, **endpoint: Unpack[ChatEndpointOptions]) -> None:
        super().__init__(**endpoint)
        self.name = f"openai:{self.model}"
        self._fallback = ExtractiveSummarizer()

    @classmethod
    def from_spec(cls, spec: str, *, timeout: float) -> ChatSummarizer:
        url, _, model = spec.partition("#")
        return cls(
            base_url=url,
            model=model or "gpt-4o-mini",
            timeout=timeout,
            api_key=os.environ.get("CAIRN_SUMMARIZER_KEY"),
        )

    def summarize_children(self, label: str, children: Sequence[TocNode]) -> Summary:
        return self._fallback.summarize_children(label, children)

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event]) -> Summary:
        shown = list(events[:MAX_PROMPT_EVENTS])
        try:
            answer = self._ask(shown)
            return self._summary(answer, shown)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            fallback = self._fallback.summarize_events(events, context)
            reason = type(exc).__name__
            return Summary(
                fallback.title,
                fallback.bullets,
                fallback.keywords,
                fallback.grips,
                f"extractive (endpoint failed: {reason})",
            )

    def _ask(self, events: Sequence[Event]) -> dict[str, Any]:
        lines = [
            f"[{i}] {e.role.value} ({e.kind}): {e.text[:MAX_EVENT_CHARS]}"
            for i, e in enumerate(events, 1)
        ]
        response = self._client.post(
            "/chat/completions",
            json={
                "model": self.model,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": _INSTRUCTIONS},
                    {"role": "user", "content": "\n".join(lines)},
                ],
            },
        )
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
        parsed = json.loads(_strip_fence(str(content)))
        if not isinstance(parsed, dict):
            raise ValueError("the answer is not a JSON object")
        return parsed

    def _summary(self, answer: dict[str, Any], events: Sequence[Event]) -> Summary:
        raw_bullets = answer["bullets"]
        if not isinstance(raw_bullets, list) or not raw_bullets:
            raise ValueError("no bullets")
        bullets: list[Bullet] = []
        grips: list[Grip] = []
        for raw in raw_bullets[:MAX_BULLETS]:
            cited = sorted({int(n) for n in raw["events"]})
            if not cited or cited[0] < 1 or cited[-1] > len(events):
                raise ValueError("a bullet cites no event of the segment")
            first, last = events[cited[0] - 1], events[cited[-1] - 1]
            holder = next((events[n - 1] for n in cited if events[n - 1].text.strip()), first)
            spoken = sentences(holder.text)
            excerpt = clip(spoken[0], MAX_EXCERPT_CHARS) if spoken else ""
            grip = grip_for(excerpt, first.event_id, last.event_id, holder)
            text = clip(" ".join(str(raw["text"]).split()), MAX_EXCERPT_CHARS)
            if not text:
                raise ValueError("an empty bullet")
            bullets.append(Bullet(text=text, grip_ids=(grip.grip_id,)))
            grips.append(grip)
        title = clip(" ".join(str(answer.get("title") or bullets[0].text).split()), MAX_TITLE_CHARS)
        keywords = tuple(
            str(k).casefold() for k in answer.get("keywords", [])[:MAX_KEYWORDS] if str(k).strip()
        )
        return Summary(title, tuple(bullets), keywords, tuple(dict.fromkeys(grips)), self.name)


def _strip_fence(text: str) -> str:
    """Models often wrap JSON in a Markdown code fence."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
