"""Dependency direction: doors reach the store and governance only through the kernel."""

from __future__ import annotations

import ast
from pathlib import Path

DOORS = Path(__file__).resolve().parents[1] / "src" / "cairn" / "doors"
FORBIDDEN = ("cairn.store", "cairn.governance")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_door_imports_the_store_or_governance() -> None:
    offenders = {
        f"{path.relative_to(DOORS)}: {module}"
        for path in DOORS.rglob("*.py")
        for module in _imports(path)
        if module.startswith(FORBIDDEN)
    }
    assert offenders == set()


def test_the_scan_sees_imports() -> None:
    assert "cairn.memory" in _imports(DOORS / "cli.py")
