"""The spool: where hook payloads wait, already redacted, while the daemon is unreachable.

One line per hook call (``{"v": 1, "events": [...]}``), appended with ``O_APPEND`` and
fsynced before the hook exits, in a ``0600`` file inside a ``0700`` folder. Replay claims
the file by renaming it (so hooks keep appending to a fresh one and never wait behind a
replay), sends every event in source-time order, and puts back what could not be sent.
Events carry their ids, so sending one twice stores it once: a replay that dies half-way
is simply run again. A claimed file left behind by a replay that died is claimed by the
next one.

Events the store refuses for good (invalid, or an id already used with other content) go
to ``<spool>.rejected`` with the reason, never silently away.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from cairn.capture.local import private_folder

__all__ = ["Outcome", "ReplayReport", "Spool"]

BATCH = 500  # events per send during a replay
BOUNDED_REPLAY_BYTES = 1024 * 1024  # the most a hook's own small replay reads


class Outcome(StrEnum):
    STORED = "stored"  # stored (or already there: the same event sent again)
    UNAVAILABLE = "unavailable"  # the daemon is down or busy: keep and retry later
    DENIED = "denied"  # no permission: keep (fixing the settings makes them go through)
    CONFLICT = "conflict"  # an id already stored with other content: can never succeed
    INVALID = "invalid"  # the store refuses the event itself: can never succeed


Send = Callable[[list[dict[str, Any]]], tuple[Outcome, str]]


class ReplayReport:
    """What a replay did (a plain class: the hook cannot afford importing dataclasses)."""

    def __init__(self) -> None:
        self.stored = 0
        self.kept = 0
        self.rejected = 0
        self.problems: list[str] = []


def _time(event: dict[str, Any]) -> tuple[datetime, str]:
    ts = datetime.fromisoformat(str(event["ts"]))
    if ts.tzinfo is None:
        # the kernel refuses it anyway, and sorting it among aware times raises: one such
        # line would stop every replay (and the daemon's start) until removed by hand
        raise ValueError("a time without a zone")
    return ts, str(event.get("event_id", ""))


class Spool:
    def __init__(self, path: Path, *, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock_path = path.with_name(path.name + ".lock")
        self._replay_lock_path = path.with_name(path.name + ".replay-lock")
        self.rejected_path = path.with_name(path.name + ".rejected")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock on a side file that is never renamed, held only for an append
        or a rename (microseconds), never while events are sent."""
        private_folder(self.path.parent)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _write_line(self, path: Path, line: bytes) -> None:
        """Append whole lines or nothing: a write the disk cuts short (full, over a size
        limit) is undone and raised, since a line left half-written would swallow the next
        one appended after it."""
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            start = os.fstat(fd).st_size
            if start and os.pread(fd, 1, start - 1) != b"\n":
                line = b"\n" + line  # whatever cut the last line short, keep this one apart
            try:
                rest = memoryview(line)
                while rest:
                    written = os.write(fd, rest)
                    if written <= 0:
                        raise OSError("the spool file took no more bytes")
                    rest = rest[written:]
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, start)
                raise
        finally:
            os.close(fd)

    def append(self, events: list[dict[str, Any]]) -> bool:
        """Add one hook call's events; False when the spool is full or the disk refused
        the write, with nothing of the line left behind (the caller counts it)."""
        line = (json.dumps({"v": 1, "events": events}, ensure_ascii=False) + "\n").encode()
        with self._locked():
            size = self.path.stat().st_size if self.path.exists() else 0
            if size + len(line) > self.max_bytes:
                return False
            try:
                self._write_line(self.path, line)
            except OSError:
                return False
        return True

    def pending(self) -> bool:
        """Whether anything waits (cheap: one stat per file, no read)."""
        return self.waiting_bytes() > 0

    def waiting_bytes(self) -> int:
        return sum(p.stat().st_size for p in self._files())

    def _files(self) -> list[Path]:
        if not self.path.parent.is_dir():
            return []
        names = [self.path.name, *self._claimed_names()]
        return [self.path.parent / n for n in names if (self.path.parent / n).is_file()]

    def _claimed_names(self) -> list[str]:
        prefix = self.path.name + ".replaying-"
        return sorted(p.name for p in self.path.parent.iterdir() if p.name.startswith(prefix))

    def _claim(self) -> Path | None:
        """Move everything waiting into one file only this replay reads."""
        mine = self.path.with_name(f"{self.path.name}.replaying-{os.getpid()}")
        with self._locked():
            sources = [n for n in self._claimed_names() if n != mine.name]
            if self.path.exists():
                sources.append(self.path.name)
            for name in sources:
                source = self.path.parent / name
                if mine.exists():
                    self._write_line(mine, source.read_bytes())
                    source.unlink()
                else:
                    source.rename(mine)
        return mine if mine.exists() else None

    def replay(
        self, send: Send, *, max_events: int | None = None, wait: bool = True
    ) -> ReplayReport:
        """Send what waits, oldest first; put back what could not be sent. ``max_events``
        bounds the work (a hook replays a little at a time; the daemon all). A bounded replay
        of a spool over ``BOUNDED_REPLAY_BYTES`` does nothing: it would read, sort and rewrite
        the whole file to send a few events, on every hook call; the daemon drains it (at
        start and every half minute).

        One replay at a time: a second one would take the first's claimed file from under
        it (that is how a replay that died is picked up), and the first then failed on the
        file gone. Without ``wait`` (a hook) a replay already running means nothing to do."""
        if max_events is not None and self.waiting_bytes() > BOUNDED_REPLAY_BYTES:
            report = ReplayReport()
            report.problems.append("the spool is large: the daemon replays it")
            return report
        private_folder(self.path.parent)
        fd = os.open(self._replay_lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return ReplayReport()
            return self._replay(send, max_events)
        finally:
            os.close(fd)  # closing releases the lock

    def _replay(self, send: Send, max_events: int | None) -> ReplayReport:
        report = ReplayReport()
        claimed = self._claim()
        if claimed is None:
            return report
        events: list[dict[str, Any]] = []
        for number, raw in enumerate(claimed.read_bytes().splitlines(), 1):
            try:
                line = json.loads(raw)
                events.extend(e for e in line["events"] if isinstance(e, dict))
            except (ValueError, KeyError, TypeError):
                if raw.strip():
                    # its bytes are kept (redacted before they were spooled), so that what
                    # it held can still be read back by hand
                    self._reject(
                        [],
                        f"line {number} of the spool is not a spooled hook call",
                        raw=raw.decode(errors="replace"),
                    )
                    report.rejected += 1
        good: list[dict[str, Any]] = []
        for event in events:
            try:
                _time(event)
            except (KeyError, TypeError, ValueError):
                self._reject([event], "the event has no valid time")
                report.rejected += 1
            else:
                good.append(event)
        good.sort(key=_time)
        # a hook retried while the daemon was down spooled the same event twice, stamped at
        # two moments: the first is the event, the second only a retry of it
        seen: set[str] = set()
        unique: list[dict[str, Any]] = []
        for event in good:
            key = f"{event.get('scope')}\0{event.get('event_id')}"
            if key not in seen:
                seen.add(key)
                unique.append(event)
        good = unique
        budget = len(good) if max_events is None else max_events
        position = 0
        while position < min(len(good), budget):
            batch = good[position : min(position + BATCH, budget)]
            outcome, message = send(batch)
            if outcome in {Outcome.UNAVAILABLE, Outcome.DENIED}:
                report.problems.append(message)
                break
            if outcome is Outcome.STORED:
                report.stored += len(batch)
            else:
                # find the one that cannot go in: one at a time for this batch
                for event in batch:
                    single, why = send([event])
                    if single is Outcome.STORED:
                        report.stored += 1
                    elif single in {Outcome.CONFLICT, Outcome.INVALID}:
                        self._reject([event], why)
                        report.rejected += 1
                    else:
                        report.problems.append(why)
                        position += batch.index(event)
                        break
                else:
                    position += len(batch)
                    continue
                break
            position += len(batch)
        rest = good[position:]
        if rest and not self.append(rest):
            report.problems.append("the spool is full: events dropped")
        report.kept = len(rest)
        claimed.unlink()
        return report

    def _reject(self, events: list[dict[str, Any]], reason: str, *, raw: str | None = None) -> None:
        entry: dict[str, Any] = {"reason": reason, "events": events}
        if raw is not None:
            entry["raw"] = raw
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._locked():
            self._write_line(self.rejected_path, line.encode())
