"""Property: nothing a read returns reveals a record its reader may not see.

Hypothesis draws a small world of records (random scopes, ACL roles, labels and
sensitivities; each with a unique marker word in its title and body), a random principal
and a random query (vocabulary words, other records' marker words, or any text), and reads
it through every read door of the kernel: ``search``, ``retrieve``, ``read_context`` and
``validate``, in keyword, vector and hybrid mode. Visibility comes from an oracle that
restates the access rules here, independently of ``governance.access``.

Checked for every example:

- every hit, item and citation is a record the reader may see, pinned to its current
  version;
- no withheld record's id, version id or marker word appears anywhere in what comes back
  (the query's own echo aside: the reader typed it);
- the same read over a world holding only the visible records returns the same records,
  the same candidate counts and exclusion count, the same vector similarities and the same
  keyword scores (shown only to a reader who sees everything): hidden records change
  nothing a reader can count. (The order keyword scores give is left out on purpose:
  BM25's term weights are computed over the whole index, as in any search engine with
  document-level security; docs/retrieval.md says so. k is large enough here that no read
  is cut.)
- ``validate`` answers a withheld id exactly as it answers an id that never existed.
"""

from __future__ import annotations

import fnmatch
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, Principal, PrincipalKind, Sensitivity, VersionPin
from cairn.retrieval.context import ReadContextRequest
from cairn.retrieval.types import Mode
from cairn.search.embedder import make_embedder
from cairn.store.base import Store
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR
from tests.pg import PgCluster

VOCAB = ("deploy", "rotation", "kafka", "backup", "incident", "budget", "runbook", "latency")
SCOPES = ("acme/app", "acme/ops", "globex/app")
SCOPE_GLOBS = ("acme/*", "acme/app", "acme/ops", "globex/*", "globex/app", "*")
ROLES = ("agent", "ops", "curator")
LABELS = ("public", "internal", "confidential", "pii")
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")
RANK = {Sensitivity.LOW: 0, Sensitivity.MEDIUM: 1, Sensitivity.HIGH: 2}
MAX_RECORDS = 8

# One embedder for every example: loading it is the slow part, and it holds no state.
EMBEDDER = make_embedder("static")


@dataclass(frozen=True)
class Spec:
    scope: str
    roles: tuple[str, ...]
    labels: tuple[str, ...]
    sensitivity: Sensitivity
    words: tuple[str, ...]


def _marker(n: int) -> str:
    return f"zmark{n}q"


def _sorted_tuple(values: list[str]) -> tuple[str, ...]:
    return tuple(sorted(values))


record_specs = st.builds(
    Spec,
    scope=st.sampled_from(SCOPES),
    roles=st.lists(st.sampled_from(ROLES), unique=True, max_size=2).map(_sorted_tuple),
    labels=st.lists(st.sampled_from(LABELS), unique=True, max_size=2).map(_sorted_tuple),
    sensitivity=st.sampled_from(list(Sensitivity)),
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(tuple),
)
principals = st.builds(
    Principal,
    id=st.just("reader"),
    kind=st.just(PrincipalKind.AGENT),
    roles=st.lists(st.sampled_from(ROLES), unique=True, max_size=2).map(_sorted_tuple),
    scopes=st.lists(st.sampled_from(SCOPE_GLOBS), unique=True, max_size=2).map(_sorted_tuple),
    labels=st.lists(st.sampled_from((*LABELS, "*")), unique=True, max_size=3).map(_sorted_tuple),
    sensitivity=st.sampled_from(list(Sensitivity)),
)
query_words = st.sampled_from(VOCAB) | st.integers(0, MAX_RECORDS - 1).map(_marker)
# Any text a store can hold (a NUL or a lone surrogate is refused as bad input before any
# read: see test_limits).
queries = st.lists(query_words, min_size=1, max_size=4).map(" ".join) | st.text(
    st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=20
)


def may_see(reader: Principal, spec: Spec) -> bool:
    """The read rule, restated: a scope glob matches, and either the reader curates (a
    curator reads everything in its scopes) or the ACL's roles (if any) meet the reader's,
    the reader holds every label (or all of them), and the sensitivity is at most the
    reader's ceiling."""
    if not any(fnmatch.fnmatchcase(spec.scope, glob) for glob in reader.scopes):
        return False
    if "curator" in reader.roles:
        return True
    return (
        (not spec.roles or bool(set(spec.roles) & set(reader.roles)))
        and ("*" in reader.labels or set(spec.labels) <= set(reader.labels))
        and RANK[spec.sensitivity] <= RANK[reader.sensitivity]
    )


@dataclass
class World:
    memory: Memory
    by_marker: dict[str, tuple[str, str]]  # marker -> (record id, current version id)


