"""CLI commands for the store itself: ``cairn migrate``, ``cairn export``, ``cairn import``.

Each takes ``--store PATH`` (the cairn folder, default ``./.cairn``: its ``cairn.db`` is the
SQLite store) and ``--db URL`` (or ``CAIRN_DB``: ``postgresql://…`` or ``sqlite:///…``), which
wins over the folder. ``register(app)`` adds them to the main typer app.

``export`` writes JSON Lines (``cairn.store.transfer``) to FILE, or to stdout when no FILE is
given (then its summary goes to stderr, so the export can be piped); ``import`` loads FILE
(``-``: stdin) into an empty store in one transaction.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, TextIO, cast

import typer
from rich.progress import Progress, TaskID

from cairn.admin import backend, export_to, import_from, migrate, where
from cairn.config import load_settings
from cairn.doors import _cli_common as common
from cairn.doors import _render as render
from cairn.doors._cli_common import DbOpt, JsonOpt, KeyOpt, StoreOpt
from cairn.doors._cli_files import input_lines, written_privately
from cairn.ingest.records import import_records, read_contents
from cairn.limits import MAX_REQUEST_BYTES, load_json
from cairn.workspace import Workspace

__all__ = ["register"]


def _db(folder: Path, db: str | None) -> str | None:
    """--db after the command > --db before it > CAIRN_DB > <store>/config.toml."""
    return load_settings(store=folder, db=common.db_url(db)).db


def _emit(payload: dict[str, Any], *, as_json: bool, text: str, err: bool = False) -> None:
    typer.echo(json.dumps(payload, sort_keys=True) if as_json else text, err=err)


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "nothing"


def migrate_command(store: StoreOpt = None, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Bring the store's schema up to this cairn's version (PostgreSQL: as an owner login)."""
    folder = common.store_path(store)
    db = _db(folder, db)
    with common.errors():
        before, after = migrate(db, folder)
    payload = {
        "backend": backend(db),
        "store": where(db, folder),
        "before": before,
        "after": after,
        "applied": after - before,
    }
    text = (
        f"schema at version {after} (was {before}; applied {after - before})"
        if after != before
        else f"schema already at version {after}"
    )
    _emit(payload, as_json=common.want_json(as_json), text=text)


