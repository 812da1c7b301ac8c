"""Stage 3 on its own: chunk-level fusion, then one hit per version."""

from __future__ import annotations

import pytest

from cairn.retrieval import fuse as fuse_module
from cairn.retrieval.fuse import CITED_CHUNKS_PER_HIT, RRF_K, collapse, fuse, max_fused_score
from cairn.retrieval.types import Hit
from cairn.retrieval.weights import DEFAULT_CONTEXT_WEIGHT
from cairn.search.fusion import FusedHit
from cairn.store.base import ChunkRow
from tests.factories import chunk_meta

SCOPES = {1: "team/app"}


def _row(chunk_id: int, version: str, chunk_key: str, text: str = "text") -> ChunkRow:
    meta = chunk_meta(
        chunk_id, id=chunk_id, record_id=f"rec_{version}", version_id=f"ver_{version}"
    )
    return ChunkRow(
        meta=meta,
        version_no=1,
        chunk_key=chunk_key,
        heading="",
        start=0,
        end=len(text),
        text=text,
        title=f"Title {version}",
    )


def _keyword_only(order: list[int]) -> list[tuple[int, float]]:
    return [(chunk_id, 10.0 - n) for n, chunk_id in enumerate(order)]


def _ranked(*chunks: tuple[str, str]) -> tuple[list[FusedHit], list[Hit]]:
    """(version, chunk_key) pairs as chunks 1, 2, ... ranked by keyword in that order:
    their fused list and the hits it collapses into."""
    rows = {i: _row(i, version, key) for i, (version, key) in enumerate(chunks, start=1)}
    fused = fuse(_keyword_only(list(rows)), [], mode="keyword", vector_complete=True)
    return fused, collapse(fused, rows, SCOPES, limit=10)


def test_weights_decide_which_signal_wins() -> None:
    keyword = [(1, 9.0), (2, 8.0)]
    vector = [(2, 0.9), (1, 0.8)]
    default = fuse(keyword, vector, mode="hybrid")
    assert [h.key for h in default] == ["2", "1"]  # vector weighs 0.6 by default
    leaning = fuse(keyword, vector, mode="hybrid", weights={"keyword": 1.0, "vector": 0.0})
    assert [h.key for h in leaning] == ["1", "2"]
    # by default keyword counts by rank (61 / (60 + rank): 1 at the top), vector by its
    # similarity scaled from the last candidate (0) to the first (1)
    assert default[0].score == pytest.approx(0.4 * 61 / 62 + 0.6 * 1.0)
    assert default[1].score == pytest.approx(0.4 * 1.0 + 0.6 * 0.0)
    assert default[0].raw_scores == {"keyword": 8.0, "vector": 0.9}
    assert max_fused_score(None, "hybrid") == pytest.approx(1.0)
    assert max_fused_score(None, "keyword") == pytest.approx(0.4)


def test_reciprocal_rank_fusion_when_chosen() -> None:
    keyword = [(1, 9.0), (2, 8.0)]
    vector = [(2, 0.9), (1, 0.8)]
    fused = fuse(keyword, vector, mode="hybrid", fusion="rrf")
    assert [h.key for h in fused] == ["2", "1"]
    assert fused[0].score == pytest.approx(0.6 / (RRF_K + 1) + 0.4 / (RRF_K + 2))
    assert fused[0].raw_scores == {"keyword": 8.0, "vector": 0.9}
    assert max_fused_score(None, "hybrid", "rrf") == pytest.approx(1.0 / (RRF_K + 1))


def test_similarity_fusion_keeps_the_gap_the_vectors_see() -> None:
    # vector finds chunk 1 far closer than the rest; keyword puts 2 and 3 ahead of 1. Ranks
    # alone make 2 (first and second) beat 1 (third and first); the similarities keep
    # the vectors' gap, so 1 comes first.
    keyword = [(2, 9.0), (3, 8.0), (1, 7.0)]
    vector = [(1, 0.90), (2, 0.31), (3, 0.30)]
    assert [h.key for h in fuse(keyword, vector, mode="hybrid")] == ["1", "2", "3"]
    assert fuse(keyword, vector, mode="hybrid", fusion="rrf")[0].key == "2"


def test_keyword_scores_sizes_never_count() -> None:
    # a keyword score's size weighs the query's words over the whole index, withheld
    # records too: only its rank may reach the fused score
    vector = [(1, 0.5), (2, 0.4), (3, 0.2)]
    quiet = fuse([(1, 2.0), (2, 1.9), (3, 0.1)], vector, mode="hybrid")
    loud = fuse([(1, 200.0), (2, 3.0), (3, 2.9)], vector, mode="hybrid")
    assert [(h.key, h.score) for h in quiet] == [(h.key, h.score) for h in loud]


