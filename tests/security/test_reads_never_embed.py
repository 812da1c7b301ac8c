"""Reads never embed: vectors are made in the background, and a read says what it lacks.

The attack this closes: pending chunks were embedded inside reads, so a read after a big
write took a minute or more, and other principals' hidden writes showed as read latency.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, ContentPatch, Principal, PrincipalKind, Status
from cairn.retrieval import indexer as indexer_module
from cairn.retrieval.types import UNCOUNTED_WAITING, VECTOR_INDEX_BUSY, vector_warnings
from cairn.search.catalog import VectorCatalog
from cairn.search.embedder import Embedder, Vectors, make_embedder
from cairn.store.base import ChunkFilter, Store
from cairn.store.sqlite import SqliteStore
from tests.conftest import content
from tests.factories import CURATOR
from tests.timeline.events import T0, conversation


class Watched:
    """The static embedder, counting document embeds; ``gate`` (when set) holds each
    document batch until released, to show what a read does meanwhile."""

    def __init__(self) -> None:
        self.inner: Embedder = make_embedder("static", cached=False)
        self.documents = 0
        self.started = threading.Event()
        self.gate: threading.Event | None = None

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.documents += len(texts)
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(60), "the test never released the embedder"
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Vectors:
        return np.asarray(self.inner.embed([text])[0], dtype=np.float32)


def _memory(store: Store, tmp_path: Path, embedder: Watched) -> Memory:
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder=embedder)


def test_a_read_after_a_big_write_embeds_nothing(store: Store, tmp_path: Path) -> None:
    embedder = Watched()
    memory = _memory(store, tmp_path, embedder)
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    memory.remember_many(
        [content(f"Shared note {n}", body=f"visible kafka note {n}") for n in range(30)]
        + [
            content(f"Hidden note {n}", body=f"hidden kafka note {n}", acl=Acl(roles=("x",)))
            for n in range(20)
        ],
        principal=CURATOR,
    )
    result = memory.retrieve("kafka note", principal=agent, mode="hybrid")
    assert embedder.documents == 0, "a read embedded pending chunks"
    # keyword recall sees the writes at once; the trace counts only what the reader may see
    assert result.items and all(i.why_included == ("keyword_match",) for i in result.items)
    assert result.trace.vector_lag == 30
    assert any("30 chunks are not embedded yet" in w for w in result.warnings)
    assert memory.status(principal=CURATOR)["vector_lag"] == 50
    assert memory.index_pending() == 50
    again = memory.retrieve("kafka note", principal=agent, mode="hybrid")
    assert again.trace.vector_lag == 0 and not again.warnings
    assert any("vector_match" in i.why_included for i in again.items)


def test_the_count_of_waiting_chunks_is_exact_past_what_the_catalog_holds(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During a large import the catalog holds only ``park_limit`` waiting chunks and
    passes the rest over; a read still counts every chunk it may see that waits (once
    each), and none it may not, or, past what it may count, says only that some wait."""
    embedder = Watched()
    memory = _memory(store, tmp_path, embedder)
    indexer = memory.indexer
    assert indexer is not None
    indexer.catalog = VectorCatalog(embedder.dim, park_limit=4)
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    hidden = Acl(roles=("x",))
    memory.remember_many(
        [content(f"Shared note {n}", body=f"visible kafka note {n}") for n in range(30)]
        + [content(f"Hidden note {n}", body=f"hidden kafka note {n}", acl=hidden)
           for n in range(20)],
        principal=CURATOR,
    )  # fmt: skip
    first = memory.retrieve("kafka note", principal=agent, mode="hybrid")
    assert indexer.catalog.parked == 4 and indexer.catalog.rescan_from is not None
    assert first.trace.vector_lag == 30 and not first.trace.vector_lag_uncounted
    assert first.warnings == ("30 chunks are not embedded yet (keyword search sees them)",)
    # One embedded (the first written), then one more written: the catalog holds it, after
    # the point where it began passing chunks over, and counts it once.
    assert indexer.catch_up(limit=1) == 1
    memory.remember(content("Shared note 30", body="visible kafka note 30"), principal=CURATOR)
    # A chunk passed over whose text already has a vector does not wait.
    memory.remember(
        content("Shared note 0", body="visible kafka note 0", scope="acme/copy"),
        principal=CURATOR,
    )
    second = memory.retrieve("kafka note", principal=agent, mode="hybrid")
    after = indexer.catalog.rescan_from
    assert after is not None
    assert any(m.seq > after for metas in indexer.catalog.pending.values() for m in metas)
    assert second.trace.vector_lag == 30
    stranger = agent.model_copy(update={"id": "eve", "scopes": ("other/*",)})
    assert memory.retrieve("kafka note", principal=stranger, mode="hybrid").trace.vector_lag == 0
    # The count looks at no more chunks than it may, from the oldest that waits on: at the
    # bound it still counts, one short of it it says only that many wait (never a number
    # that would depend on where others' chunks lie).
    chunks = store.chunk_changes(0)
    embedded = store.get_vectors(indexer.model, [c.text_hash for c in chunks])
    oldest = min(c.seq for c in chunks if c.text_hash not in embedded)
    looked_at = sum(1 for c in chunks if c.seq >= oldest)
    monkeypatch.setattr(indexer_module, "WAITING_SCAN", looked_at)
    assert memory.retrieve("kafka note", principal=agent, mode="hybrid").trace.vector_lag == 30
    monkeypatch.setattr(indexer_module, "WAITING_SCAN", looked_at - 1)
    partial = memory.retrieve("kafka note", principal=agent, mode="hybrid")
    assert partial.trace.vector_lag_uncounted and partial.trace.vector_lag == 0
    assert partial.warnings == (UNCOUNTED_WAITING,)
    memory.index_pending()
    done = memory.retrieve("kafka note", principal=agent, mode="hybrid")
    assert done.trace.vector_lag == 0 and not done.trace.vector_lag_uncounted
    assert not done.warnings


