"""``cairn export`` / ``cairn import``: the whole store as JSON Lines, between any backends.

The file is a header line, one line per stored row, and a trailer with counts::

    {"format": "cairn-export", "version": 1}
    {"type": "record", "data": {...}}          records, each with its head content
    {"type": "version", "data": {...}}         every version of every record
    {"type": "proposal", "data": {...}}        every proposal, whatever its status
    {"type": "audit", "data": {..., "seq": 7}} the audit log with its sequence numbers
    {"type": "baseline", "data": {...}}        baselines with their pins
    {"type": "published", "data": {...}}       each scope's published pointer (the timeline
    {"type": "edge", "data": {...}}            of who superseded / accepted / rebased what)
    {"type": "path_link", "data": {...}}       records' ties to repository files
    {"type": "end", "counts": {...}}

Rows come in that order, each kind sorted by its key, keys sorted, timestamps in UTC, so two
stores holding the same history export byte-identical files whatever their backend. Import
loads into an *empty* store only, in one transaction, keeping ids, version numbers and audit
sequence numbers; a file without its trailer (cut short) or with wrong counts loads nothing.
It goes through ``Store.import_rows``, not the gate: it replays history the gate already
decided and audited, and it cannot touch a store that holds anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TextIO

from pydantic import BaseModel, ValidationError

from cairn.errors import InvalidInput, describe_validation
from cairn.limits import STORED, LimitExceeded, load_json
from cairn.model import (
    Acl,
    AuditEntry,
    Baseline,
    Edge,
    Event,
    Origin,
    PathLink,
    Proposal,
    Record,
    Sensitivity,
    Version,
)
from cairn.store.base import Chunker, Dumped, PublishedRow, Store

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "MAX_ROW_DEPTH",
    "export_store",
    "import_store",
    "read_rows",
    "row_data",
]

FORMAT = "cairn-export"
# 2: edges carry an id, scope, ACL and the rest of the domain type. Version 1 files still
# import: their edges were the kernel's bookkeeping links, which come back as system edges
# only curators read (a version 1 edge holds no scope or ACL to read them under).
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
# How deep a row may nest. A row holds what a store kept, and versions of cairn before the
# metadata limit kept deeper metadata than a request may carry today, so this is generous;
# it only keeps rows away from where Python's JSON parser gives up (about 1,000 levels).
MAX_ROW_DEPTH = 256
_CURATORS_ONLY = Acl(roles=("curator",), labels=(), sensitivity=Sensitivity.HIGH)

# Kind name per row type, in the order rows must appear (foreign keys point backwards).
KINDS: tuple[tuple[str, type[Any]], ...] = (
    ("record", Record),
    ("version", Version),
    ("proposal", Proposal),
    ("audit", AuditEntry),
    ("baseline", Baseline),
    ("published", PublishedRow),
    ("edge", Edge),
    ("path_link", PathLink),
    ("event", Event),
)
_KIND_OF: dict[type[Any], str] = {cls: name for name, cls in KINDS}
_ORDER: dict[str, int] = {name: i for i, (name, _) in enumerate(KINDS)}
_CLASS_OF: dict[str, type[Any]] = dict(KINDS)


def _plain(value: Any) -> Any:
    """JSON-ready value with UTC timestamps, so equal histories serialise identically."""
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def row_data(row: Dumped) -> dict[str, Any]:
    if isinstance(row, BaseModel):
        data: dict[str, Any] = _plain(row.model_dump(mode="python"))
        return data
    return dict(_plain(dataclasses.asdict(row)))


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def export_store(store: Store, out: TextIO) -> dict[str, int]:
    """Write every row of ``store`` to ``out``; return the row count per kind."""
    counts = {name: 0 for name, _ in KINDS}
    out.write(_line({"format": FORMAT, "version": FORMAT_VERSION}))
    for row in store.iter_all():
        kind = _KIND_OF[type(row)]
        counts[kind] += 1
        out.write(_line({"type": kind, "data": row_data(row)}))
    out.write(_line({"type": "end", "counts": counts}))
    return counts


def _legacy_edge(data: Any) -> dict[str, Any]:
    """A version 1 edge row (src, dst, type, created_at) as a system edge."""
    if not isinstance(data, dict) or set(data) != {"src", "dst", "type", "created_at"}:
        raise ValueError("a version 1 edge row has exactly src, dst, type and created_at")
    key = f"{data['src']}|{data['dst']}|{data['type']}".encode()
    return {
        **data,
        "id": "edg_" + hashlib.sha256(key).hexdigest()[:26].upper(),
        "scope": "",
        "acl": _CURATORS_ONLY.model_dump(mode="json"),
        "origin": Origin.SYSTEM.value,
        "created_by": "system",
    }


def _parse(kind: str, data: Any, lineno: int, version: int = FORMAT_VERSION) -> Dumped:
    cls = _CLASS_OF[kind]
    try:
        if kind == "edge" and version == 1:
            data = _legacy_edge(data)
        if issubclass(cls, BaseModel):
            parsed: Dumped = cls.model_validate(data, context=STORED)  # type: ignore[assignment]
            return parsed
        fields = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or set(data) != fields:
            raise InvalidInput(f"line {lineno}: a {kind} row has exactly {sorted(fields)}")
        values = dict(data)
        for name in ("updated_at", "created_at"):
            if name in values:
                values[name] = datetime.fromisoformat(values[name])
        built: Dumped = cls(**values)
        return built
    except ValidationError as exc:  # said in cairn's words, one line, no input echoed
        why = describe_validation(exc)
        raise InvalidInput(f"line {lineno}: not a valid {kind} row: {why}") from None
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"line {lineno}: not a valid {kind} row: {exc}") from exc


def read_rows(lines: Iterable[str], counts: dict[str, int]) -> Iterator[Dumped]:
    """Parse and check an export; fills ``counts`` as it goes. Raises ``InvalidInput`` (so an
    import in progress rolls back) on a bad header, line, order, or missing/wrong trailer."""
    it = enumerate(lines, start=1)
    try:
        _, first = next(it)
        header = load_json(first, "line 1", max_depth=MAX_ROW_DEPTH, finite=False)
    except (StopIteration, ValueError) as exc:
        raise InvalidInput("not a cairn export: the first line is not its header") from exc
    if (
        not isinstance(header, dict)
        or set(header) != {"format", "version"}
        or header["format"] != FORMAT
        or header["version"] not in _READABLE_VERSIONS
    ):
        raise InvalidInput(f"not a cairn export this cairn can read: header {header!r}")
    version = int(header["version"])
    for name, _ in KINDS:
        counts[name] = 0
    position = 0
    for lineno, text in it:
        if not text.strip():
            continue
        try:
            # as written: an export holds what a store kept, NaN included, if it ever was
            obj = load_json(text, f"line {lineno}", max_depth=MAX_ROW_DEPTH, finite=False)
        except LimitExceeded as exc:
            raise InvalidInput(str(exc)) from None
        except ValueError as exc:
            raise InvalidInput(f"line {lineno}: not JSON: {exc}") from exc
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "end":
            if obj.get("counts") != counts:
                raise InvalidInput(
                    f"line {lineno}: the trailer counts {obj.get('counts')} do not match "
                    f"the rows read {counts}"
                )
            for extra, more in it:
                if more.strip():
                    raise InvalidInput(f"line {extra}: data after the trailer")
            return
        if kind not in _ORDER:
            raise InvalidInput(f"line {lineno}: unknown row type {kind!r}")
        if _ORDER[kind] < position:
            raise InvalidInput(f"line {lineno}: {kind} rows must come before {KINDS[position][0]}")
        position = _ORDER[kind]
        counts[kind] += 1
        yield _parse(kind, obj.get("data"), lineno, version)
    raise InvalidInput("the export is cut short: its trailer line is missing")


def import_store(
    store: Store, lines: Iterable[str], *, chunker: Chunker | None = None
) -> dict[str, int]:
    """Load an export into ``store``, which must be empty; return the row count per kind.

    The export holds memory, not its derived indexes: every version is cut into chunks again
    (``chunker``, by default the kernel's ``chunks_for``) so the copy is searchable at once;
    vectors are embedded again by the indexer as on any write.
    """
    if chunker is None:
        from cairn.retrieval.chunking import chunks_for

        chunker = chunks_for
    counts: dict[str, int] = {}
    store.import_rows(read_rows(lines, counts), chunker=chunker)
    return counts
