"""``python -m cairn``: the same as the ``cairn`` command."""

from cairn._main import main

main()
