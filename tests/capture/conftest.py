from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.capture.project import Project, make_project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    """A project with a store, and a state folder of its own (spool and hook log)."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("CAIRN_STORE", raising=False)
    (tmp_path / "proj").mkdir()
    yield from make_project(tmp_path / "proj", state)
