"""A writer process for the durability tests: commits episodes one by one and prints each
acknowledged record id (flushed) only after ``remember`` has returned."""

from __future__ import annotations

import sys
from pathlib import Path

from cairn.model import Content
from cairn.workspace import Workspace


def main() -> None:
    folder, key, label, count = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    workspace = Workspace(folder)
    principal = workspace.authenticate(key)
    with workspace.open_memory() as memory:
        for n in range(count):
            body = f"{label} wrote episode {n}"
            outcome = memory.remember(
                Content(kind="episode", scope="acme/app", title=f"{label}-{n}", body=body),
                principal=principal,
            )
            assert outcome.record is not None
            print(f"{outcome.record.id} {label}-{n}", flush=True)


if __name__ == "__main__":
    main()
