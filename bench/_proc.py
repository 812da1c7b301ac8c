"""What Linux says of this process's memory (``/proc/self/status``), for the benchmarks."""

from __future__ import annotations

__all__ = ["status_mb"]


def status_mb(field: str) -> float:
    """A memory line of ``/proc/self/status`` in MB (``VmRSS``: resident; ``RssAnon``: what
    the process allocated, without mapped files); 0 where the system has no such line."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0
