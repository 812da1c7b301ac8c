"""Rendering helpers for the CLI: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cairn.model import AuditEntry, Proposal, Record, Version

__all__ = [
    "audit_table",
    "err",
    "out",
    "print_json",
    "progress",
    "proposals_table",
    "records_table",
    "to_jsonable",
    "versions_table",
]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    # print() rather than rich: machine output must be exact JSON, never wrapped or styled.
    print(json.dumps(to_jsonable(value), indent=2, sort_keys=False, default=str))


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def records_table(records: Iterable[Record], title: str = "records") -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("id", "kind", "scope", "status", "v", "title"):
        table.add_column(column)
    for r in records:
        status = r.status.value + (" (superseded)" if r.superseded_by else "")
        table.add_row(
            r.id, r.kind, r.scope, status, str(r.current_version), _short(r.content.title)
        )
    return table


def versions_table(versions: Sequence[Version], title: str = "history") -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("v", "version id", "created", "by", "title"):
        table.add_column(column)
    for v in versions:
        table.add_row(
            str(v.number),
            v.id,
            f"{v.created_at:%Y-%m-%d %H:%M:%S}",
            v.created_by,
            _short(v.content.title),
        )
    return table


def proposals_table(proposals: Iterable[Proposal], stale: set[str], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("proposal", "op", "scope", "record", "by", "status", "rule"):
        table.add_column(column)
    for p in proposals:
        status = p.status.value + (" (stale)" if p.id in stale else "")
        table.add_row(
            p.id, p.change.op, p.scope, p.record_id or "-", p.principal_id, status, p.rule or "-"
        )
    return table


def audit_table(entries: Iterable[AuditEntry]) -> Table:
    table = Table(title="audit", title_justify="left")
    for column in ("#", "when", "actor", "action", "subject", "rule", "status", "reason"):
        table.add_column(column, overflow="fold")
    for e in entries:
        move = f"{e.from_status or '∅'}→{e.to_status}" if e.to_status else ""
        table.add_row(
            str(e.seq),
            f"{e.at:%H:%M:%S}",
            e.actor,
            e.action,
            e.subject_id or "-",
            e.rule or "-",
            move,
            _short(e.reason or "", 40),
        )
    return table


@contextmanager
def progress(quiet: bool) -> Iterator[Progress]:
    """A progress bar on stderr for work that can take more than a second; silent when
    ``quiet`` (JSON output) or when stderr is not a terminal."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
    )
    with bar:
        yield bar
