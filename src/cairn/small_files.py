"""Reading a small file a user or a repository put in place (settings, policy, principals)
without trusting what is there: a FIFO would wait for a writer for ever, ``/dev/zero`` or a
file of gigabytes fill the memory. Standard library only: the capture hook reads with it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["read_small_file"]


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (links followed), at most ``limit`` of them.

    Opened without blocking, so a FIFO is refused instead of waited on, and checked on the
    descriptor, so a file swapped in after a check is what is judged. ``ValueError`` naming
    the file for one that is not a regular file or is larger than ``limit``; the ``OSError``
    of the open (``FileNotFoundError`` among them) as it comes."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is over the limit of {limit:,} bytes")
    return data
