"""Store administration for doors: which backend, migrate, export, import.

Doors never import ``cairn.store`` nor hold a store: these verbs open it themselves and are
the store-level operations doors may offer (``cairn migrate|export|import``). Import is the
one write outside the gate, and only into an empty store (see ``cairn.store.transfer``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from cairn.errors import NotFound
from cairn.store.base import Store
from cairn.store.factory import backend_of, migrate_store, open_store, redact, sqlite_path
from cairn.store.transfer import export_store, import_store

__all__ = ["backend", "export_to", "import_from", "migrate", "where"]


def backend(db: str | None) -> str:
    return backend_of(db)


def where(db: str | None, folder: Path) -> str:
    """The store's name for messages (never with a password)."""
    return redact(db) if db is not None else str(sqlite_path(None, folder))


def require_store(db: str | None, folder: Path) -> None:
    """A SQLite store is made by ``cairn init`` (with its policy and keys), not by these."""
    if backend_of(db) == "sqlite" and not sqlite_path(db, folder).exists():
        raise NotFound(f"no store at {where(db, folder)}: run 'cairn init' first", field="store")


@contextmanager
def _opened(db: str | None, folder: Path) -> Iterator[Store]:
    require_store(db, folder)
    store = open_store(db, folder)
    try:
        yield store
    finally:
        store.close()


def migrate(db: str | None, folder: Path) -> tuple[int, int]:
    require_store(db, folder)
    return migrate_store(db, folder)


def export_to(db: str | None, folder: Path, out: TextIO) -> dict[str, int]:
    """Write the whole store as JSON Lines to ``out``; the row counts by kind."""
    with _opened(db, folder) as store:
        return export_store(store, out)


def import_from(db: str | None, folder: Path, lines: Iterable[str]) -> dict[str, int]:
    """Restore an export into an empty store, in one transaction; the row counts by kind."""
    with _opened(db, folder) as store:
        return import_store(store, lines)
