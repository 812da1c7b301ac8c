"""The JSON Schemas kept with the graph (``schemas/``): the fixture files and an answer's
meta. Loaded once, from the package, and checked with ``jsonschema``."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = ["load_schema", "meta_errors", "validator"]


def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("cairn.graph").joinpath(f"schemas/{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def validator(name: str) -> Draft202012Validator:
    # jsonschema is imported on the first check, not with the kernel: most CLI commands
    # never validate a graph fixture or an answer's meta, and it costs them start-up time.
    from jsonschema import Draft202012Validator

    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def meta_errors(meta: dict[str, Any]) -> list[str]:
    """Every way ``meta`` departs from the meta schema, as ``path: message``."""
    found = []
    for error in sorted(validator("meta").iter_errors(meta), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        found.append(f"{where}: {error.message}")
    return found
