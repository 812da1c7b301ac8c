"""Files a user names on the command line: how cairn reads them and writes them.

Reading (``--body-file``, ``cairn timeline append``, ``cairn import``): a path must name a
regular file. It is opened without blocking, so a FIFO with no writer is refused at once
instead of hanging the command, and a device or a folder is refused before a byte is read.
Nothing is read without a bound, stdin (``-``) included: a body stops at the size of a
request the HTTP door accepts, a JSON Lines file at the length of one line, so ``/dev/zero``
costs a refusal, not the machine's memory. The store folder is never read, as ingest never
reads it: its ``config.toml`` holds service keys and ``principals.yaml`` the key hashes, and
a record made from either would show them to everyone who may read its scope.

Writing (``cairn export``, ``cairn trace download``): a new ``0600`` file is renamed over
the target (``replaced_privately``), which must be a regular file or nothing yet, outside
the store folder, and not the SQLite database in use or a file SQLite keeps next to it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from cairn.admin import backend
from cairn.errors import InvalidInput
from cairn.limits import MAX_REQUEST_BYTES
from cairn.private_files import replaced_privately
from cairn.small_files import open_regular_file
from cairn.workspace import Workspace

__all__ = ["input_lines", "read_input", "written_privately"]

# Blank lines are passed over by every reader of JSON Lines, but not without end: stdin from
# ``yes ''`` would otherwise keep a command reading for ever.
MAX_BLANK_LINES = 1_000_000

# The files SQLite keeps next to a database while it is open (its journal modes).
_SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def read_input(file: Path, store: Path, *, option: str) -> str:
    """The UTF-8 text of ``file`` (``-``: stdin), which ``option`` named: at most
    ``MAX_REQUEST_BYTES``, the most an HTTP request may send, read and no more."""
    field = option.removeprefix("--")
    if str(file) == "-":
        source, data = "stdin", sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    else:
        with os.fdopen(_open_input(file, store, field), "rb") as handle:
            source, data = str(file), handle.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise InvalidInput(
            f"{option}: {source} is over the limit of {MAX_REQUEST_BYTES:,} bytes", field=field
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{option}: {source} is not UTF-8 text: {exc.reason}", field=field
        ) from None


@contextlib.contextmanager
def input_lines(
    file: Path, store: Path, *, max_chars: int, field: str = "file"
) -> Iterator[Iterator[str]]:
    """The lines of ``file`` (``-``: stdin), each read no further than ``max_chars``
    characters: a longer one is refused by its number before the rest of it is read (a
    file without line ends would otherwise be read whole into memory)."""
    with contextlib.ExitStack() as opened:
        if str(file) == "-":
            source, handle = "stdin", sys.stdin
        else:
            fd = _open_input(file, store, field)
            source, handle = str(file), opened.enter_context(os.fdopen(fd, encoding="utf-8"))
        try:
            yield _bounded(handle, max_chars, field)
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{source} is not UTF-8 text: {exc.reason}", field=field) from None


def _bounded(handle: TextIO, max_chars: int, field: str) -> Iterator[str]:
    blank = 0
    for number in itertools.count(1):
        line = handle.readline(max_chars + 1)
        if not line:
            return
        if len(line) > max_chars:
            raise InvalidInput(f"line {number} is over {max_chars:,} characters", field=field)
        if not line.strip():
            blank += 1
            if blank > MAX_BLANK_LINES:
                raise InvalidInput(f"over {MAX_BLANK_LINES:,} blank lines", field=field)
        yield line


def _open_input(file: Path, store: Path, field: str) -> int:
    """A blocking descriptor of the regular file ``file``, outside the store folder."""
    real = _refuse_store_folder(file, store, field, "cairn does not read it as input")
    try:
        # The path checked is the one opened, and never through a link put in its place since.
        fd = open_regular_file(real, follow_links=False)
    except OSError as exc:
        raise InvalidInput(f"cannot read {file}: {exc.strerror}", field=field) from None
    except ValueError:
        raise InvalidInput(
            f"{file} is not a regular file (a FIFO, device or folder is not read)", field=field
        ) from None
    try:
        info = os.fstat(fd)
        # Where the opened file really is, asked of the descriptor: a folder on the path
        # swapped for a link to the store folder after the check above leads there.
        opened = _opened_path(fd)
        if (opened is not None and opened.is_relative_to(store.resolve())) or _is_store_file(
            info, store
        ):
            raise InvalidInput(
                f"{file} is a file of the store folder: cairn does not read it as input",
                field=field,
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_store_folder(file: Path, store: Path, field: str, why: str) -> Path:
    """Where ``file`` really is (every link followed), unless that, or the path as written,
    is in the store folder: the rule ingest follows. (A store file may be a link out of it,
    ``config.toml`` to a secret mount: named through the store folder it is still refused.)"""
    real = file.resolve()
    inside = store.resolve()
    if real.is_relative_to(inside) or Path(os.path.abspath(file)).is_relative_to(
        Path(os.path.abspath(store))
    ):
        raise InvalidInput(f"{file} is inside the store folder: {why}", field=field)
    return real


def _opened_path(fd: int) -> Path | None:
    """The path the kernel says descriptor ``fd`` was opened at (Linux), or None."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _is_store_file(info: os.stat_result, store: Path) -> bool:
    """Whether the file ``info`` describes is one of the store's: a file at the top of its
    folder, or the file a link there leads to (``config.toml`` may be a link to the secret
    it holds, read by its other name); and, for a file with several hard links, any file
    below the folder (only then is the whole folder walked: it grows with traces)."""
    if not store.is_dir():
        return False
    wanted = (info.st_dev, info.st_ino)
    entries = store.rglob("*") if info.st_nlink > 1 else store.iterdir()
    for entry in entries:
        for look in (entry.lstat, entry.stat):
            with contextlib.suppress(OSError):
                seen = look()
                if (seen.st_dev, seen.st_ino) == wanted:
                    return True
    return False


@contextlib.contextmanager
def written_privately(file: Path, workspace: Workspace, *, field: str) -> Iterator[TextIO]:
    """``replaced_privately(file)``, for a file the user named: refused (``InvalidInput``)
    inside the store folder, over the SQLite database in use or its ``-wal``, ``-shm`` or
    ``-journal`` file (the database may live outside the folder), and over anything but a
    regular file (a link, a device or a FIFO would be replaced, or written through)."""
    target = _refuse_store_folder(file, workspace.folder, field, "write elsewhere")
    if backend(workspace.db) == "sqlite":
        database = workspace.db_path.resolve()
        for suffix in _SQLITE_COMPANIONS:
            used = database.with_name(database.name + suffix)
            same = target == used
            with contextlib.suppress(OSError):
                same = same or os.path.samefile(file, used)
            if same:
                raise InvalidInput(
                    f"{file} is the database in use ({used}): write elsewhere", field=field
                )
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(file.lstat().st_mode):
            raise InvalidInput(f"{file} is not a regular file: write to a new file", field=field)
    try:
        with replaced_privately(file) as out:
            yield out
    except OSError as exc:
        raise InvalidInput(f"cannot write {file}: {exc.strerror}", field=field) from exc
