"""The spool: nothing is lost while the daemon is down, and nothing is stored twice."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cairn.capture import hook
from cairn.capture.spool import Outcome, Spool
from tests.capture.project import Project, payload, storing


def _hook_in_process(monkeypatch: pytest.MonkeyPatch, body: dict[str, Any]) -> None:
    """The hook's own ``main``, fed one payload on stdin as the ``cairn hook`` process is."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(body).encode())))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert hook.main([]) == 0


def test_with_the_daemon_down_200_calls_spool_and_one_replay_stores_each_once_in_time_order(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = [
        payload(
            "PostToolUse",
            session="s1",
            cwd=project.root,
            tool_name="Bash",
            tool_use_id=f"toolu_{i:03d}",
            tool_response={"stdout": f"step {i}"},
        )
        for i in range(200)
    ]
    for body in bodies:
        _hook_in_process(monkeypatch, body)
    assert len(project.spool.read_text().splitlines()) == 200
    # a retried hook while the daemon is still down spools a second copy of one call
    _hook_in_process(monkeypatch, bodies[7])
    # the daemon replays the spool when it starts
    project.start_daemon()
    events = project.events()
    assert len(events) == 200
    assert len({e.event_id for e in events}) == 200
    assert sorted(e.text for e in events) == sorted(f"stdout: step {i}" for i in range(200))
    # stored in source-time order: the log's sequence follows the events' times
    by_seq = sorted(events, key=lambda e: e.seq or 0)
    assert [e.event_id for e in by_seq] == [e.event_id for e in events]
    assert not Spool(project.spool).pending()
    assert not Spool(project.spool).rejected_path.exists()  # the retry was a retry, not a clash
    # and a replay run again finds nothing to send and stores nothing twice
    done = project.hook(b"", "replay", "--store", str(project.store))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"stored": 0, "kept": 0, "rejected": 0}
    assert len(project.events()) == 200


def test_cairn_hook_replay_sends_the_spool_and_says_what_it_did(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hook_in_process(monkeypatch, payload("UserPromptSubmit", cwd=project.root, prompt="one"))
    # with the daemon down, replay keeps everything and says how to go on
    kept = project.hook(b"", "replay", "--store", str(project.store))
    assert kept.returncode == 1
    assert json.loads(kept.stdout)["kept"] == 1
    assert "cairn daemon start" in kept.stderr
    project.start_daemon()
    # the daemon already replayed at start; a new spooled line appears if it stops again
    project.stop_daemon()
    _hook_in_process(monkeypatch, payload("UserPromptSubmit", cwd=project.root, prompt="two"))
    project.start_daemon()
    assert sorted(e.text for e in project.events()) == ["one", "two"]


def _event(i: int, ts: datetime) -> dict[str, Any]:
    return {"event_id": f"e{i}", "ts": ts.isoformat(), "text": str(i)}


def test_replay_sends_oldest_first_and_keeps_what_the_daemon_did_not_take(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "x.jsonl")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    spool.append([_event(2, start + timedelta(seconds=2))])
    spool.append([_event(0, start), _event(1, start + timedelta(seconds=1))])
    spool.append([_event(3, start + timedelta(seconds=3))])
    sent: list[str] = []

    def flaky(events: list[dict[str, Any]]) -> tuple[Outcome, str]:
        if len(sent) >= 2:
            return Outcome.UNAVAILABLE, "down"
        sent.extend(e["event_id"] for e in events)
        return Outcome.STORED, ""

    import cairn.capture.spool as module

    module_batch = module.BATCH
    module.BATCH = 2
    try:
        report = spool.replay(flaky)
    finally:
        module.BATCH = module_batch
    assert sent == ["e0", "e1"]
    assert (report.stored, report.kept) == (2, 2)
    rest = [
        e["event_id"]
        for line in spool.path.read_text().splitlines()
        for e in json.loads(line)["events"]
    ]
    assert rest == ["e2", "e3"]


def test_events_that_can_never_go_in_are_set_aside_with_the_reason(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "x.jsonl")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    spool.append([_event(i, start + timedelta(seconds=i)) for i in range(4)])
    stored: list[str] = []

    def picky(events: list[dict[str, Any]]) -> tuple[Outcome, str]:
        if any(e["event_id"] == "e2" for e in events):
            return Outcome.CONFLICT, "event e2 was appended before with other content"
        stored.extend(e["event_id"] for e in events)
        return Outcome.STORED, ""

    report = spool.replay(picky)
    assert stored == ["e0", "e1", "e3"]
    assert (report.stored, report.rejected, report.kept) == (3, 1, 0)
    rejected = json.loads(spool.rejected_path.read_text())
    assert rejected["events"][0]["event_id"] == "e2"
    assert "other content" in rejected["reason"]
    assert spool.rejected_path.stat().st_mode & 0o777 == 0o600


def test_a_replay_that_died_half_way_is_picked_up_by_the_next(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "x.jsonl")
    spool.append([_event(0, datetime(2026, 1, 1, tzinfo=UTC))])
    # what a replay leaves when its process dies after claiming the file
    spool.path.rename(spool.path.with_name(spool.path.name + ".replaying-999999"))
    spool.append([_event(1, datetime(2026, 1, 2, tzinfo=UTC))])
    got: list[str] = []
    report = spool.replay(
        lambda events: (got.extend(e["event_id"] for e in events), (Outcome.STORED, ""))[1]
    )
    assert got == ["e0", "e1"]
    assert report.stored == 2
    assert not spool.pending()


def test_hooks_appending_during_a_replay_lose_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "x.jsonl")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(50):
        spool.append([_event(i, start + timedelta(seconds=i))])
    got: list[str] = []
    writers_go = threading.Event()

    def slow_send(events: list[dict[str, Any]]) -> tuple[Outcome, str]:
        writers_go.set()  # appends now race with this replay
        got.extend(e["event_id"] for e in events)
        return Outcome.STORED, ""

    def writer(base: int) -> None:
        writers_go.wait(timeout=30)
        for i in range(base, base + 25):
            spool.append([_event(i, start + timedelta(seconds=i))])

    threads = [threading.Thread(target=writer, args=(b,)) for b in (100, 200)]
    for thread in threads:
        thread.start()
    spool.replay(slow_send)
    for thread in threads:
        thread.join()
    spool.replay(slow_send)
    expected = {f"e{i}" for i in [*range(50), *range(100, 125), *range(200, 225)]}
    assert set(got) == expected
    assert len(got) == len(expected)


