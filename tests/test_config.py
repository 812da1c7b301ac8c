"""Settings precedence: flags > CAIRN_* environment > <store>/config.toml > the user's
config.toml > defaults."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from cairn.config import load_settings
from cairn.errors import InvalidInput
from cairn.small_files import MAX_SETTINGS_FILE_BYTES
from tests.blocking import within_seconds


def test_each_layer_overrides_the_one_below(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CAIRN_DB", "CAIRN_EMBEDDER", "CAIRN_STORE", "CAIRN_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert load_settings(store=tmp_path).embedder == "minilm"  # default
    (tmp_path / "config.toml").write_text('embedder = "static"\nport = 9000\n')
    assert load_settings(store=tmp_path).embedder == "static"  # file
    monkeypatch.setenv("CAIRN_EMBEDDER", "openai:http://127.0.0.1:1/v1")
    settings = load_settings(store=tmp_path)
    assert settings.embedder.startswith("openai:")  # environment beats the file
    assert settings.port == 9000  # the file still supplies what the environment does not
    assert load_settings(store=tmp_path, embedder="static").embedder == "static"  # flag wins


def test_the_store_folder_is_found_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.toml").write_text('db = "postgresql://db.example/cairn"\n')
    monkeypatch.setenv("CAIRN_STORE", str(tmp_path))
    monkeypatch.delenv("CAIRN_DB", raising=False)
    assert load_settings().db == "postgresql://db.example/cairn"


def test_a_typo_in_the_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('embeder = "static"\n')
    with pytest.raises(ValidationError, match="embeder"):
        load_settings(store=tmp_path)


def test_the_user_file_sits_below_the_store_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, store = tmp_path / "home", tmp_path / "store"
    (home / "cairn").mkdir(parents=True)
    store.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for name in ("CAIRN_DB", "CAIRN_EMBEDDER", "CAIRN_TIMELINE__GAP_MINUTES"):
        monkeypatch.delenv(name, raising=False)
    (home / "cairn" / "config.toml").write_text(
        'embedder = "static"\n[timeline]\ngap_minutes = 20\ntimezone = "Europe/Paris"\n'
    )
    settings = load_settings(store=store)
    assert (settings.embedder, settings.timeline.gap_minutes) == ("static", 20)
    (store / "config.toml").write_text("[timeline]\ngap_minutes = 45\n")
    settings = load_settings(store=store)
    # the store's file wins where it speaks; the user's still supplies the rest
    assert settings.timeline.gap_minutes == 45
    assert (settings.timeline.timezone, settings.embedder) == ("Europe/Paris", "static")
    monkeypatch.setenv("CAIRN_TIMELINE__GAP_MINUTES", "10")
    assert load_settings(store=store).timeline.gap_minutes == 10


def test_the_user_file_cannot_choose_a_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cairn").mkdir()
    (tmp_path / "cairn" / "config.toml").write_text('db = "postgresql://elsewhere/x"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("CAIRN_DB", raising=False)
    assert load_settings(store=tmp_path / "store").db is None


def test_a_bad_timeline_setting_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[timeline]\ntimezone = "Mars/Olympus"\n')
    with pytest.raises(ValidationError, match="Mars/Olympus"):
        load_settings(store=tmp_path)


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda file: file.write_text("x = [\n"), "is not valid TOML"),
        (lambda file: file.write_bytes(b"# caf\xe9\n"), "not UTF-8 text"),
        (lambda file: os.mkfifo(file), "is not a regular file"),
        (lambda file: file.symlink_to("/dev/zero"), "is not a regular file"),
        (lambda file: file.write_bytes(b"#" * (MAX_SETTINGS_FILE_BYTES + 1)), "over the limit"),
    ],
    ids=["not-toml", "not-utf8", "fifo", "dev-zero", "too-large"],
)
def test_a_config_file_that_cannot_be_read_is_a_clear_error(
    tmp_path: Path, make: Callable[[Path], object], said: str
) -> None:
    """A store's ``config.toml`` may have come with a cloned repository: one that is broken,
    a FIFO or endless is refused at once by name (a CLI error in one line), never a
    traceback, a hang or the memory filled."""
    store = tmp_path / ".cairn"
    store.mkdir()
    file = store / "config.toml"
    make(file)
    with pytest.raises(InvalidInput, match=said):
        within_seconds(10, file, lambda: load_settings(store=store))