def build(folder: Path, specs: list[tuple[int, Spec]], store: Store) -> World:
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=EMBEDDER)
    by_marker: dict[str, tuple[str, str]] = {}
    for n, spec in specs:
        marker = _marker(n)
        outcome = memory.remember(
            Content(
                kind="fact",
                scope=spec.scope,
                title=f"Note {marker}",
                body=f"{' '.join(spec.words)} {marker}.",
                acl=Acl(roles=spec.roles, labels=spec.labels, sensitivity=spec.sensitivity),
            ),
            principal=CURATOR,
        )
        assert outcome.record is not None
        by_marker[marker] = (outcome.record.id, outcome.record.current_version_id)
    memory.index_pending()
    return World(memory, by_marker)


def _dump_without_query(result: Any) -> str:
    data = result.model_dump(mode="json")
    data.pop("query", None)  # the reader's own words, echoed
    return json.dumps(data)


def _reads(world: World, reader: Principal, query: str, mode: Mode) -> dict[str, Any]:
    memory = world.memory
    reads: dict[str, Any] = {
        "search": memory.search(query, principal=reader, mode=mode, k=50),
        "retrieve": memory.retrieve(query, principal=reader, mode=mode, k=50),
    }
    for scope in SCOPES:
        reads[f"context {scope}"] = memory.read_context(
            ReadContextRequest(
                scope=scope, query=query, mode=mode, k=50, selector=VersionPin.head()
            ),
            principal=reader,
        )
    return reads


def _returned(name: str, result: Any) -> list[tuple[str, str]]:
    """(record id, version id) of every hit or item, and of every citation."""
    entries = result.hits if name == "search" else result.items
    found = [(e.record_id, e.version_id) for e in entries]
    found += [(c.record_id, c.version_id) for e in entries for c in e.citations]
    return found


@contextmanager
def _store(backend: str, folder: Path, cluster: PgCluster) -> Iterator[Store]:
    if backend == "sqlite":
        yield SqliteStore(folder / "cairn.db")
        return
    url = cluster.new_database()
    try:
        yield PostgresStore(url)
    finally:
        cluster.drop_database(url)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    specs=st.lists(record_specs, min_size=1, max_size=MAX_RECORDS),
    reader=principals,
    query=queries,
    mode=st.sampled_from(MODES),
)
def test_no_read_reveals_a_withheld_record(
    backend: str,
    pg_cluster: PgCluster,
    specs: list[Spec],
    reader: Principal,
    query: str,
    mode: Mode,
) -> None:
    numbered = list(enumerate(specs))
    visible = [(n, s) for n, s in numbered if may_see(reader, s)]
    with (
        tempfile.TemporaryDirectory() as full_dir,
        tempfile.TemporaryDirectory() as seen_dir,
        _store(backend, Path(full_dir), pg_cluster) as full_store,
        _store(backend, Path(seen_dir), pg_cluster) as seen_store,
    ):
        world = build(Path(full_dir), numbered, full_store)
        seen_world = build(Path(seen_dir), visible, seen_store)
        try:
            shown = {_marker(n) for n, _ in visible}
            hidden = {m: ids for m, ids in world.by_marker.items() if m not in shown}
            current = {ids for m, ids in world.by_marker.items() if m in shown}
            reads = _reads(world, reader, query, mode)
            seen_reads = _reads(seen_world, reader, query, mode)
            for name, result in reads.items():
                for pair in _returned(name, result):
                    assert pair in current, (name, "returned a hidden record")
                dumped = _dump_without_query(result)
                for marker, (record_id, version_id) in hidden.items():
                    assert record_id not in dumped, (name, "leaked a withheld record id")
                    assert version_id not in dumped, (name, "leaked a withheld version id")
                    assert marker not in dumped, (name, "leaked a withheld record's text")
                _same_as_without_hidden(name, result, seen_reads[name])
            _validate_hides(world, reader, hidden)
        finally:
            world.memory.close()
            seen_world.memory.close()


def _same_as_without_hidden(name: str, result: Any, seen: Any) -> None:
    entries = result.hits if name == "search" else result.items
    seen_entries = seen.hits if name == "search" else seen.items
    assert {e.title for e in entries} == {e.title for e in seen_entries}, name
    assert result.trace.candidates == seen.trace.candidates, name
    if name != "search":
        assert result.excluded_count == seen.excluded_count, name
    keyword = {e.title: e.scores.keyword for e in entries}
    assert keyword == {e.title: e.scores.keyword for e in seen_entries}, name
    vector = {e.title: e.scores.vector for e in entries}
    for e in seen_entries:
        if e.scores.vector is None:
            assert vector[e.title] is None, name
        else:
            assert vector[e.title] == pytest.approx(e.scores.vector, abs=1e-6), name


