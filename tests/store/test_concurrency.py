"""Concurrency across "server processes": several stores (own connections) on one database.

Run on both backends. Two store objects on one SQLite file, or on one PostgreSQL database,
behave like two cairn processes sharing a store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from cairn.errors import Conflict, DuplicateContent
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import AuditQuery, Content, ContentPatch, Principal, ProposalStatus
from cairn.store.base import ChangeSet, Store
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from tests.conftest import content
from tests.pg import PgCluster

StoreOpener = Callable[[], Store]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreOpener]:
    """Opens another store on one shared database, as another process would."""
    opened: list[Store] = []
    if request.param == "sqlite":
        target: str = str(tmp_path / "cairn.db")

        def make() -> Store:
            opened.append(SqliteStore(target))
            return opened[-1]

    else:
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        target = cluster.new_database()
        request.addfinalizer(lambda: cluster.drop_database(target))

        def make() -> Store:
            opened.append(PostgresStore(target))
            return opened[-1]

    yield make
    for store in opened:
        store.close()


def _memory(store: Store) -> Memory:
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML))


def _hold_commits_at(barrier: threading.Barrier, store: Store) -> None:
    """Make ``store.commit`` wait until every racer has finished its reads and is about to
    commit, so the race is decided by the store's own precondition check, every time. Only
    the first commit waits: a change the gate decides again commits straight away."""
    real = store.commit
    waited: list[bool] = []

    def commit(changesets: Sequence[ChangeSet]) -> list[int]:
        if not waited:
            waited.append(True)
            barrier.wait(timeout=60)
        return real(changesets)

    store.commit = commit  # type: ignore[method-assign]


@pytest.mark.parametrize("round_", range(3))
def test_two_curators_accept_conflicting_proposals_exactly_one_wins(
    open_store: StoreOpener, curator: Principal, agent: Principal, round_: int
) -> None:
    setup_store = open_store()
    setup = _memory(setup_store)
    record = setup.remember(content("Deploys happen on Tuesdays"), principal=curator).record
    assert record is not None
    first = setup.update(record.id, ContentPatch(body="Deploys happen on Wednesdays"),
                         principal=agent)  # fmt: skip
    second = setup.update(record.id, ContentPatch(body="Deploys happen on Fridays"),
                          principal=agent)  # fmt: skip
    assert first.proposal.status is second.proposal.status is ProposalStatus.PENDING

    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def accept(proposal_id: str) -> None:
        store = open_store()
        _hold_commits_at(barrier, store)
        try:
            results[proposal_id] = _memory(store).decide(
                proposal_id, approve=True, principal=curator
            )
        except Conflict as exc:
            results[proposal_id] = exc

    threads = [threading.Thread(target=accept, args=(p.proposal.id,)) for p in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 2
    conflicts = [r for r in results.values() if isinstance(r, Conflict)]
    assert len(conflicts) == 1, results  # exactly one loser, told it lost
    winner_id = next(pid for pid, r in results.items() if not isinstance(r, Conflict))
    loser_id = next(pid for pid, r in results.items() if isinstance(r, Conflict))

    head = setup_store.get_record(record.id)
    assert head is not None and head.current_version == 2
    assert [v.number for v in setup_store.list_versions(record.id)] == [1, 2]
    winner = setup_store.get_proposal(winner_id)
    loser = setup_store.get_proposal(loser_id)
    assert winner is not None and winner.status is ProposalStatus.ACCEPTED
    assert loser is not None and loser.status is ProposalStatus.PENDING
    assert setup.is_stale(loser)  # the curator is told to rebase it
    approvals = setup.audit(AuditQuery(action="approve", proposal_id=loser_id), principal=curator)
    assert approvals == []


@pytest.mark.parametrize("round_", range(3))
def test_the_same_content_from_two_processes_at_once_is_stored_once(
    open_store: StoreOpener, curator: Principal, round_: int
) -> None:
    """Both writers have checked for a duplicate (none) and both commit at once: the store's
    own check (on PostgreSQL under a lock for the scope's new content) lets one through, and
    the other, decided again, is refused as a duplicate of it."""
    barrier = threading.Barrier(2)
    results: list[object] = []

    def write() -> None:
        store = open_store()
        _hold_commits_at(barrier, store)
        try:
            results.append(_memory(store).remember(content("Freeze on Fridays"), principal=curator))
        except Conflict as exc:
            results.append(exc)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 2
    assert sum(isinstance(r, DuplicateContent) for r in results) == 1, results
    check = open_store()
    stored = check.find_by_hashes("acme/app", [content("Freeze on Fridays").content_hash()])
    assert len(stored) == 1


def test_many_writers_at_once_lose_nothing(
    open_store: StoreOpener, curator: Principal, agent: Principal
) -> None:
    writers, per_writer, bumps = 4, 15, 10
    seed_store = open_store()
    seed = _memory(seed_store)
    shared = seed.remember(content("A shared counter", kind="skill"), principal=curator).record
    assert shared is not None
    created: list[str] = []
    bumped: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def write(label: str) -> None:
        try:
            writer_store = open_store()
            memory = _memory(writer_store)
            start.wait(timeout=60)
            for n in range(per_writer):
                body = f"{label} wrote {n}"
                outcome = memory.remember(
                    Content(kind="episode", scope="acme/app", title=body, body=body),
                    principal=agent,
                )
                assert outcome.record is not None
                created.append(outcome.record.id)
            done = 0
            while done < bumps:  # optimistic concurrency: re-read and retry on conflict
                head = writer_store.get_record(shared.id)
                assert head is not None
                try:
                    patch = ContentPatch(body=f"{head.content.body} +{label}")
                    memory.update(
                        shared.id, patch, principal=curator, base_version_id=head.current_version_id
                    )
                except Conflict:
                    continue
                done += 1
            bumped.append(done)
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert len(created) == writers * per_writer
    found = seed_store.get_records(created)
    assert set(found) == set(created)
    versions = seed_store.list_versions(shared.id)
    assert [v.number for v in versions] == list(range(1, 1 + writers * bumps + 1))
    audit = seed_store.list_audit(AuditQuery(limit=100_000))
    seqs = [e.seq for e in audit]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert seed_store.count_audit() == 1 + writers * per_writer + writers * bumps


def test_a_pinned_update_never_overwrites_a_newer_version(
    open_store: StoreOpener, curator: Principal
) -> None:
    store = open_store()
    memory = _memory(store)
    record = memory.remember(content("Pinned"), principal=curator).record
    assert record is not None
    other = _memory(open_store())
    real_get = store.get_record
    calls = {"n": 0}

    def get_record(record_id: str) -> object:
        # After the gate's staleness check (its first read), another process commits.
        calls["n"] += 1
        if calls["n"] == 2:
            other.update(record.id, ContentPatch(body="newer"), principal=curator)
        return real_get(record_id)

    store.get_record = get_record  # type: ignore[method-assign,assignment]  (the gate's too)
    with pytest.raises(Conflict):
        memory.update(record.id, ContentPatch(body="based on v1"), principal=curator,
                      base_version_id=record.current_version_id)  # fmt: skip


def test_a_reader_tailing_chunk_changes_misses_nothing(
    open_store: StoreOpener, curator: Principal
) -> None:
    """Writers in several processes index chunks concurrently while another process tails
    ``chunk_changes`` by seq (as each server's vector catalog does): every chunk is seen, in
    its latest state, and nothing committed later ever gets a lower seq than one already read."""
    writers = [_memory(open_store()) for _ in range(3)]
    reader = open_store()
    per_writer = 12
    done = threading.Event()
    seen: dict[int, tuple[int, str]] = {}  # chunk id -> (seq, status)
    errors: list[BaseException] = []

    def tail() -> None:
        since = 0
        try:
            while True:
                finished = done.is_set()
                for change in reader.chunk_changes(since):
                    assert change.seq > since
                    since = change.seq
                    seen[change.id] = (change.seq, change.status)
                if finished:
                    return
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def write(memory: Memory, n: int) -> None:
        try:
            for i in range(per_writer):
                outcome = memory.remember(
                    content(f"Writer {n} note {i}", body=f"Body {n} {i}."), principal=curator
                )
                assert outcome.record is not None
                if i % 4 == 0:
                    memory.archive(outcome.record.id, principal=curator)
        except BaseException as exc:
            errors.append(exc)

    tailer = threading.Thread(target=tail)
    tailer.start()
    threads = [threading.Thread(target=write, args=(m, n)) for n, m in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    tailer.join()
    assert not errors, errors
    final = {c.id: (c.seq, c.status) for c in reader.chunk_changes(0)}
    assert len(final) == reader.chunk_count() == 3 * per_writer
    assert seen == final  # the tail ended exactly where a fresh full read is
    assert sum(status == "archived" for _, status in final.values()) == 3 * 3
