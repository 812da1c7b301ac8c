"""Records from a JSON Lines file into the store, through the batch write path.

Each line is one record's content (``kind``, ``scope``, ``title``, ``body``, …, as the HTTP
API takes it). The whole file is read and checked first: a bad line is named by its number
and nothing is stored. Then the records go in batches (``BATCH``), each one governed
transaction with one audit entry; a batch the caller may not write refuses the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pydantic import ValidationError

from cairn.errors import InvalidInput
from cairn.limits import MAX_REQUEST_BYTES, LimitExceeded, load_json
from cairn.memory import Memory
from cairn.model import Content, Decision, Principal

__all__ = ["BATCH", "ImportReport", "import_records", "read_contents"]

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


def read_contents(lines: Iterable[str]) -> list[Content]:
    """Every line's content, or ``InvalidInput`` naming the first bad line."""
    contents: list[Content] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(contents) >= MAX_LINES:
            raise InvalidInput(f"a file holds at most {MAX_LINES:,} records", field="file")
        if len(line) > MAX_REQUEST_BYTES:
            raise InvalidInput(f"line {number} is over {MAX_REQUEST_BYTES:,} bytes", field="file")
        try:
            data = load_json(line, f"line {number}")
        except LimitExceeded as exc:
            raise InvalidInput(str(exc), field="file") from None
        except ValueError as exc:
            raise InvalidInput(f"line {number} is not a JSON object: {exc}", field="file") from None
        try:
            contents.append(Content.model_validate(data))
        except ValidationError as exc:
            refusal = InvalidInput.from_validation(exc, prefix=f"line {number}: ")
            raise InvalidInput(refusal.message, field="file") from None
    if not contents:
        raise InvalidInput("the file holds no records", field="file")
    return contents


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
            if outcome.decision is Decision.APPROVE:
                report.approved += 1
            elif outcome.decision is Decision.QUEUE:
                report.queued += 1
            else:
                report.rejected += 1
            if outcome.record is not None:
                report.record_ids.append(outcome.record.id)
        progress(min(start + BATCH, len(contents)), len(contents))
    return report
