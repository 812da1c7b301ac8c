"""The Python door: ``cairn``'s public names load, are documented, and the documented
example runs as written."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cairn
from cairn.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_DOC = ROOT / "docs" / "library.md"


def test_every_public_name_loads_from_its_module() -> None:
    assert sorted(cairn.__all__) == sorted(cairn._HOME)
    for name in cairn.__all__:
        value = getattr(cairn, name)
        home = __import__(cairn._HOME[name], fromlist=[name])
        assert value is getattr(home, name)


def test_every_public_name_has_its_own_docstring_and_a_place_in_the_docs() -> None:
    doc = LIBRARY_DOC.read_text()
    for name in cairn.__all__:
        value = getattr(cairn, name)
        own = value.__dict__.get("__doc__") if isinstance(value, type) else value.__doc__
        assert own and own.strip(), f"{name} has no docstring"
        assert f"`{name}`" in doc, f"docs/library.md does not describe {name}"


def test_importing_cairn_loads_no_kernel() -> None:
    probe = "import sys, cairn; print(sorted(m for m in sys.modules if m.startswith('cairn')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['cairn']"


def test_every_module_says_what_it_exports() -> None:
    missing = []
    for path in sorted((ROOT / "src" / "cairn").rglob("*.py")):
        if "grpc_gen" in path.parts or path.name in {"__init__.py", "__main__.py"}:
            continue
        tree = ast.parse(path.read_text())
        if not any(
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for node in tree.body
        ):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"modules without __all__: {missing}"


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = re.search(r"```python\n(.*?)```", LIBRARY_DOC.read_text(), re.S)
    assert code is not None
    keys = Workspace(tmp_path / ".cairn").init().keys
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAIRN_EMBEDDER", "static")
    printed: list[str] = []
    namespace = {"key": keys["agent"], "print": lambda *a: printed.append(" ".join(map(str, a)))}
    exec(compile(code.group(1), str(LIBRARY_DOC), "exec"), namespace)
    assert printed[0].startswith("approve ")
    assert any("Test command" in line for line in printed[1:-1])
    assert printed[-1] == "1 make test"
