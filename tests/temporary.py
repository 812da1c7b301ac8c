"""Where the suite's temporary files go.

Creating a file on this machine's disk (journal-less ext4) costs ~0.3 ms of kernel time once
a run has deleted many (the inode allocator reads each candidate free inode's deletion time
and skips the recently freed), 14x what it costs in memory; a CREATE DATABASE makes ~300
files, and the suite makes tens of thousands of stores and folders. So the suite's temporary
files (pytest's ``tmp_path``, every store, the PostgreSQL clusters, the servers it starts,
which inherit TMPDIR) go to a fresh folder in /dev/shm when that is a writable, executable
memory file system with room to spare; a TMPDIR the user set wins.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

SHM = Path("/dev/shm")
ROOM_NEEDED = 4 << 30  # bytes, free in /dev/shm and in memory; a run keeps ~1.1 GB at its peak
PREFIX = "cairn-tests-"


def memory_root() -> str | None:
    """A fresh folder in /dev/shm for this run's temporary files (named after this process),
    or None to keep the system's default."""
    if os.environ.get("TMPDIR"):
        return None
    try:
        room = os.statvfs(SHM)
    except OSError:
        return None
    # Tests write scripts and run them (the README tour's ``cairn``): noexec will not do.
    if room.f_flag & (os.ST_RDONLY | os.ST_NOEXEC) or not os.access(SHM, os.W_OK | os.X_OK):
        return None
    if min(room.f_bavail * room.f_frsize, _memory_available()) < ROOM_NEEDED:
        return None
    remove_abandoned()
    try:
        return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=SHM)
    except OSError:  # out of inodes, or a security module said no
        return None


def remove_abandoned() -> None:
    """Remove this user's folders of earlier runs whose process is gone: a run killed before
    its exit handlers ran (SIGKILL, or SIGTERM, which pytest does not catch) leaves its
    folder, and /dev/shm holds it in memory until the machine restarts."""
    for folder in SHM.glob(f"{PREFIX}*-*"):
        pid = folder.name.removeprefix(PREFIX).split("-", 1)[0]
        try:
            if not pid.isdigit() or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # alive under another user, or gone meanwhile


def _memory_available() -> int:
    """MemAvailable in bytes (what a memory file system's pages come out of), or 0 when
    /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
