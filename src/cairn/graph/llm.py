"""Answers of graph queries from an OpenAI-compatible ``POST {base}/chat/completions``.

Optional: without an endpoint, or when it fails, times out or answers with nothing, a query
gets the templated answer and its meta says so (``fallback_used``, ``fallback_reason``).
The prompt is built by the caller from the included, masked items only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn.openai_compat import AnswerTooLarge, ChatEndpoint, CompressedAnswer

__all__ = ["ChatAnswerer", "Completion", "LlmUnavailable"]


class LlmUnavailable(Exception):
    """The endpoint gave no usable answer; ``reason`` says why, for the meta."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    raw: dict[str, Any]


class ChatAnswerer(ChatEndpoint):
    @classmethod
    def from_spec(
        cls, spec: str, *, timeout: float, api_key: str | None = None
    ) -> ChatAnswerer | None:
        """``off`` gives none; ``openai:URL#model`` an answerer for that endpoint."""
        if spec == "off":
            return None
        if not spec.startswith("openai:"):
            raise ValueError("graph.llm is 'off' or 'openai:URL#model'")
        url, model = cls.parse_address(spec.removeprefix("openai:"))
        return cls(base_url=url, model=model, timeout=timeout, api_key=api_key)

    def complete(self, messages: list[dict[str, str]], *, max_tokens: int) -> Completion:
        import httpx  # loaded with the client (openai_compat.endpoint_client), not at import

        try:
            raw, text = self.chat(messages, max_tokens=max_tokens)
        except httpx.TimeoutException:
            raise LlmUnavailable("llm:timeout") from None
        except httpx.HTTPStatusError as exc:
            raise LlmUnavailable(f"llm:http_{exc.response.status_code}") from None
        except httpx.HTTPError:
            raise LlmUnavailable("llm:unreachable") from None
        except AnswerTooLarge:
            raise LlmUnavailable("llm:answer_too_large") from None
        except CompressedAnswer:
            raise LlmUnavailable("llm:compressed_answer") from None
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmUnavailable("llm:malformed_answer") from None
        if not isinstance(text, str) or not text.strip():
            raise LlmUnavailable("llm:empty_answer")
        usage = raw.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        return Completion(
            text=text.strip(),
            model=str(raw.get("model") or self.model),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            raw=raw,
        )
