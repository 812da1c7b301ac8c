"""The gRPC door's generated code: every build makes it from ``proto/`` (``proto/generate.py``,
run by ``proto/hatch_build.py``); do not edit, and after editing a proto run ``make proto``."""
