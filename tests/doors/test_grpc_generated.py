"""The generated gRPC code is what ``proto/generate.py`` makes of the protos today, and
cairn's dependency floors admit no runtime older than the one that code was made for."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "src" / "cairn" / "doors" / "grpc_gen"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _floor(name: str) -> str:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for requirement in dependencies["project"]["dependencies"]:
        found = re.fullmatch(rf"{re.escape(name)}>=([\d.]+)(,.*)?", requirement)
        if found:
            return found.group(1)
    raise AssertionError(f"pyproject.toml has no floor for {name}")


def test_regenerating_from_the_protos_gives_the_installed_files() -> None:
    fresh: dict[str, bytes] = _generator().generated_files()
    assert fresh, "the generator made nothing"
    built = {p.name: p.read_bytes() for p in GENERATED.iterdir() if "_pb2" in p.name}
    assert sorted(fresh) == sorted(built), "run: python proto/generate.py"
    stale = [name for name, content in fresh.items() if built[name] != content]
    assert not stale, f"out of date: {', '.join(stale)}; run: python proto/generate.py"


def test_the_grpcio_floor_is_the_generators_version() -> None:
    text = (GENERATED / "timeline_pb2_grpc.py").read_text(encoding="utf-8")
    made_by = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", text)
    assert made_by is not None
    for package in ("grpcio", "grpcio-health-checking", "grpcio-reflection"):
        assert _floor(package) == made_by.group(1), package


def test_the_protobuf_floor_is_the_generated_codes_runtime() -> None:
    text = (GENERATED / "timeline_pb2.py").read_text(encoding="utf-8")
    made_for = re.search(r"# Protobuf Python Version: ([\d.]+)", text)
    assert made_for is not None
    assert _floor("protobuf") == made_for.group(1)
