"""Answers from the optional OpenAI-compatible endpoints (embeddings, reranking, timeline
summaries, graph answers) are read within their timeout in all and up to a size: an
endpoint that trickles its answer, or sends gigabytes (or a small gzip that unpacks to
them), costs a search its timeout and a fallback, never a thread or the memory."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from cairn.openai_compat import (
    MAX_ANSWER_BYTES,
    AnswerTooLarge,
    CompressedAnswer,
    endpoint_client,
    post_bounded,
)
from cairn.search.embedder import EmbeddingEndpointError
from cairn.search.openai_embed import OpenAIEmbedder
from cairn.timeline.chat_summarizer import ChatSummarizer
from tests.loopback import PROXY_VARIABLES, TRICKLE_SECONDS, serving, trickling

TIMEOUT = 0.3


@pytest.fixture(params=["body", "headers", "interim"])
def trickler(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An endpoint whose answer trickles in: its body, header lines without end, or interim
    ``102 Processing`` answers without end."""
    for name in PROXY_VARIABLES:  # a proxy would stand between the client and the socket
        monkeypatch.delenv(name, raising=False)
    with trickling(request.param) as url:
        yield url


class _Counted:
    """A streamed body of ``total`` bytes in 1 MiB pieces, counting how many were taken."""

    def __init__(self, total: int, piece: bytes = b" " * (1 << 20)) -> None:
        self.total, self.piece, self.taken = total, piece, 0

    def __iter__(self) -> Iterator[bytes]:
        while self.taken * len(self.piece) < self.total:
            self.taken += 1
            yield self.piece


def _answering(response: httpx.Response) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: response)


def _ends_at_the_timeout(url: str) -> None:
    """A call to the trickling endpoint at ``url`` ends in a timeout, long before the
    endpoint would stop (each wait is cut to the time left, so at about the timeout)."""
    client = endpoint_client(url, api_key=None, timeout=TIMEOUT)
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        post_bounded(client, "/rerank", {"query": "q"})
    assert time.monotonic() - started < TRICKLE_SECONDS / 2
    client.close()


def test_an_answer_that_trickles_in_ends_at_the_timeout(trickler: str) -> None:
    _ends_at_the_timeout(trickler)


def test_a_large_answer_is_refused_before_it_is_read_whole() -> None:
    body = _Counted(4 * MAX_ANSWER_BYTES)
    client = endpoint_client(
        "http://endpoint.test/v1", api_key=None, timeout=5,
        transport=_answering(httpx.Response(200, content=body)),
    )  # fmt: skip
    with pytest.raises(AnswerTooLarge, match="over 33,554,432 bytes"):
        post_bounded(client, "/embeddings", {})
    assert body.taken == MAX_ANSWER_BYTES // len(body.piece) + 1  # read no further


@pytest.mark.parametrize("encoding", ["gzip", "gzip, gzip", "deflate", "br"])
def test_a_compressed_answer_is_refused_not_unpacked(encoding: str) -> None:
    """Answers are asked for uncompressed: a small gzip can unpack to gigabytes (in layers,
    each unpacked whole before any bound is checked), so one sent anyway is not read."""
    asked: list[httpx.Request] = []
    bomb = gzip.compress(gzip.compress(b" " * (MAX_ANSWER_BYTES + 1), compresslevel=1))
    assert len(bomb) < MAX_ANSWER_BYTES // 100

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        # streamed, as from a socket: httpx would unpack an answer made whole in memory
        return httpx.Response(200, headers={"Content-Encoding": encoding}, content=iter([bomb]))

    client = endpoint_client(
        "http://endpoint.test/v1", api_key=None, timeout=5, transport=httpx.MockTransport(answer)
    )
    with pytest.raises(CompressedAnswer, match="compressed"):
        post_bounded(client, "/embeddings", {})
    assert asked[0].headers["Accept-Encoding"] == "identity"


def test_a_bounded_answer_reads_like_any_other() -> None:
    client = endpoint_client(
        "http://endpoint.test/v1", api_key=None, timeout=5,
        transport=_answering(
            httpx.Response(
                503,
                headers={"Content-Type": "application/json; charset=utf-8", "X-Kept": "yes"},
                content='{"ok": "café"}'.encode(),
            )
        ),
    )  # fmt: skip
    answer = post_bounded(client, "/embeddings", {})
    assert answer.json() == {"ok": "café"} and answer.headers["X-Kept"] == "yes"
    with pytest.raises(httpx.HTTPStatusError):
        answer.raise_for_status()


# ---- each endpoint through it ----------------------------------------------------------------


def test_an_embedding_endpoint_that_trickles_or_floods_is_an_endpoint_error(
    trickler: str,
) -> None:
    slow = OpenAIEmbedder(base_url=trickler, model="tiny", dim=3, timeout=TIMEOUT)
    with pytest.raises(EmbeddingEndpointError, match="timed out"):
        slow.embed_query("a question")
    flooding = OpenAIEmbedder(
        base_url="http://embedder.test/v1", model="tiny", dim=3,
        transport=_answering(httpx.Response(200, content=_Counted(2 * MAX_ANSWER_BYTES))),
    )  # fmt: skip
    with pytest.raises(EmbeddingEndpointError, match="over 33,554,432 bytes"):
        flooding.embed(["a"])


