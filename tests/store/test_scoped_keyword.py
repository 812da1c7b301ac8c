"""Keyword search restricted to the reader's scopes inside the index, on both stores.

SQLite: each chunk's scope is a token of its own FTS column, so a read limited to a few
scopes is an AND the FTS engine answers by seeking. PostgreSQL: a btree on the chunks' scope
lets the planner take a small scope's rows instead of the whole GIN match. On both, a kept
per-scope count says how small the scope is, and keyword recall then keeps every query
term for a small scope, even terms so common in the store at large that a store-wide query
drops them.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import cairn.retrieval.recall as recall
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, ContentPatch
from cairn.retrieval.recall import keyword_match, keyword_recall
from cairn.store.base import ChunkFilter, KeywordQuery, Store
from cairn.store.migrations import SQLITE_MIGRATIONS
from cairn.store.pg_migrations import latest_version
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from cairn.store.transfer import export_store, import_store
from tests.factories import CURATOR
from tests.pg import PgCluster, make_postgres_store
from tests.store.legacy import rewind_edges_postgres, rewind_edges_sqlite

BIG = 5_200  # above recall.PRUNE_FROM_CHUNKS: the store-wide query prunes common terms


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    assert BIG > recall.PRUNE_FROM_CHUNKS
    folder: Path = tmp_path_factory.mktemp("scoped-keyword")
    made: Store = (
        SqliteStore(folder / "cairn.db")
        if request.param == "sqlite"
        else make_postgres_store(request, folder)
    )
    memory = Memory(made, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=None)
    # "recommend" is in nearly every chunk of the store: a store-wide query drops it.
    contents = [
        Content(kind="fact", scope=f"chat/user-{i % 40}", title=f"turn {i}",
                body=f"I recommend option {i}.", acl=Acl(labels=("public",)))
        for i in range(BIG)
    ]  # fmt: skip
    contents += [
        Content(kind="fact", scope="chat/alice", title="hotel", body="Alice would recommend "
                "the harbour hotel.", acl=Acl(labels=("public",))),
        Content(kind="fact", scope="chat/alice", title="weather", body="It rained all week.",
                acl=Acl(labels=("public",))),
    ]  # fmt: skip
    for outcome in memory.remember_many(contents, principal=CURATOR):
        assert outcome.record is not None
    yield made
    made.close()


def _where(store: Store, *scopes: str | None) -> ChunkFilter:
    ids = {name: i for i, name in store.scopes().items()}
    return ChunkFilter(
        acl_ids=frozenset(a.id for a in store.acls()),
        statuses=frozenset({"active"}),
        scope_ids=None if scopes == (None,) else frozenset(ids[s] for s in scopes if s),
    )


def test_reach_counts_the_chunks_of_the_readers_scopes(store: Store) -> None:
    alice = _where(store, "chat/alice")
    assert store.keyword_reach(alice) == 2
    assert store.keyword_reach(_where(store, "chat/alice", "chat/user-0")) == 2 + BIG // 40
    # Not restricted by scope, or by scopes holding most of the store: the filter comes
    # after the match, the whole index is searched, so there is no bound to give.
    assert store.keyword_reach(_where(store, None)) is None
    broad = [f"chat/user-{i}" for i in range(30)]
    assert store.keyword_reach(_where(store, *broad)) is None


def test_a_small_scope_keeps_a_term_common_in_the_store(store: Store) -> None:
    alice = _where(store, "chat/alice")
    everyone = _where(store, None)
    # Store-wide, "recommend" is in almost every chunk: hopeless, so nothing is searched.
    assert keyword_match(store, "recommend", everyone) is None
    assert keyword_recall(store, "recommend", everyone, 10) == []
    # In Alice's two chunks the word is kept, and it finds her recommendation.
    assert keyword_match(store, "recommend", alice) == KeywordQuery(("recommend",))
    found = keyword_recall(store, "recommend", alice, 10)
    rows = store.chunk_rows([chunk_id for chunk_id, _ in found])
    assert [rows[chunk_id].title for chunk_id, _ in found] == ["hotel"]


def test_a_large_reach_is_pruned_as_before(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall, "FULL_QUERY_REACH", 1)
    assert keyword_match(store, "recommend", _where(store, "chat/alice")) is None


def test_a_store_wide_query_never_counts_a_stopword(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[str] = []
    real = store.doc_freq

    def counting(term: str) -> int:
        counted.append(term)
        return real(term)

    monkeypatch.setattr(store, "doc_freq", counting)
    # "would" and "the" are stopwords (dropped whatever their counts): counting them would
    # walk their posting lists for nothing. The words that decide are still counted, and
    # the query keeps the one that is not hopeless.
    found = keyword_match(store, "would the harbour recommend the hotel", _where(store, None))
    assert found is not None and set(found.terms) == {"harbour", "hotel"}
    assert "the" not in counted and "would" not in counted
    assert {"harbour", "recommend", "hotel"} <= set(counted)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)  # the scope column is SQLite's
def test_query_words_never_match_the_scope_column(store: Store) -> None:
    alice = _where(store, "chat/alice")
    (scope_id,) = alice.scope_ids or ()
    token = KeywordQuery((f"zs{scope_id}",))
    # The token is in the index (reach counts it), yet a query naming it finds nothing,
    # whether the search is scope-restricted in the index or filtered after.
    assert store.keyword_search(token, alice, 10) == []
    assert store.keyword_search(token, _where(store, None), 10) == []


def test_a_schema_2_store_is_upgraded_and_searchable(tmp_path: Path) -> None:
    path = tmp_path / "cairn.db"
    made = SqliteStore(path)
    memory = Memory(made, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder=None)
    memory.remember_many(
        [Content(kind="fact", scope=f"team/{name}", title=f"{name} runbook",
                 body="Rotate the replica password.", acl=Acl(labels=("public",)))
         for name in ("red", "blue", "green", "gold", "grey")],
        principal=CURATOR,
    )  # fmt: skip
    # Put the index back the way schema 2 built it: no scope column, no scope counts.
    with made._write_txn() as conn:
        conn.execute("DROP TABLE scope_chunks")
        conn.execute("DROP TABLE chunks_vocab")
        conn.execute("DROP TABLE chunks_fts")
        conn.execute(
            "CREATE VIRTUAL TABLE chunks_fts USING fts5(title, heading, text, content='', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')")
        conn.execute(
            "INSERT INTO chunks_fts (rowid, title, heading, text) SELECT c.id, "
            "json_extract(v.content, '$.title'), c.heading, c.text "
            "FROM chunks c JOIN versions v ON v.id = c.version_id"
        )
        conn.execute("DELETE FROM schema_migrations WHERE version > 2")
        rewind_edges_sqlite(conn)
    made.close()

    upgraded = SqliteStore(path)
    try:
        assert upgraded.schema_version == len(SQLITE_MIGRATIONS)
        red = _where(upgraded, "team/red")
        assert upgraded.keyword_reach(red) == 1
        found = upgraded.keyword_search(KeywordQuery(("replica",)), red, 10)
        rows = upgraded.chunk_rows([chunk_id for chunk_id, _ in found])
        assert [rows[chunk_id].title for chunk_id, _ in found] == ["red runbook"]
        assert (
            len(upgraded.keyword_search(KeywordQuery(("replica",)), _where(upgraded, None), 10))
            == 5
        )
    finally:
        upgraded.close()


def _titles(store: Store, found: list[tuple[int, float]]) -> list[str]:
    rows = store.chunk_rows([chunk_id for chunk_id, _ in found])
    return [rows[chunk_id].title for chunk_id, _ in found]


# Enough teams that two of them hold less than a quarter of the store (SCOPED_SEARCH_MAX_SHARE).
TEAMS = (
    "red",
    "blue",
    "green",
    "gold",
    "grey",
    "teal",
    "navy",
    "pink",
    "plum",
    "rust",
    "sand",
    "jade",
)


def _runbooks(*teams: str) -> list[Content]:
    return [
        Content(kind="fact", scope=f"team/{name}", title=f"{name} runbook",
                body="Rotate the replica password.", acl=Acl(labels=("public",)))
        for name in teams
    ]  # fmt: skip


def test_postgres_counts_a_scopes_chunks_on_every_write_path(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    url, copy_url = pg_cluster.new_database(), pg_cluster.new_database()
    try:
        with PostgresStore(url) as made:
            memory = Memory(made, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder=None)
            outcomes = memory.remember_many(_runbooks(*TEAMS), principal=CURATOR)
            assert all(outcome.record is not None for outcome in outcomes)
            assert made.keyword_reach(_where(made, "team/red")) == 1
            first = outcomes[0].record
            assert first is not None
            # A new version adds its chunks (the old version's stay, as history).
            memory.update(first.id, ContentPatch(body="Rotate the replica password weekly."),
                          principal=CURATOR)  # fmt: skip
            assert made.keyword_reach(_where(made, "team/red")) == 2
            assert made.keyword_reach(_where(made, "team/red", "team/blue")) == 3
            buffer = io.StringIO()
            export_store(made, buffer)
        # An import re-indexes every version as the owner: the counts come back with it.
        with PostgresStore(copy_url) as copy:
            import_store(copy, buffer.getvalue().splitlines())
            assert copy.keyword_reach(_where(copy, "team/red")) == 2
            assert copy.keyword_reach(_where(copy, "team/blue")) == 1
    finally:
        pg_cluster.drop_database(url)
        pg_cluster.drop_database(copy_url)


def test_a_schema_2_postgres_store_is_upgraded_with_its_scopes_counted(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    url = pg_cluster.new_database()
    try:
        with PostgresStore(url) as made:
            memory = Memory(made, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder=None)
            memory.remember_many(_runbooks("red", "blue", "green", "gold", "grey"),
                                 principal=CURATOR)  # fmt: skip
        # Put the database back the way schema 2 left it: no scope index, no counts.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER chunks_count_scopes ON cairn.chunks")
            conn.execute("DROP FUNCTION cairn.cairn_count_scope_chunks()")
            conn.execute("DROP TABLE cairn.scope_chunks")
            conn.execute("DROP INDEX cairn.chunks_scope")
            conn.execute("DELETE FROM cairn.schema_migrations WHERE version > 2")
            rewind_edges_postgres(conn)
        with PostgresStore(url) as upgraded:
            assert upgraded.schema_version == latest_version()
            red = _where(upgraded, "team/red")
            assert upgraded.keyword_reach(red) == 1
            assert _titles(upgraded, keyword_recall(upgraded, "replica", red, 10)) == [
                "red runbook"
            ]
            everyone = _where(upgraded, None)
            assert len(keyword_recall(upgraded, "replica", everyone, 10)) == 5
    finally:
        pg_cluster.drop_database(url)
