"""The gRPC door's generated code: every build makes it from ``proto/`` (``proto/generate.py``,
run by ``proto/hatch_build.py``); do not edit, and after editing a proto run ``make proto``."""

from pathlib import Path

# A working copy updated past the commit that stopped tracking these files, but not
# reinstalled since, has none: say how to make them rather than fail on a bare import.
if not (Path(__file__).parent / "timeline_pb2.py").is_file():
    raise ImportError(
        "cairn's gRPC code is made at install time and is missing here: "
        "run `make proto` (or reinstall: pip install -e .)"
    )
