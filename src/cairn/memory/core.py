"""What every part of ``Memory`` stands on: its private state (store, gate, policy) and
the rules for what a response may show a principal, plus the checks of a verb's plain
string inputs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from cairn.errors import NotFound
from cairn.governance import access
from cairn.governance.gate import Gate
from cairn.governance.policy import Policy
from cairn.governance.visible import readable_record
from cairn.limits import shown_id
from cairn.model import Principal, ProposalOutcome, Record, RecordQuery, Status, Version
from cairn.retrieval.preselect import ReadRequest, readable
from cairn.store.base import ChunkFilter, Store

__all__ = ["MemoryCore", "literal_glob"]


class MemoryCore:
    """What every part of ``Memory`` shares: the store, gate and policy it is built on (the
    kernel's own: no door reaches them), and the rules for what a principal may see."""

    _store: Store
    _gate: Gate
    _policy: Policy
    root: Path
    folder: Path | None
    clock: Callable[[], datetime]

    def _visible(self, record_id: str, principal: Principal) -> Record:
        record = readable_record(self._store, record_id, principal)
        if record is None:
            raise NotFound(f"no record {shown_id(record_id)}", field="record_id")
        return record

    def _shown_record(self, record: Record, principal: Principal) -> Record:
        """``record`` as ``principal`` may see it: the id of a successor it may not read
        is left out (the record still reads as superseded in ``validate``)."""
        if record.superseded_by is None:
            return record
        successor = self._store.get_record(record.superseded_by)
        if successor is not None and access.can_read(
            principal, successor.scope, successor.content.acl
        ):
            return record
        return record.model_copy(update={"superseded_by": None})

    def _shown_version(self, version: Version, principal: Principal) -> Version:
        """A version names the proposal that made it only to those who may see that
        proposal: its author and the scope's curators."""
        if version.proposal_id is None or version.created_by == principal.id:
            return version
        if access.is_curator(principal) and access.in_scope(principal, version.content.scope):
            return version
        return version.model_copy(update={"proposal_id": None})

    def _shown_outcome(self, outcome: ProposalOutcome, principal: Principal) -> ProposalOutcome:
        updates: dict[str, object] = {}
        if outcome.record is not None:
            record = self._shown_record(outcome.record, principal)
            if record is not outcome.record:
                updates["record"] = record
        if outcome.version is not None:
            version = self._shown_version(outcome.version, principal)
            if version is not outcome.version:
                updates["version"] = version
        return outcome.model_copy(update=updates) if updates else outcome

    def _everything_readable(self, principal: Principal) -> ChunkFilter:
        """The filter admitting the head of every record the principal may read, in any
        state (drafts, archived and superseded ones too)."""
        where = readable(self._store, principal, ReadRequest(include_drafts=True))
        return dataclasses.replace(
            where, statuses=frozenset(s.value for s in Status), include_superseded=True
        )

    def _visible_records(self, query: RecordQuery, principal: Principal) -> list[Record]:
        """One page of records the principal may read: trimmed and bounded in the store."""
        for kind in query.kinds:
            self._policy.check_kind(kind)
        rows = self._store.query_records(
            query, scope_globs=principal.scopes, readable=self._everything_readable(principal)
        )
        # The store already trimmed by ACL in the index; the rule is checked once more here.
        return [r for r in rows if access.can_read(principal, r.scope, r.content.acl)]

    def _each_visible_record(self, query: RecordQuery, principal: Principal) -> Iterator[Record]:
        """Every record the principal may read that ``query`` matches, a page at a time."""
        page = query.model_copy(update={"offset": 0, "limit": 1000})
        while True:
            found = self._visible_records(page, principal)
            yield from found
            if len(found) < page.limit:
                return
            page = page.model_copy(update={"after": found[-1].id})


def literal_glob(text: str) -> str:
    """``text`` as a scope glob that matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)
