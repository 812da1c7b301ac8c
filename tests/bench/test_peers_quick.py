"""bench/peers.py runs end to end in --quick mode, with whichever peers are installed, and
writes the figures it prints. A peer whose package is missing (the `peers` extra is not
part of `dev`) must be reported as skipped, not fail the run."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.bench.quick_run import run_quick

PEERS = ("lancedb", "chroma", "sqlite_vec")
# What each peer needs to run here (sqlite-vec is an extension: a driver must load it).
NEEDS = {
    "lancedb": ("lancedb", "pyarrow"),
    "chroma": ("chromadb",),
    "sqlite_vec": ("sqlite_vec",)
    + (() if hasattr(sqlite3.Connection, "enable_load_extension") else ("apsw",)),
}
# The modes each peer serves (Chroma's local client has no ranked keyword search).
MODES = {
    "cairn": ("keyword", "vector", "hybrid"),
    "lancedb": ("keyword", "vector", "hybrid"),
    "chroma": ("vector",),
    "sqlite_vec": ("keyword", "vector", "hybrid"),
}


def installed(peer: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in NEEDS[peer])


# A LoCoMo-shaped file: two conversations of 30 turns, each question asking about a word
# only its evidence turn holds, so an engine with keyword search finds every evidence turn
# in its top 10, and one that maps its answers to the wrong turns does not.
RARE = ("zucchini", "saxophone", "lighthouse")
FILLER = ("weather", "coffee", "weekend", "movie", "garden", "train", "music", "dinner")


def _locomo_file(folder: Path) -> Path:
    samples = []
    for c in range(2):
        turns = []
        for i in range(30):
            words = " ".join(FILLER[(i * 3 + j) % len(FILLER)] for j in range(4))
            text = f"talking about {words} again, part {c}-{i}"
            if i in (5, 17, 26):
                text = f"I have a {RARE[(5, 17, 26).index(i)]} story to tell"
            turns.append({"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D1:{i + 1}",
                          "text": text})  # fmt: skip
        qa = [
            {"question": f"Who mentioned the {word}?", "answer": "someone",
             "evidence": [f"D1:{i + 1}"], "category": 1}
            for word, i in zip(RARE, (5, 17, 26), strict=True)
        ]  # fmt: skip
        samples.append({
            "sample_id": f"conv-{c}", "qa": qa,
            "conversation": {"speaker_a": "Ann", "speaker_b": "Bob", "session_1": turns,
                             "session_1_date_time": "1:56 pm on 8 May, 2023"},
        })  # fmt: skip
    path = folder / "locomo.json"
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    folder = tmp_path_factory.mktemp("peers")
    locomo = _locomo_file(folder)
    return run_quick("peers", folder, "--locomo", str(locomo), output="--out", timeout=600)


def test_quick_run_writes_the_expected_structure(run: tuple[dict[str, Any], str]) -> None:
    figures, stdout = run
    assert figures["records"] == 2_000 and figures["queries"] == 50 and figures["k"] == 10
    embedding = figures["embedding"]
    assert embedding["dim"] > 0 and embedding["documents_per_s"] > 0
    assert "cairn" in figures["engines"]
    assert set(figures["engines"]) | set(figures["skipped"]) == {"cairn", *PEERS}
    assert "cairn and peers" in stdout


def _check_engine(engine: dict[str, Any], modes: tuple[str, ...]) -> None:
    ingest = engine["ingest"]
    assert ingest["per_s"] > 0 and ingest["seconds"] > 0
    assert all(seconds >= 0 for seconds in ingest["parts_s"].values())
    for mode in ("keyword", "vector", "hybrid"):
        figures = engine[mode]
        if mode not in modes:
            assert figures is None and mode in engine["unsupported"]
            continue
        assert 0 < figures["p50_ms"] <= figures["p95_ms"], (mode, figures)
        assert figures["mean_items"] > 0, f"{mode} reads found nothing"
    assert 0 < engine["vector"]["recall_at_10"] <= 1


def test_cairn_figures(run: tuple[dict[str, Any], str]) -> None:
    cairn = run[0]["engines"]["cairn"]
    _check_engine(cairn, MODES["cairn"])
    assert cairn["embedder_misses"] == 0, "cairn embedded a text itself: vectors not shared"
    # Exact search over the very vectors numpy ranks by: the same answers.
    assert cairn["vector"]["recall_at_10"] >= 0.9
    if installed("sqlite_vec"):
        for mode in ("keyword", "hybrid"):
            assert 0 <= cairn[mode]["overlap_with_reference"] <= 1


@pytest.mark.parametrize("peer", PEERS)
def test_peer_figures_and_ratios(run: tuple[dict[str, Any], str], peer: str) -> None:
    figures, stdout = run
    if not installed(peer):
        assert "not installed" in figures["skipped"][peer]
        assert "skipping" in stdout
        pytest.skip(f"{peer} is not installed (pip install -e '.[peers]')")
    engine = figures["engines"][peer]
    _check_engine(engine, MODES[peer])
    ratios = figures["ratios"][peer]
    assert ratios["ingest_per_s"] > 0
    for mode in ("keyword", "vector", "hybrid"):
        for q in ("p50_ms", "p95_ms"):
            value = ratios[f"{mode}_{q}"]
            assert (value is None) == (mode not in MODES[peer]) and (value is None or value > 0)


def test_every_engine_is_scored_on_the_same_locomo_turns(run: tuple[dict[str, Any], str]) -> None:
    figures, stdout = run
    locomo = figures["locomo"]
    assert set(locomo) == {"cairn", *(peer for peer in PEERS if installed(peer))}
    for name, row in locomo.items():
        assert row["questions"] == 6
        assert row["mode"] == ("vector" if name == "chroma" else "hybrid")
        assert 0 <= row["turn_recall_at_10"] <= 100
        if row["mode"] == "hybrid":  # the rare word is in the evidence turn alone
            assert row["turn_recall_at_10"] == 100, (name, row)
    assert "LoCoMo turn recall@10" in stdout