def _validate_hides(world: World, reader: Principal, hidden: dict[str, tuple[str, str]]) -> None:
    never = "rec_00000000000000000000000000"
    report = world.memory.validate([never, *(ids[0] for ids in hidden.values())], principal=reader)
    absent, *withheld = report.records
    for check in withheld:
        assert check.model_dump(exclude={"record_id"}) == absent.model_dump(exclude={"record_id"})
    dumped = report.model_dump_json()
    for _, version_id in hidden.values():
        assert version_id not in dumped


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_readers_fused_scores_and_confidence_do_not_weigh_hidden_records(
    backend: str, pg_cluster: PgCluster, tmp_path: Path
) -> None:
    """Fusion may not carry keyword scores' sizes to a reader who does not see everything.
    The agent's three notes keep their keyword order whatever is hidden (both query words;
    the second word twice; the second word once), but the sizes of their keyword scores
    move against each other as curator-only records holding the first word are added (it
    weighs less): fused scores or confidences made from those sizes would move with them,
    and count the hidden records."""
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    query = "zorbule quaffle"
    with _store(backend, tmp_path, pg_cluster) as store:
        memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
        try:
            notes = (("First note", "zorbule and quaffle"),
                     ("Second note", "quaffle again and quaffle twice"),
                     ("Third note", "quaffle alone here"))  # fmt: skip
            for title, body in notes:
                note = Content(kind="fact", scope="acme/app", title=title, body=body)
                memory.remember(note, principal=agent, draft=True)
            for n in range(30):  # enough other records that the words' weights stay above 0
                filler = Content(kind="fact", scope="acme/app", title=f"Filler {n}",
                                 body=f"gardens and weather, entry {n}")  # fmt: skip
                memory.remember(filler, principal=CURATOR)
            memory.index_pending()
            seen: list[list[tuple[list[tuple[str, int | None]], list[float], list[Any]]]] = []
            curator_scores: list[tuple[float | None, ...]] = []
            for hidden in range(3):
                secret = Content(kind="fact", scope="acme/app", title=f"Secret {hidden}",
                                 body=f"zorbule plan number {hidden}",
                                 acl=Acl(roles=("curator",)))  # fmt: skip
                memory.remember(secret, principal=CURATOR)
                memory.index_pending()
                reads = []
                for mode in ("keyword", "hybrid"):
                    hits = memory.search(query, principal=agent, mode=mode, include_drafts=True)
                    items = memory.retrieve(query, principal=agent, mode=mode, include_drafts=True)
                    ours = [h for h in hits.hits if h.title.endswith("note")]
                    reads.append((
                        [(h.title, h.scores.keyword_rank) for h in ours],
                        [h.scores.fused for h in ours],
                        [(i.title, i.scores.confidence) for i in items.items
                         if i.title.endswith("note")],
                    ))  # fmt: skip
                seen.append(reads)
                everything = memory.search(query, principal=CURATOR, mode="keyword",
                                           include_drafts=True)  # fmt: skip
                curator_scores.append(tuple(
                    h.scores.keyword for h in everything.hits if h.title.endswith("note")
                ))  # fmt: skip
            # the premise: the notes' keyword scores do move against each other ...
            ratios = [(s[1] or 0.0) / (s[0] or 1.0) for s in curator_scores]
            assert len(set(curator_scores)) == 3 and ratios[0] != pytest.approx(ratios[-1])
            # ... while their keyword order holds (and every read's order, below)
            keyword_order = [title for title, _ in seen[0][0][0]]
            assert keyword_order == ["First note", "Second note", "Third note"]
            for reads in seen[1:]:
                for (ranks, fused, confidence), (ranks0, fused0, confidence0) in zip(
                    reads, seen[0], strict=True
                ):
                    assert ranks == ranks0 and confidence == confidence0
                    # (a vector similarity moves in its last float digits as the index grows)
                    assert fused == pytest.approx(fused0, abs=1e-6)
        finally:
            memory.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_readers_own_keyword_score_does_not_count_hidden_records(
    backend: str, pg_cluster: PgCluster, tmp_path: Path
) -> None:
    """An agent's own draft holding a word of its choosing: were its keyword score shown,
    it would fall as curator-only records holding the word are added, counting them. Only a
    reader who sees everything is shown keyword scores; the others get the rank."""
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    with _store(backend, tmp_path, pg_cluster) as store:
        memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
        try:
            draft = Content(kind="fact", scope="acme/app", title="My note",
                            body="zorbule is the word I chose")  # fmt: skip
            memory.remember(draft, principal=agent, draft=True)
            seen: list[tuple[float | None, int | None]] = []
            for hidden in range(3):
                secret = Content(kind="fact", scope="acme/app", title=f"Secret {hidden}",
                                 body=f"zorbule plan number {hidden}",
                                 acl=Acl(roles=("curator",)))  # fmt: skip
                memory.remember(secret, principal=CURATOR)
                (hit,) = memory.search(
                    "zorbule", principal=agent, mode="keyword", include_drafts=True
                ).hits
                seen.append((hit.scores.keyword, hit.scores.keyword_rank))
                everything = memory.search(
                    "zorbule", principal=CURATOR, mode="keyword", include_drafts=True
                )
                assert all(h.scores.keyword is not None for h in everything.hits)
            assert seen == [(None, 1)] * 3
        finally:
            memory.close()
