"""docs/python.md runs as written: its ``pycon`` examples are doctests, run in order in an
empty folder with one namespace, the server part against a real ``cairn serve`` on the
store the page made (on a free loopback port instead of the 8765 the page shows)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

from tests.doors.conftest import free_port, start_server, stop_server, wait_ready

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "python.md"
SHOWN_URL = "http://127.0.0.1:8765"  # `cairn serve`'s default address, as the page says
BLOCK = re.compile(r"^```pycon\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, int]]:
    text = GUIDE.read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start()) + 2) for m in BLOCK.finditer(text)]


def test_the_python_guide_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAIRN_EMBEDDER", "static")  # the embedder the server runs too
    for name in ("CAIRN_API_KEY", "CAIRN_STORE", "CAIRN_DB"):
        monkeypatch.delenv(name, raising=False)
    blocks = _blocks()
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    namespace: dict[str, object] = {"__name__": "python_md"}
    report: list[str] = []
    server = None
    against_server = 0
    try:
        for source, line in blocks:
            if SHOWN_URL in source:
                if server is None:  # the store exists now: serve it
                    port = free_port()
                    server = start_server(tmp_path / ".cairn", port)
                    wait_ready(f"http://127.0.0.1:{port}", server)
                source = source.replace(SHOWN_URL, f"http://127.0.0.1:{port}")
                against_server += 1
            test = parser.get_doctest(source, namespace, f"python.md:{line}", str(GUIDE), line)
            runner.run(test, out=report.append, clear_globs=False)
            namespace = test.globs  # a doctest runs in a copy: the next block goes on from it
    finally:
        if server is not None:
            stop_server(server)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)
    # the page was read (a renamed fence would otherwise leave nothing to run)
    assert len(blocks) >= 8 and results.attempted >= 30, results
    assert against_server >= 2
