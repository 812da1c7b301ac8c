"""Embedding speed: sentences/s in batches and ms per single query, per embedder and setting.

    .venv/bin/python bench/embed_speed.py [--data ../shared/data/locomo/locomo_dev.json]
        [--lme ../shared/data/longmemeval/longmemeval_s_dev.json.xz]
        [--sentences 2000] [--queries 100] [--repeats 3] [--json OUT] [--only NAME,...]

Texts are the first ``--sentences`` LoCoMo turns ("Speaker: text", as a memory store holds
conversation turns), or with ``--lme`` LongMemEval's (``role: text``: longer chat turns,
~220 tokens against LoCoMo's ~30). Every setting embeds the same texts; the settings take
turns, repeat by repeat, so a burst of load from elsewhere on the machine hits them all
alike. Reported: the first repeat's sentences/s (what a setting's own caches, empty then,
cost), the median and best over the repeats, and the median ms of ``embed_query`` over
``--queries`` distinct texts. No vector cache unless the setting says so.

Settings: ``minilm`` as cairn runs it (texts sorted by token count so a batch holds texts of
similar length, 32 a batch, 2 onnxruntime threads that sleep when idle); ``minilm-unsorted``
(batches in input order: what length sorting saves); ``minilm-b8`` / ``-b16`` / ``-b64`` /
``-b128`` (batch size); ``minilm-1t`` (one thread); ``minilm-disk-warm`` (every vector already
in a :class:`DiskVectorCache` file, the cost after a restart); ``static`` (as cairn runs it:
token ids kept per whitespace-separated piece, ``cairn.search.pieces``);
``static-every-text`` (every text tokenised from scratch: what the piece cache saves); ``e5``
(when ``cairn[e5]`` is installed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._data import load_longmemeval
from bench.embedders import query_latency_ms

from cairn.search.embedder import CachedEmbedder, Embedder, Vectors, make_embedder
from cairn.search.nano_e5 import available as e5_available
from cairn.search.onnx_minilm import OnnxMiniLMEmbedder
from cairn.search.static_embed import StaticEmbedder
from cairn.search.vector_cache import DiskVectorCache

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared/data"
DEFAULT_DATA = SHARED_DATA / "locomo/locomo_dev.json"


class UnsortedMiniLM(OnnxMiniLMEmbedder):
    """MiniLM batching texts in the order given: the cost of padding without length sorting."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = [np.asarray(enc.ids, dtype=np.int64) for enc in encodings]
        parts = [
            self._run_batch(ids[start : start + self.batch_size])
            for start in range(0, len(ids), self.batch_size)
        ]
        return np.concatenate(parts).astype(np.float32, copy=False)


class StaticEveryText(StaticEmbedder):
    """The static embedder tokenising every text from scratch with the tokenizer, as it did
    before its piece cache: the same vectors, to the bit."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        assert self._tokenizer is not None
        encodings = self._tokenizer.tokenizer.encode_batch_fast(
            list(texts), add_special_tokens=False
        )
        return self._vectors([encoding.ids for encoding in encodings])


@dataclass
class Row:
    name: str
    dim: int
    load_s: float
    sentences_per_s_first: float
    sentences_per_s_median: float
    sentences_per_s_best: float
    ms_per_query: float
    runs: list[float]


def load_turns(path: Path, limit: int) -> list[str]:
    samples: list[dict[str, Any]] = json.loads(path.read_text())
    turns = [
        f"{turn['speaker']}: {turn['text']}"
        for sample in samples
        for key, value in sample["conversation"].items()
        if key.startswith("session_") and isinstance(value, list)
        for turn in value
    ]
    return turns[:limit]


def load_lme_turns(path: Path, limit: int) -> list[str]:
    """The first ``limit`` distinct turns of LongMemEval's haystacks, in order."""
    turns = (
        f"{turn.role}: {turn.content}"
        for question in load_longmemeval(path)
        for session in question.sessions
        for turn in session.turns
    )
    out: dict[str, None] = {}
    for turn in turns:
        out[turn] = None
        if len(out) == limit:
            break
    return list(out)


