"""bench/graph.py runs end to end in --quick mode and writes the figures it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = {"staff k=1", "manager k=1", "director k=1", "director k=2", "staff k=1 by key"}
STAGES = {"preselector", "selector", "gate", "templater", "rest"}


def test_graph_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "graph.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "graph.py"), "--quick", "--keep", str(tmp_path),
         "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    sqlite = figures["backends"]["sqlite"]
    graph = sqlite["graph"]
    assert (graph["vertices"], graph["edges"]) == (1_500, 7_500) and not graph["reused"]
    assert set(graph["kinds"]) == {"decision", "event"}
    assert set(graph["edge_types"]) == {"CAUSAL_PRECEDES", "SUPPORTED_BY", "BASED_ON", "ALIAS_OF"}
    assert sum(graph["edge_types"].values()) == 7_500 and graph["edges_with_own_acl"] > 0
    assert graph["load"]["vertices_per_s"] > 0 and graph["load"]["edges_per_s"] > 0
    assert graph["degree"]["max"] > graph["degree"]["p95"] >= graph["degree"]["p50"] > 0
    assert set(sqlite["cases"]) == CASES
    for case in sqlite["cases"].values():
        miss, hit = case["miss"], case["hit"]
        assert case["anchors"] == 20 and miss["wall_ms"]["n"] == 20
        wall = miss["wall_ms"]
        assert 0 < wall["p50"] <= wall["p95"] <= wall["p99"]
        assert set(miss["stages_ms"]) == STAGES
        # fresh anchors miss the candidate cache; the repeat finds every one of them
        assert miss["cache_hit_rate"] == 0 and hit["cache_hit_rate"] == 1
        assert miss["pool_mean"] >= 1 and 0 <= miss["withheld_share"] <= 1
    # every role has something withheld somewhere
    assert all(case["miss"]["withheld_share"] > 0 for case in sqlite["cases"].values())
    assert figures["target"]["p95_ms"] == 50
    assert "ask, sqlite: 1,500 vertices, 7,500 edges" in done.stdout
    # kept: a second run reuses the store instead of loading it again
    again = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "graph.py"), "--quick", "--keep", str(tmp_path),
         "--anchors", "5", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(out.read_text())["backends"]["sqlite"]["graph"]["reused"]
    assert "reusing the graph" in again.stdout