def test_a_summarizer_that_trickles_falls_back_to_the_extractive_summary(
    trickler: str,
) -> None:
    from tests.timeline.test_chat_summarizer import _events

    summarizer = ChatSummarizer(base_url=trickler, model="tiny", timeout=TIMEOUT)
    started = time.monotonic()
    summary = summarizer.summarize_events(_events(), [])
    assert time.monotonic() - started < TRICKLE_SECONDS / 2
    assert summary.summarizer == "extractive (endpoint failed: ReadTimeout)"


def _recording(asked: list[tuple[str, str]]) -> type[BaseHTTPRequestHandler]:
    """A server (a forward proxy, or the endpoint itself) that answers every request with
    an empty ranking, noting the path it was asked for (a proxy is asked for the whole URL)
    and the key that came with it."""

    class Recording(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            asked.append((self.path, self.headers.get("Authorization", "")))
            body = b'{"results": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Recording


def test_a_proxy_named_in_the_environment_is_still_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a proxy in the environment the endpoint is asked through it (the whole URL, as
    a proxy is asked), also when the variable names it without a scheme."""
    for spelled in ("with-scheme", "host-and-port"):
        at_proxy: list[tuple[str, str]] = []
        with serving(_recording(at_proxy)) as proxy:
            for name in PROXY_VARIABLES:
                monkeypatch.delenv(name, raising=False)
            named = proxy if spelled == "with-scheme" else proxy.removeprefix("http://")
            monkeypatch.setenv("HTTP_PROXY", named)
            monkeypatch.setenv("NO_PROXY", "")
            client = endpoint_client("http://reranker.test/v1", api_key=None, timeout=5)
            answer = post_bounded(client, "/rerank", {"query": "q"})
            client.close()
        assert answer.json() == {"results": []}, spelled
        assert at_proxy == [("http://reranker.test/v1/rerank", "")], spelled


@pytest.mark.parametrize(
    "exempt", ["{host}:{port}", "http://{host}:{port}", "{host}", "localhost,{host}"]
)
def test_an_endpoint_no_proxy_exempts_is_asked_directly_and_its_key_never_reaches_the_proxy(
    monkeypatch: pytest.MonkeyPatch, exempt: str
) -> None:
    """``NO_PROXY`` is read as httpx reads it (by host, host and port, scheme, address):
    an exempted endpoint is asked directly, with its key, and the proxy hears nothing."""
    at_proxy: list[tuple[str, str]] = []
    at_endpoint: list[tuple[str, str]] = []
    with serving(_recording(at_proxy)) as proxy, serving(_recording(at_endpoint)) as endpoint:
        for name in PROXY_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        host, port = endpoint.removeprefix("http://").split(":")
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", exempt.format(host=host, port=port))
        client = endpoint_client(f"{endpoint}/v1", api_key="sk-secret", timeout=5)
        post_bounded(client, "/rerank", {"query": "q"})
        client.close()
    assert at_endpoint == [("/v1/rerank", "Bearer sk-secret")]
    assert at_proxy == []


@pytest.mark.parametrize(
    "settings",
    [
        {"ALL_PROXY": "socks5://127.0.0.1:1080", "NO_PROXY": "{host}"},
        {"HTTPS_PROXY": "socks4://proxy.invalid:1080"},
        {"HTTPS_PROXY": "http://proxy.invalid:notaport", "NO_PROXY": "internal"},
    ],
    ids=["socks-for-the-rest", "unknown-scheme-for-https", "bad-port-for-https"],
)
def test_a_proxy_this_endpoint_does_not_go_through_never_stops_it(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str]
) -> None:
    """Only the proxy settings an endpoint's own address falls under are read: a SOCKS
    proxy for everything else (this machine has no SOCKS support installed), or a proxy
    for https an http endpoint never takes, leaves a local model server reachable."""
    asked: list[tuple[str, str]] = []
    with serving(_recording(asked)) as endpoint:
        for name in PROXY_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        host = endpoint.removeprefix("http://").split(":")[0]
        for name, value in settings.items():
            monkeypatch.setenv(name, value.format(host=host))
        client = endpoint_client(f"{endpoint}/v1", api_key=None, timeout=5)
        post_bounded(client, "/rerank", {"query": "q"})
        client.close()
    assert asked == [("/v1/rerank", "")]


def test_an_answer_that_trickles_in_through_a_proxy_ends_at_the_timeout(
    trickler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that passes the answer on a little at a time (or is itself that slow): the
    exchange through it keeps the call's deadline, as a direct one does."""
    monkeypatch.setenv("HTTP_PROXY", trickler)
    monkeypatch.setenv("NO_PROXY", "")
    _ends_at_the_timeout("http://reranker.test/v1")


def test_an_endpoint_the_proxy_settings_exempt_keeps_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A company proxy in the environment and ``NO_PROXY`` for a local model server: httpx
    goes to the server directly, and the whole exchange keeps its deadline."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with trickling("headers") as url:
        _ends_at_the_timeout(url)