def test_a_full_spool_refuses_and_the_hook_says_so(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "x.jsonl", max_bytes=300)
    assert spool.append([_event(0, datetime(2026, 1, 1, tzinfo=UTC))])
    assert not spool.append(
        [{"event_id": "big", "ts": "2026-01-01T00:00:00+00:00", "text": "x" * 400}]
    )
    assert len(spool.path.read_text().splitlines()) == 1


# Appends under a file size limit (what a full disk does to a write), in a child process so
# that the limit binds no other file of the test run.
_UNDER_LIMIT = """
import json, resource, sys
from datetime import UTC, datetime
from pathlib import Path
from cairn.capture.spool import Spool

spool = Spool(Path(sys.argv[1]))
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
event = {"event_id": "big", "ts": datetime(2026, 1, 1, tzinfo=UTC).isoformat(), "text": "b" * 4000}
print(json.dumps(spool.append([event])))
"""


def test_a_write_the_disk_cuts_short_leaves_nothing_and_loses_no_later_event(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "spool" / "x.jsonl")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert spool.append([_event(0, start)])
    size = spool.path.stat().st_size
    limit = size + 2048  # room for half of the next line only
    child = subprocess.run(
        [sys.executable, "-c", _UNDER_LIMIT, str(spool.path), str(limit)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(child.stdout) is False  # refused, so the hook logs it
    assert spool.path.stat().st_size == size  # nothing of the cut line is left
    # a line cut short some other way (a crash mid-write) does not swallow the next one
    with spool.path.open("ab") as cut:
        cut.write(b'{"v": 1, "events": [{"event_id": "half')
    assert spool.append([_event(1, start + timedelta(seconds=1))])
    sent: list[str] = []
    report = spool.replay(storing(sent))
    assert sent == ["e0", "e1"]
    assert (report.stored, report.rejected) == (2, 1)
    rejected = json.loads(spool.rejected_path.read_text())
    assert rejected["raw"] == '{"v": 1, "events": [{"event_id": "half'  # kept, to read by hand
