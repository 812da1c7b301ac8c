"""FTS5 helpers against a real SQLite FTS5 index."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.search import fts
from cairn.search.fts import (
    FTS5_TOKENIZE,
    TermOptions,
    build_match_query,
    doc_freq_from_vocab,
    fts_tokens,
    quote_term,
    select_terms,
)

FTS5_SYNTAX = [
    '"',
    '""',
    "*",
    "NEAR",
    "NEAR(",
    ")",
    "(",
    "-",
    "+",
    "^",
    ":",
    "AND",
    "OR",
    "NOT",
    "{",
    "}",
    "title:",
    "body:",
    "'",
    "\\",
    "\x00",
    "near/3",
    "a*",
    "Café",
    "🙂",
    "日本語",
]

query_text = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(FTS5_SYNTAX), st.text(max_size=5))).map(" ".join),
    st.lists(st.sampled_from(FTS5_SYNTAX)).map("".join),
)


def _new_db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='{FTS5_TOKENIZE}')")
    conn.execute("CREATE VIRTUAL TABLE docs_vocab USING fts5vocab(docs, 'row')")
    conn.execute("CREATE VIRTUAL TABLE docs_inst USING fts5vocab(docs, 'instance')")
    return conn


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = _new_db()
    yield conn
    conn.close()


def _insert(conn: sqlite3.Connection, rows: dict[int, str]) -> None:
    conn.executemany("INSERT INTO docs(rowid, title, body) VALUES (?, '', ?)", sorted(rows.items()))


def _search(conn: sqlite3.Connection, query: str | None) -> list[int]:
    if query is None:
        return []
    sql = "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), rowid"
    return [int(r[0]) for r in conn.execute(sql, (query,))]


# One shared database for the property tests: hypothesis re-runs the body many
# times and function-scoped fixtures would not be reset between examples.
_PROPERTY_DB = _new_db()
_insert(
    _PROPERTY_DB,
    {
        1: "Café au lait near the station",
        2: "NOT a drill: title AND body OR more",
        3: "日本語のテキスト and emoji 🙂 and naïve résumé",
        4: "the the the the common words",
    },
)


def _holding_any(conn: sqlite3.Connection, terms: tuple[str, ...]) -> set[int]:
    """The rows FTS5's own index lists for any of ``terms`` (its instance vocabulary): what
    an OR of plain terms must match, found without MATCH."""
    found: set[int] = set()
    for term in terms:
        found |= {
            int(r[0]) for r in conn.execute("SELECT doc FROM docs_inst WHERE term = ?", (term,))
        }
    return found


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query_text)
def test_match_finds_exactly_the_rows_holding_a_kept_term(text: str) -> None:
    """Whatever the text (operators, quotes, columns, NUL), the MATCH built from it never
    raises and matches exactly the rows holding one of the terms kept: nothing in the text
    acts as syntax that would narrow (NOT, AND, a column filter) or widen (a prefix) it."""
    terms = select_terms(text)
    query = build_match_query(text)
    assert (query is None) == (not terms)
    assert set(_search(_PROPERTY_DB, query)) == _holding_any(_PROPERTY_DB, terms)


@settings(max_examples=200)
@given(query_text)
def test_match_with_doc_freq_finds_the_rows_of_its_terms(text: str) -> None:
    options: TermOptions = {
        "doc_freq": doc_freq_from_vocab(_PROPERTY_DB, "docs_vocab"),
        "total_docs": 4,
        "max_terms": 3,
    }
    terms = select_terms(text, **options)
    assert len(terms) <= 3
    query = build_match_query(text, **options)
    assert set(_search(_PROPERTY_DB, query)) == _holding_any(_PROPERTY_DB, terms)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_tokens_equal_the_terms_fts5_indexes(text: str) -> None:
    conn = _new_db()
    conn.execute("INSERT INTO docs(rowid, title, body) VALUES (1, '', ?)", (text,))
    indexed = [r[0] for r in conn.execute("SELECT term FROM docs_inst ORDER BY offset")]
    conn.close()
    assert fts_tokens(text) == indexed


# Scripts assigned in Unicode 6.1 (SQLite's tables) on which the pure-Python
# fallback is exact; outside them it only approximates.
common_scripts = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=0x20, max_codepoint=0x1DF),  # ASCII, Latin-1, Latin Ext
        st.characters(min_codepoint=0x391, max_codepoint=0x3A1),  # Greek
        st.characters(min_codepoint=0x3B1, max_codepoint=0x3C9),
        st.characters(min_codepoint=0x400, max_codepoint=0x527),  # Cyrillic
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FCB),  # CJK
        st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul
        st.sampled_from("\u0301\u0308\u0327\u0130 \t\n-_.,;:!?\"'()[]{}"),
    )
)


@settings(max_examples=300)
@given(common_scripts)
def test_pure_python_fallback_agrees_on_common_scripts(text: str) -> None:
    assert fts._fallback_tokens(text) == fts_tokens(text)


def test_tokens_fold_case_and_diacritics() -> None:
    assert fts_tokens("Café NAÏVE, résumé!") == ["cafe", "naive", "resume"]
    assert fts_tokens("x-ray_v2.0") == ["x", "ray", "v2", "0"]
    assert fts_tokens("") == []


@pytest.mark.parametrize("text", ["", "   ", "!!! ???", '"', "*", "the and of", "What is it?"])
def test_nothing_searchable_gives_none(text: str) -> None:
    assert build_match_query(text) is None


def test_query_terms_are_quoted_deduplicated_and_or_ed() -> None:
    assert build_match_query('Why did we pick SQLite? sqlite "FTS5"') == (
        '"pick" OR "sqlite" OR "fts5"'
    )


def test_quote_term_doubles_quotes() -> None:
    assert quote_term('a"b') == '"a""b"'


def test_operators_are_plain_words(db: sqlite3.Connection) -> None:
    _insert(db, {1: "postgres sqlite", 2: "near the body title"})
    # Unquoted, "-sqlite" would be a syntax error and "title:" a column filter.
    assert _search(db, build_match_query("postgres -sqlite")) == [1]
    assert _search(db, build_match_query("title: NEAR(body")) == [2]


def test_diacritics_and_case_match(db: sqlite3.Connection) -> None:
    _insert(db, {1: "the cafe on the corner", 2: "a naive approach", 3: "unrelated"})
    assert _search(db, build_match_query("Café")) == [1]
    assert _search(db, build_match_query("CAFE")) == [1]
    assert _search(db, build_match_query("NAÏVE")) == [2]


def test_bm25_ranks_the_most_relevant_document_first(db: sqlite3.Connection) -> None:
    _insert(
        db,
        {
            1: "We chose PostgreSQL for the analytics warehouse.",
            2: "Migration plan: move the memory store from SQLite to PostgreSQL, "
            "keep SQLite for the embedded default. SQLite WAL mode matters.",
            3: "Lunch menu for Friday.",
            4: "SQLite is small.",
        },
    )
    hits = _search(db, build_match_query("sqlite migration of the memory store"))
    assert hits[0] == 2
    assert 3 not in hits and 1 not in hits


def test_frequent_terms_are_dropped(db: sqlite3.Connection) -> None:
    rows = {i: f"memory note number {i}" for i in range(1, 11)}
    rows[11] = "memory about hnswlib"
    _insert(db, rows)
    df = doc_freq_from_vocab(db, "docs_vocab")
    assert df("memory") == 11 and df("hnswlib") == 1 and df("absent") == 0
    query = build_match_query("memory hnswlib", doc_freq=df, total_docs=11)
    assert query == '"hnswlib"'
    assert _search(db, query) == [11]
    # Without frequencies the common term stays in.
    assert build_match_query("memory hnswlib") == '"memory" OR "hnswlib"'


def test_all_frequent_keeps_the_rarest(db: sqlite3.Connection) -> None:
    rows = {i: "alpha beta" for i in range(1, 11)}
    rows.update({i: "alpha beta gamma" for i in range(11, 16)})
    rows.update({i: "alpha" for i in range(16, 21)})
    _insert(db, rows)
    df = doc_freq_from_vocab(db, "docs_vocab")  # alpha 20, beta 15, gamma 5 of 20
    query = build_match_query("alpha beta gamma", doc_freq=df, total_docs=20, max_df_ratio=0.1)
    assert query == '"beta" OR "gamma"'
    one = build_match_query(
        "alpha beta gamma", doc_freq=df, total_docs=20, max_df_ratio=0.1, keep_rarest=1
    )
    assert one == '"gamma"'


def test_max_terms_prefers_rare_terms_and_keeps_query_order() -> None:
    freq = {"w1": 50, "w2": 1, "w3": 40, "w4": 2}
    query = build_match_query("w1 w2 w3 w4", doc_freq=freq.__getitem__, max_terms=2)
    assert query == '"w2" OR "w4"'
    assert build_match_query("w1 w2 w3 w4", max_terms=2) == '"w1" OR "w2"'


def test_custom_stopwords() -> None:
    assert build_match_query("the memory", stopwords={"memory"}) == '"the"'


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        build_match_query("x", max_terms=0)
    with pytest.raises(ValueError):
        build_match_query("x", max_df_ratio=1.5)


def test_vocab_name_is_validated(db: sqlite3.Connection) -> None:
    with pytest.raises(ValueError):
        doc_freq_from_vocab(db, "docs_vocab; DROP TABLE docs")
    assert doc_freq_from_vocab(db, "main.docs_vocab")("x") == 0
