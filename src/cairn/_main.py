"""The ``cairn`` command's entry point.

``cairn hook`` runs on every prompt and tool call of a coding agent, so it must not pay for
importing the full CLI (typer, rich, pydantic and the kernel take over half a second): it
is dispatched here, before anything heavy is imported. Every other command goes to the
typer app.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from cairn.capture.hook import main as hook_main

        raise SystemExit(hook_main(sys.argv[2:]))
    from cairn.doors.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
