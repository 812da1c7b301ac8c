"""A graph answer's trace folder is written whole: every file flushed before the answer
returns, and after a failure neither a half-written trace nor its staging folder remains."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
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
    folder = TraceFolder(tmp_path, keep_days=7, per_day=10)
    folder.save(TRACE, owner="u-staff", scope="acme/region_emea", files=FILES, now=NOW)
    (day,) = tmp_path.iterdir()
    (asker,) = day.iterdir()
    assert [p.name for p in asker.iterdir()] == [TRACE]  # no staging folder left behind
    written = sorted(p.name for p in (asker / TRACE).iterdir())
    assert written == ["_meta.json", "_owner.json", "envelope.json"]
    assert all((asker / TRACE / name).stat().st_mode & 0o777 == 0o600 for name in written)
    # each file, the trace's folder and the day's folder (the rename) are flushed
    assert len(flushed) == len(written) + (2 if traces._CAN_SYNC_FOLDERS else 0)
    found = folder.load(TRACE)
    assert found is not None and found.owner == "u-staff"
    assert found.files == {k: v for k, v in FILES.items() if k != "_fingerprints"}


def test_a_failed_save_leaves_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(traces.os, "fsync", fsync)
    folder = TraceFolder(tmp_path, keep_days=7, per_day=10)
    with pytest.raises(OSError, match="No space"):
        folder.save(TRACE, owner="u-staff", scope="acme/region_emea", files=FILES, now=NOW)
    (day,) = tmp_path.iterdir()
    assert [list(asker.iterdir()) for asker in day.iterdir()] == [[]]
    assert folder.load(TRACE) is None
    with pytest.raises(TypeError):  # a file that is not JSON: nothing is created
        folder.save(TRACE, owner="u", scope="acme", files={"x.json": {1, 2}}, now=NOW)
    assert all(list(asker.iterdir()) == [] for asker in day.iterdir())


def _trace_id(n: int) -> str:
    return f"trc_01HAAAAAAAAAAAAAAAAAAA{n:04d}"


def test_an_asker_keeps_at_most_its_daily_cap_and_loses_its_oldest_first(tmp_path: Path) -> None:
    folder = TraceFolder(tmp_path, keep_days=7, per_day=3)
    for n in range(8):
        folder.save(_trace_id(n), owner="u-flood", scope="acme", files=FILES, now=NOW)
    assert [folder.load(_trace_id(n)) is not None for n in range(8)] == [False] * 5 + [True] * 3
    (day,) = tmp_path.iterdir()
    (asker,) = day.iterdir()
    assert sorted(p.name for p in asker.iterdir()) == [_trace_id(n) for n in (5, 6, 7)]


def test_one_askers_flood_never_evicts_another_askers_traces(tmp_path: Path) -> None:
    folder = TraceFolder(tmp_path, keep_days=7, per_day=2)
    quiet = "trc_01HAAAAAAAAAAAAAAAAAAAQQQQ"
    folder.save(quiet, owner="u-quiet", scope="acme", files=FILES, now=NOW)
    for n in range(6):
        folder.save(_trace_id(n), owner="u-flood", scope="acme", files=FILES, now=NOW)
    found = folder.load(quiet)
    assert found is not None and found.owner == "u-quiet"
    # the cap is per day: the flood's next day starts afresh, yesterday's survivors stay
    folder.save(
        _trace_id(9), owner="u-flood", scope="acme", files=FILES, now=NOW + timedelta(days=1)
    )
    assert [folder.load(_trace_id(n)) is not None for n in (4, 5, 9)] == [True, True, True]


def test_an_askers_folder_name_is_a_digest_never_its_id(tmp_path: Path) -> None:
    folder = TraceFolder(tmp_path, keep_days=7, per_day=2)
    folder.save(TRACE, owner="../../etc/evil", scope="acme", files=FILES, now=NOW)
    (day,) = tmp_path.iterdir()
    (asker,) = day.iterdir()
    assert asker.parent == day and asker.name.startswith("a-") and "evil" not in asker.name
    found = folder.load(TRACE)
    assert found is not None and found.owner == "../../etc/evil"
