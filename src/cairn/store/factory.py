"""Choose a store backend from a ``--db`` / ``CAIRN_DB`` value.

``None`` (the default) is the embedded SQLite file in the cairn folder; ``sqlite:///path``
names another SQLite file; ``postgresql://…`` (or ``postgres://…``) is the server backend.
psycopg is imported only for PostgreSQL, so SQLite-only installs never need it.
"""

from __future__ import annotations

import re
from pathlib import Path

from cairn.errors import InvalidInput
from cairn.store.base import Store

__all__ = [
    "DB_FILE",
    "backend_of",
    "migrate_store",
    "open_store",
    "redact",
    "sqlite_path",
]

DB_FILE = "cairn.db"
_PG_SCHEMES = ("postgresql://", "postgres://")


def backend_of(db: str | None) -> str:
    """``"sqlite"`` or ``"postgres"`` for a ``--db`` value; ``InvalidInput`` otherwise."""
    if db is None or db.startswith("sqlite:"):
        return "sqlite"
    if db.startswith(_PG_SCHEMES):
        return "postgres"
    raise InvalidInput(
        f"unknown --db {redact(db)!r}: use sqlite:///path/to/cairn.db or postgresql://…",
        field="db",
    )


def sqlite_path(db: str | None, folder: Path) -> Path:
    """The file a SQLite ``--db`` value names (``sqlite:///rel`` or ``sqlite:////abs``)."""
    if db is None:
        return folder / DB_FILE
    rest = db.removeprefix("sqlite:")
    if not rest.startswith("///") or len(rest) == 3:
        raise InvalidInput(
            f"a SQLite --db is sqlite:///relative/path or sqlite:////absolute/path, not {db!r}",
            field="db",
        )
    return Path(rest[3:])


def open_store(db: str | None, folder: Path, *, auto_migrate: bool = True) -> Store:
    """Open the store ``db`` names; both backends bring their schema up to date on open
    (PostgreSQL only when the login may; see ``PostgresStore``)."""
    if backend_of(db) == "postgres":
        assert db is not None
        from cairn.store.postgres import PostgresStore

        return PostgresStore(db, auto_migrate=auto_migrate)
    from cairn.store.sqlite import SqliteStore

    return SqliteStore(sqlite_path(db, folder))


def migrate_store(db: str | None, folder: Path) -> tuple[int, int]:
    """``cairn migrate``: bring the schema to this cairn's version; (before, after)."""
    if backend_of(db) == "postgres":
        assert db is not None
        from cairn.store.pg_migrations import migrate

        result = migrate(db)
        return result.before, result.after
    from cairn.store.migrations import SQLITE_MIGRATIONS
    from cairn.store.sqlite import SqliteStore

    path = sqlite_path(db, folder)
    before = _sqlite_version(path)
    SqliteStore(path).close()  # opening a SqliteStore migrates it
    return before, len(SQLITE_MIGRATIONS)


def _sqlite_version(path: Path) -> int:
    import sqlite3

    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        ).fetchone()
        if row is None:
            return 0
        return int(
            conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
        )
    finally:
        conn.close()


# Where a database address (or a driver's message quoting one) holds a password: after the
# user in a URL (``scheme://user:pw@host``), and as a ``password=`` or ``sslpassword=``
# parameter, in a URL's query or a ``key=value`` connection string (quoted or not).
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_PARAMETER_PASSWORD = re.compile(r"(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'\"]+)")


def redact(text: str) -> str:
    """``text`` (a database address, or a message quoting one) with every password
    replaced by ``***``, for messages and logs."""
    return _PARAMETER_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))