def export_command(
    file: Annotated[
        Path | None, typer.Argument(help="Where to write (default: stdout).", show_default=False)
    ] = None,
    store: StoreOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the whole store as JSON Lines: records, versions, proposals, audit, baselines."""

    folder = common.store_path(store)
    db = _db(folder, db)
    to_stdout = file is None or str(file) == "-"
    with common.errors(), render.progress(common.want_json(as_json)) as bar:
        # how many rows there are is not known before the end: the bar counts them
        task = bar.add_task("export", total=None)
        if to_stdout:
            counts = export_to(db, folder, _counting(sys.stdout, bar, task))
            sys.stdout.flush()
        else:
            assert file is not None
            counts = _export_to_file(db, folder, file, bar, task)
    payload = {
        "store": where(db, folder),
        "file": None if to_stdout else str(file),
        "counts": counts,
    }
    destination = "stdout" if to_stdout else str(file)
    _emit(
        payload,
        as_json=common.want_json(as_json),
        text=f"exported {_summary(counts)} to {destination}",
        err=to_stdout,  # keep stdout for the export itself
    )


class _RowCounter:
    """An export's output that moves the progress bar one step per row (line) written."""

    def __init__(self, out: TextIO, bar: Progress, task: TaskID) -> None:
        self._out, self._bar, self._task = out, bar, task

    def write(self, text: str) -> int:
        self._bar.advance(self._task, text.count("\n"))
        return self._out.write(text)


def _counting(out: TextIO, bar: Progress, task: TaskID) -> TextIO:
    # the export only ever calls write(): the counter stands in for the whole stream
    return cast(TextIO, _RowCounter(out, bar, task))


def _export_to_file(
    db: str | None, folder: Path, file: Path, bar: Progress, task: TaskID
) -> dict[str, int]:
    """Write next to ``file`` and rename, so a failed export never leaves a partial file.

    An export holds every record, version and audit entry of the store: it is written as the
    store's own files are (``written_privately``: ``0600``, never through a link, over a
    device or a pipe, into the store folder or over the database it was read from)."""
    with written_privately(file, Workspace(folder, db=db), field="file") as out:
        return export_to(db, folder, _counting(out, bar, task))


def import_command(
    file: Annotated[
        Path, typer.Argument(help="Records as JSON Lines, or an export file ('-': stdin).")
    ],
    store: StoreOpt = None,
    db: DbOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store records from a JSON Lines file, or restore an export.

    A file of records holds one per line, as the HTTP API takes them ({"kind": "fact",
    "scope": "acme/app", "title": "...", "body": "..."}). Every line is checked first (a bad
    line is named and nothing is stored); then the records go through the gate in batches of
    1,000, each one transaction audited once. Needs a key. An export (from `cairn export`)
    is restored instead, into an EMPTY store, keeping ids, versions and audit numbers."""

    folder = common.store_path(store)
    db = _db(folder, db)
    quiet = common.want_json(as_json)
    with common.errors(), input_lines(file, folder, max_chars=MAX_LINE_CHARS) as lines:
        first = next((line for line in lines if line.strip()), "")
        everything = itertools.chain([first], lines)
        if not _is_export(first):
            report = _store_records(folder, db, common.api_key(key), everything, quiet)
            _emit(
                {"store": where(db, folder), "file": str(file), **report},
                as_json=quiet,
                text=(
                    f"stored {report['approved']} · queued {report['queued']} · rejected "
                    f"{report['rejected']} in {report['batches']} batches into {where(db, folder)}"
                ),
            )
            return
        with render.progress(quiet, in_bytes=True) as bar:
            task = bar.add_task("restore", total=_size(file))
            counts = import_from(db, folder, _reading(everything, bar, task))
    payload = {"store": where(db, folder), "file": str(file), "counts": counts}
    _emit(payload, as_json=quiet, text=f"imported {_summary(counts)} into {where(db, folder)}")


def _size(file: Path) -> int | None:
    """The file's size in bytes, the bar's total; None for stdin or a pipe."""
    if str(file) == "-" or not file.is_file():
        return None
    return file.stat().st_size


def _reading(lines: Iterable[str], bar: Progress, task: TaskID) -> Iterator[str]:
    """The lines of an export, moving the bar by the bytes each one took in the file."""
    for line in lines:
        bar.advance(task, len(line.encode("utf-8")))
        yield line


def _is_export(first: str) -> bool:
    try:
        header = load_json(first, "line 1")
    except ValueError:  # not JSON, or nested too deep: read_contents says which
        return False
    return isinstance(header, dict) and header.get("format") == "cairn-export"


def _store_records(
    folder: Path, db: str | None, key: str | None, lines: Iterator[str], quiet: bool
) -> dict[str, int]:
    contents = read_contents(lines)
    workspace = Workspace(folder, db=db)
    principal = workspace.authenticate(key)
    with workspace.open_memory() as memory, render.progress(quiet) as bar:
        progress = render.counting(bar, "import", len(contents))
        report = import_records(memory, contents, principal, progress=progress)
    return {
        "batches": report.batches,
        "approved": report.approved,
        "queued": report.queued,
        "rejected": report.rejected,
    }


# The longest line read at all: past a record line's limit (the request limit), with room for
# an export's rows, whose JSON quotes a whole version. A file with no line end (a binary file,
# stdin from /dev/zero) is refused here instead of being read whole into memory.
MAX_LINE_CHARS = 8 * MAX_REQUEST_BYTES


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate_command)
    app.command("export")(export_command)
    app.command("import")(import_command)
