"""The JSON API's upkeep routes: drift refresh and retention vacuum (a curator's), who the
caller is, and what the store holds as the caller may see it."""

from __future__ import annotations

from fastapi import APIRouter

from cairn.doors.http_common import Who, api_router
from cairn.memory import Memory, RefreshReport, VacuumReport
from cairn.model import Principal

__all__ = ["admin_router"]


def admin_router(memory: Memory) -> APIRouter:
    """``/v1/refresh``, ``/v1/vacuum``, ``/v1/whoami`` and ``/v1/status``."""
    router = api_router(tags=["admin"])

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
