"""An embedder backed by any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

Works with OpenAI itself and with local servers that copy its API (llama.cpp, Ollama, vLLM,
LM Studio, text-embeddings-inference). Vectors are re-normalised here because not every
server returns unit vectors.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from cairn.openai_compat import RefusedAnswer, endpoint_client, post_bounded
from cairn.search.embedder import EmbeddingEndpointError, Vectors, first_row, l2_normalise

DEFAULT_MODEL = "text-embedding-3-small"


class OpenAIEmbedder:
    """``base_url`` is the API root including the version, e.g. ``http://127.0.0.1:8080/v1``.

    ``dim`` is discovered from the first answer when not given; reading it before any call
    sends one short probe request.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.model = model or DEFAULT_MODEL
        self.batch_size = batch_size
        self._dim = dim
        self._client = endpoint_client(
            self.base_url, api_key=api_key, timeout=timeout, transport=transport
        )
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        # The same model name on two servers may be two different models: key on both.
        return f"openai:{self.model}@{self.base_url}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [
            self._request(list(texts[start : start + self.batch_size]))
            for start in range(0, len(texts), self.batch_size)
        ]
        return l2_normalise(np.concatenate(batches, axis=0))

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed([text]))

    def close(self) -> None:
        self._client.close()

    def _request(self, texts: list[str]) -> Vectors:
        url = f"{self.base_url}/embeddings"
        try:
            response = post_bounded(
                self._client, "/embeddings", {"model": self.model, "input": texts}
            )
        except RefusedAnswer as exc:
            raise EmbeddingEndpointError(f"embedding endpoint {url}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise EmbeddingEndpointError(f"embedding endpoint {url} timed out: {exc}") from exc
        except httpx.HTTPError as exc:
            raise EmbeddingEndpointError(f"embedding endpoint {url} unreachable: {exc}") from exc
        if response.is_error:
            raise EmbeddingEndpointError(
                f"embedding endpoint {url} answered HTTP {response.status_code}: "
                f"{_error_detail(response)}",
                status=response.status_code,
            )
        return self._parse(response, url, len(texts))

    def _parse(self, response: httpx.Response, url: str, expected: int) -> Vectors:
        try:
            items = response.json()["data"]
            # The spec says results come back in input order, but each carries its index.
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            vectors = np.array([item["embedding"] for item in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingEndpointError(
                f"embedding endpoint {url} answered something that is not an embeddings "
                f"response: {exc!r}"
            ) from exc
        if vectors.ndim != 2 or vectors.shape[0] != expected:
            raise EmbeddingEndpointError(
                f"embedding endpoint {url} returned {vectors.shape[0]} vectors for {expected} texts"
            )
        self._check_dim(vectors.shape[1], url)
        return vectors

    def _check_dim(self, width: int, url: str) -> None:
        with self._lock:
            if self._dim is None:
                self._dim = width
            elif self._dim != width:
                raise EmbeddingEndpointError(
                    f"embedding endpoint {url} returned {width}-d vectors, expected {self._dim}"
                )


def _error_detail(response: httpx.Response) -> str:
    """The server's own message when it gives one (OpenAI: ``{"error": {"message": ...}}``)."""
    try:
        body: Any = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(body)[:300]


__all__ = ["DEFAULT_MODEL", "OpenAIEmbedder"]
