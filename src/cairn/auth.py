"""Principals and API keys: the principals file maps hashed keys to who is asking.

Keys are 256-bit random tokens, so a plain SHA-256 is enough to store them (nobody can
brute-force that space; a slow password hash would only slow every request). Comparison
is constant-time. A missing, unknown or revoked key is refused: cairn fails closed.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from datetime import datetime
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from cairn.errors import InvalidInput, NotFound, PolicyError, Unauthenticated, describe_validation
from cairn.governance.policy import load_yaml, read_config_text, yaml_problem
from cairn.model import CairnModel, Principal, new_id, utcnow
from cairn.private_files import write_private

__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "PrincipalEntry",
    "PrincipalsFile",
    "add_key",
    "add_principal",
    "authenticate",
    "generate_key",
    "hash_key",
    "identify",
    "load_principals",
    "principal_of_key",
    "revoke_key",
    "save_principals",
]

KEY_PREFIX = "cairn_"
MAX_LABEL_CHARS = 256


class ApiKey(CairnModel):
    id: str
    sha256: str
    created_at: datetime
    revoked: bool = False
    label: str | None = None


class PrincipalEntry(Principal):
    keys: tuple[ApiKey, ...] = ()

    def principal(self) -> Principal:
        return Principal.model_validate(self.model_dump(exclude={"keys"}))


class PrincipalsFile(CairnModel):
    principals: tuple[PrincipalEntry, ...] = Field(default_factory=tuple)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def load_principals(path: Path) -> PrincipalsFile:
    """The principals file as it is now: every request reads it, so that a key revoked or a
    principal changed takes effect at once."""
    if not path.exists():
        raise PolicyError(f"principals file {path} does not exist: run 'cairn init'")
    return _parse_principals(str(path), read_config_text(path))


# Reading the file costs microseconds; parsing and validating it cost about a millisecond a
# request with a handful of keys (more with many), so a text already seen is not parsed
# again. The key is the whole text, not a timestamp: any change, however quick, is seen.
# ``PrincipalsFile`` is frozen, so every caller may share one.
@functools.lru_cache(maxsize=32)
def _parse_principals(source: str, text: str) -> PrincipalsFile:
    try:
        raw = load_yaml(text) or {}
        return PrincipalsFile.model_validate(raw)
    except yaml.YAMLError as exc:
        raise PolicyError(yaml_problem(source, exc)) from None
    except ValidationError as exc:
        raise PolicyError(f"{source}: {describe_validation(exc)}") from None


def save_principals(path: Path, principals: PrincipalsFile) -> None:
    data = principals.model_dump(mode="json")
    for entry in data["principals"]:
        # Written only when set, so that a file cairn rewrites (a new key, say) still reads
        # in a cairn from before default scopes.
        if entry.get("default_scope") is None:
            entry.pop("default_scope", None)
    write_private(
        path,
        "# cairn principals: who may use this store. Keys are stored as SHA-256 hashes only.\n"
        + yaml.safe_dump(data, sort_keys=False),
    )


def authenticate(principals: PrincipalsFile, key: str | None) -> Principal:
    return identify(principals, key)[0]


def identify(principals: PrincipalsFile, key: str | None) -> tuple[Principal, str]:
    """The principal of ``key`` and the id of the key (which a web session keeps instead
    of the key itself)."""
    if not key:
        raise Unauthenticated("no API key was given")
    digest = hash_key(key)
    for entry in principals.principals:
        for api_key in entry.keys:
            if hmac.compare_digest(api_key.sha256, digest) and not api_key.revoked:
                return entry.principal(), api_key.id
    raise Unauthenticated("unknown or revoked API key")


def principal_of_key(principals: PrincipalsFile, key_id: str) -> Principal:
    """The principal holding the key ``key_id``, while that key is not revoked."""
    for entry in principals.principals:
        for api_key in entry.keys:
            if api_key.id == key_id and not api_key.revoked:
                return entry.principal()
    raise Unauthenticated("the key this session was opened with is unknown or revoked")


def add_key(
    principals: PrincipalsFile, principal_id: str, *, label: str | None = None
) -> tuple[PrincipalsFile, str, ApiKey]:
    # a label is shown in terminals (`cairn keys list`): no escape sequences, no line breaks
    if label is not None and not (label.isprintable() and len(label) <= MAX_LABEL_CHARS):
        raise InvalidInput(
            f"a key's label is printable text of at most {MAX_LABEL_CHARS} characters",
            field="label",
        )
    key = generate_key()
    api_key = ApiKey(id=new_id("key"), sha256=hash_key(key), created_at=utcnow(), label=label)
    entries = list(principals.principals)
    for i, entry in enumerate(entries):
        if entry.id == principal_id:
            entries[i] = entry.model_copy(update={"keys": (*entry.keys, api_key)})
            return PrincipalsFile(principals=tuple(entries)), key, api_key
    raise NotFound(f"no principal {principal_id}", field="principal")


def revoke_key(principals: PrincipalsFile, key_id: str) -> PrincipalsFile:
    entries = list(principals.principals)
    for i, entry in enumerate(entries):
        keys = list(entry.keys)
        for j, api_key in enumerate(keys):
            if api_key.id == key_id:
                keys[j] = api_key.model_copy(update={"revoked": True})
                entries[i] = entry.model_copy(update={"keys": tuple(keys)})
                return PrincipalsFile(principals=tuple(entries))
    raise NotFound(f"no key {key_id}", field="key_id")


def add_principal(principals: PrincipalsFile, entry: PrincipalEntry) -> PrincipalsFile:
    if any(p.id == entry.id for p in principals.principals):
        raise InvalidInput(f"principal {entry.id} already exists", field="id")
    return PrincipalsFile(principals=(*principals.principals, entry))
