"""The optional reranking endpoint, and the ``[retrieval]`` settings that choose how search
ranks: the endpoint reorders only what the reader may see, never cuts, and a search keeps
fusion's order when it fails."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from cairn.config import Settings
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, Principal, PrincipalKind, Sensitivity
from cairn.openai_compat import MAX_ANSWER_BYTES
from cairn.retrieval.endpoint_rerank import EndpointReranker
from cairn.retrieval.ranking import RankingConfig
from cairn.retrieval.settings import RetrievalSettings
from cairn.retrieval.weights import DEFAULT_WEIGHTS, STATIC_EMBEDDER_WEIGHTS, Fusion
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR
from tests.loopback import PROXY_VARIABLES, TRICKLE_SECONDS, trickling

READER = Principal(
    id="reader", kind=PrincipalKind.HUMAN, roles=("staff",), scopes=("acme/*",),
    sensitivity=Sensitivity.LOW,
)  # fmt: skip
TITLES = ("Deploy runbook one", "Deploy runbook two", "Deploy runbook three")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    memory = Memory(
        SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML),
        root=tmp_path, embedder=None,
    )  # fmt: skip
    for title in TITLES:
        memory.remember(
            Content(kind="fact", scope="acme/ops", title=title, body="deploy steps"),
            principal=CURATOR,
        )
    memory.remember(
        Content(
            kind="fact",
            scope="acme/ops",
            title="Deploy runbook secret",
            body="deploy steps",
            acl=Acl(sensitivity=Sensitivity.HIGH),
        ),
        principal=CURATOR,
    )
    yield memory
    memory.close()


def endpoint(
    answer: Callable[[dict[str, object]], httpx.Response], sent: list[dict[str, object]]
) -> EndpointReranker:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/rerank"
        body = json.loads(request.content)
        sent.append(body)
        return answer(body)

    return EndpointReranker(
        base_url="http://reranker.test/v1", model="rr-1", timeout=2, top=30,
        transport=httpx.MockTransport(handler),
    )  # fmt: skip


def by_reverse(body: dict[str, object]) -> httpx.Response:
    documents = body["documents"]
    assert isinstance(documents, list)
    results = [{"index": i, "relevance_score": float(i)} for i in range(len(documents))]
    return httpx.Response(200, json={"results": results})


def titles(memory: Memory, k: int = 10) -> list[str]:
    found = memory.search("deploy runbook", principal=READER, mode="keyword", k=k)
    return [hit.title for hit in found.hits]


def test_the_endpoint_orders_the_hits_and_is_sent_only_what_the_reader_may_see(
    memory: Memory,
) -> None:
    plain = titles(memory)
    sent: list[dict[str, object]] = []
    memory._reranker = endpoint(by_reverse, sent)
    found = memory.search("deploy runbook", principal=READER, mode="keyword")
    assert [h.title for h in found.hits] == list(reversed(plain))
    assert found.trace.reranker == "openai:rr-1" and "rerank" in found.trace.timings_ms
    (body,) = sent
    assert body["model"] == "rr-1" and body["query"] == "deploy runbook"
    assert "secret" not in json.dumps(body)  # a hit the reader may not see is never sent
    assert len(plain) == 3


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (lambda body: httpx.Response(500, json={"error": "down"}), "fallback: HTTPStatusError"),
        (lambda body: httpx.Response(200, json={"results": [{"index": 7,
                                                             "relevance_score": 1}]}),
         "fallback: ValueError"),
        (lambda body: httpx.Response(200, json={"ranking": []}), "fallback: KeyError"),
        (lambda body: httpx.Response(200, text="not json"), "fallback: JSONDecodeError"),
    ],
)  # fmt: skip
def test_a_failing_endpoint_leaves_fusions_order_and_says_why(
    memory: Memory, answer: Callable[[dict[str, object]], httpx.Response], note: str
) -> None:
    plain = titles(memory)
    memory._reranker = endpoint(answer, [])
    found = memory.search("deploy runbook", principal=READER, mode="keyword")
    assert [h.title for h in found.hits] == plain
    assert found.trace.reranker == note


def _too_slow(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("no answer in time", request=request)


def _flood(request: httpx.Request) -> httpx.Response:
    """An answer twice as large as an endpoint's answer may be, streamed a MiB at a time."""
    return httpx.Response(
        200, content=(b" " * (1 << 20) for _ in range(2 * MAX_ANSWER_BYTES >> 20))
    )


