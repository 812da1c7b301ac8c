"""Acknowledged writes survive SIGKILL; concurrent writer processes lose nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from cairn.model import Principal
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.factories import CURATOR

WRITER = Path(__file__).with_name("writer_process.py")
ROOT = Path(__file__).resolve().parents[2]


def _writer(folder: Path, key: str, label: str, count: int) -> subprocess.Popen[str]:
    # this checkout's code first, whatever the virtualenv's editable install points at
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(folder), key, label, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _check(folder: Path, acknowledged: list[tuple[str, str]]) -> None:
    store = SqliteStore(folder / "cairn.db")
    try:
        assert store.integrity_check() == "ok"
        found = store.get_records([record_id for record_id, _ in acknowledged])
        for record_id, title in acknowledged:
            assert record_id in found, f"acknowledged {record_id} was lost"
            assert found[record_id].content.title == title
    finally:
        store.close()


def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    proc = _writer(folder, keys["agent"], "w", 100_000)
    acknowledged: list[tuple[str, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        record_id, title = line.split()
        acknowledged.append((record_id, title))
        if len(acknowledged) == 40:
            proc.send_signal(signal.SIGKILL)  # mid-stream: the writer is busy committing
            break
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _check(folder, acknowledged)
    # and the store keeps working after the crash
    with Workspace(folder).open_memory() as memory:
        assert memory.status(principal=CURATOR)["records"] >= 40


def test_two_writers_at_once_lose_nothing(tmp_path: Path, agent: Principal) -> None:
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    procs = [_writer(folder, keys["agent"], label, 150) for label in ("a", "b")]
    acknowledged: list[tuple[str, str]] = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        assert "locked" not in stderr.lower()
        acknowledged += [tuple(line.split()) for line in stdout.splitlines()]  # type: ignore[misc]
    assert len(acknowledged) == 300
    _check(folder, acknowledged)
    with Workspace(folder).open_memory() as memory:
        counts = memory.status(principal=CURATOR)
        assert counts["records"] == 300
        assert counts["audit"] == 300
