"""Reranking through an endpoint: an optional stage after fusion that asks a reranking
model served over HTTP to reorder the best hits (``POST {base_url}/rerank`` with
``{"model", "query", "documents", "top_n"}``, answered by ``{"results": [{"index",
"relevance_score"}]}``: the form vLLM, llama.cpp's server, Infinity and Jina serve).

Never required, never a cut: it is off unless ``[retrieval] reranker`` names an endpoint;
the hits it is sent are the ones the reader may already see; and when it fails, answers
late or answers in another shape, the search keeps fusion's order and says why in its
trace. Hits the endpoint did not score keep their fused order after the ones it did.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from cairn.openai_compat import EndpointOptions, ModelEndpoint, post_bounded
from cairn.retrieval.types import Hit

__all__ = ["EndpointReranker", "Reranked", "parse_reranker"]


def parse_reranker(spec: str) -> tuple[str, str] | None:
    """``off`` (None) or ``openai:URL#model`` as (URL, model); anything else is a
    ``ValueError`` naming what is expected."""
    if spec == "off":
        return None
    url, model = ModelEndpoint.split_address(spec.removeprefix("openai:"))
    if not spec.startswith("openai:") or not url.startswith(("http://", "https://")) or not model:
        raise ValueError(f"reranker must be off or openai:URL#model, not {spec!r}")
    return url, model


@dataclass(frozen=True)
class Reranked:
    """The hits in their new order, and what the trace says of the stage."""

    hits: list[Hit]
    note: str  # "openai:MODEL", or "fallback: <why>"
    ms: float


class EndpointReranker(ModelEndpoint):
    def __init__(self, *, top: int, **endpoint: Unpack[EndpointOptions]) -> None:
        """``top``: how many of the best hits are sent to be reordered."""
        super().__init__(**endpoint)
        self.top = top

    @classmethod
    def from_spec(
        cls, spec: str, *, timeout: float, top: int, api_key: str | None = None
    ) -> EndpointReranker | None:
        """The endpoint ``spec`` names (``parse_reranker``), or None for ``off``."""
        parsed = parse_reranker(spec)
        if parsed is None:
            return None
        url, model = parsed
        return cls(base_url=url, model=model, timeout=timeout, top=top, api_key=api_key)

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> Reranked:
        """The best ``k`` of ``hits`` (fusion's order) as the endpoint orders its first
        ``top``; fusion's order, cut to ``k``, when it cannot."""
        import httpx  # loaded with the client (openai_compat.endpoint_client), not at import

        started = time.perf_counter()
        head = list(hits[: self.top])
        try:
            scores = self._scores(query, head)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError) as exc:
            reason = "timeout" if isinstance(exc, httpx.TimeoutException) else type(exc).__name__
            return Reranked(list(hits[:k]), f"fallback: {reason}", _ms(started))
        order = sorted(
            range(len(head)),
            key=lambda i: (scores.get(i) is None, -(scores.get(i) or 0.0), i),
        )
        ranked = [head[i] for i in order] + list(hits[self.top :])
        return Reranked(ranked[:k], self.name, _ms(started))

    def _scores(self, query: str, head: Sequence[Hit]) -> dict[int, float]:
        body = {
            "model": self.model,
            "query": query,
            "documents": [hit.text for hit in head],
            "top_n": len(head),
        }
        response = post_bounded(self._client, "/rerank", body)
        response.raise_for_status()
        results: Any = response.json()["results"]
        scores: dict[int, float] = {}
        for result in results:
            index, score = int(result["index"]), float(result["relevance_score"])
            if not 0 <= index < len(head) or not math.isfinite(score):
                raise ValueError(f"a result out of bounds: {result!r}")
            scores[index] = score
        return scores


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