def settings(disk_dir: Path, turns: Sequence[str]) -> dict[str, Callable[[], Embedder]]:
    def minilm(**options: Any) -> Callable[[], Embedder]:
        return lambda: OnnxMiniLMEmbedder(**options)

    def disk_warm() -> Embedder:
        cache = DiskVectorCache(disk_dir / "vectors.sqlite", max_items=len(turns) + 1000)
        cached = CachedEmbedder(OnnxMiniLMEmbedder(), cache)
        cached.embed(turns)  # fill the file, as a previous run would have
        cache.close()
        return CachedEmbedder(OnnxMiniLMEmbedder(), DiskVectorCache(disk_dir / "vectors.sqlite"))

    out: dict[str, Callable[[], Embedder]] = {
        "minilm": minilm(),
        "minilm-unsorted": lambda: UnsortedMiniLM(),
        "minilm-b8": minilm(batch_size=8),
        "minilm-b16": minilm(batch_size=16),
        "minilm-b64": minilm(batch_size=64),
        "minilm-b128": minilm(batch_size=128),
        "minilm-1t": minilm(threads=1),
        "minilm-disk-warm": disk_warm,
        "static": lambda: make_embedder("static", cached=False),
        "static-every-text": lambda: StaticEveryText(),
    }
    if e5_available():
        out["e5"] = lambda: make_embedder("e5", cached=False)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo_dev.json")
    parser.add_argument(
        "--lme", type=Path, help="longmemeval_s_dev.json.xz: embed its turns instead"
    )
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="comma-separated settings (default: all)")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    console = Console(width=120)
    source = args.lme or args.data
    if not source.is_file():
        console.print(f"[red]benchmark data not found at {source}[/red]")
        return 2
    load = load_lme_turns if args.lme else load_turns
    everything = load(source, args.sentences + args.queries)
    # Queries are other turns, never batch texts: a warm cache must not answer them.
    turns, queries = everything[: args.sentences], everything[args.sentences :]

    with tempfile.TemporaryDirectory() as tmp:
        chosen = settings(Path(tmp), turns)
        if args.only:
            names = args.only.split(",")
            unknown = sorted(set(names) - set(chosen))
            if unknown:
                console.print(f"[red]unknown settings {unknown}; known: {sorted(chosen)}")
                return 2
            chosen = {name: chosen[name] for name in names}
        embedders: dict[str, Embedder] = {}
        loads: dict[str, float] = {}
        for name, build in chosen.items():
            console.print(f"loading {name} …")
            start = time.perf_counter()
            embedders[name] = build()
            embedders[name].embed(["warm up: loads and verifies the model"])
            loads[name] = time.perf_counter() - start
        runs: dict[str, list[float]] = {name: [] for name in embedders}
        for repeat in range(args.repeats):
            for name, embedder in embedders.items():
                start = time.perf_counter()
                embedder.embed(turns)
                runs[name].append(len(turns) / (time.perf_counter() - start))
            console.print(f"repeat {repeat + 1}/{args.repeats} done")
        rows = [
            Row(
                name=name,
                dim=embedder.dim,
                load_s=loads[name],
                sentences_per_s_first=runs[name][0],
                sentences_per_s_median=statistics.median(runs[name]),
                sentences_per_s_best=max(runs[name]),
                ms_per_query=query_latency_ms(embedder, queries),
                runs=runs[name],
            )
            for name, embedder in embedders.items()
        ]

    corpus = "LongMemEval" if args.lme else "LoCoMo"
    table = Table(title=f"Embedding speed ({len(turns)} {corpus} turns, {args.repeats} repeats)")
    headers = ("setting", "dim", "load s", "sentences/s (first)", "median", "best", "ms/query")
    for header in headers:
        table.add_column(header, justify="left" if header == "setting" else "right")
    for row in rows:
        table.add_row(
            row.name,
            str(row.dim),
            f"{row.load_s:.2f}",
            f"{row.sentences_per_s_first:,.0f}",
            f"{row.sentences_per_s_median:,.0f}",
            f"{row.sentences_per_s_best:,.0f}",
            f"{row.ms_per_query:.2f}",
        )
    console.print(table)
    if args.json:
        meta = {
            "corpus": corpus,
            "sentences": len(turns),
            "queries": len(queries),
            "repeats": args.repeats,
        }
        args.json.write_text(
            json.dumps({"meta": meta, "rows": [asdict(row) for row in rows]}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
