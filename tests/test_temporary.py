"""The suite's temporary folder in memory: chosen only when fit, and an abandoned one removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import temporary


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout)


def test_a_killed_run_s_folder_is_removed_and_a_live_one_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(temporary, "SHM", tmp_path)
    abandoned = tmp_path / f"{temporary.PREFIX}{_dead_pid()}-abc"
    live = tmp_path / f"{temporary.PREFIX}{os.getpid()}-def"
    other = tmp_path / "cairn-tests-not-a-pid"
    for folder in (abandoned, live, other):
        (folder / "pytest-of-root").mkdir(parents=True)
    temporary.remove_abandoned()
    assert not abandoned.exists()
    assert live.is_dir() and other.is_dir()


def test_a_tmpdir_the_user_set_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", "/somewhere/else")
    assert temporary.memory_root() is None


def test_no_memory_folder_without_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(temporary, "SHM", tmp_path)
    monkeypatch.setattr(temporary, "ROOM_NEEDED", 1 << 62)
    assert temporary.memory_root() is None
    assert list(tmp_path.iterdir()) == []


def test_a_memory_folder_is_named_after_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(temporary, "SHM", tmp_path)
    monkeypatch.setattr(temporary, "ROOM_NEEDED", 1)
    made = temporary.memory_root()
    assert made is not None
    assert Path(made).parent == tmp_path
    assert Path(made).name.startswith(f"{temporary.PREFIX}{os.getpid()}-")