@pytest.mark.parametrize("written_before", [0, 2])
def test_an_older_version_waiting_is_counted_whether_held_or_passed_over(
    store: Store, tmp_path: Path, written_before: int
) -> None:
    """A read pinned to an older version counts its waiting chunk by the same rule whether
    the catalog holds it or passed it over, which others' writes decide (here two records
    written before it fill the catalog's two places)."""
    memory = _memory(store, tmp_path, Watched())
    indexer = memory.indexer
    assert indexer is not None
    indexer.catalog = VectorCatalog(indexer.embedder.dim, park_limit=2)
    hidden = Acl(roles=("x",))
    for n in range(written_before):
        memory.remember(content(f"Hidden {n}", body=f"hidden kafka {n}", acl=hidden),
                        principal=CURATOR)  # fmt: skip
    first = memory.remember(content("Pinned", body="kafka pinned v1"), principal=CURATOR)
    assert first.record is not None
    record_id, old_version = first.record.id, first.record.current_version_id
    memory.update(record_id, ContentPatch(body="kafka pinned v2"), principal=CURATOR)
    acl_ids = frozenset(c.acl_id for c in store.chunk_changes(0) if c.record_id == record_id)
    where = ChunkFilter(acl_ids=acl_ids, statuses=frozenset({"active"}),
                        version_ids=frozenset({old_version}), include_superseded=True)  # fmt: skip
    assert indexer.read("kafka", where, 5).waiting == 1


