from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.capture.project import Project, make_project


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    """A project with a store, and a state folder of its own (spool and hook log).

    Not under ``tmp_path``: its length grows with the test's name and pytest's run number,
    and the daemon's socket goes in the store folder only when its path fits a Unix socket
    address (~100 bytes), which is what these tests expect of it."""
    with tempfile.TemporaryDirectory(prefix="cap-") as short:
        root = Path(short)
        state = root / "state"
        state.mkdir()
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        monkeypatch.delenv("CAIRN_STORE", raising=False)
        (root / "proj").mkdir()
        yield from make_project(root / "proj", state)
