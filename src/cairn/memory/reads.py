"""``Memory``'s direct reads: a record at a chosen version, its history and successors, pages
of records and baselines, and the completions doors offer, all trimmed to the principal."""

from __future__ import annotations

import dataclasses

from cairn.errors import InvalidInput, NotFound
from cairn.governance import access, lifecycle
from cairn.limits import MAX_COUNTER, MAX_ID_CHARS, MAX_SCOPE_CHARS, check_input
from cairn.memory.core import MemoryCore
from cairn.model import (
    Baseline,
    PinKind,
    Principal,
    Record,
    RecordQuery,
    RecordView,
    Status,
    Version,
    VersionPin,
)

__all__ = ["ReadVerbs"]


class ReadVerbs(MemoryCore):
    """Mixed into ``Memory``: reads by id, by page and by prefix."""

    def get(
        self,
        record_id: str,
        *,
        principal: Principal,
        selector: VersionPin | None = None,
        version: int | None = None,
    ) -> RecordView:
        """One record at the version a selector (or an explicit version number) chooses."""
        if version is not None and not 1 <= version <= MAX_COUNTER:
            # Said before the record is looked at: a number no version can have.
            raise InvalidInput(f"version is a number from 1 to {MAX_COUNTER}", field="version")
        record = self._visible(record_id, principal)
        selector = selector or VersionPin.head()
        chosen: Version | None
        if version is not None:
            chosen = self._store.get_version_by_number(record_id, version)
            missing = NotFound(f"{record_id} has no version {version}", field="version")
            selector_kind = PinKind.VERSION_REF
        elif selector.kind is PinKind.HEAD:
            chosen = self._store.get_version(record.current_version_id)
            missing = NotFound(f"no record {record_id}", field="record_id")
            selector_kind = PinKind.HEAD
        elif selector.kind is PinKind.VERSION_REF:
            check_input(selector.version_id or "", "version_id", MAX_ID_CHARS)
            chosen = self._store.get_version(selector.version_id or "")
            if chosen is not None and chosen.record_id != record_id:
                chosen = None
            missing = NotFound(
                f"{record_id} has no version {selector.version_id}", field="version_id"
            )
            selector_kind = PinKind.VERSION_REF
        else:
            baseline = self._baseline_for(record.scope, selector, principal)
            version_id = baseline.pins.get(record_id)
            if version_id is None:
                raise NotFound(f"{record_id} is not in baseline {baseline.id}", field="selector")
            chosen = self._store.get_version(version_id)
            missing = NotFound(f"{record_id} is not in baseline {baseline.id}", field="selector")
            selector = VersionPin(kind=selector.kind, baseline_id=baseline.id)
            selector_kind = selector.kind
        # A version the principal may not read (its ACL was narrower then) answers exactly
        # like a version that does not exist.
        if chosen is None or not access.can_read(
            principal, chosen.content.scope, chosen.content.acl
        ):
            raise missing
        if selector_kind is PinKind.VERSION_REF:
            selector = VersionPin(kind=PinKind.VERSION_REF, version_id=chosen.id)
        resolved = self.resolve(record_id, principal=principal).id
        return RecordView(
            record=self._shown_record(record, principal),
            version=self._shown_version(chosen, principal),
            selector_used=selector,
            resolved_id=resolved,
        )

    def _baseline_for(self, scope: str, selector: VersionPin, principal: Principal) -> Baseline:
        if selector.kind is PinKind.PUBLISHED:
            baseline_id = self._store.published_baseline_id(scope)
            if baseline_id is None:
                raise NotFound(f"scope {scope} has nothing published yet", field="selector")
        else:
            baseline_id = check_input(selector.baseline_id or "", "baseline_id", MAX_ID_CHARS)
        baseline = self._store.get_baseline(baseline_id)
        # A baseline of a scope the principal may not read does not exist for it.
        if baseline is None or not access.in_scope(principal, baseline.scope):
            raise NotFound(f"no baseline {baseline_id}", field="baseline_id")
        return baseline

    def moves(self, record_id: str, *, principal: Principal) -> tuple[Status, ...]:
        """The lifecycle moves ``principal`` may propose for the record now (none for an
        agent): what a door offers, the gate still deciding."""
        return lifecycle.moves(self._visible(record_id, principal).status, principal)

    def resolve(self, record_id: str, *, principal: Principal) -> Record:
        """Follow the supersession chain to its end (A→B→C resolves to C)."""
        record = self._visible(record_id, principal)
        seen = {record.id}
        while record.superseded_by:
            nxt = self._store.get_record(record.superseded_by)
            if nxt is None or nxt.id in seen:
                break
            if not access.can_read(principal, nxt.scope, nxt.content.acl):
                break  # the reader sees the newest version it may see, never a hidden id
            seen.add(nxt.id)
            record = nxt
        return self._shown_record(record, principal)

    def history(
        self, record_id: str, *, principal: Principal, after: int = 0, limit: int = 1000
    ) -> list[Version]:
        """The versions of a record the principal may read, oldest first: at most ``limit``
        after version number ``after``."""
        if not 0 <= after <= MAX_COUNTER or not 1 <= limit <= 10_000:
            raise InvalidInput(
                f"history pages take 0 <= after <= {MAX_COUNTER} and 1 <= limit <= 10000"
            )
        self._visible(record_id, principal)
        return [
            self._shown_version(v, principal)
            for v in self._store.list_versions(record_id, after=after, limit=limit)
            if access.can_read(principal, v.content.scope, v.content.acl)
        ]

    def list_records(self, query: RecordQuery, *, principal: Principal) -> list[Record]:
        """A page of records the principal may read (``query.after`` and ``query.offset``
        page on), bounded in the store."""
        return [self._shown_record(r, principal) for r in self._visible_records(query, principal)]

    def baselines(self, scope: str | None, *, principal: Principal) -> list[Baseline]:
        """Baselines of the scopes the principal reads, each with only the pins of records
        it may read."""
        if scope is not None:
            check_input(scope, "scope", MAX_SCOPE_CHARS)
        shown: list[Baseline] = []
        for baseline in self._store.list_baselines(scope):
            if not access.in_scope(principal, baseline.scope):
                continue
            records = self._store.get_records(list(baseline.pins))
            pins: dict[str, str] = {}
            for record_id, version_id in baseline.pins.items():
                record = records.get(record_id)
                if record is None or not access.can_read(
                    principal, record.scope, record.content.acl
                ):
                    continue
                # The pinned version must be readable too: its ACL may be narrower.
                version = self._store.get_version(version_id)
                if version is not None and access.can_read(
                    principal, version.content.scope, version.content.acl
                ):
                    pins[record_id] = version_id
            curates = access.is_curator(principal)
            shown.append(
                baseline.model_copy(
                    update={
                        "pins": pins,
                        # the publish proposal is the curators' (and its proposer's) to see
                        "proposal_id": baseline.proposal_id
                        if curates or baseline.created_by == principal.id
                        else None,
                    }
                )
            )
        return shown

    def published_baseline_id(self, scope: str, *, principal: Principal) -> str | None:
        """The baseline ``scope``'s published pointer names, if the principal may see it."""
        check_input(scope, "scope", MAX_SCOPE_CHARS)
        pointer = self._store.published_baseline_id(scope)
        if pointer is None:
            return None
        visible = {b.id for b in self.baselines(scope, principal=principal)}
        return pointer if pointer in visible else None

    def record_ids(self, prefix: str, *, principal: Principal, limit: int = 100) -> list[str]:
        """Ids of records the principal may read that start with ``prefix``, in order, at
        most ``limit`` (for completions: one bounded query on the index)."""
        check_input(prefix, "prefix", MAX_ID_CHARS)
        where = self._everything_readable(principal)
        return self._store.record_ids(where, prefix, max(0, min(limit, 1000)))

    def scopes(self, prefix: str, *, principal: Principal, limit: int = 100) -> list[str]:
        """Scopes starting with ``prefix`` that hold a record the principal may read, in
        order, at most ``limit`` (for completions)."""
        check_input(prefix, "prefix", MAX_SCOPE_CHARS)
        where = self._everything_readable(principal)
        names = self._store.scopes()
        found: list[str] = []
        for scope_id in sorted(where.scope_ids or (), key=lambda i: names[i]):
            if len(found) >= limit:
                break
            if names[scope_id].startswith(prefix) and self._store.record_ids(
                dataclasses.replace(where, scope_ids=frozenset({scope_id})), "", 1
            ):
                found.append(names[scope_id])
        return found

    def default_scope(self, *, principal: Principal) -> str:
        """Where a write that names no scope goes: the principal's own default scope (or
        its one plain scope), never a scope cairn makes up. Without one the write is
        refused, naming the scopes it may write."""
        home = principal.home_scope()
        if home is not None:
            return home
        scopes = ", ".join(principal.scopes) or "none"
        raise InvalidInput(
            f"no scope given, and {principal.id} has no default scope (its scopes are "
            f'{scopes}): name the scope, e.g. "scope": "acme/app"; an operator can set '
            f"default_scope for {principal.id} in principals.yaml",
            field="scope",
        )

    def record_kinds(self) -> tuple[str, ...]:
        """The record kinds this store's policy knows (doors list them in forms and schemas;
        the policy file, not the code, says which exist)."""
        return tuple(self._policy.all_kinds)