@pytest.mark.parametrize(
    ("handler", "note"),
    [(_too_slow, "fallback: timeout"), (_flood, "fallback: AnswerTooLarge")],
)
def test_a_slow_or_flooding_endpoint_is_a_fallback_not_a_failed_search(
    memory: Memory, handler: Callable[[httpx.Request], httpx.Response], note: str
) -> None:
    plain = titles(memory)
    memory._reranker = EndpointReranker(
        base_url="http://reranker.test/v1", model="rr-1", timeout=5, top=30,
        transport=httpx.MockTransport(handler),
    )  # fmt: skip
    found = memory.search("deploy runbook", principal=READER, mode="keyword")
    assert [h.title for h in found.hits] == plain
    assert found.trace.reranker == note


def test_hits_the_endpoint_did_not_score_keep_their_order_after_those_it_did(
    memory: Memory,
) -> None:
    plain = titles(memory)
    memory._reranker = endpoint(
        lambda body: httpx.Response(200, json={"results": [{"index": 2, "relevance_score": 0.9}]}),
        [],
    )
    found = memory.search("deploy runbook", principal=READER, mode="keyword", k=3)
    assert [h.title for h in found.hits] == [plain[2], plain[0], plain[1]]  # nothing cut


def test_retrieval_settings_choose_the_ranking_and_check_the_reranker_address() -> None:
    settings = Settings(retrieval={"time_weight": 0.5, "context_weight": 0.25})
    assert settings.retrieval.ranking() == RankingConfig(time_weight=0.5, context_weight=0.25)
    assert RetrievalSettings().ranking() == RankingConfig()  # the defaults are the kernel's
    assert Settings(retrieval={"fusion": "rrf"}).retrieval.ranking() == RankingConfig(fusion="rrf")
    with pytest.raises(ValidationError, match="similarity"):
        RetrievalSettings(fusion="scores")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="openai:URL#model"):
        RetrievalSettings(reranker="http://reranker.test/v1")
    with pytest.raises(ValidationError, match="openai:URL#model"):
        RetrievalSettings(reranker="openai:http://reranker.test/v1")  # no model named
    assert RetrievalSettings(reranker="openai:http://reranker.test/v1#rr-1").reranker.endswith(
        "#rr-1"
    )


def test_a_memory_searches_with_its_configured_ranking(tmp_path: Path) -> None:
    memory = Memory(
        SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML), root=tmp_path,
        embedder=None, retrieval=RetrievalSettings(reranker="openai:http://reranker.test/v1#rr"),
    )  # fmt: skip
    try:
        memory.remember(
            Content(kind="fact", scope="acme/ops", title="Deploy runbook", body="steps"),
            principal=CURATOR,
        )
        # the setting built the endpoint the searches go to
        configured = memory._reranker
        assert configured is not None and (configured.name, configured.top) == ("openai:rr", 30)
        configured.close()
        # an endpoint that answers 503: the search answers anyway, in fusion's order
        memory._reranker = EndpointReranker(
            base_url="http://reranker.test/v1", model="rr", timeout=2, top=30,
            transport=httpx.MockTransport(lambda r: httpx.Response(503)),
        )  # fmt: skip
        found = memory.search("deploy runbook", principal=READER, mode="keyword")
        assert [h.title for h in found.hits] == ["Deploy runbook"]
        assert found.trace.reranker == "fallback: HTTPStatusError"
    finally:
        memory.close()


