"""Session evidence on its own: which versions form a session, and how support moves hits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cairn.retrieval.sessions import SESSION_GAP, session_evidence, session_keys
from cairn.store.base import ChunkRow
from tests.factories import T0, chunk_meta


def _row(i: int, minutes: float | None, *, kind: str = "episode", scope: int = 1) -> ChunkRow:
    when = None if minutes is None else T0 + timedelta(minutes=minutes)
    meta = chunk_meta(i, kind=kind, scope_id=scope, source_time=when)
    return ChunkRow(meta, 1, "", "", 0, 4, "text", f"title {i}")


def test_turns_close_in_time_share_a_session_and_a_gap_splits_them() -> None:
    gap = SESSION_GAP.total_seconds() / 60
    keys = session_keys([_row(1, 0), _row(2, 1), _row(3, 1 + gap / 2), _row(4, 3 * gap)])
    assert keys["ver-1"] == keys["ver-2"] == keys["ver-3"]
    assert keys["ver-4"] != keys["ver-1"]


def test_scopes_kinds_and_untimed_versions_never_join_a_session() -> None:
    keys = session_keys([_row(1, 0), _row(2, 0, scope=2), _row(3, 0, kind="fact"), _row(4, None)])
    assert keys["ver-1"] != keys["ver-2"]  # same time, other scope
    assert "ver-3" not in keys and "ver-4" not in keys


def test_keys_do_not_depend_on_row_order() -> None:
    rows = [_row(1, 0), _row(2, 100), _row(3, 5)]
    assert session_keys(rows) == session_keys(list(reversed(rows)))


def test_a_hit_gains_from_the_best_other_hits_of_its_session() -> None:
    scores = [1.0, 0.9, 0.5, 0.4, 0.3]
    sessions = ["a", "b", "b", "b", None]
    out = session_evidence(scores, sessions, weight=0.5, depth=1)
    assert out[0] == pytest.approx(1.0)  # a lone session: nothing to borrow
    assert out[1] == pytest.approx(0.9 + 0.5 * 0.5)  # its best other hit is 0.5
    assert out[2] == pytest.approx(0.5 + 0.5 * 0.9)  # never counts itself
    assert out[4] == pytest.approx(0.3)  # no session
    # the session that several hits point to now leads
    assert max(range(5), key=out.__getitem__) == 1


def test_depth_counts_that_many_other_hits() -> None:
    scores = [0.4, 0.3, 0.2, 0.1]
    out = session_evidence(scores, ["s"] * 4, weight=1.0, depth=2)
    assert out == pytest.approx([0.4 + 0.5, 0.3 + 0.6, 0.2 + 0.7, 0.1 + 0.7])


def test_weight_zero_changes_nothing_and_lengths_must_agree() -> None:
    assert session_evidence([0.3, 0.2], ["s", "s"], weight=0.0, depth=2) == [0.3, 0.2]
    with pytest.raises(ValueError):
        session_evidence([0.3], ["s", "s"], weight=1.0, depth=1)
