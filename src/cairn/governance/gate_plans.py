"""What an accepted change writes, planned before anything is committed: a new record, a
new version, a supersession, a lifecycle move, a link or a baseline, each with the
preconditions its commit checks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cairn import model
from cairn.errors import InvalidInput, NotFound, StaleProposal
from cairn.governance import links
from cairn.governance.gate_core import GateCore
from cairn.model import Content, Proposal, Record, new_id
from cairn.store.base import (
    ExpectPublished,
    ExpectRecord,
    Precondition,
    PutBaseline,
    PutEdge,
    PutPathLink,
    PutRecord,
    PutVersion,
    SetPublished,
    Write,
)

__all__ = ["GatePlans", "Plan"]


@dataclass
class Plan:
    """What accepting a proposal would write, before it is committed."""

    writes: list[Write]
    expects: list[Precondition]
    record: Record | None = None
    version: model.Version | None = None
    from_status: model.Status | None = None
    to_status: model.Status | None = None
    subject: str | None = None
    edge: model.Edge | None = None


class GatePlans(GateCore):
    """Mixed into ``Gate``: the writes and preconditions of an accepted proposal."""

    def _pinned(self, proposal: Proposal) -> Record:
        """The proposal's target, provided its head is still the version the proposal
        pinned. Writes then expect exactly that version, so a concurrent commit between this
        read and our transaction makes the commit fail instead of overwriting newer truth."""
        assert proposal.record_id is not None
        record = self._record(proposal.record_id)
        if proposal.base_version_id and record.current_version_id != proposal.base_version_id:
            # The proposal may not be stored (an automatic decision): name only the record.
            raise StaleProposal(
                f"{record.id} moved on to v{record.current_version} meanwhile; "
                "read it again and propose the change on the new version",
                record_id=record.id,
            )
        return record

    def _plan(self, proposal: Proposal, now: datetime) -> Plan:
        change = proposal.change
        actor = proposal.principal_id
        if isinstance(change, model.CreateChange):
            status = model.Status.DRAFT if change.draft else model.Status.ACTIVE
            plan = self._plan_create(change.content, status, actor, proposal.id, now)
            for path in change.paths:
                plan.writes.append(
                    PutPathLink(
                        model.PathLink(
                            record_id=plan.record.id if plan.record else "",
                            path=path,
                            content_hash=self.path_hasher(path),
                        )
                    )
                )
            return plan
        if isinstance(change, model.UpdateChange):
            record = self._pinned(proposal)
            return self._plan_new_version(
                record, change.patch.apply(record.content), actor, proposal.id, now
            )
        if isinstance(change, model.SupersedeChange):
            return self._plan_supersede(change, proposal, actor, now)
        if isinstance(change, model.LinkChange):
            source = self._record(change.edge.src)
            edge = links.linked_edge(
                change.edge,
                source,
                actor=actor,
                proposal_id=proposal.id,
                now=now,
            )
            return Plan(writes=[PutEdge(edge)], expects=[], subject=edge.id, edge=edge)
        if isinstance(change, model.UnlinkChange):
            stored = self.store.get_edge(change.edge_id)
            if stored is None:
                raise NotFound(f"no edge {change.edge_id}", field="edge_id")
            edge = links.removed_edge(stored, actor=actor, now=now)
            return Plan(writes=[PutEdge(edge)], expects=[], subject=edge.id, edge=edge)
        if isinstance(change, model.TransitionChange):
            record = self._pinned(proposal)
            moved = record.model_copy(
                update={"status": change.to, "updated_at": now, "status_changed_at": now}
            )
            return Plan(
                writes=[PutRecord(moved)],
                expects=[ExpectRecord(record.id, record.current_version_id, record.status)],
                record=moved,
                from_status=record.status,
                to_status=change.to,
            )
        return self._plan_publish(change, proposal, now)

    def _plan_create(
        self, content: Content, status: model.Status, actor: str, proposal_id: str, now: datetime
    ) -> Plan:
        record_id = new_id("rec")
        version = model.Version(
            id=new_id("ver"),
            record_id=record_id,
            number=1,
            content=content,
            content_hash=content.content_hash(),
            created_at=now,
            created_by=actor,
            proposal_id=proposal_id,
        )
        record = Record(
            id=record_id,
            kind=content.kind,
            scope=content.scope,
            status=status,
            current_version_id=version.id,
            current_version=1,
            created_at=now,
            updated_at=now,
            status_changed_at=now,
            created_by=actor,
            content=content,
        )
        return Plan(
            writes=[PutRecord(record), PutVersion(version, self.chunker(content))],
            expects=[ExpectRecord(record_id, None)],
            record=record,
            version=version,
            to_status=status,
        )

    def _plan_new_version(
        self, record: Record, content: Content, actor: str, proposal_id: str, now: datetime
    ) -> Plan:
        if content.kind != record.kind or content.scope != record.scope:
            raise InvalidInput("an update cannot change a record's kind or scope")
        version = model.Version(
            id=new_id("ver"),
            record_id=record.id,
            number=record.current_version + 1,
            content=content,
            content_hash=content.content_hash(),
            created_at=now,
            created_by=actor,
            proposal_id=proposal_id,
        )
        updated = record.model_copy(
            update={
                "current_version_id": version.id,
                "current_version": version.number,
                "updated_at": now,
                "content": content,
            }
        )
        return Plan(
            writes=[PutRecord(updated), PutVersion(version, self.chunker(content))],
            expects=[ExpectRecord(record.id, record.current_version_id)],
            record=updated,
            version=version,
        )

    def _plan_supersede(
        self, change: model.SupersedeChange, proposal: Proposal, actor: str, now: datetime
    ) -> Plan:
        proposal_id = proposal.id
        old = self._pinned(proposal)
        if change.content is not None:
            plan = self._plan_create(change.content, model.Status.ACTIVE, actor, proposal_id, now)
            assert plan.record is not None
            new_id_ = plan.record.id
        else:
            assert change.by is not None
            replacement = self._record(change.by)
            # Both ends must still be current when this commits: two opposite supersessions
            # at once would otherwise each pass, and make a cycle.
            plan = Plan(
                writes=[],
                expects=[
                    ExpectRecord(replacement.id, replacement.current_version_id, unsuperseded=True)
                ],
                record=replacement,
            )
            new_id_ = replacement.id
        retired = old.model_copy(update={"superseded_by": new_id_, "updated_at": now})
        assert plan.record is not None
        supersedes = links.system_edge(
            "SUPERSEDES",
            new_id_,
            old.id,
            scope=old.scope,
            acl=plan.record.content.acl,
            now=now,
            proposal_id=proposal_id,
        )
        plan.writes += [PutRecord(retired), PutEdge(supersedes)]
        # and a record is superseded once: a second replacement at once is refused
        plan.expects.append(ExpectRecord(old.id, old.current_version_id, unsuperseded=True))
        return plan

    def _plan_publish(self, change: model.PublishChange, proposal: Proposal, now: datetime) -> Plan:
        pins: dict[str, str] = {}
        previous_id = self.store.published_baseline_id(change.scope)
        if previous_id and not change.replace:
            previous = self.store.get_baseline(previous_id)
            pins.update(previous.pins if previous else {})
        # A record pinned at its head must still be active, at that head, when this commits:
        # an archive at the same moment would otherwise be published.
        still_active: list[Precondition] = []
        for record_id, version_id in change.pins.items():
            if version_id is None:
                record = self._record(record_id)
                version_id = record.current_version_id
                still_active.append(ExpectRecord(record_id, version_id, model.Status.ACTIVE))
            pins[record_id] = version_id
        baseline = model.Baseline(
            id=new_id("bsl"),
            scope=change.scope,
            name=change.name,
            pins=pins,
            created_at=now,
            created_by=proposal.principal_id,
            proposal_id=proposal.id,
        )
        return Plan(
            writes=[PutBaseline(baseline), SetPublished(change.scope, baseline.id)],
            expects=[ExpectPublished(change.scope, previous_id), *still_active],
            subject=baseline.id,
        )