def test_a_vector_list_holding_every_chunk_is_scaled_from_similar_to_nothing() -> None:
    vector = [(1, 0.8), (2, 0.6), (3, 0.4)]
    # recall asked for three and got three: more chunks exist, so the last counts as nothing
    full = {h.key: h.score for h in fuse([], vector, mode="vector")}
    assert full == pytest.approx({"1": 0.6, "2": 0.3, "3": 0.0})
    # asked for fifty and got three: every chunk there is, scaled from a similarity of 0
    short = {h.key: h.score for h in fuse([], vector, mode="vector", vector_complete=True)}
    assert short == pytest.approx({"1": 0.6, "2": 0.6 * 6 / 8, "3": 0.6 * 4 / 8})


def test_one_signal_keeps_its_own_order_under_either_fusion() -> None:
    keyword = [(4, 7.5), (2, 7.5), (9, 3.0), (1, 0.5)]
    for fusion in ("similarity", "rrf"):
        fused = fuse(keyword, [(5, 0.9)], mode="keyword", fusion=fusion)  # type: ignore[arg-type]
        assert [h.key for h in fused][2:] == ["9", "1"]
        assert {h.key for h in fused[:2]} == {"4", "2"}


def test_modes_use_only_their_signals() -> None:
    keyword, vector = [(1, 9.0)], [(2, 0.9)]
    assert [h.key for h in fuse(keyword, vector, mode="keyword")] == ["1"]
    assert [h.key for h in fuse(keyword, vector, mode="vector")] == ["2"]


def test_context_chunks_add_evidence_to_their_version() -> None:
    # a alone ranks first; b's own chunk second, then two of its context chunks
    fused, hits = _ranked(("a", "body"), ("b", "body"), ("b", "context~1"), ("b", "context~2"))
    assert [h.record_id for h in hits] == ["rec_b", "rec_a"]
    by_key = {h.key: h.score for h in fused}
    context = DEFAULT_CONTEXT_WEIGHT * (by_key["3"] + by_key["4"])
    assert hits[0].scores.fused == pytest.approx(by_key["2"] + context)
    # context is never cited: b is cited by its own chunk only
    assert [c.chunk_key for c in hits[0].citations] == ["body"]
    assert hits[0].text == "text"


def test_an_own_chunk_found_after_the_context_replaces_the_whole_version_citation() -> None:
    # b is met first through a context chunk (cited whole), then through its own chunks
    _, hits = _ranked(("b", "context~1"), ("a", "body"), ("b", "s1"), ("b", "s2"))
    first = next(h for h in hits if h.record_id == "rec_b")
    assert [(c.chunk_key, c.excerpt is not None) for c in first.citations] == [
        ("s1", True),
        ("s2", True),
    ]
    assert first.chunk_ids == (3, 4)  # the chunks cited, in the same order
    assert all(c.scope == SCOPES[1] for c in first.citations)


def test_more_sections_of_a_document_do_not_add_up() -> None:
    _, hits = _ranked(("short", "body"), ("long", "s1"), ("long", "s2"), ("long", "s3"))
    assert [h.record_id for h in hits] == ["rec_short", "rec_long"]
    # its other sections are citations, best first
    assert [c.chunk_key for c in hits[1].citations] == ["s1", "s2", "s3"][:CITED_CHUNKS_PER_HIT]


def test_found_only_through_context_is_cited_whole_and_not_shown() -> None:
    rows = {1: _row(1, "a", "context~1", text="neighbour words"), 2: _row(2, "b", "body")}
    hits = collapse(fuse(_keyword_only([1, 2]), [], mode="keyword"), rows, SCOPES, limit=10)
    first = next(h for h in hits if h.record_id == "rec_a")
    assert first.text == ""
    assert [(c.version_id, c.chunk_key, c.excerpt) for c in first.citations] == [
        ("ver_a", None, None)
    ]


def test_limit_keeps_the_best_versions() -> None:
    rows = {i: _row(i, f"v{i}", "body") for i in range(1, 6)}
    hits = collapse(fuse(_keyword_only([5, 4, 3, 2, 1]), [], mode="keyword"), rows, SCOPES, 2)
    assert [h.record_id for h in hits] == ["rec_v5", "rec_v4"]
    assert hits[0].why_included == ("keyword_match",)


def test_citations_are_built_only_for_the_hits_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # forty versions with two chunks each, one hit kept: a search's candidates are mostly
    # dropped by the limit, and building their citation models was a share of its CPU
    rows = {i: _row(i, f"v{(i - 1) // 2}", f"s{i % 2}") for i in range(1, 81)}
    built: list[str] = []
    real = fuse_module._citation

    def counted(row: ChunkRow, scope: str) -> object:
        built.append(row.meta.version_id)
        return real(row, scope)

    monkeypatch.setattr(fuse_module, "_citation", counted)
    (hit,) = collapse(fuse(_keyword_only(list(rows)), [], mode="keyword"), rows, SCOPES, 1)
    assert hit.version_id == "ver_v0" and len(hit.citations) == 2
    assert built == ["ver_v0", "ver_v0"]
