"""SQLite keyword search ranks the best FTS matches first and filters only those.

At 1M chunks that two-step query is what keeps keyword recall fast; it must return exactly
what the one-step query (every match joined to its chunk, filtered, ranked) returns, for
permissive and selective readers alike. The depth is shrunk here so that both the two-step
answer and the fallback run on a small store.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cairn.store.sqlite as sqlite_module
from cairn.errors import StoreError
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, Sensitivity, Status
from cairn.search.fts import match_expression, select_terms
from cairn.store.base import ChunkFilter, KeywordQuery
from cairn.store.filters import to_sql
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR

WORDS = [
    "rotation",
    "password",
    "database",
    "schema",
    "replica",
    "backup",
    "restore",
    "vacuum",
    "index",
    "plan",
]
LABELS = (("public",), ("internal",), ("confidential",))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    folder: Path = tmp_path_factory.mktemp("large-keyword")
    made = SqliteStore(folder / "cairn.db")
    memory = Memory(made, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=None)
    rng = random.Random(5)
    contents = [
        Content(
            kind="fact", scope=f"acme/team-{rng.randrange(6)}",
            # Repeated words and varied lengths spread the BM25 scores; some tie exactly.
            title=" ".join(rng.choices(WORDS, k=rng.randrange(1, 4))) + f" #{i}",
            body=" ".join(rng.choices(WORDS, k=rng.randrange(3, 30))) + ".",
            acl=Acl(labels=LABELS[i % 3], sensitivity=Sensitivity.LOW),
        )
        for i in range(400)
    ]  # fmt: skip
    # Same words, same lengths: equal scores, so a cut between them must follow chunk ids.
    contents += [
        Content(kind="fact", scope=f"acme/team-{i % 6}", title=f"rotation password #{i}",
                body="database schema.", acl=Acl(labels=LABELS[i % 3]))
        for i in range(400, 460)
    ]  # fmt: skip
    outcomes = memory.remember_many(contents, principal=CURATOR)
    for outcome in outcomes[::7]:
        assert outcome.record is not None
        memory.transition(outcome.record.id, Status.ARCHIVED, principal=CURATOR)
    yield made
    made.close()


def _one_step(store: SqliteStore, query: KeywordQuery, where: ChunkFilter, limit: int) -> list[Any]:
    clause, params = to_sql(where, store.dialect)
    rows = store._read(
        "SELECT c.id, -bm25(chunks_fts, 3.0, 1.5, 1.0) AS score "
        "FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
        f"WHERE chunks_fts MATCH ? AND {clause} ORDER BY score DESC, c.id LIMIT ?",
        [f"{{title heading text}} : ({match_expression(query.terms)})", *params, limit],
    )
    return [(int(r["id"]), float(r["score"])) for r in rows]


@pytest.mark.parametrize("slices", [1, 3])
def test_two_step_keyword_search_equals_the_one_step_query(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch, slices: int
) -> None:
    """Also when the store is cut into chunk-id ranges ranked side by side, as a large
    one is: the best of the ranges' answers is the whole store's."""
    monkeypatch.setattr(sqlite_module, "_KEYWORD_DEPTH_MIN", 1)
    monkeypatch.setattr(sqlite_module, "_KEYWORD_DEPTH_PER_RESULT", 2)
    monkeypatch.setattr(sqlite_module, "_KEYWORD_SLICED_FROM", 1)
    monkeypatch.setattr(sqlite_module, "_keyword_slices", lambda: slices)
    calls: list[str] = []
    read = store._read

    def counting(sql: str, params: Any = ()) -> Any:
        if "bm25(" in sql:  # the ranking queries, not the lookups around them
            calls.append(sql)
        return read(sql, params)

    monkeypatch.setattr(store, "_read", counting)
    acls = {a.labels: a.id for a in store.acls()}
    scopes = sorted(store.scopes())
    rng = random.Random(9)
    steps: list[int] = []
    for _ in range(120):
        where = ChunkFilter(
            acl_ids=frozenset(acls[label] for label in rng.sample(LABELS, rng.randrange(1, 4))),
            statuses=frozenset(rng.sample(["active", "archived"], rng.randrange(1, 3))),
            scope_ids=frozenset(rng.sample(scopes, rng.randrange(1, len(scopes) + 1))),
        )
        match = KeywordQuery(select_terms(" ".join(rng.sample(WORDS, rng.randrange(1, 4)))))
        assert match.terms
        limit = rng.choice([1, 5, 20, 80])
        calls.clear()
        found = store.keyword_search(match, where, limit)
        steps.append(len(calls))
        assert found == _one_step(store, match, where, limit)
    # Both the two-step answer and the fallback to the one-step query were exercised, in
    # each range.
    assert slices in steps and 2 * slices in steps
    assert all(slices <= step <= 2 * slices for step in steps)


def test_chunk_id_ranges_cover_every_id_once() -> None:
    assert sqlite_module._id_ranges(10, 4) == [(0, sqlite_module._OPEN_END)]  # a small store
    for chunks, slices in ((200_000, 2), (1_000_003, 3), (999_999, 4)):
        ranges = sqlite_module._id_ranges(chunks, slices)
        assert len(ranges) == slices and ranges[0][0] <= 1
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        assert ranges[-1][1] > 10 * chunks  # chunks committed meanwhile fall in the last
        widths = [hi - lo for lo, hi in ranges[1:-1]]
        assert all(abs(w - chunks / slices) <= 1 for w in widths)


def test_a_reader_who_sees_little_still_gets_a_full_list(store: SqliteStore) -> None:
    """Others' chunks fill the first ``depth`` matches; the reader's are found anyway."""
    archived = ChunkFilter(acl_ids=frozenset(a.id for a in store.acls()),
                           statuses=frozenset({"archived"}))  # fmt: skip
    everything = _one_step(store, KeywordQuery(("rotation", "password")), archived, 1000)
    assert 40 < len(everything) < 100  # every seventh record, out of ~400 matches
    found = store.keyword_search(KeywordQuery(("rotation", "password")), archived, 40)
    assert found == everything[:40]


def test_a_closed_store_refuses_a_ranged_keyword_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_KEYWORD_SLICED_FROM", 1)
    monkeypatch.setattr(sqlite_module, "_keyword_slices", lambda: 2)
    made = SqliteStore(tmp_path / "cairn.db")
    memory = Memory(made, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder=None)
    memory.remember(Content(kind="fact", scope="acme/app", title="Rotation", body="rotation plan"),
                    principal=CURATOR)  # fmt: skip
    everyone = ChunkFilter(acl_ids=frozenset(a.id for a in made.acls()),
                           statuses=frozenset({"active"}))  # fmt: skip
    assert len(made.keyword_search(KeywordQuery(("rotation",)), everyone, 5)) == 1
    made.close()
    with pytest.raises(StoreError, match="closed"):
        made.keyword_search(KeywordQuery(("rotation",)), everyone, 5)