@pytest.mark.parametrize(("fusion", "top"), [("similarity", 0.4), ("rrf", 0.4 / 61)])
def test_a_memory_fuses_as_configured(tmp_path: Path, fusion: Fusion, top: float) -> None:
    memory = Memory(
        SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML), root=tmp_path,
        embedder=None, retrieval=RetrievalSettings(fusion=fusion),
    )  # fmt: skip
    try:
        memory.remember(
            Content(kind="fact", scope="acme/ops", title="Deploy runbook", body="steps"),
            principal=CURATOR,
        )
        (hit,) = memory.search("deploy runbook", principal=READER, mode="keyword").hits
        assert hit.scores.fused == pytest.approx(top)  # first by keyword, weighing 0.4
        # its confidence: its fused score against the best that fusion can give (1), less
        # the 0.1 an "inferred" record loses
        (item,) = memory.retrieve("deploy runbook", principal=READER, mode="keyword").items
        assert item.scores.confidence == pytest.approx(0.9)
    finally:
        memory.close()


@pytest.mark.parametrize(
    ("embedder", "defaults"), [("static", STATIC_EMBEDDER_WEIGHTS), (None, DEFAULT_WEIGHTS)]
)
def test_the_default_weights_are_the_embedders(
    tmp_path: Path, embedder: str | None, defaults: Mapping[str, float]
) -> None:
    """The static embedder's weaker vectors weigh less by default; a weight the caller names
    replaces the default of that signal only."""
    memory = Memory(
        SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML), root=tmp_path,
        embedder=embedder,
    )  # fmt: skip
    try:
        memory.remember(
            Content(kind="fact", scope="acme/ops", title="Deploy runbook", body="steps"),
            principal=CURATOR,
        )
        assert memory.recall("deploy", principal=READER, mode="keyword").weights == defaults
        given = memory.recall("deploy", principal=READER, mode="keyword", weights={"vector": 1})
        assert given.weights == {"keyword": defaults["keyword"], "vector": 1}
        # and what fusion weighs: first by keyword alone, with that keyword weight
        (hit,) = memory.search("deploy runbook", principal=READER, mode="keyword").hits
        assert hit.scores.fused == pytest.approx(defaults["keyword"])
    finally:
        memory.close()


def test_a_configured_time_weight_ranks_by_the_time_the_query_names(tmp_path: Path) -> None:
    now = datetime(2025, 3, 12, 18, tzinfo=UTC)  # a Wednesday
    memory = Memory(
        SqliteStore(tmp_path / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML), root=tmp_path,
        embedder=None, clock=lambda: now, retrieval=RetrievalSettings(time_weight=1.0),
    )  # fmt: skip
    try:
        for day in (2, 9, 11):  # the same words, said on three days
            memory.remember(
                Content(
                    kind="episode",
                    scope="acme/ops",
                    title=f"Standup on the {day}th",
                    body="the deploy slipped again",
                    valid_from=datetime(2025, 3, day, tzinfo=UTC),
                ),
                principal=CURATOR,
            )
        found = memory.search("what slipped yesterday", principal=READER, mode="keyword")
        assert found.trace.time_window is not None
        assert found.trace.time_window["phrase"] == "yesterday"
        assert found.hits[0].title == "Standup on the 11th"
        assert len(found.hits) == 3  # a boost, never a cut
    finally:
        memory.close()


@pytest.fixture(params=["body", "headers", "interim"])
def trickler(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in PROXY_VARIABLES:  # a proxy would stand between the client and the socket
        monkeypatch.delenv(name, raising=False)
    with trickling(request.param) as url:
        yield url


def test_a_trickling_endpoint_costs_a_search_its_timeout_not_the_whole_answer(
    memory: Memory, trickler: str
) -> None:
    plain = titles(memory)
    memory._reranker = EndpointReranker(base_url=trickler, model="rr-1", timeout=0.3, top=30)
    started = time.monotonic()
    found = memory.search("deploy runbook", principal=READER, mode="keyword")
    assert time.monotonic() - started < TRICKLE_SECONDS / 2  # not until the answer ends
    assert [h.title for h in found.hits] == plain
    assert found.trace.reranker == "fallback: timeout"
