"""Build hook: makes the gRPC door's Python code from ``proto/`` at build time.

The generated modules (``src/cairn/doors/grpc_gen/*_pb2*``) are build output, not source:
git ignores them, every build (wheel, sdist install, ``pip install -e``) makes them afresh
from the ``.proto`` files with the pinned ``grpcio-tools`` and ``mypy-protobuf`` declared as
this hook's build dependencies, and the wheel ships them, so that running cairn still needs
only ``grpcio`` and ``protobuf``. ``proto/generate.py`` does the work (``make proto`` runs it
by hand after editing a proto).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ProtoBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        script = Path(self.root) / "proto" / "generate.py"
        spec = importlib.util.spec_from_file_location("cairn_proto_generate", script)
        assert spec is not None and spec.loader is not None
        generate = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(generate)
        generate.main()
        # git ignores the generated files, and hatch leaves ignored files out unless told
        build_data["artifacts"].append("src/cairn/doors/grpc_gen/*_pb2*")
