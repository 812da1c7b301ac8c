"""The stages after recall together: defaults and a boost that applies to no query keep
fusion's order, knobs move it."""

from __future__ import annotations

from datetime import timedelta

from cairn.retrieval.fuse import collapse, fuse
from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig, rank
from cairn.retrieval.when import TimeWindow
from cairn.store.base import ChunkRow
from tests.factories import T0, chunk_meta

SCOPES = {1: "chat/alice"}


def _turn(i: int, session_day: int, text: str) -> ChunkRow:
    meta = chunk_meta(i, kind="episode", source_time=T0 + timedelta(days=session_day))
    return ChunkRow(meta, 1, "", "", 0, len(text), text, f"turn {i}")


def test_defaults_are_plain_fusion() -> None:
    rows = {i: _turn(i, i, f"text {i}") for i in range(1, 6)}
    keyword = [(i, 10.0 - i) for i in (1, 2, 3, 4, 5)]
    vector = [(i, 1.0 - i / 10) for i in (3, 1, 5, 2, 4)]
    expected = collapse(fuse(keyword, vector, mode="hybrid"), rows, SCOPES, 3)
    got = rank(keyword, vector, rows, SCOPES, query="Which test in Tampa?", mode="hybrid", k=3)
    assert got == expected
    assert not DEFAULT_RANKING.reorders


def test_an_entity_boost_moves_only_queries_that_name_an_entity() -> None:
    # turn 2 ranks second by fusion but is the only one naming Tampa
    rows = {1: _turn(1, 0, "we went to the beach"), 2: _turn(2, 1, "the beach in Tampa")}
    keyword = [(1, 9.0), (2, 8.0)]
    config = RankingConfig(entity_weight=0.5)
    plain = rank(keyword, [], rows, SCOPES, query="which beach", mode="keyword", k=2, config=config)
    assert not config.reorders_for("which beach", None)
    assert [h.record_id for h in plain] == ["rec-1", "rec-2"]
    named = rank(
        keyword, [], rows, SCOPES, query="Which beach in Tampa?", mode="keyword", k=2, config=config
    )
    assert [h.record_id for h in named] == ["rec-2", "rec-1"]


def test_session_evidence_lifts_the_turns_of_a_well_supported_session() -> None:
    # turn 1 is the single best match, alone on day 0; turns 2-4 share day 5
    rows = {1: _turn(1, 0, "a"), 2: _turn(2, 5, "b"), 3: _turn(3, 5, "c"), 4: _turn(4, 5, "d")}
    keyword = [(i, 10.0 - i) for i in (1, 2, 3, 4)]
    plain = rank(keyword, [], rows, SCOPES, query="q", mode="keyword", k=2)
    assert [h.record_id for h in plain] == ["rec-1", "rec-2"]
    config = RankingConfig(session_weight=0.5, session_depth=2)
    boosted = rank(keyword, [], rows, SCOPES, query="q", mode="keyword", k=2, config=config)
    assert [h.record_id for h in boosted] == ["rec-2", "rec-3"]
    assert boosted[0].scores.fused > plain[0].scores.fused


def test_context_weight_zero_ranks_by_own_chunks_only() -> None:
    own = _turn(1, 0, "own")
    other = _turn(2, 0, "other")
    context = ChunkRow(
        chunk_meta(3, record_id="rec-2", version_id="ver-2", kind="episode"),
        1,
        "context~1",
        "",
        0,
        3,
        "ctx",
        "turn 2",
    )
    rows = {1: own, 2: other, 3: context}
    keyword = [(1, 9.0), (2, 8.0), (3, 7.0)]
    summed = rank(keyword, [], rows, SCOPES, query="q", mode="keyword", k=2)
    assert summed[0].record_id == "rec-2"  # its context adds to its own chunk
    alone = rank(
        keyword,
        [],
        rows,
        SCOPES,
        query="q",
        mode="keyword",
        k=2,
        config=RankingConfig(context_weight=0.0),
    )
    assert alone[0].record_id == "rec-1"


def test_a_time_in_the_query_lifts_what_was_said_then_and_cuts_nothing() -> None:
    # five equally matching turns on days 0..4; the query names day 3
    rows = {i: _turn(i, i - 1, f"text {i}") for i in range(1, 6)}
    keyword = [(i, 5.0) for i in (1, 2, 3, 4, 5)]
    day3 = TimeWindow(T0 + timedelta(days=3), T0 + timedelta(days=4), "on that day")
    config = RankingConfig(time_weight=1.0)
    plain = rank(keyword, [], rows, SCOPES, query="q", mode="keyword", k=5)
    timed = rank(
        keyword, [], rows, SCOPES, query="q", mode="keyword", k=5, config=config, window=day3
    )
    assert timed[0].record_id == "rec-4"  # said on day 3
    assert {h.record_id for h in timed} == {h.record_id for h in plain}  # a boost, not a cut
    # nearer days gain more than farther ones: day 2 and 4 before day 0
    order = [h.record_id for h in timed]
    assert order.index("rec-3") < order.index("rec-1") and order.index("rec-5") < order.index(
        "rec-1"
    )
    # no window, or a zero weight: fusion's order stands
    assert rank(keyword, [], rows, SCOPES, query="q", mode="keyword", k=5, config=config) == plain
    assert rank(keyword, [], rows, SCOPES, query="q", mode="keyword", k=5, window=day3) == plain
