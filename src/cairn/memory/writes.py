"""``Memory``'s writes: every one a proposal the gate decides (the policy or a curator), from
one record to a batch of ten thousand, file ingest and publishing included."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Unpack

from cairn import model
from cairn.errors import Conflict, InvalidInput
from cairn.governance import access
from cairn.governance.gate_core import ORIGIN_OF
from cairn.ingest.files import (
    INGESTED_EVIDENCE,
    IngestArea,
    IngestReport,
    document_for,
    expand,
    git_info,
    read_text,
    shown_name,
)
from cairn.limits import MAX_BODY_CHARS, MAX_SCOPE_CHARS, check_input
from cairn.memory.core import MemoryCore, literal_glob
from cairn.model import Content, Principal, Record
from cairn.options import PublishChoice, check_names

__all__ = ["WriteVerbs"]


class WriteVerbs(MemoryCore):
    """Mixed into ``Memory``: proposing records, versions, links, lifecycle moves and
    baselines, all through the gate."""

    def remember(
        self,
        content: Content,
        *,
        principal: Principal,
        draft: bool = False,
        paths: Sequence[str] = (),
        reason: str | None = None,
    ) -> model.ProposalOutcome:
        """Propose a new record (or record a draft, which any principal may do)."""
        change = model.CreateChange(content=content, draft=draft, paths=tuple(paths))
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def update(
        self,
        record_id: str,
        patch: model.ContentPatch,
        *,
        principal: Principal,
        base_version_id: str | None = None,
        reason: str | None = None,
    ) -> model.ProposalOutcome:
        change = model.UpdateChange(record_id=record_id, patch=patch)
        outcome = self._gate.submit(
            change, principal, base_version_id=base_version_id, reason=reason
        )
        return self._shown_outcome(outcome, principal)

    def supersede(
        self,
        record_id: str,
        *,
        principal: Principal,
        by: str | None = None,
        content: Content | None = None,
        patch: model.ContentPatch | None = None,
        reason: str | None = None,
    ) -> model.ProposalOutcome:
        """Supersede a record by an existing one (``by``), by new ``content``, or by a new
        record made of its current content with ``patch`` applied."""
        if patch is not None:
            if content is not None:
                raise InvalidInput("give content or patch, not both", field="patch")
            content = patch.apply(self._visible(record_id, principal).content)
        change = model.SupersedeChange(record_id=record_id, by=by, content=content)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def transition(
        self, record_id: str, to: model.Status, *, principal: Principal, reason: str | None = None
    ) -> model.ProposalOutcome:
        """Move a record along the lifecycle: approve/reject a draft, archive, restore, …"""
        change = model.TransitionChange(record_id=record_id, to=to)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def link(
        self, edge: model.EdgeDraft, *, principal: Principal, reason: str | None = None
    ) -> model.ProposalOutcome:
        """Propose a typed edge between two records the principal may read; the policy
        decides (a relation the catalog does not declare is refused)."""
        change = model.LinkChange(edge=edge)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def unlink(
        self, edge_id: str, *, principal: Principal, reason: str | None = None
    ) -> model.ProposalOutcome:
        """Propose removing an edge (it is marked removed; its history stays)."""
        change = model.UnlinkChange(edge_id=edge_id)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def archive(
        self, record_id: str, *, principal: Principal, reason: str | None = None
    ) -> model.ProposalOutcome:
        return self.transition(record_id, model.Status.ARCHIVED, principal=principal, reason=reason)

    def restore(
        self, record_id: str, *, principal: Principal, reason: str | None = None
    ) -> model.ProposalOutcome:
        return self.transition(record_id, model.Status.ACTIVE, principal=principal, reason=reason)

    def publish(
        self, scope: str, *, principal: Principal, **choice: Unpack[PublishChoice]
    ) -> model.ProposalOutcome:
        """Promote record versions into a new baseline and make it the scope's published one.

        With neither ``record_ids`` nor ``pins`` (``PublishChoice``), every active, current
        record of the scope is published at its head version.
        """
        check_names(choice, PublishChoice.__optional_keys__)
        access.require_curator(principal, "publish")
        chosen: dict[str, str | None] = dict(choice.get("pins") or {})
        for record_id in choice.get("record_ids") or ():
            chosen.setdefault(record_id, None)
        if not chosen:
            query = model.RecordQuery(scope=literal_glob(scope), statuses=(model.Status.ACTIVE,))
            for record in self._each_visible_record(query, principal):
                if record.scope == scope and record.superseded_by is None:
                    chosen[record.id] = None
        if not chosen:
            raise Conflict(f"nothing to publish in scope {scope}: no active records", field="scope")
        change = model.PublishChange(
            scope=scope, pins=chosen, name=choice.get("name"), replace=choice.get("replace", False)
        )
        return self._gate.submit(change, principal, reason=choice.get("reason"))

    def store_many(
        self, contents: Sequence[Content], *, principal: Principal, draft: bool = False
    ) -> list[model.ProposalOutcome]:
        """Propose up to 10,000 records in one governed transaction: each passes the policy,
        the duplicate check and the permission check (duplicates are rejected item by item;
        a refusal of the caller refuses the whole batch, nothing written), and one audit
        entry names every record the batch made. Vectors are made afterwards, in the
        background, like any write's."""
        changes = [model.CreateChange(content=c, draft=draft) for c in contents]
        outcomes = self._gate.submit_many(changes, principal)
        return [self._shown_outcome(o, principal) for o in outcomes]

    def remember_many(
        self, contents: Sequence[Content], *, principal: Principal, draft: bool = False
    ) -> list[model.ProposalOutcome]:
        """``store_many`` under its earlier name."""
        return self.store_many(contents, principal=principal, draft=draft)

    def ingest(
        self,
        paths: Sequence[str],
        *,
        principal: Principal,
        scope: str,
        kind: str = "document",
        progress: Callable[[int, int, str], None] | None = None,
    ) -> IngestReport:
        """Ingest files as evidence records (see ``cairn.ingest.files``), from the ingest
        roots the policy opens to the principal's roles only."""
        check_input(scope, "scope", MAX_SCOPE_CHARS)
        # before any file or record is looked at: matching files against what was ingested
        # before must never reach into a scope the caller may not write
        access.require_scope(principal, scope)
        report = IngestReport()
        area = IngestArea(self.root, self._policy.ingest_roots(principal.roles), self.folder)
        files = expand(paths, area)
        git = git_info(files[0].parent if files else self.root, self.root)
        known = self._ingested_by_path(scope, principal)
        creates: list[model.CreateChange] = []
        for n, path in enumerate(files, start=1):
            shown = shown_name(path.relative_to(self.root).as_posix())
            if progress:
                progress(n, len(files), shown_name(path.name))
            if shown != path.relative_to(self.root).as_posix():
                # a file name that is not UTF-8 cannot be a record's path: skipped, and named
                # with its odd bytes escaped
                report.skipped.append(shown)
                continue
            try:
                text = read_text(path, MAX_BODY_CHARS, area)
            except OSError:
                text = None
            if text is None:  # not UTF-8 text, or larger than a record's body may be
                report.skipped.append(shown)
                continue
            content = document_for(
                path, text, scope=scope, git=git, kind=kind, origin=ORIGIN_OF[principal.kind]
            )
            relative = content.provenance.path or path.name
            existing = known.get(relative)
            if existing is None:
                creates.append(model.CreateChange(content=content, paths=(relative,)))
                continue
            if existing.content.content_hash() == content.content_hash():
                report.unchanged.append(existing.id)
                continue
            patch = model.ContentPatch(
                title=content.title, body=content.body, provenance=content.provenance
            )
            # The kernel's own provenance (ingested evidence) is kept: kernel_provenance.
            outcome = self._gate.submit(
                model.UpdateChange(record_id=existing.id, patch=patch),
                principal,
                reason="re-ingest",
                kernel_provenance=True,
            )
            _file_outcome(report, self._shown_outcome(outcome, principal), updated=True)
        outcomes = (
            self._gate.submit_many(creates, principal, kernel_provenance=True) if creates else []
        )
        for outcome in outcomes:
            _file_outcome(report, outcome, updated=False)
        return report

    def _ingested_by_path(self, scope: str, principal: Principal) -> dict[str, Record]:
        """The records ingested before in ``scope`` that ``principal`` may read, by path: one
        it may not read is no match (answering "unchanged" or naming it would tell it what
        a hidden record holds)."""
        linked = [link.record_id for link in self._store.list_path_links()]
        found: dict[str, Record] = {}
        for record in self._store.get_records(linked).values():
            path = record.content.provenance.path
            if (
                record.scope == scope
                and access.can_read(principal, record.scope, record.content.acl)
                and path
                and record.content.provenance.source_kind == INGESTED_EVIDENCE
                and record.status not in (model.Status.ARCHIVED, model.Status.REJECTED)
            ):
                found[path] = record
        return found


def _file_outcome(report: IngestReport, outcome: model.ProposalOutcome, *, updated: bool) -> None:
    if outcome.decision is model.Verdict.APPROVE:
        record_id = outcome.record.id if outcome.record else ""
        (report.updated if updated else report.created).append(record_id)
    elif outcome.decision is model.Verdict.QUEUE:
        report.queued.append(outcome.proposal.id)
    else:
        report.rejected.append(outcome.proposal.id)
