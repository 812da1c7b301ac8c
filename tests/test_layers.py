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


# What a door may not reach through a Memory: its store, gate and policy are the kernel's
# (private now, and a door must not take the underscore's word as a mere suggestion).
KERNEL_INSIDES = frozenset({"store", "gate", "policy", "indexer", "_store", "_gate", "_policy"})


def _insides_reached(path: Path) -> set[str]:
    """``x.store``/``x.gate``/``x.policy``/``x.indexer`` on a name a door holds a Memory in
    (``memory``, ``opened``, ``mem``), as ``line: expression``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in KERNEL_INSIDES
            and isinstance(node.value, ast.Name)
            and node.value.id in {"memory", "opened", "mem", "self_memory"}
        ):
            found.add(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_door_reaches_inside_the_kernel() -> None:
    offenders = {
        f"{path.relative_to(DOORS)} {where}"
        for path in DOORS.rglob("*.py")
        for where in _insides_reached(path)
    }
    assert offenders == set()


def test_the_insides_scan_sees_an_access(tmp_path: Path) -> None:
    sample = tmp_path / "door.py"
    sample.write_text("def f(memory):\n    return memory.store.scopes()\n")
    assert _insides_reached(sample) == {"2: memory.store"}


def test_admin_hands_doors_no_store() -> None:
    """``cairn.admin`` opens the store itself for each verb: a door never holds one."""
    import cairn.admin

    assert "Store" not in cairn.admin.__all__
    assert not hasattr(cairn.admin, "opened")
