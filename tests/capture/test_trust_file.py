"""The list of stores the hooks trust, changed by ``cairn hooks trust`` and ``untrust``: in
several terminals at once, over a list someone else could have written, and for a
``.cairn`` that is a symbolic link. (What the hook itself does in each case is in
``test_attacks.py``.)"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.capture import local
from cairn.doors.cli import app
from cairn.errors import InvalidInput
from cairn.workspace import Workspace
from tests.capture.project import Project

runner = CliRunner()
WORKERS = 8


def _stores(parent: Path, count: int) -> list[Path]:
    made = []
    for number in range(count):
        store = parent / f"other-{number}" / ".cairn"
        Workspace(store).init()
        made.append(store)
    return made


def _trust_file(project: Project) -> Path:
    return project.state / "cairn" / "trusted-stores.json"


def test_trusts_and_an_untrust_at_once_lose_nothing(project: Project) -> None:
    """Eight ``cairn hooks trust`` and one ``untrust`` at once. Each reads the list, changes
    it and writes it back; were they not taken in turn, each would write back what it read,
    and all changes but the last one's would be lost.

    So that the race is lost every time it can be, not now and then: a worker that has read
    the list does not write it back until every other worker has read it too, or is waiting
    for the lock (and so cannot read it before this one is done)."""
    stores = _stores(project.root.parent, WORKERS)
    jobs: list[tuple[Callable[[Path], Any], Path]] = [
        *((local.trust_store, store) for store in stores),
        (local.untrust_store, project.store),
    ]
    changed = threading.Condition()
    counts = {"read": 0, "at_lock": 0}
    real_flock, real_trusted, real_save = fcntl.flock, local._trusted, local._save_trusted

    def worker() -> bool:
        return threading.current_thread().name.startswith("trust-worker")

    def count(name: str, step: int) -> None:
        with changed:
            counts[name] += step
            changed.notify_all()

    def flock(fd: int, operation: int) -> None:
        if not (worker() and operation & fcntl.LOCK_EX):
            real_flock(fd, operation)
            return
        count("at_lock", 1)
        try:
            real_flock(fd, operation)
        finally:
            count("at_lock", -1)

    def trusted() -> list[dict[str, Any]]:
        entries = real_trusted()
        if worker():
            count("read", 1)
        return entries

    def save(entries: list[dict[str, Any]]) -> None:
        with changed:
            # (the timeout only ends a broken run: the condition is what waits)
            assert changed.wait_for(
                lambda: counts["read"] + counts["at_lock"] >= len(jobs), timeout=60
            ), counts
        real_save(entries)

    start = threading.Barrier(len(jobs))
    failures: list[BaseException] = []

    def run(job: Callable[[Path], Any], store: Path) -> None:
        try:
            start.wait(60)
            job(store)
        except BaseException as exc:
            failures.append(exc)

    threads = [
        threading.Thread(target=run, args=job, name=f"trust-worker-{number}")
        for number, job in enumerate(jobs)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fcntl, "flock", flock)
        patch.setattr(local, "_trusted", trusted)
        patch.setattr(local, "_save_trusted", save)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    assert [store for store in stores if not local.is_trusted(store)] == []
    assert not local.is_trusted(project.store)


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (0o620, "writable by others (mode 620)"),
        (0o602, "writable by others (mode 602)"),
        (0o600, "owned by user"),
    ],
    ids=["group-writable", "world-writable", "another-users"],
)
def test_hooks_trust_will_not_write_over_a_list_others_could_have_written(
    project: Project, mode: int, said: str
) -> None:
    """Someone who could write the list could trust a store of their own making in it: the
    hooks believe none of it, and ``cairn hooks trust`` says which file is wrong and why
    rather than write over it (which would hide that it was tampered with)."""
    trust_file = _trust_file(project)
    (other,) = _stores(project.root.parent, 1)
    trust_file.chmod(mode)
    if said.startswith("owned"):
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user takes root")
        os.chown(trust_file, os.geteuid() + 1000, -1)
    before = trust_file.read_bytes()
    assert not local.is_trusted(project.store)  # the hooks trust nothing
    for command in ("trust", "untrust"):
        result = runner.invoke(app, ["hooks", command, str(other)])
        assert result.exit_code == InvalidInput.exit_code, (result.output, result.exception)
        assert str(trust_file) in result.stderr and said in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert trust_file.read_bytes() == before
    os.chown(trust_file, os.geteuid(), -1)
    trust_file.chmod(0o600)
    assert local.is_trusted(project.store) and not local.is_trusted(other)


def test_hooks_trust_refuses_a_list_that_is_a_link(project: Project) -> None:
    """A link would have the list kept wherever it leads (a file someone else may write)."""
    trust_file = _trust_file(project)
    elsewhere = project.root.parent / "elsewhere.json"
    trust_file.rename(elsewhere)
    trust_file.symlink_to(elsewhere)
    (other,) = _stores(project.root.parent, 1)
    before = elsewhere.read_bytes()
    assert not local.is_trusted(project.store)
    result = runner.invoke(app, ["hooks", "trust", str(other)])
    assert result.exit_code == InvalidInput.exit_code, (result.output, result.exception)
    assert f"{trust_file} is a symbolic link" in result.stderr, result.stderr
    assert trust_file.is_symlink() and elsewhere.read_bytes() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user takes root")
def test_hooks_trust_leaves_a_state_folder_another_user_owns_alone(project: Project) -> None:
    """Root's own state folder given to another user: what it holds is not believed, and
    ``cairn hooks trust`` says so, rather than take the folder back (make it root's own
    ``0700``) and trust what is in it."""
    folder = project.state / "cairn"
    trust_file = _trust_file(project)
    (other,) = _stores(project.root.parent, 1)
    before = trust_file.read_bytes()
    someone_else = os.geteuid() + 1000
    os.chown(folder, someone_else, -1)
    folder.chmod(0o755)
    try:
        assert not local.is_trusted(project.store)
        result = runner.invoke(app, ["hooks", "trust", str(other)])
        assert result.exit_code == InvalidInput.exit_code, (result.output, result.exception)
        said = f"the folder {folder}, which holds the list of trusted stores, is owned by user"
        assert said in result.stderr, result.stderr
        seen = folder.stat()
        assert (seen.st_uid, stat.S_IMODE(seen.st_mode)) == (someone_else, 0o755)
        assert trust_file.read_bytes() == before
    finally:
        os.chown(folder, os.geteuid(), -1)
        folder.chmod(0o700)


def test_hooks_trust_and_untrust_refuse_a_store_folder_that_is_a_link(project: Project) -> None:
    """A cloned repository that ships ``.cairn -> <the user's other project>/.cairn``:
    trusting it would trust that other store for this project's prompts, and untrusting it
    would untrust that other store. Both are refused, saying why, and nothing changes."""
    clone = project.root.parent / "clone"
    clone.mkdir()
    (clone / ".cairn").symlink_to(project.store)
    before = _trust_file(project).read_bytes()
    for command, target in [
        ("trust", clone),
        ("trust", clone / ".cairn"),
        ("untrust", clone),
    ]:
        result = runner.invoke(app, ["hooks", command, str(target)])
        assert result.exit_code == InvalidInput.exit_code, (result.output, result.exception)
        assert "symbolic link" in result.stderr, result.stderr
    assert _trust_file(project).read_bytes() == before
    assert local.is_trusted(project.store)
    assert local.find_store(str(clone)) is None


def test_untrust_on_a_machine_with_no_list_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing to take back: no state folder, no lock file is made for it."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    store = tmp_path / "project" / ".cairn"
    Workspace(store).init()
    assert local.untrust_store(store) is False
    assert not state.exists()
