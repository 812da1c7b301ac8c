"""Every request is checked against the principals file as it is now, even though a file
already seen is not parsed again: a key revoked by any edit, however quick, stops at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.auth import add_key, load_principals
from cairn.errors import InvalidInput, PolicyError, Unauthenticated
from cairn.workspace import Workspace


def test_an_unchanged_principals_file_is_not_parsed_again(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".cairn")
    workspace.init()
    first = load_principals(workspace.principals_path)
    assert load_principals(workspace.principals_path) is first


def test_an_edit_that_keeps_size_and_time_still_revokes_the_key_at_once(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".cairn")
    keys = workspace.init().keys
    agent = workspace.authenticate(keys["agent"])
    path = workspace.principals_path
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    # The agent's key, and only it, revoked in place: same inode, same size (the space makes
    # up for "false" being a letter longer than "true"), and the old modification time put
    # back, so that no check of the file's size or times could see the edit.
    entry = text.index(f"id: {agent.id}\n")
    start = text.index("revoked: false", entry)
    edited = text[:start] + "revoked: true " + text[start + len("revoked: false") :]
    assert len(edited) == len(text) and edited.count("revoked: true") == 1
    with path.open("r+", encoding="utf-8") as handle:
        handle.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    with pytest.raises(Unauthenticated):
        workspace.authenticate(keys["agent"])
    assert workspace.authenticate(keys["curator"]).id != agent.id  # the others' keys still work


def test_a_date_yaml_cannot_read_is_a_policy_error_that_quotes_nothing(tmp_path: Path) -> None:
    """A hand-edited file with a date YAML reads as a timestamp but no calendar has: a
    clean error naming the file, not a crash on every request, and no text from the file."""
    workspace = Workspace(tmp_path / ".cairn")
    keys = workspace.init().keys
    path = workspace.principals_path
    text = path.read_text(encoding="utf-8")
    assert "created_at: '" in text
    broken = text.replace("created_at: '", "created_at: 2001-13-45 #'", 1)
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(PolicyError) as caught:
        workspace.authenticate(keys["agent"])
    message = str(caught.value)
    assert message.startswith(f"{path}: not valid YAML") and "2001" not in message


@pytest.mark.parametrize("label", ["\x1b[31mRED\x1b[0m\a", "two\nlines", "x" * 257])
def test_a_key_label_is_short_printable_text(tmp_path: Path, label: str) -> None:
    """Labels are printed in terminals: an escape sequence could repaint `cairn keys list`."""
    folder = tmp_path / ".cairn"
    Workspace(folder).init()
    with pytest.raises(InvalidInput, match="printable text"):
        add_key(Workspace(folder).principals(), "agent", label=label)
    _, _, made = add_key(Workspace(folder).principals(), "agent", label="laptop · 2026")
    assert made.label == "laptop · 2026"
