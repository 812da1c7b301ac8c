"""Upkeep that reaches every scope is for a curator of every scope: a curator of some scopes
must not move, archive, name or count records of the others through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import PermissionDenied
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Content, Principal, PrincipalKind, Status
from cairn.search.embedder import make_embedder
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR

SCOPED = Principal(id="scur", kind=PrincipalKind.HUMAN, roles=("curator",), scopes=("acme/*",))


def test_refresh_and_vacuum_are_for_a_curator_of_every_scope(memory: Memory) -> None:
    hidden = Content(kind="fact", scope="secret/hr", title="Pay bands", body="Pay bands.")
    made = memory.remember(hidden, principal=CURATOR, draft=True).record
    assert made is not None
    for verb in (memory.refresh, memory.vacuum):
        with pytest.raises(PermissionDenied, match="curator of every scope"):
            verb(principal=SCOPED)
    assert memory.get(made.id, principal=CURATOR).record.status is Status.DRAFT
    assert memory.refresh(principal=CURATOR).checked == 0  # a curator of every scope may


def test_reindex_counts_only_for_a_curator_of_every_scope(tmp_path: Path) -> None:
    with Memory(
        SqliteStore(tmp_path / "cairn.db"),
        parse_policy(DEFAULT_POLICY_YAML),
        root=tmp_path,
        embedder=make_embedder("static"),
    ) as memory:
        hidden = Content(kind="fact", scope="secret/hr", title="Pay bands", body="Pay bands.")
        memory.remember(hidden, principal=CURATOR)
        assert memory.reindex(principal=SCOPED) is None
        memory.remember(hidden.model_copy(update={"title": "Pay bands 2"}), principal=CURATOR)
        assert memory.reindex(principal=CURATOR) == 1
