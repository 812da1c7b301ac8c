"""Session evidence: a hit borrows strength from the other hits of its session.

Questions whose answer is spread over several turns of a conversation ("What activities
does Melanie partake in?") are answered by a few turns of a few sessions, each of which may
match the question only weakly. A session that several hits point to is likelier to be
the one asked about than a session touched by one stray turn, so each hit gains
``weight`` times the summed scores of the best ``depth`` *other* hits of its session: the
best turns of the best sessions rise, and a lone strong match keeps its own score.

A session is what the records say, not a dataset's label: episodes (conversation turns
and transcripts) of one scope whose source times (a record's validity start, else when it
was written) follow each other with no gap longer than ``SESSION_GAP``, the usual
sessionisation rule for activity logs. Other kinds of records have no session and are left
as they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from cairn.store.base import ChunkRow

__all__ = ["SESSION_GAP", "SESSION_KINDS", "session_evidence", "session_keys"]

SESSION_GAP = timedelta(minutes=30)
SESSION_KINDS = frozenset({"episode"})


def session_keys(rows: Iterable[ChunkRow], *, gap: timedelta = SESSION_GAP) -> dict[str, str]:
    """``{version_id: session key}`` for the episode versions among ``rows``.

    Within a scope, versions are sorted by source time and a new session starts wherever
    two consecutive ones lie more than ``gap`` apart. Versions without a source time, or
    of kinds other than episodes, get no key.
    """
    by_scope: dict[int, dict[str, datetime]] = defaultdict(dict)
    for row in rows:
        meta = row.meta
        if meta.kind in SESSION_KINDS and meta.source_time is not None:
            by_scope[meta.scope_id][meta.version_id] = meta.source_time
    keys: dict[str, str] = {}
    for scope_id, times in by_scope.items():
        number = 0
        previous: datetime | None = None
        # ties sort by version id so the keys never depend on the order rows came in
        for version_id, when in sorted(times.items(), key=lambda item: (item[1], item[0])):
            if previous is None or when - previous > gap:
                number += 1
            keys[version_id] = f"{scope_id}:{number}"
            previous = when
    return keys


def session_evidence(
    scores: Sequence[float],
    sessions: Sequence[str | None],
    *,
    weight: float,
    depth: int,
) -> list[float]:
    """Each score plus ``weight`` × the summed best ``depth`` scores of the other hits of its
    session (``sessions[i]`` is hit ``i``'s session, ``None``: it has none).

    Returns the new scores, in the order given; ``weight`` 0 returns them unchanged.
    """
    if len(scores) != len(sessions):
        raise ValueError("one session per score")
    if weight == 0 or depth < 1:
        return list(scores)
    members: Mapping[str, list[int]] = _members(sessions)
    # per session, its best depth + 1 hits: enough to leave out any one and keep depth
    best: dict[str, list[int]] = {
        key: sorted(indexes, key=lambda i: -scores[i])[: depth + 1]
        for key, indexes in members.items()
    }
    out: list[float] = []
    for i, (score, key) in enumerate(zip(scores, sessions, strict=True)):
        if key is None:
            out.append(score)
            continue
        others = [scores[j] for j in best[key] if j != i][:depth]
        out.append(score + weight * sum(others))
    return out


def _members(sessions: Sequence[str | None]) -> dict[str, list[int]]:
    members: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(sessions):
        if key is not None:
            members[key].append(i)
    return members
