"""The JSON API's upkeep routes: the audit log, drift refresh and retention vacuum (a
curator's), who the caller is, and what the store holds as the caller may see it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cairn.doors.http_common import Who, api_router
from cairn.limits import MAX_COUNTER
from cairn.memory import Memory, RefreshReport, VacuumReport
from cairn.model import AuditEntry, AuditQuery, Name, Principal, Timestamp

__all__ = ["admin_router"]


def admin_router(memory: Memory) -> APIRouter:
    """``/v1/audit``, ``/v1/refresh``, ``/v1/vacuum``, ``/v1/whoami`` and ``/v1/status``."""
    router = api_router(tags=["admin"])

    @router.get("/audit", summary="The audit log (curators)")
    def audit(
        who: Who,
        actor: Name | None = None,
        action: Name | None = None,
        subject_id: Name | None = None,
        proposal_id: Name | None = None,
        rule: Name | None = None,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 100,
        after_seq: Annotated[
            int | None, Query(ge=0, le=MAX_COUNTER, description="the last seq of the previous page")
        ] = None,
    ) -> list[AuditEntry]:
        query = AuditQuery(
            actor=actor,
            action=action,
            subject_id=subject_id,
            proposal_id=proposal_id,
            rule=rule,
            since=since,
            until=until,
            limit=limit,
            after_seq=after_seq,
        )
        return memory.audit(query, principal=who)

    @router.post("/refresh", summary="Re-hash linked files and mark drift (curators)")
    def refresh(who: Who) -> RefreshReport:
        return memory.refresh(principal=who)

    @router.post("/vacuum", summary="Archive records kept past retention (curators)")
    def vacuum(who: Who) -> VacuumReport:
        return memory.vacuum(principal=who)

    @router.get(
        "/whoami",
        summary="Who the key belongs to: its principal's roles, scopes, labels and sensitivity",
    )
    def whoami(who: Who) -> Principal:
        return who

    @router.get(
        "/status",
        summary="Counts of what the caller may see (the whole store for curators of every scope)",
    )
    def status(who: Who) -> dict[str, int]:
        return memory.status(principal=who)

    return router
