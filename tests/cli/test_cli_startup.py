"""Every ``cairn`` command pays for what the CLI imports at start-up: the server stacks and
the libraries only some commands use load when such a command runs, never with the CLI."""

from __future__ import annotations

import subprocess
import sys

# Each is imported only by the commands (or the reads) that need it: the servers (serve,
# mcp, the A2A agent, gRPC, the web console, Postgres), the dense index and its embedders
# (numpy, hnswlib, onnxruntime, tokenizers), the HTTP client of optional model endpoints
# (httpx) and the graph's JSON Schema checks (jsonschema).
DEFERRED = (
    "a2a",
    "fastapi",
    "grpc",
    "hnswlib",
    "httpx",
    "jinja2",
    "jsonschema",
    "mcp",
    "numpy",
    "onnxruntime",
    "psycopg",
    "starlette",
    "tokenizers",
    "uvicorn",
)


def _loaded_by(statement: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after running ``statement``."""
    probe = f"{statement}; import sys; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return {name.partition(".")[0] for name in done.stdout.split()}


def test_importing_the_cli_loads_none_of_the_deferred_libraries() -> None:
    loaded = _loaded_by("import cairn.doors.cli")
    assert "cairn" in loaded  # the probe saw the import
    assert sorted(loaded.intersection(DEFERRED)) == []


def test_the_probe_sees_a_deferred_library_once_a_module_that_needs_it_loads() -> None:
    assert {"numpy", "hnswlib"} <= _loaded_by("import cairn.retrieval.indexer")
