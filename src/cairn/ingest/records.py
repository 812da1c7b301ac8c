"""Records (and timeline events) from a JSON Lines file into the store, through the batch
write paths.

Each line is one record's content (``kind``, ``scope``, ``title``, ``body``, …, as the HTTP
API takes it). The whole file is read and checked first: a bad line is named by its number
and nothing is stored. Then the records go in batches (``BATCH``), each one governed
transaction with one audit entry; a batch the caller may not write refuses the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from cairn.errors import InvalidInput
from cairn.limits import MAX_REQUEST_BYTES, LimitExceeded, load_json
from cairn.memory import Memory
from cairn.model import AppendReport, CairnModel, Content, EventDraft, Principal, Verdict

M = TypeVar("M", bound=CairnModel)

__all__ = [
    "BATCH",
    "ImportReport",
    "append_events",
    "import_records",
    "read_contents",
    "read_events",
    "read_jsonl",
]

BATCH = 1_000
# A file of records is read whole before anything is stored: bound it like many requests.
MAX_LINES = 1_000_000


@dataclass
class ImportReport:
    batches: int = 0
    approved: int = 0
    queued: int = 0
    rejected: int = 0
    record_ids: list[str] = field(default_factory=list)


def read_jsonl(lines: Iterable[str], model: type[M], noun: str) -> list[M]:
    """Every line as a ``model``, or ``InvalidInput`` naming the first bad line."""
    found: list[M] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(found) >= MAX_LINES:
            raise InvalidInput(f"a file holds at most {MAX_LINES:,} {noun}", field="file")
        if len(line) > MAX_REQUEST_BYTES:
            raise InvalidInput(f"line {number} is over {MAX_REQUEST_BYTES:,} bytes", field="file")
        try:
            data = load_json(line, f"line {number}")
        except LimitExceeded as exc:
            raise InvalidInput(str(exc), field="file") from None
        except ValueError as exc:
            raise InvalidInput(f"line {number} is not a JSON object: {exc}", field="file") from None
        try:
            found.append(model.model_validate(data))
        except ValidationError as exc:
            refusal = InvalidInput.from_validation(exc, prefix=f"line {number}: ")
            raise InvalidInput(refusal.message, field="file") from None
    if not found:
        raise InvalidInput(f"the file holds no {noun}", field="file")
    return found


def read_contents(lines: Iterable[str]) -> list[Content]:
    """Every line's record content, or ``InvalidInput`` naming the first bad line."""
    return read_jsonl(lines, Content, "records")


def read_events(lines: Iterable[str]) -> list[EventDraft]:
    """Every line's event (``event_id, ts, session_id, scope, agent, role, kind, text,
    metadata``), or ``InvalidInput`` naming the first bad line."""
    return read_jsonl(lines, EventDraft, "events")


def append_events(
    memory: Memory,
    events: list[EventDraft],
    principal: Principal,
    *,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> AppendReport:
    """Append in batches of ``BATCH`` (each one transaction with one audit entry), once
    every event was checked: a scope the caller may not write or an id that clashes
    anywhere in the file stores no batch. Events are idempotent by id, so a run cut short
    can simply be repeated."""
    memory.check_events(events, principal=principal)
    stored: list[str] = []
    duplicates: list[str] = []
    for start in range(0, len(events), BATCH):
        report = memory.append_events(events[start : start + BATCH], principal=principal)
        stored += report.stored
        duplicates += report.duplicates
        progress(min(start + BATCH, len(events)), len(events))
    return AppendReport(stored=tuple(stored), duplicates=tuple(duplicates))


def import_records(
    memory: Memory,
    contents: list[Content],
    principal: Principal,
    *,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ImportReport:
    report = ImportReport()
    for start in range(0, len(contents), BATCH):
        outcomes = memory.store_many(contents[start : start + BATCH], principal=principal)
        report.batches += 1
        for outcome in outcomes:
            if outcome.decision is Verdict.APPROVE:
                report.approved += 1
            elif outcome.decision is Verdict.QUEUE:
                report.queued += 1
            else:
                report.rejected += 1
            if outcome.record is not None:
                report.record_ids.append(outcome.record.id)
        progress(min(start + BATCH, len(contents)), len(contents))
    return report