def test_a_change_between_the_reads_turn_and_its_count_is_counted_once(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read looks at what waits while it has the index and counts it in the store after
    it let go: a waiting draft published in between (its chunk's seq moves on) is counted
    once, in its new state."""
    memory = _memory(store, tmp_path, Watched())
    indexer = memory.indexer
    assert indexer is not None
    indexer.catalog = VectorCatalog(indexer.embedder.dim, park_limit=4)
    drafts = [content(f"Draft {n}", body=f"visible kafka draft {n}") for n in range(10)]
    memory.remember_many(drafts, draft=True, principal=CURATOR)

    def waiting() -> int:
        found = memory.retrieve("kafka", principal=CURATOR, mode="hybrid", include_drafts=True)
        return found.trace.vector_lag

    assert waiting() == 10
    held = min((m for metas in indexer.catalog.pending.values() for m in metas),
               key=lambda m: m.seq)  # fmt: skip
    count = store.count_unembedded

    def publishing_first(*args: Any) -> int | None:
        monkeypatch.setattr(store, "count_unembedded", count)
        memory.transition(held.record_id, Status.ACTIVE, principal=CURATOR)
        return count(*args)

    monkeypatch.setattr(store, "count_unembedded", publishing_first)
    assert waiting() == 10
    assert waiting() == 10


def test_a_chunk_passed_over_before_every_held_one_is_counted(store: Store, tmp_path: Path) -> None:
    """Where the catalog began passing chunks over can lie before the oldest chunk it still
    holds (the held ones were published since, and moved on): the count starts from there."""
    memory = _memory(store, tmp_path, Watched())
    indexer = memory.indexer
    assert indexer is not None
    indexer.catalog = VectorCatalog(indexer.embedder.dim, park_limit=4)
    drafts = [content(f"Draft {n}", body=f"visible kafka draft {n}") for n in range(5)]
    outcomes = memory.remember_many(drafts, draft=True, principal=CURATOR)

    def waiting() -> int:
        found = memory.retrieve("kafka", principal=CURATOR, mode="hybrid", include_drafts=True)
        return found.trace.vector_lag

    assert waiting() == 5
    catalog = indexer.catalog
    for outcome in outcomes[:4]:
        assert outcome.record is not None
        memory.transition(outcome.record.id, Status.ACTIVE, principal=CURATOR)
    assert waiting() == 5
    oldest_held = min(m.seq for metas in catalog.pending.values() for m in metas)
    assert catalog.rescan_from is not None and catalog.rescan_from < oldest_held - 1


def test_what_a_read_says_of_chunks_waiting_for_a_vector() -> None:
    said = "7 chunks are not embedded yet (keyword search sees them)"
    assert vector_warnings(waiting=7, busy=False) == (said,)
    assert vector_warnings(waiting=0, busy=False) == ()
    assert vector_warnings(waiting=None, busy=False) == (UNCOUNTED_WAITING,)
    assert vector_warnings(waiting=7, busy=True) == (said, VECTOR_INDEX_BUSY)


def test_the_background_worker_embeds_what_is_written(store: Store, tmp_path: Path) -> None:
    embedder = Watched()
    memory = _memory(store, tmp_path, embedder)
    worker = memory.start_indexing(poll=60)  # woken by commits, not by the poll
    assert worker is not None
    try:
        assert worker.wait_idle(60)
        memory.remember(content("Zebra crossings", body="Zebra crossings are striped."),
                        principal=CURATOR)  # fmt: skip
        assert worker.wait_idle(60), "the worker never caught up"
        assert memory.vector_lag() == 0
        found = memory.search("striped crossing", principal=CURATOR, mode="vector")
        assert found.hits and embedder.documents >= 1
    finally:
        memory.close()


def test_reads_go_on_while_a_batch_embeds(store: Store, tmp_path: Path) -> None:
    embedder = Watched()
    memory = _memory(store, tmp_path, embedder)
    memory.remember_many([content(f"Runbook {n}") for n in range(5)], principal=CURATOR)
    embedder.gate = threading.Event()
    embedding = threading.Thread(target=memory.index_pending)
    embedding.start()
    try:
        assert embedder.started.wait(60)
        # The model is busy with a batch; a hybrid read must not wait for it.
        done = threading.Event()

        def read() -> None:
            memory.retrieve("runbook", principal=CURATOR, mode="hybrid")
            done.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert done.wait(30), "a read waited for the embedding batch"
        reader.join()
    finally:
        embedder.gate.set()
        embedding.join(60)
    assert memory.vector_lag() == 0


def test_timeline_reads_embed_nothing_and_write_nothing(store: Store, tmp_path: Path) -> None:
    """Teleport search syncs the vector catalog with what rollups wrote; it must not embed
    the new summaries (the rollup's readers would wait for them), nor may any timeline read
    write a row, the outbox cursor included."""
    embedder = Watched()
    memory = _memory(store, tmp_path, embedder)
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    memory.append_events(conversation("a", T0, 8), principal=agent)
    memory.rollup(principal=CURATOR)
    memory.append_events(conversation("b", T0 + timedelta(days=1), 4), principal=agent)
    lag = memory.vector_lag()
    assert lag > 0
    before = _every_row(store)
    (year,) = memory.timeline_root(principal=agent)
    found = memory.timeline_search("nightly build", principal=agent)
    hits = found.hits
    assert hits and all("vector" not in h.signals for h in hits)
    # the answer says it is partial, counting only what the reader may see
    (warning,) = found.warnings
    waiting, said = warning.split(" ", 1)
    assert int(waiting) > 0 and said == "chunks are not embedded yet (keyword search sees them)"
    stranger = agent.model_copy(update={"id": "eve", "scopes": ("other/*",)})
    assert memory.timeline_search("nightly build", principal=stranger).warnings == ()
    segment = memory.timeline_node(hits[0].node_id, principal=agent)
    memory.expand_grip(segment.bullets[0].grip_ids[0], principal=agent)
    memory.timeline_browse(year.node_id, principal=agent)
    memory.timeline_recent(principal=agent)
    memory.timeline_scan("jenkins", node_id=year.node_id, principal=agent)
    memory.events(principal=agent)
    memory.timeline_status(principal=CURATOR)
    assert embedder.documents == 0, "a timeline read embedded pending chunks"
    assert memory.vector_lag() == lag
    assert _every_row(store) == before, "a timeline read wrote to the store"
    # once embedded, vectors take part and nothing is said to wait
    memory.index_pending()
    embedded = memory.timeline_search("nightly build", principal=agent)
    assert embedded.warnings == () and any("vector" in h.signals for h in embedded.hits)


def _every_row(store: Store) -> dict[str, list[tuple[str, ...]]]:
    """Every row of every table, read through the store's own connection."""
    read = store._read  # type: ignore[attr-defined]
    if isinstance(store, SqliteStore):
        listed = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    else:
        listed = "SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()"
    rows: dict[str, list[tuple[str, ...]]] = {}
    for table in sorted(row["name"] for row in read(listed)):
        found = read(f"SELECT * FROM {table}")
        rows[table] = sorted(
            tuple(map(repr, row.values() if isinstance(row, dict) else tuple(row))) for row in found
        )
    return rows
