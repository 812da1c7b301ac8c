"""The read path end to end on every backend: trimming before ranking, lifecycle rules,
selectors, citations, budget, validation, and contradiction flags."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.errors import InvalidInput
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import (
    SYSTEM_PRINCIPAL,
    Acl,
    ContentPatch,
    Principal,
    RecordQuery,
    Status,
    VersionPin,
    utcnow,
)
from cairn.retrieval.ranking import rank
from cairn.retrieval.types import Hit, Mode
from cairn.store.base import Store
from tests.conftest import content
from tests.factories import CURATOR


@pytest.fixture
def rmemory(store: Store, tmp_path: Path) -> Memory:
    """A memory with the fast static embedder, so hybrid reads are real but quick."""
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder="static")


def _add(memory: Memory, who: Principal, title: str, body: str, **fields: object) -> str:
    outcome = memory.remember(content(title, body=body, **fields), principal=who)
    assert outcome.record is not None
    return outcome.record.id


def _add_secrets(memory: Memory, curator: Principal, count: int) -> list[str]:
    """``count`` confidential notes (an agent may not read them), each a close match for
    "database password rotation schedule": what a trimmed read must leave out."""
    return [
        _add(
            memory,
            curator,
            f"Database password rotation {n}",
            f"The database password rotation schedule, part {n}.",
            acl=Acl(labels=("confidential",)),
        )
        for n in range(count)
    ]


def test_trimming_happens_before_ranking(
    rmemory: Memory, curator: Principal, agent: Principal
) -> None:
    secret_ids = _add_secrets(rmemory, curator, 12)
    public_ids = {
        _add(rmemory, curator, "Password policy", "Passwords rotate; ask the team."),
        _add(rmemory, curator, "Rotation of on-call", "The on-call rotation changes weekly."),
    }
    rmemory.index_pending()  # reads never embed: vectors come from the indexer
    for mode in ("keyword", "vector", "hybrid"):
        result = rmemory.retrieve(
            "database password rotation schedule", principal=agent, mode=mode, k=2
        )
        assert {i.record_id for i in result.items} == public_ids, mode
        dumped = json.dumps(result.model_dump(mode="json"))
        assert not any(secret in dumped for secret in secret_ids), "a withheld id leaked"
    # The curator may read the secrets, and they outrank the public notes for this query:
    # both slots go to them. (So the agent's answer above is not just the top two overall.)
    seen_by_curator = rmemory.retrieve(
        "database password rotation schedule", principal=curator, mode="keyword", k=2
    )
    curator_ids = [i.record_id for i in seen_by_curator.items]
    assert len(curator_ids) == 2 and set(curator_ids) <= set(secret_ids)


def test_scopes_and_sensitivity_trim_too(
    rmemory: Memory, curator: Principal, agent: Principal
) -> None:
    other = _add(rmemory, curator, "Globex deploy day", "Deploys on Friday.", scope="globex/app")
    high = _add(
        rmemory, curator, "Acme deploy secrets", "Deploy keys.", acl=Acl(sensitivity="high")
    )
    mine = _add(rmemory, curator, "Acme deploy day", "Deploys on Tuesday.")
    found = {i.record_id for i in rmemory.retrieve("deploy", principal=agent, mode="keyword").items}
    assert found == {mine}
    assert {other, high} <= {
        i.record_id for i in rmemory.retrieve("deploy", principal=curator, mode="keyword").items
    }


def _rank_only(hit: Hit) -> Hit:
    return hit.model_copy(update={"scores": hit.scores.model_copy(update={"keyword": None})})


def test_recall_hands_out_only_readable_chunks_and_ranks_to_search_exactly(
    rmemory: Memory, curator: Principal, agent: Principal
) -> None:
    secret_ids = set(_add_secrets(rmemory, curator, 4))
    elsewhere = _add(
        rmemory,
        curator,
        "Password rotation at Globex",
        "Globex rotates database passwords monthly.",
        scope="globex/app",
    )
    public_ids = {
        _add(rmemory, curator, "Password policy", "Passwords rotate; ask the team."),
        _add(rmemory, curator, "Rotation of on-call", "The on-call rotation changes weekly."),
        _add(rmemory, curator, "Database backups", "The database is backed up nightly."),
    }
    rmemory.index_pending()
    query = "database password rotation schedule"
    asks: list[tuple[Mode, int, int | None, dict[str, float] | None]] = [
        ("keyword", 2, None, None),
        ("vector", 10, None, None),
        ("hybrid", 3, 5, {"keyword": 2.0, "vector": 1.0}),
    ]
    for ask in asks:
        mode, k, candidates, weights = ask
        recalled = rmemory.recall(
            query, principal=agent, mode=mode, k=k, candidates=candidates, weights=weights
        )
        readable = {row.meta.record_id for row in recalled.rows.values()}
        assert readable and readable <= public_ids, ask
        assert set(recalled.scopes.values()) == {"acme/app"}, ask
        listed = {i for i, _ in recalled.keyword} | {i for i, _ in recalled.vector}
        assert listed == set(recalled.rows), ask
        dumped = repr(recalled)
        assert not any(hidden in dumped for hidden in secret_ids | {elsewhere}), ask
        replayed = rank(
            recalled.keyword,
            recalled.vector,
            recalled.rows,
            recalled.scopes,
            query=recalled.query,
            mode=recalled.mode,
            k=recalled.k,
            weights=recalled.weights,
            config=recalled.ranking,
            window=recalled.window,
            vector_complete=recalled.vector_complete,
        )
        searched = rmemory.search(
            query, principal=agent, mode=mode, k=k, candidates=candidates, weights=weights
        )
        # the same hits, but for the keyword score, which search shows only to a reader who
        # sees everything (its word weights count withheld records too)
        assert tuple(_rank_only(hit) for hit in replayed) == searched.hits, ask
        assert any(hit.scores.keyword for hit in replayed) == (mode != "vector"), ask
    # the curator's recall holds the secrets too: the agent's was trimmed, not just short
    seen_by_curator = rmemory.recall(query, principal=curator, mode="keyword", k=10)
    assert {row.meta.record_id for row in seen_by_curator.rows.values()} >= secret_ids


def test_lifecycle_rules(rmemory: Memory, curator: Principal, agent: Principal) -> None:
    active = _add(rmemory, curator, "Kafka retention is seven days", "Kafka keeps 7 days.")
    stale = _add(rmemory, curator, "Kafka brokers", "We run 3 Kafka brokers.")
    rmemory.transition(stale, Status.STALE, principal=SYSTEM_PRINCIPAL)
    draft = rmemory.remember(
        content("Kafka upgrade note", body="Kafka upgrade planned."), principal=agent, draft=True
    ).record
    assert draft is not None

    def found(**options: object) -> set[str]:
        result = rmemory.retrieve("kafka", principal=agent, **options)  # type: ignore[arg-type]
        return {i.record_id for i in result.items}

    assert found(mode="keyword") == {active}  # stale never, drafts not by default
    assert found(mode="keyword", include_drafts=True) == {active, draft.id}
    symbol = rmemory.for_symbol("kafka", principal=agent)
    assert draft.id in {i.record_id for i in symbol.items}
    assert "draft_non_authoritative" in next(
        i.flags for i in symbol.items if i.record_id == draft.id
    )


def test_superseded_and_expired_are_left_out(
    rmemory: Memory, curator: Principal, agent: Principal
) -> None:
    old = _add(rmemory, curator, "Python version is 3.10", "We use Python 3.10.")
    new = _add(rmemory, curator, "Python version is 3.12", "We use Python 3.12.")
    rmemory.supersede(old, by=new, principal=curator)
    expired = _add(
        rmemory,
        curator,
        "Python freeze",
        "Python upgrades frozen.",
        valid_to=utcnow() - timedelta(days=1),
        valid_from=utcnow() - timedelta(days=30),
    )
    ids = {i.record_id for i in rmemory.retrieve("python", principal=agent, mode="hybrid").items}
    assert new in ids and old not in ids and expired not in ids


def test_published_selector_reads_the_pinned_version(
    rmemory: Memory, curator: Principal, agent: Principal
) -> None:
    record_id = _add(rmemory, curator, "Testing SOP", "Run make test for phase 0 tests.")
    rmemory.publish("acme/app", principal=curator)
    rmemory.update(record_id, ContentPatch(body="Run tox for phase 0 tests."), principal=curator)
    published = rmemory.retrieve("phase 0 tests", principal=agent, selector=VersionPin.published())
    head = rmemory.retrieve("phase 0 tests", principal=agent)
    assert [i.version for i in published.items] == [1]
    assert "make test" in published.items[0].content
    assert [i.version for i in head.items] == [2]
    assert published.selector_used.kind.value == "published"


def test_every_citation_is_pinned_and_checkable(
    rmemory: Memory, curator: Principal, agent: Principal, tmp_path: Path
) -> None:
    body = (
        "# Runbook\n\nIntro.\n\n## Restart\n\nRestart the API with systemctl.\n\n"
        "## Logs\n\nSee journald."
    )
    outcome = rmemory.remember(
        content("API runbook", body=body, kind="document"), principal=curator
    )
    assert outcome.record is not None and outcome.version is not None
    record_id, version_id = outcome.record.id, outcome.version.id
    rmemory.index_pending()
    result = rmemory.retrieve("restart the API", principal=agent)
    assert [i.record_id for i in result.items] == [record_id]
    item = result.items[0]
    assert item.version_id == version_id and item.version == 1
    # The best chunk is the "Restart" section: cited to this version, by the section's key,
    # with the span of exactly that section in the body (counted here from the text).
    first = item.citations[0]
    assert (first.record_id, first.version_id, first.chunk_key) == (
        record_id,
        version_id,
        "runbook/restart",
    )
    start = body.index("## Restart")
    end = body.index("systemctl.") + len("systemctl.")
    assert first.excerpt is not None
    assert (first.excerpt.start, first.excerpt.end) == (start, end)
    assert all((c.record_id, c.version_id) == (record_id, version_id) for c in item.citations)
    assert set(item.why_included) == {"keyword_match", "vector_match"}
    assert {
        "preselect",
        "recall.keyword",
        "recall.vector",
        "fuse",
        "validate",
        "budget",
        "compose",
    } <= set(result.trace.timings_ms)


def test_budget_clips_in_order_without_reranking(rmemory: Memory, curator: Principal) -> None:
    for n in range(6):
        _add(rmemory, curator, f"Cache note {n}", f"cache eviction detail {n} " * 40)
    full = rmemory.retrieve("cache eviction", principal=curator, mode="keyword", k=6)
    tight = rmemory.retrieve(
        "cache eviction",
        principal=curator,
        mode="keyword",
        k=6,
        max_tokens=full.items[0].tokens + full.items[1].tokens,
    )
    assert [i.record_id for i in tight.items] == [i.record_id for i in full.items[:2]]
    assert tight.token_budget_exceeded and tight.excluded_count == 4
    assert [e.record_id for e in tight.excluded] == [i.record_id for i in full.items[2:]]
    assert {e.reason for e in tight.excluded} == {"token_budget"}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=60) | st.sampled_from(['"', "*", "NEAR(", "-x", "a AND", "(", "é", ""]))
def test_any_text_is_a_valid_keyword_query(
    memory: Memory, curator: Principal, store: Store, text: str
) -> None:
    """Any text searches (query syntax is never the caller's problem), except text no store
    can hold, which is refused as bad input rather than failing inside a store."""
    if not memory.status(principal=CURATOR)["records"]:
        memory.remember(content("Stable anchor"), principal=curator)
    if "\x00" in text:
        with pytest.raises(InvalidInput, match="NUL"):
            memory.search(text, principal=curator, mode="keyword")
        return
    memory.search(text, principal=curator, mode="keyword")  # the text alone: no error
    # Whatever else the text holds (quotes, NEAR(, a dangling AND...), it does not turn a
    # word the record holds into something that misses it.
    (record,) = store.query_records(RecordQuery(limit=2), scope_globs=("*",))
    found = memory.search(f"anchor {text}", principal=curator, mode="keyword")
    assert [h.record_id for h in found.hits] == [record.id]


def test_empty_query_returns_nothing(rmemory: Memory, curator: Principal) -> None:
    _add(rmemory, curator, "Anything", "at all")
    assert rmemory.retrieve("   ", principal=curator).items == ()


def test_keyword_sees_a_write_at_once_and_status_shows_vector_lag(
    rmemory: Memory, curator: Principal
) -> None:
    fresh = _add(rmemory, curator, "Fresh fact", "Zebra crossings are striped.")
    assert rmemory.status(principal=CURATOR)["vector_lag"] == 1
    assert [
        h.record_id for h in rmemory.search("zebra", principal=curator, mode="keyword").hits
    ] == [fresh]
    assert rmemory.index_pending() == 1
    assert rmemory.status(principal=CURATOR)["vector_lag"] == 0
    found = rmemory.search("zebra crossing", principal=curator, mode="vector").hits
    assert [(h.record_id, h.why_included) for h in found] == [(fresh, ("vector_match",))]


def test_confidence_decreases_with_version(rmemory: Memory, curator: Principal) -> None:
    young = _add(rmemory, curator, "Lint with ruff", "Lint with ruff check.", confidence="verified")
    old = _add(
        rmemory, curator, "Format with ruff", "Format with ruff format.", confidence="verified"
    )
    for n in range(4):
        rmemory.update(
            old, ContentPatch(body=f"Format with ruff format, take {n}."), principal=curator
        )
    result = rmemory.retrieve("ruff", principal=curator, mode="keyword")
    conf = {i.record_id: i.scores.confidence for i in result.items}
    assert conf[old] is not None and conf[young] is not None and conf[old] < conf[young]
    assert next(i.version for i in result.items if i.record_id == old) == 5


def test_contradictions_are_flagged_not_resolved(rmemory: Memory, curator: Principal) -> None:
    a = _add(
        rmemory, curator, "Deploys happen on Tuesdays", "We deploy on Tuesdays.", kind="belief"
    )
    b = _add(
        rmemory,
        curator,
        "Deploys never happen on Tuesdays",
        "We never deploy on Tuesdays.",
        kind="belief",
    )
    result = rmemory.retrieve("deploy tuesdays", principal=curator)
    assert {i.record_id for i in result.items} >= {a, b}, "both stay: nothing auto-resolved"
    assert [set(c.record_ids) for c in result.contradictions] == [{a, b}]
    report = rmemory.validate([a, b], principal=curator)
    assert all(check.valid for check in report.records)
    assert len(report.contradictions) == 1


def test_validate_reports_what_cannot_be_relied_on(
    rmemory: Memory, curator: Principal, agent: Principal
) -> None:
    old = _add(rmemory, curator, "Old", "old")
    new = _add(rmemory, curator, "New", "new")
    rmemory.supersede(old, by=new, principal=curator)
    hidden = _add(rmemory, curator, "Hidden", "x", acl=Acl(labels=("confidential",)))
    report = rmemory.validate([old, new, hidden, "rec_missing"], principal=agent)
    by_id = {c.record_id: c for c in report.records}
    assert by_id[old].problems == ("superseded",) and by_id[old].resolved_id == new
    assert by_id[new].valid
    assert by_id[hidden].problems == by_id["rec_missing"].problems == ("not_found",)


def test_context_finds_a_record_but_is_never_shown(rmemory: Memory, curator: Principal) -> None:
    turn = content(
        "Caroline · turn 7",
        body="Caroline: Yes, that one!",
        kind="episode",
        context=("Melanie: Did you adopt the beagle from the shelter downtown?",),
    )
    record = rmemory.remember(turn, principal=curator).record
    assert record is not None
    result = rmemory.retrieve("beagle shelter", principal=curator, mode="keyword")
    assert [i.record_id for i in result.items] == [record.id]
    item = result.items[0]
    assert item.content == "Caroline: Yes, that one!"
    assert [(c.record_id, c.version_id, c.chunk_key) for c in item.citations] == [
        (record.id, record.current_version_id, None)
    ]
    assert "beagle" not in json.dumps(result.model_dump(mode="json")).replace("beagle shelter", "")


class _StaleIndex:
    """Stands in for ``Indexer.read``: each real answer is recorded, and while ``stale`` is
    above 0 a read answers with the first one recorded instead (an index a moment behind
    the database), counting ``stale`` down."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from cairn.retrieval.indexer import Indexer

        self.real = Indexer.read
        self.recorded: list[object] = []
        self.stale = 0

        def read(indexer: Indexer, text: str, where: object, k: int) -> object:
            return self.answer(indexer, text, where, k)

        monkeypatch.setattr(Indexer, "read", read)

    def answer(self, indexer: object, text: str, where: object, k: int) -> object:
        if self.stale:
            self.stale -= 1
            return self.recorded[0]
        self.recorded.append(self.real(indexer, text, where, k))  # type: ignore[arg-type]
        return self.recorded[-1]


def _deploy_notes(memory: Memory, curator: Principal, count: int) -> list[str]:
    """``count`` notes that all match ``DEPLOYS``, indexed for vector reads."""
    ids = [
        _add(memory, curator, f"Deploy note {n}", f"Deploys go out on day {n} of the train.")
        for n in range(count)
    ]
    memory.index_pending()
    return ids


DEPLOYS = "when do deploys go out"


def _by_vector(memory: Memory, curator: Principal) -> tuple[tuple[str, float], ...]:
    """(record, fused score) of a vector search for ``DEPLOYS``, four candidates asked for."""
    hits = memory.search(DEPLOYS, principal=curator, mode="vector", k=4, candidates=4).hits
    return tuple((h.record_id, h.scores.fused) for h in hits)


def test_a_candidate_the_recheck_drops_does_not_change_how_the_rest_are_scaled(
    rmemory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The vector index may answer from a moment before a change the store already holds:
    # the store's rows are checked once more, and a candidate archived meanwhile leaves.
    # Recall's list was full (more chunks exist than it asked for), so what is left is
    # still scaled from its own last candidate (0), not read as "every chunk there is",
    # which would scale it from a similarity of 0 and lift every score. (Here the index
    # stays behind, so the vector side asked again answers the same list.)
    ids = _deploy_notes(rmemory, curator, 8)
    index = _StaleIndex(monkeypatch)
    before = _by_vector(rmemory, curator)  # the index's answer is recorded
    assert len(before) == 4 and min(score for _, score in before) == 0.0
    second = before[1][0]
    assert second in ids
    rmemory.archive(second, principal=curator)
    index.stale = 2  # the index stays behind for the search and its second ask
    after = _by_vector(rmemory, curator)
    assert [record for record, _ in after] == [r for r, _ in before if r != second]
    assert min(score for _, score in after) == 0.0
    assert after[0][1] == before[0][1]


def test_a_list_the_recheck_shortens_is_asked_again_and_ranks_as_a_read_after_the_change(
    rmemory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Four chunks, four candidates asked for: the index's answer is full. One is archived
    # before the check reads the database; the vector side is asked once more, finds the
    # three that are every chunk there is, and the answer is the one a read after the
    # archiving gives (scaled from a similarity of 0), not one shaped by the dropped chunk.
    _deploy_notes(rmemory, curator, 4)
    index = _StaleIndex(monkeypatch)
    before = _by_vector(rmemory, curator)  # the index's answer is recorded: a full list
    assert len(before) == 4
    rmemory.archive(before[1][0], principal=curator)
    settled = _by_vector(rmemory, curator)
    assert len(settled) == 3 and settled[-1][1] > 0  # every chunk there is: scaled from 0
    index.stale = 1  # the next search's index answers from before the archiving
    raced = _by_vector(rmemory, curator)
    assert raced == settled
