"""A graph answer's trace folder is written whole: every file flushed before the answer
returns, and after a failure neither a half-written trace nor its staging folder remains."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cairn.graph import traces
from cairn.graph.traces import TraceFolder

NOW = datetime(2025, 6, 30, 12, tzinfo=UTC)
TRACE = "trc_01HAAAAAAAAAAAAAAAAAAAAAAA"
FILES = {
    "envelope.json": {"text": "Migrate EMEA customers"},
    "_meta.json": {"policy_trace": {"withheld_ids": ["withheld-1"]}},
    "_fingerprints": {"prompt_fp": "sha256:x"},
}


def test_a_saved_trace_is_every_file_flushed_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        flushed.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(traces.os, "fsync", fsync)
    folder = TraceFolder(tmp_path, keep_days=7)
    folder.save(TRACE, owner="u-staff", scope="acme/region_emea", files=FILES, now=NOW)
    (day,) = tmp_path.iterdir()
    assert [p.name for p in day.iterdir()] == [TRACE]  # no staging folder left behind
    written = sorted(p.name for p in (day / TRACE).iterdir())
    assert written == ["_meta.json", "_owner.json", "envelope.json"]
    assert all((day / TRACE / name).stat().st_mode & 0o777 == 0o600 for name in written)
    # each file, the trace's folder and the day's folder (the rename) are flushed
    assert len(flushed) == len(written) + (2 if traces._CAN_SYNC_FOLDERS else 0)
    found = folder.load(TRACE)
    assert found is not None and found.owner == "u-staff"
    assert found.files == {k: v for k, v in FILES.items() if k != "_fingerprints"}


def test_a_failed_save_leaves_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(traces.os, "fsync", fsync)
    folder = TraceFolder(tmp_path, keep_days=7)
    with pytest.raises(OSError, match="No space"):
        folder.save(TRACE, owner="u-staff", scope="acme/region_emea", files=FILES, now=NOW)
    (day,) = tmp_path.iterdir()
    assert list(day.iterdir()) == []
    assert folder.load(TRACE) is None
    with pytest.raises(TypeError):  # a file that is not JSON: nothing is created
        folder.save(TRACE, owner="u", scope="acme", files={"x.json": {1, 2}}, now=NOW)
    assert list(day.iterdir()) == []
