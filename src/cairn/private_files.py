"""The store folder's files: readable by their owner only, written atomically.

A store folder holds the database, the policy and the principals file; none of it is for
other users of the machine. The folder is made ``0700`` and every file ``0600`` from the
moment it exists (created with that mode, never chmod-ed after being written), and a file
is replaced by renaming a complete temporary copy over it, so a crash never leaves half a
principals file behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "create_private_file",
    "make_private_folder",
    "replaced_privately",
    "tighten",
    "write_private",
]

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def make_private_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) if needed; the folder itself ends up ``0700``."""
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    folder.chmod(FOLDER_MODE)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, as a ``0600`` file (``replaced_privately``)."""
    with replaced_privately(path) as handle:
        handle.write(text)


@contextlib.contextmanager
def replaced_privately(path: Path) -> Iterator[TextIO]:
    """A text handle whose content replaces ``path`` atomically, as a ``0600`` file, when the
    block ends without an error (and nothing of it is left when it raises).

    The temporary copy is created ``0600`` with ``O_EXCL`` (so never through a link planted
    under its name) next to the target (the same file system, so the rename is atomic),
    flushed to disk, then renamed over the target."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def create_private_file(path: Path) -> None:
    """Create an empty ``0600`` file unless one exists (for files another library fills,
    such as a SQLite database, which keeps the mode of the file it opens)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))


def tighten(folder: Path) -> None:
    """Make an existing store folder ``0700`` and the files in it ``0600`` (stores made by
    older versions of cairn had ``0644`` files). Only what the current user owns is
    touched; symbolic links are left alone."""
    if not folder.is_dir() or folder.is_symlink():
        return
    uid = os.getuid()
    if folder.stat().st_uid == uid:
        folder.chmod(FOLDER_MODE)
    for entry in folder.iterdir():
        info = entry.lstat()
        if stat.S_ISREG(info.st_mode) and info.st_uid == uid and info.st_mode & 0o077:
            entry.chmod(FILE_MODE)
