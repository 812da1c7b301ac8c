"""Settings, in layers: flags > environment (``CAIRN_*``) > ``<store>/config.toml`` > the
user's ``~/.config/cairn/config.toml`` (``$XDG_CONFIG_HOME``) > defaults.

Only a door's entry point builds ``Settings``; nothing reads the environment at import.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from cairn.capture.local import parse_capture
from cairn.errors import InvalidInput
from cairn.graph.settings import GraphSettings
from cairn.retrieval.settings import RetrievalSettings
from cairn.small_files import read_toml
from cairn.timeline.settings import TimelineSettings

__all__ = [
    "CONFIG_FILE",
    "Settings",
    "load_settings",
]

CONFIG_FILE = "config.toml"


class Settings(BaseSettings):
    """What a cairn process needs to know. ``db`` unset means the embedded SQLite file."""

    model_config = SettingsConfigDict(
        env_prefix="CAIRN_", env_nested_delimiter="__", extra="forbid"
    )

    store: Path = Field(default=Path(".cairn"), description="the cairn folder")
    db: str | None = Field(default=None, description="postgresql://… or sqlite:///path")
    embedder: str = Field(
        default="minilm", description="minilm, static, e5 (extra cairn[e5]) or openai:URL#model"
    )
    vector_cache: Path | None = Field(
        default=None,
        description=(
            "a SQLite file that keeps computed vectors (queries above all) across restarts, "
            "relative to the cairn folder; unset: kept in memory only"
        ),
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    grpc_port: int | None = Field(
        default=None, ge=1, le=65535, description="serve the gRPC door on this port; unset: off"
    )
    timeline: TimelineSettings = Field(
        default_factory=TimelineSettings,
        description="how the timeline cuts and summarises ([timeline] in a config file)",
    )
    graph: GraphSettings = Field(
        default_factory=GraphSettings,
        description="how the decision graph answers ([graph] in a config file)",
    )
    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings,
        description="how search ranks, and an optional reranker ([retrieval] in a config file)",
    )
    # Read by the coding-agent hook, which cannot afford pydantic at start-up: the table is
    # checked here by the hook's own rules (``parse_capture``) so a mistake shows on every
    # command, not only in the hook's log.
    capture: dict[str, Any] = Field(
        default_factory=dict,
        description="how coding-agent hooks record sessions ([capture] in a config file)",
    )

    @field_validator("vector_cache", mode="before")
    @classmethod
    def _empty_means_unset(cls, value: Any) -> Any:
        # ``CAIRN_VECTOR_CACHE=`` is how a shell unsets it, not a path to the current folder
        return None if value == "" else value

    @field_validator("host")
    @classmethod
    def _host_names_an_interface(cls, value: str) -> str:
        # An empty host makes the server listen on every interface (as 0.0.0.0 would): a
        # shell's ``CAIRN_HOST=`` or a config's ``host = ""`` must not open the store to the
        # network unasked. Whoever wants every interface says 0.0.0.0 or ::.
        if not value.strip():
            raise ValueError("must name an interface, such as 127.0.0.1 (0.0.0.0: every one)")
        return value

    @field_validator("capture")
    @classmethod
    def _capture_is_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        parse_capture(value)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _StoreToml(settings_cls, init_settings, env_settings),
            _UserToml(settings_cls),
        )


class _StoreToml(PydanticBaseSettingsSource):
    """``config.toml`` inside the store folder chosen by the higher layers."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        chosen = init_settings().get("store") or env_settings().get("store") or ".cairn"
        self._file = Path(chosen) / CONFIG_FILE

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values = _toml_file(self._file)
        values.pop("store", None)  # the folder cannot relocate itself
        return values


class _UserToml(PydanticBaseSettingsSource):
    """The user-wide ``config.toml``: ``$XDG_CONFIG_HOME/cairn`` (default ``~/.config/cairn``).
    It may not choose a store or a database: those belong to a project."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        file = Path(base) / "cairn" / CONFIG_FILE
        values = _toml_file(file)
        values.pop("store", None)
        values.pop("db", None)
        return values


def _toml_file(file: Path) -> dict[str, Any]:
    """A ``config.toml``'s values ({} when there is none). A store's may have come with a
    cloned repository, so it is read like every settings file (``read_toml``: a regular file
    of at most 4 MiB, never waited on), and one that cannot be read or is not TOML is an
    ``InvalidInput`` naming the file and the problem, never a traceback."""
    try:
        return read_toml(file)
    except OSError as exc:
        raise InvalidInput(f"cannot read {file}: {exc.strerror}", field="config") from None
    except ValueError as exc:
        raise InvalidInput(str(exc), field="config") from None


def load_settings(**flags: Any) -> Settings:
    """Build settings from flags given on the command line (``None`` = not given)."""
    return Settings(**{k: v for k, v in flags.items() if v is not None})
