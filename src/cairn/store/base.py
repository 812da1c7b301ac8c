"""The storage protocol.

Reads take filters the kernel built; there is exactly one write method, ``commit``, which
applies change sets in one transaction. Each change set carries exactly one audit entry, so
"every committed change is audited" holds by construction, and preconditions that are
checked inside the transaction, which is how optimistic concurrency on pinned versions
works on every backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cairn.model import (
    AuditEntry,
    AuditQuery,
    Baseline,
    PathLink,
    Proposal,
    ProposalStatus,
    Record,
    RecordQuery,
    Status,
    Version,
)

# ---- writes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PutRecord:
    """Insert or replace a record's state row (its content lives in its versions)."""

    record: Record


@dataclass(frozen=True)
class PutVersion:
    """Append a version. Versions are never changed or removed."""

    version: Version


@dataclass(frozen=True)
class PutProposal:
    proposal: Proposal


@dataclass(frozen=True)
class PutBaseline:
    baseline: Baseline


@dataclass(frozen=True)
class SetPublished:
    scope: str
    baseline_id: str


@dataclass(frozen=True)
class PutEdge:
    src: str
    dst: str
    type: str


@dataclass(frozen=True)
class PutPathLink:
    link: PathLink


Write = PutRecord | PutVersion | PutProposal | PutBaseline | SetPublished | PutEdge | PutPathLink


# ---- preconditions -----------------------------------------------------------------------


@dataclass(frozen=True)
class ExpectRecord:
    """The record's head must still be ``version_id`` (``None``: it must not exist yet),
    and, when given, its status must still be ``status``."""

    record_id: str
    version_id: str | None
    status: Status | None = None


@dataclass(frozen=True)
class ExpectProposal:
    proposal_id: str
    status: ProposalStatus


@dataclass(frozen=True)
class ExpectPublished:
    scope: str
    baseline_id: str | None


Precondition = ExpectRecord | ExpectProposal | ExpectPublished


@dataclass(frozen=True)
class ChangeSet:
    audit: AuditEntry
    writes: tuple[Write, ...] = ()
    expects: tuple[Precondition, ...] = field(default_factory=tuple)


# ---- the protocol ------------------------------------------------------------------------


class Store(Protocol):
    """What the kernel needs from a backend. Nothing else may write memory tables."""

    def commit(self, changesets: Sequence[ChangeSet]) -> list[int]:
        """Apply every change set in one transaction; return the audit sequence numbers.

        Raises ``Conflict`` (nothing written) when a precondition no longer holds.
        """
        ...

    def get_record(self, record_id: str) -> Record | None: ...

    def get_records(self, record_ids: Sequence[str]) -> dict[str, Record]: ...

    def get_version(self, version_id: str) -> Version | None: ...

    def get_version_by_number(self, record_id: str, number: int) -> Version | None: ...

    def list_versions(self, record_id: str) -> list[Version]: ...

    def query_records(self, query: RecordQuery, *, scope_globs: Sequence[str]) -> list[Record]:
        """Records matching ``query`` within ``scope_globs``, ordered by id, *not* yet
        trimmed by ACL; ``limit``/``offset`` are the caller's job after trimming."""
        ...

    def find_by_hash(self, scope: str, content_hash: str) -> list[Record]: ...

    def get_proposal(self, proposal_id: str) -> Proposal | None: ...

    def list_proposals(
        self, *, status: ProposalStatus | None = None, limit: int = 100, offset: int = 0
    ) -> list[Proposal]: ...

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]: ...

    def count_audit(self) -> int: ...

    def get_baseline(self, baseline_id: str) -> Baseline | None: ...

    def published_baseline_id(self, scope: str) -> str | None: ...

    def list_baselines(self, scope: str | None = None) -> list[Baseline]: ...

    def list_path_links(self, record_id: str | None = None) -> list[PathLink]: ...

    def list_edges(self, node_id: str) -> list[tuple[str, str, str]]: ...

    def counts(self) -> dict[str, int]:
        """Row counts by table and by record status, for ``cairn status``."""
        ...

    def close(self) -> None: ...
