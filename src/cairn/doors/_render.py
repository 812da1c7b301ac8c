"""Rendering helpers for the CLI: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from cairn.model import AuditEntry, Proposal, Record, Version

__all__ = [
    "Column",
    "audit_table",
    "err",
    "keys_table",
    "out",
    "print_json",
    "progress",
    "proposals_table",
    "records_table",
    "table",
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


@dataclass(frozen=True)
class Column:
    """A table column. An ``ident`` column holds ids: shown whole, on one line, never
    dropped. Other columns wrap; when the terminal is too narrow for every column, those
    with the highest ``drop`` go first (0: never dropped)."""

    header: str
    ident: bool = False
    drop: int = 0


# The narrowest a text column may get: its longest word (so a rule name or a scope is not
# chopped in two), but no more than this, and never narrower than its header.
_MAX_WORD = 20
# a rich box table spends 3 cells per column (its padding and left border) and 1 on the right
_PER_COLUMN = 3


def table(title: str, columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> Table:
    """A table that fits the terminal (``out``'s width) without cutting an id short:
    people copy ids from tables into the next command. The widths are worked out here
    rather than by rich, whose squeezing would cut into an id or a word."""
    body = [list(row) for row in rows]

    def longest(i: int) -> int:
        return max([len(columns[i].header), *(len(row[i]) for row in body)])

    def needs(i: int) -> int:
        if columns[i].ident:
            return longest(i)
        words = [len(word) for row in body for word in row[i].split()]
        return max(len(columns[i].header), min(max(words, default=0), _MAX_WORD))

    def room(kept: list[int]) -> int:
        return out.width - _PER_COLUMN * len(kept) - 1

    keep = list(range(len(columns)))
    while sum(needs(i) for i in keep) > room(keep):
        droppable = [i for i in keep if columns[i].drop]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda i: columns[i].drop))
    widths = {i: needs(i) for i in keep}
    spare = room(keep) - sum(widths.values())
    while spare > 0:
        # one more cell to the text column that is furthest from showing all it holds
        short = {i: longest(i) - widths[i] for i in keep if widths[i] < longest(i)}
        if not short:
            break
        widths[max(short, key=lambda i: short[i])] += 1
        spare -= 1
    shown = Table(title=title, title_justify="left")
    for i in keep:
        shown.add_column(
            columns[i].header,
            width=widths[i],
            no_wrap=columns[i].ident,
            overflow="fold",  # a word longer than the column is folded, never cut off
        )
    for row in body:
        # Text, not markup: a title such as "[draft] plan" is shown as written
        shown.add_row(*(Text(row[i]) for i in keep))
    return shown


def records_table(records: Iterable[Record], title: str = "records") -> Table:
    columns = [
        Column("id", ident=True),
        Column("kind", drop=2),
        Column("scope", drop=1),
        Column("status"),
        Column("v", drop=3),
        Column("title"),
    ]
    rows = [
        (
            r.id,
            r.kind,
            r.scope,
            r.status.value + (" (superseded)" if r.superseded_by else ""),
            str(r.current_version),
            _short(r.content.title),
        )
        for r in records
    ]
    return table(title, columns, rows)


def versions_table(versions: Sequence[Version], title: str = "history") -> Table:
    columns = [
        Column("v"),
        Column("version id", ident=True),
        Column("created", drop=2),
        Column("by", drop=1),
        Column("title"),
    ]
    rows = [
        (
            str(v.number),
            v.id,
            f"{v.created_at:%Y-%m-%d %H:%M:%S}",
            v.created_by,
            _short(v.content.title),
        )
        for v in versions
    ]
    return table(title, columns, rows)


def proposals_table(proposals: Iterable[Proposal], stale: set[str], title: str) -> Table:
    columns = [
        Column("proposal", ident=True),
        Column("op", drop=2),
        Column("scope", drop=3),
        Column("record", ident=True),
        Column("by", drop=4),
        Column("status"),
        Column("rule", drop=5),
    ]
    rows = [
        (
            p.id,
            p.change.op,
            p.scope,
            p.record_id or "-",
            p.principal_id,
            p.status.value + (" (stale)" if p.id in stale else ""),
            p.rule or "-",
        )
        for p in proposals
    ]
    return table(title, columns, rows)


def audit_table(entries: Iterable[AuditEntry]) -> Table:
    columns = [
        Column("#"),
        Column("when", drop=3),
        Column("actor", drop=2),
        Column("action"),
        Column("subject", ident=True),
        Column("rule", drop=4),
        Column("status", drop=1),
        Column("reason", drop=5),
    ]
    rows = [
        (
            str(e.seq),
            f"{e.at:%H:%M:%S}",
            e.actor,
            e.action,
            e.subject_id or "-",
            e.rule or "-",
            f"{e.from_status or '∅'}→{e.to_status}" if e.to_status else "",
            _short(e.reason or "", 40),
        )
        for e in entries
    ]
    return table("audit", columns, rows)


def keys_table(keys: Iterable[dict[str, Any]]) -> Table:
    """``cairn keys list``: one row per key, never the key itself."""
    columns = [
        Column("id", ident=True),
        Column("principal"),
        Column("state"),
        Column("created", drop=2),
        Column("label", drop=1),
    ]
    rows = [
        (
            k["id"],
            k["principal"],
            "revoked" if k["revoked"] else "active",
            str(k["created_at"])[:10],
            k["label"] or "",
        )
        for k in keys
    ]
    return table("keys", columns, rows)


@contextmanager
def progress(quiet: bool, *, in_bytes: bool = False) -> Iterator[Progress]:
    """A progress bar on stderr for work that can take more than a second (counting items,
    or bytes when ``in_bytes``); silent when ``quiet`` (JSON output) or when stderr is not
    a terminal (a log file or a pipe), so scripts and CI never see it."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn() if in_bytes else MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
        # stdout is left alone: it may carry the command's data (`cairn export > file`), and
        # rich would otherwise send it through the bar's console, to stderr
        redirect_stdout=False,
    )
    with bar:
        yield bar


def counting(
    bar: Progress, description: str, total: int | None = None
) -> Callable[[int, int], None]:
    """A task on ``bar`` and the ``progress(done, total)`` callback that moves it, as the
    kernel's batch verbs (append, import, reindex) call it while they go."""
    task = bar.add_task(description, total=total)
    return lambda done, of: bar.update(task, completed=done, total=of)
