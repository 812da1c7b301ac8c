"""Regenerate the Python code for cairn's protos into ``src/cairn/doors/grpc_gen``.

    python proto/generate.py            # or: make proto

Every build runs it (``proto/hatch_build.py``), so the generated files are build output that
git ignores and the wheel ships: running cairn needs only ``grpcio`` and ``protobuf``. Run it
by hand after editing a proto in an editable install; ``tests/doors/test_grpc_generated.py``
fails while the files no longer match what this script makes from the ``.proto`` files. It
needs ``grpcio-tools`` (the messages and the service stubs) and ``mypy-protobuf`` (their type
stubs, so the door is type-checked against the messages it builds): the build installs both,
and so does the dev extra.

protoc writes imports after the proto's own path (``from cairn.timeline.v1 import ...``),
which in Python would name the kernel's ``cairn.timeline`` package; this script moves the
files into ``cairn.doors.grpc_gen`` and rewrites those imports to match.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
OUT = ROOT / "src" / "cairn" / "doors" / "grpc_gen"
PACKAGE = "cairn.doors.grpc_gen"
# Each proto's Python module, as protoc names it, by the proto's path under proto/.
PROTOS = ("cairn/timeline/v1/timeline.proto",)
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def _plugin(name: str) -> str:
    # The plugins are console scripts of mypy-protobuf: beside this Python, or on PATH.
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: pip install -e '.[dev]' (mypy-protobuf)")
    return found


def generated_files() -> dict[str, bytes]:
    """What protoc makes of the protos today: file name in ``grpc_gen`` → contents."""
    from grpc_tools import protoc

    well_known = resources.files("grpc_tools") / "_proto"
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--mypy_out={tmp}",
            f"--mypy_grpc_out={tmp}",
            *PROTOS,
        ]
        if protoc.main(argv) != 0:
            raise SystemExit("protoc failed (its message is above)")
        for proto in PROTOS:
            stem = proto.removesuffix(".proto")
            module = stem.replace("/", ".")
            for suffix in SUFFIXES:
                text = (Path(tmp) / f"{stem}{suffix}").read_text(encoding="utf-8")
                files[Path(stem).name + suffix] = _relocate(text, module).encode("utf-8")
    return files


def _relocate(text: str, module: str) -> str:
    """Point imports of ``module`` (``cairn.timeline.v1.timeline_pb2``) at ``grpc_gen``."""
    package, _, name = module.rpartition(".")
    text = text.replace(f"from {package} import {name}_pb2", f"from {PACKAGE} import {name}_pb2")
    return re.sub(rf"\b{re.escape(package)}\.{name}_pb2\b", f"{PACKAGE}.{name}_pb2", text)


def main() -> None:
    for name, content in generated_files().items():
        (OUT / name).write_bytes(content)
        print(f"wrote {(OUT / name).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
