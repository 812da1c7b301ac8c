"""``Memory``'s upkeep: what the store holds, counted for whoever asks; drift of linked
files (``refresh``) and retention (``vacuum``), both a curator's to start."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from cairn.governance import access
from cairn.memory.indexing import IndexVerbs
from cairn.model import (
    SYSTEM_PRINCIPAL,
    CairnModel,
    PathLink,
    Principal,
    ProposalStatus,
    RecordQuery,
    Status,
    TransitionChange,
)

__all__ = ["RefreshReport", "UpkeepVerbs", "VacuumReport"]


class RefreshReport(CairnModel):
    checked: int
    marked_stale: list[str]
    reactivated: list[str]


class VacuumReport(CairnModel):
    archived: list[str]


class UpkeepVerbs(IndexVerbs):
    """Mixed into ``Memory``: ``status``, ``refresh`` and ``vacuum``."""

    _hash_path: Callable[[str], str | None]  # a linked file's hash now (``file_hasher``)

    def status(self, *, principal: Principal) -> dict[str, int]:
        """Counts of what ``principal`` may see. A curator of every scope gets the store's
        row counts, its chunk count and the vector index's lag (chunks not embedded yet);
        anyone else the records it may read, by status, and the proposals it may see."""
        if access.sees_everything(principal):
            counts = self._store.counts()
            counts["chunks"] = self._store.chunk_count()
            if self.indexer is not None:
                counts["vector_lag"] = self.vector_lag()
                counts["vector_index_busy"] = int(self.vector_index_busy())
            return counts
        by_status = self._store.count_records(self._everything_readable(principal))
        counts = {"records": sum(by_status.values())}
        counts.update({f"records.{name}": n for name, n in sorted(by_status.items())})
        curates = access.is_curator(principal)
        seen = self._store.count_proposals(
            proposer=principal.id, scope_globs=principal.scopes if curates else None
        )
        counts["proposals"] = sum(seen.values())
        for status in ProposalStatus:
            counts[f"proposals.{status.value}"] = seen.get(status.value, 0)
        return counts

    def refresh(self, *, principal: Principal) -> RefreshReport:
        """Re-hash linked files: changed files make active records stale; files that match
        their linked hash again re-activate records that drift made stale."""
        access.require_curator_of_every_scope(
            principal, "refresh drift", "refresh checks and moves the linked records of every scope"
        )
        by_record: dict[str, list[PathLink]] = {}
        for link in self._store.list_path_links():
            by_record.setdefault(link.record_id, []).append(link)
        stale: list[str] = []
        reactivated: list[str] = []
        for record_id, links in by_record.items():
            record = self._store.get_record(record_id)
            if record is None:
                continue
            checked = [
                link.model_copy(update={"drifted": self._hash_path(link.path) != link.content_hash})
                for link in links
            ]
            drifted = [link.path for link in checked if link.drifted]
            reason = f"refresh requested by {principal.id}"
            if record.status is Status.ACTIVE and drifted:
                self._gate.relink(
                    record,
                    checked,
                    Status.STALE,
                    principal=SYSTEM_PRINCIPAL,
                    reason=f"{reason}: changed {', '.join(drifted)}",
                )
                stale.append(record_id)
            elif (
                record.status is Status.STALE
                and not drifted
                and any(link.drifted for link in links)
            ):
                self._gate.relink(
                    record,
                    checked,
                    Status.ACTIVE,
                    principal=SYSTEM_PRINCIPAL,
                    reason=f"{reason}: linked files match again",
                )
                reactivated.append(record_id)
        return RefreshReport(checked=len(by_record), marked_stale=stale, reactivated=reactivated)

    def vacuum(self, *, principal: Principal) -> VacuumReport:
        """Archive drafts, rejected and stale records kept past the policy's retention."""
        access.require_curator_of_every_scope(
            principal, "vacuum", "vacuum archives and names the old records of every scope"
        )
        retention = self._policy.retention
        limits = {
            Status.DRAFT: timedelta(days=retention.draft_days),
            Status.REJECTED: timedelta(days=retention.rejected_days),
            Status.STALE: timedelta(days=retention.stale_days),
        }
        now = self.clock()
        archived: list[str] = []
        query = RecordQuery(statuses=tuple(limits), limit=1000)
        while page := self._store.query_records(query, scope_globs=()):
            query = query.model_copy(update={"after": page[-1].id})
            for record in page:
                if now - record.status_changed_at < limits[record.status]:
                    continue
                self._gate.submit(
                    TransitionChange(record_id=record.id, to=Status.ARCHIVED),
                    SYSTEM_PRINCIPAL,
                    reason=f"retention: {record.status.value} since "
                    f"{record.status_changed_at:%Y-%m-%d} (vacuum by {principal.id})",
                )
                archived.append(record.id)
        return VacuumReport(archived=archived)
