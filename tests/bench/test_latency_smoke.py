"""bench/latency.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick_run import run_quick


def test_latency_quick_writes_json(tmp_path: Path) -> None:
    figures, printed = run_quick("latency", tmp_path)
    assert figures["records"] == 500 and figures["ingest_records_per_s"] > 0
    assert (figures["backend"], figures["embedder"], figures["store_reused"]) == (
        "sqlite",
        "static",
        False,
    )
    # 500 records sit far below the HNSW threshold: the catalog searches exactly.
    assert figures["vector_index"] == "exact" and figures["ann_build_s"] == 0
    # Each mode ran the stages it names, and only those: a run that ignored the mode (or
    # timed nothing) would report the same stages for all of them.
    always = {"preselect", "fuse", "validate", "budget", "compose"}
    recalls = {
        "keyword": {"recall.keyword"},
        "vector": {"recall.vector"},
        "hybrid": {"recall.keyword", "recall.vector"},
        "hybrid_one_scope": {"recall.keyword", "recall.vector"},
    }
    for mode, recall in recalls.items():
        stages = set(figures[mode]["stages_ms"])
        assert always | recall <= stages, (mode, stages)
        assert stages & {"recall.keyword", "recall.vector"} == recall, (mode, stages)
        assert 0 < figures[mode]["p50_ms"] <= figures[mode]["p95_ms"] <= figures[mode]["p99_ms"]
        # k=10: a read returns between one and ten items on average, never more.
        assert 0 < figures[mode]["mean_items"] <= 10, f"{mode}: {figures[mode]['mean_items']}"
    for row in ("keyword", "vector", "hybrid", "hybrid_one_scope", "ingest rec/s"):
        assert row in printed
    assert figures["vector_lag_after_build"] == 0 and not figures["overlapped"]
    assert figures["searchable_s"] >= figures["ingest_s"] > 0


def test_latency_quick_overlapped_ends_with_every_vector_built(tmp_path: Path) -> None:
    """With the background worker embedding while the writes go on, as a server does, the
    run still ends with nothing left to embed and vector reads finding what was written."""
    figures, printed = run_quick("latency", tmp_path, "--overlap")
    assert figures["overlapped"] and figures["vector_lag_after_build"] == 0
    assert figures["searchable_s"] > 0 and figures["vector"]["mean_items"] > 0
    assert "(overlapped)" in printed
