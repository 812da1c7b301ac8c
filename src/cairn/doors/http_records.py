"""The JSON API's record routes: propose, read, list, version, supersede and move records
along their lifecycle, one at a time or in batches, and ingest files as evidence."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi import Path as PathParam
from pydantic import Discriminator, Field, StrictBool, Tag

from cairn.doors.http_common import (
    ReasonBody,
    RecordId,
    StrictBody,
    Who,
    api_router,
    branch_by_key,
    selector_of,
)
from cairn.ingest.files import IngestReport
from cairn.limits import MAX_COUNTER, MAX_LIST_ITEMS, MAX_RECORD_BATCH, TextLimit
from cairn.memory import Memory, RecordView
from cairn.model import (
    Content,
    ContentPatch,
    Id,
    Kind,
    Name,
    PinKind,
    ProposalOutcome,
    Reason,
    Record,
    RecordQuery,
    RepoPaths,
    ScopePath,
    Status,
    Timestamp,
    Version,
)

__all__ = ["lifecycle_router", "records_router", "versions_router"]


class RememberBody(StrictBody):
    content: Content
    draft: StrictBool = False
    paths: RepoPaths = ()
    reason: Reason | None = None


class UpdateBody(StrictBody):
    patch: ContentPatch
    base_version_id: Id | None = None
    reason: Reason | None = None


class SupersedeByRecord(StrictBody):
    by: Id = Field(description="the existing record that replaces this one")
    reason: Reason | None = None


class SupersedeWithContent(StrictBody):
    content: Content = Field(description="a new record that replaces this one")
    reason: Reason | None = None


# Exactly one of the two, said in the schema: a replacement by id or by new content. The
# body's own keys choose the branch, so an error speaks of that branch's fields only.
SupersedeBody = Annotated[
    Annotated[SupersedeByRecord, Tag("by")] | Annotated[SupersedeWithContent, Tag("content")],
    Discriminator(branch_by_key("by", "content")),
]


class TransitionBody(StrictBody):
    to: Status
    reason: Reason | None = None


# Repository-relative only: over the network a caller must not name files outside the tree
# (no leading slash, no ".." segment). Written without look-arounds for pydantic's regex.
_SEGMENT = r"(?:[^./\\\x00][^/\\\x00]*|\.[^./\\\x00][^/\\\x00]*|\.\.[^/\\\x00]+|\.)"


_RELATIVE_PATH = rf"^{_SEGMENT}(?:[/\\]{_SEGMENT})*[/\\]?$"


class IngestBody(StrictBody):
    paths: list[Annotated[str, TextLimit(4096, min_chars=1, pattern=_RELATIVE_PATH)]] = Field(
        min_length=1,
        max_length=MAX_LIST_ITEMS,
        description="files, folders or globs relative to the project folder, under an ingest "
        "root the policy opens to the caller",
    )
    scope: ScopePath
    kind: Kind = "document"


@dataclass(frozen=True)
class RecordFilters:
    """The query of ``GET /v1/records``, one parameter a field (FastAPI reads a dataclass
    dependency's fields as query parameters): the kernel's ``RecordQuery`` as a URL spells
    it, ``kind`` and ``status`` repeated rather than ``kinds`` and ``statuses``."""

    kind: Annotated[list[Kind] | None, Query(max_length=MAX_LIST_ITEMS)] = None
    status: Annotated[list[Status] | None, Query()] = None
    scope: Name | None = None
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100
    offset: Annotated[int, Query(ge=0, le=MAX_COUNTER)] = 0
    after: Annotated[
        Id | None, Query(description="the last id of the previous page (keyset paging)")
    ] = None

    def query(self) -> RecordQuery:
        given = asdict(self)
        # every other field has the kernel's name; these two are plural there
        kinds, statuses = given.pop("kind") or (), given.pop("status") or ()
        return RecordQuery(kinds=tuple(kinds), statuses=tuple(statuses), **given)


class BulkBody(StrictBody):
    contents: list[Content] = Field(min_length=1, max_length=1000)


class BatchBody(StrictBody):
    contents: list[Content] = Field(min_length=1, max_length=MAX_RECORD_BATCH)
    draft: StrictBool = False


def records_router(memory: Memory) -> APIRouter:
    """``/v1/records`` and the bulk writes: every write a proposal the gate decides."""
    router = api_router(tags=["records"])

    @router.post("/records", summary="Propose a new record (or record a draft)")
    def remember(body: RememberBody, who: Who) -> ProposalOutcome:
        return memory.remember(
            body.content, principal=who, draft=body.draft, paths=body.paths, reason=body.reason
        )

    @router.get("/records", summary="List records visible to the caller")
    def list_records(who: Who, filters: Annotated[RecordFilters, Depends()]) -> list[Record]:
        return memory.list_records(filters.query(), principal=who)

    @router.get("/records/{record_id}", summary="One record at the version a selector chooses")
    def get_record(
        record_id: RecordId,
        who: Who,
        selector: PinKind = PinKind.HEAD,
        baseline_id: Id | None = None,
        version_id: Id | None = None,
    ) -> RecordView:
        chosen = selector_of(selector, baseline_id, version_id)
        return memory.get(record_id, principal=who, selector=chosen)

    @router.get("/records/{record_id}/resolve", summary="Follow the supersession chain to its end")
    def resolve(record_id: RecordId, who: Who) -> Record:
        return memory.resolve(record_id, principal=who)

    @router.patch(
        "/records/{record_id}",
        summary="Propose an update (pin base_version_id to detect staleness)",
    )
    def update(record_id: RecordId, body: UpdateBody, who: Who) -> ProposalOutcome:
        return memory.update(
            record_id,
            body.patch,
            principal=who,
            base_version_id=body.base_version_id,
            reason=body.reason,
        )

    @router.post("/records/{record_id}/supersede", summary="Propose superseding a record")
    def supersede(record_id: RecordId, body: SupersedeBody, who: Who) -> ProposalOutcome:
        if isinstance(body, SupersedeByRecord):
            return memory.supersede(record_id, principal=who, by=body.by, reason=body.reason)
        return memory.supersede(record_id, principal=who, content=body.content, reason=body.reason)

    @router.post(
        "/ingest", summary="Ingest repository files as evidence records (through the gate)"
    )
    def ingest(body: IngestBody, who: Who) -> IngestReport:
        return memory.ingest(body.paths, principal=who, scope=body.scope, kind=body.kind)

    @router.post(
        "/remember_many", summary="Propose many records at once; each is decided on its own"
    )
    def remember_many(body: BulkBody, who: Who) -> list[ProposalOutcome]:
        return memory.remember_many(body.contents, principal=who)

    @router.post(
        "/records:batch", summary="Store many records in one governed transaction, audited once"
    )
    def store_many(body: BatchBody, who: Who) -> list[ProposalOutcome]:
        return memory.store_many(body.contents, principal=who, draft=body.draft)

    return router


def lifecycle_router(memory: Memory) -> APIRouter:
    """``/v1/records/{id}/transition``, ``archive`` and ``restore``: a curator moves a record
    along its lifecycle (listed with the review routes)."""
    router = api_router(tags=["review"])

    @router.post(
        "/records/{record_id}/transition", summary="Move a record along its lifecycle (curators)"
    )
    def transition(record_id: RecordId, body: TransitionBody, who: Who) -> ProposalOutcome:
        return memory.transition(record_id, body.to, principal=who, reason=body.reason)

    @router.post("/records/{record_id}/archive", summary="Archive a record (curators)")
    def archive(record_id: RecordId, body: ReasonBody, who: Who) -> ProposalOutcome:
        return memory.archive(record_id, principal=who, reason=body.reason)

    @router.post("/records/{record_id}/restore", summary="Restore an archived record (curators)")
    def restore(record_id: RecordId, body: ReasonBody, who: Who) -> ProposalOutcome:
        return memory.restore(record_id, principal=who, reason=body.reason)

    return router


def versions_router(memory: Memory) -> APIRouter:
    """``/v1/records/{id}/versions``: a record's history, and one version of it."""
    router = api_router(tags=["versions"])

    @router.get(
        "/records/{record_id}/versions", summary="Every version of a record the caller may see"
    )
    def history(
        record_id: RecordId,
        who: Who,
        after: Annotated[
            int, Query(ge=0, le=MAX_COUNTER, description="the last version number seen")
        ] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> list[Version]:
        return memory.history(record_id, principal=who, after=after, limit=limit)

    @router.get("/records/{record_id}/versions/{number}", summary="One version by its number")
    def get_version(
        record_id: RecordId, number: Annotated[int, PathParam(ge=1, le=MAX_COUNTER)], who: Who
    ) -> RecordView:
        return memory.get(record_id, principal=who, version=number)

    return router
