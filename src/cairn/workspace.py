"""A cairn folder (default ``./.cairn``): the database, the policy file, the principals file.

``init`` writes a sensible default of each and creates the first keys; ``open_memory`` and
``authenticate`` are what every door uses to get a ``Memory`` and a ``Principal``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cairn.auth import (
    PrincipalEntry,
    PrincipalsFile,
    add_key,
    authenticate,
    identify,
    load_principals,
    principal_of_key,
    save_principals,
)
from cairn.capture.local import default_scope as project_scope
from cairn.config import load_settings
from cairn.errors import InvalidInput
from cairn.governance.policy import DEFAULT_POLICY_YAML, load_policy
from cairn.memory import DEFAULT_EMBEDDER, POLICY_FILE, PRINCIPALS_FILE, Memory
from cairn.model import Principal, PrincipalKind, Sensitivity
from cairn.private_files import make_private_folder, tighten, write_private
from cairn.store.factory import open_store, sqlite_path

__all__ = [
    "InitResult",
    "Workspace",
]


@dataclass(frozen=True)
class InitResult:
    folder: Path
    keys: dict[str, str]  # principal id → the plaintext key, shown once


@dataclass(frozen=True)
class Workspace:
    folder: Path
    db: str | None = None  # None: the embedded SQLite file in the folder

    def __post_init__(self) -> None:
        # ``Workspace(".cairn")`` reads as well as ``Workspace(Path(".cairn"))``
        object.__setattr__(self, "folder", Path(self.folder))

    @property
    def db_path(self) -> Path:
        return sqlite_path(self.db, self.folder)

    @property
    def policy_path(self) -> Path:
        return self.folder / POLICY_FILE

    @property
    def principals_path(self) -> Path:
        return self.folder / PRINCIPALS_FILE

    def exists(self) -> bool:
        if not (self.policy_path.exists() and self.principals_path.exists()):
            return False
        return self.db is not None or self.db_path.exists()

    def init(self) -> InitResult:
        """Create the store and default files; existing files are never overwritten."""
        if self.exists():
            raise InvalidInput(f"{self.folder} already holds a cairn store", field="store")
        make_private_folder(self.folder)
        if not self.policy_path.exists():
            write_private(self.policy_path, DEFAULT_POLICY_YAML)
        load_policy(self.policy_path)  # refuse to create a store under a broken policy
        keys: dict[str, str] = {}
        if not self.principals_path.exists():
            # Both write, when a write names no scope, into the project's own scope (the
            # one coding-agent capture uses): never one a door makes up.
            principals = PrincipalsFile(
                principals=(
                    PrincipalEntry(
                        id="curator",
                        kind=PrincipalKind.HUMAN,
                        # exec: the decision graph's widest role (``cairn why``)
                        roles=("curator", "admin", "exec"),
                        scopes=("*",),
                        default_scope=project_scope(self.folder),
                        labels=("*",),
                        sensitivity=Sensitivity.HIGH,
                        purpose="local development: review, publish, administer",
                    ),
                    PrincipalEntry(
                        id="agent",
                        kind=PrincipalKind.AGENT,
                        # staff: the decision graph's narrowest role
                        roles=("agent", "staff"),
                        scopes=("*",),
                        default_scope=project_scope(self.folder),
                        labels=("public", "internal"),
                        sensitivity=Sensitivity.MEDIUM,
                        purpose="local development: coding agents",
                    ),
                )
            )
            for principal_id in ("curator", "agent"):
                principals, key, _ = add_key(principals, principal_id, label="created by init")
                keys[principal_id] = key
            save_principals(self.principals_path, principals)
        open_store(self.db, self.folder).close()  # creates the schema (migrations)
        return InitResult(folder=self.folder, keys=keys)

    def open_memory(self, *, embedder: str | None = DEFAULT_EMBEDDER) -> Memory:
        # Stores made before files were private get their modes fixed on the way in.
        tighten(self.folder)
        # The timeline's and the graph's settings come from the same layers on every door
        # (config files, then CAIRN_TIMELINE__* / CAIRN_GRAPH__*).
        settings = load_settings(store=self.folder)
        return Memory.open(
            self.folder,
            db=self.db,
            embedder=embedder,
            vector_cache=self._vector_cache(settings.vector_cache),
            timeline=settings.timeline,
            graph=settings.graph,
            retrieval=settings.retrieval,
        )

    def _vector_cache(self, configured: Path | None) -> Path | None:
        """Where ``vector_cache`` points: a file, relative to the cairn folder unless
        absolute (``folder / absolute`` is ``absolute``)."""
        if configured is None:
            return None
        path = self.folder / configured
        if path.is_dir():
            raise InvalidInput(
                f"vector_cache names a folder ({path}): give a file, e.g. vectors.sqlite",
                field="vector_cache",
            )
        return path

    def principals(self) -> PrincipalsFile:
        return load_principals(self.principals_path)

    def authenticate(self, key: str | None) -> Principal:
        return authenticate(self.principals(), key)

    def identify(self, key: str | None) -> tuple[Principal, str]:
        """The principal of ``key`` and the key's id (never the key)."""
        return identify(self.principals(), key)

    def principal_of_key(self, key_id: str) -> Principal:
        """Re-read the principals file: a revoked key's sessions stop at once."""
        return principal_of_key(self.principals(), key_id)
