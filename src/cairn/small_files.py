"""Reading a small file a user or a repository put in place (settings, policy, principals)
without trusting what is there: a FIFO would wait for a writer for ever, ``/dev/zero`` or a
file of gigabytes fill the memory. Standard library only: the capture hook reads with it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_SETTINGS_FILE_BYTES",
    "open_regular_file",
    "read_small_file",
    "read_small_text",
    "read_toml",
]

#: The largest settings file cairn reads (``config.toml``, the policy and principals files,
#: an agent's settings): far above any real one (a thousand rules or keys are ~100 KB).
MAX_SETTINGS_FILE_BYTES = 4 * 1024 * 1024


def open_regular_file(path: Path, *, follow_links: bool = True) -> int:
    """A read-only descriptor of the regular file ``path``, opened without blocking, so a
    FIFO is refused instead of waited on, and checked on the descriptor, so a file swapped
    in after a check is what is judged. ``ValueError`` naming the file for one that is not
    a regular file; the ``OSError`` of the open (``FileNotFoundError`` among them, and
    ``ELOOP`` for a link when ``follow_links`` is false) as it comes."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (links followed, ``open_regular_file``), at
    most ``limit`` of them: ``ValueError`` naming the file for a larger one."""
    with os.fdopen(open_regular_file(path), "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is over the limit of {limit:,} bytes")
    return data


def read_small_text(path: Path, limit: int = MAX_SETTINGS_FILE_BYTES) -> str:
    """``read_small_file`` as UTF-8 text; ``ValueError`` naming the file and the first byte
    that is not UTF-8."""
    data = read_small_file(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML settings file's values ({} when there is none), read as ``read_small_text``
    reads; ``ValueError`` naming the file for one that is not TOML."""
    import tomllib  # only when a file is read: most hook calls read none

    try:
        text = read_small_text(path)
    except FileNotFoundError:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path} is not valid TOML: {exc}") from None
