"""cairn against peer engines: ingest, keyword, vector and hybrid reads on one corpus, one run.

    python bench/peers.py --records 100000 --out peers.json
    python bench/peers.py --quick --out peers.json        # 2,000 records: a smoke run
    python bench/peers.py --records 100000 --locomo ../shared/data/locomo/locomo_dev.json
    pip install -e '.[peers]'                             # the peers (optional extra)

The peers are LanceDB (Lance files, native BM25 full-text index, flat vector search),
Chroma (local persistent client, HNSW) and SQLite FTS5 + sqlite-vec (one SQLite file: an
FTS5 table with porter stemming, as cairn's, and a ``vec0`` table searched exactly). A peer
whose package is missing is skipped with a message saying which package to install.

Every engine gets the same records (the corpus of bench/latency.py: Zipf-distributed
words, ~280-character bodies, 20 scopes) and the same vectors: the texts are embedded once,
before anything is timed, with one of cairn's offline embedders (``--embedder``, static by
default), and that cost is reported on its own line. cairn is handed the vectors through
an embedder that looks them up (its indexer still stores them and builds its catalog, which
is timed); the peers take them as arrays. Queries (Zipf words, 2 to 5 of them, as in
bench/latency.py) are embedded once too, so no read pays for a model.

What is timed:

- ingest: each engine's bulk path from prepared input to searchable. cairn: ``store_many``
  in batches (``--batch``; every record through the gate: policy, duplicate check,
  permissions, audit, FTS5) and then ``index_pending`` (vectors stored, catalog built).
  LanceDB: ``create_table`` with all rows, then its full-text index. Chroma: ``add`` in
  batches of its maximum batch size. SQLite + sqlite-vec: one transaction of
  ``executemany`` into a table, its FTS5 index and a ``vec0`` table.
- reads, k = 10, interleaved: for each query every engine answers in turn, so a burst of
  load on the shared machine hits all of them alike. cairn reads through ``Memory.search``
  as a principal who may see everything (permission filter, fusion, hits with their text
  and citations); peers return ids and text. Hybrid is weighted reciprocal rank fusion
  where the engine has it (cairn: its default weights, k 60; LanceDB: its RRF
  reranker; SQLite: the same weighted RRF in one SQL statement over 50 candidates a side).
- how alike the answers are: vector recall@10 against exact search over the same vectors
  (numpy), and, for keyword and hybrid reads, which have no ground truth, the share of
  SQLite FTS5 + sqlite-vec's top 10 that an engine's top 10 holds too (overlap@10), with
  the mean number of items returned. Beside recall, "similarity kept" (the summed cosine
  of an engine's vector answers over that of the true top 10) says whether the answers
  missed were near-ties. cairn leaves out query terms common across the store
  (docs/retrieval.md), so it answers fewer keyword queries, and with other hits, than an
  engine that searches every term.

Each peer runs as it comes: LanceDB without a vector index (exact, like cairn below 200k
rows) unless ``--lance-index IVF_PQ|IVF_HNSW_SQ`` asks for one (its build then counts as
ingest), Chroma with its default HNSW search breadth unless ``--chroma-ef-search N``.

With ``--locomo FILE`` every engine is also scored on LoCoMo: each conversation's turns (the
speaker as title, the words and any image caption as body) go into a fresh instance of each
engine with the same vectors, and each question is answered by the engine's hybrid read
(Chroma's local client has none: its vector read), top 10, scored as turn recall@10 against
the question's evidence turns. This is every engine on the same plain input; cairn's own
LoCoMo figures (bench/locomo.py) add context windows and session records.

Ratios are cairn ÷ peer of the same quantity: for ingest (records/s) below 1 means cairn
is slower; for latency (ms) above 1 means cairn is slower. Prints tables and writes JSON
(``--out``); never asserts.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# LanceDB's Rust side warns on every read whose columns leave out _score or _distance
# (a coming change of default); the warnings would bury the tables.
os.environ.setdefault("LANCEDB_LOG", "error")

from bench._data import LocomoConversation, load_locomo
from bench._metrics import recall_at_k
from bench.latency import _percentiles, _text, corpus
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Content, Principal, PrincipalKind, Sensitivity
from cairn.retrieval.weights import DEFAULT_WEIGHTS
from cairn.search.embedder import Embedder, make_embedder
from cairn.search.fts import fts_tokens, quote_term
from cairn.store.base import embed_input
from cairn.store.sqlite import SqliteStore

Vectors = npt.NDArray[np.float32]
K = 10
HYBRID_CANDIDATES = 50  # cairn's own: max(50, 5 k)
RRF_K = 60
WEIGHTS = dict(DEFAULT_WEIGHTS)  # cairn's defaults, for the SQLite peer's RRF
MODES = ("keyword", "vector", "hybrid")
PEERS = ("lancedb", "chroma", "sqlite_vec")
LABELS = {
    "cairn": "cairn (SQLite)",
    "lancedb": "LanceDB",
    "chroma": "Chroma",
    "sqlite_vec": "SQLite FTS5 + sqlite-vec",
}
READER = Principal(
    id="bench-peers",
    kind=PrincipalKind.HUMAN,
    roles=("curator",),
    scopes=("*",),
    labels=("*",),
    sensitivity=Sensitivity.HIGH,
)


# ---- the corpus and its vectors -------------------------------------------------------------


@dataclass
class Corpus:
    contents: list[Content]
    texts: list[str]  # what cairn embeds for a record: title, then body
    vectors: Vectors
    queries: list[str]
    query_vectors: Vectors
    embed_docs_s: float
    embed_query_ms: float

    def __len__(self) -> int:
        return len(self.contents)


def build_corpus(n: int, queries: int, seed: int, embedder: Embedder, progress: Progress) -> Corpus:
    contents = list(corpus(n, seed))
    texts = [embed_input(c.title, "", c.body) for c in contents]
    embedder.embed(texts[:8])  # load the model before timing it
    task = progress.add_task("embedding the corpus (once, for every engine)", total=n)
    parts = []
    started = time.perf_counter()
    for i in range(0, n, 4096):
        parts.append(embedder.embed(texts[i : i + 4096]).astype(np.float32))
        progress.update(task, completed=min(n, i + 4096))
    embed_docs_s = time.perf_counter() - started
    rng = random.Random(seed + 1)
    asked = [_text(rng, rng.randrange(2, 6)) for _ in range(queries)]
    started = time.perf_counter()
    query_vectors = np.stack([embedder.embed_query(q) for q in asked]).astype(np.float32)
    embed_query_ms = (time.perf_counter() - started) * 1000 / max(1, queries)
    return Corpus(contents, texts, np.concatenate(parts), asked, query_vectors,
                  embed_docs_s, embed_query_ms)  # fmt: skip


class LookupEmbedder:
    """The embedder cairn is given: it answers from the precomputed vectors, so cairn's
    figures, like the peers', leave the model out. A text it was not given (there should be
    none) goes to the real model and is counted."""

    def __init__(self, inner: Embedder, data: Corpus) -> None:
        self.inner = inner
        self._rows = {text: i for i, text in enumerate(data.texts)}
        self._vectors = data.vectors
        self._queries: dict[str, Vectors] = {
            q: data.query_vectors[i] for i, q in enumerate(data.queries)
        }
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [self._rows.get(text) for text in texts]
        if all(row is not None for row in rows):
            found: Vectors = self._vectors[[r for r in rows if r is not None]]
            return found
        self.misses += sum(1 for row in rows if row is None)
        made: Vectors = self.inner.embed(texts)
        return made

    def embed_query(self, text: str) -> Vectors:
        found = self._queries.get(text)
        if found is not None:
            return found
        self.misses += 1
        made: Vectors = self.inner.embed_query(text)
        return made


# ---- engines ---------------------------------------------------------------------------------


@dataclass
class Engine:
    """One engine under test. The read methods return corpus row numbers, best first; a
    mode the engine cannot serve is named in ``unsupported`` with the reason."""

    name: str
    vector_index: str = "exact"
    notes: list[str] = field(default_factory=list)
    unsupported: dict[str, str] = field(default_factory=dict)
    ingest_parts: dict[str, float] = field(default_factory=dict)
    folder: Path | None = None

    def prepare(self, data: Corpus) -> None:
        """Build the engine's input (not timed)."""

    def ingest(self, data: Corpus) -> None:
        raise NotImplementedError

    def keyword(self, query: str) -> list[int]:
        raise NotImplementedError

    def vector(self, vec: Vectors) -> list[int]:
        raise NotImplementedError

    def hybrid(self, query: str, vec: Vectors) -> list[int]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def info(self) -> dict[str, Any]:
        return {}


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


class CairnEngine(Engine):
    def __init__(self, folder: Path, inner: Embedder, batch: int) -> None:
        super().__init__("cairn", folder=folder)
        self.inner = inner
        self.batch = batch
        self.notes = [
            "every record through the gate (policy, duplicate and permission checks, audit)",
            "reads: Memory.search as an all-seeing principal (permission filter still run)",
        ]

    def prepare(self, data: Corpus) -> None:
        self.embedder = LookupEmbedder(self.inner, data)
        assert self.folder is not None
        self.memory = Memory(SqliteStore(self.folder / "cairn.db"),
                             parse_policy(DEFAULT_POLICY_YAML), root=self.folder,
                             embedder=self.embedder)  # fmt: skip
        self.parts = [data.contents[i : i + self.batch] for i in range(0, len(data), self.batch)]

    def ingest(self, data: Corpus) -> None:
        outcomes = []

        def write() -> None:
            for part in self.parts:
                outcomes.extend(self.memory.store_many(part, principal=READER))

        self.ingest_parts["write_s"] = _timed(write)
        self.ingest_parts["vectors_s"] = _timed(self.memory.index_pending)
        # Hits name records; the reads answer corpus rows, as the peers do.
        self.row_of = {o.record.id: i for i, o in enumerate(outcomes) if o.record is not None}

    def _rows(self, query: str, mode: Any) -> list[int]:
        found = self.memory.search(query, principal=READER, mode=mode, k=K)
        return [self.row_of[hit.record_id] for hit in found.hits]

    def keyword(self, query: str) -> list[int]:
        return self._rows(query, "keyword")

    def vector(self, vec: Vectors) -> list[int]:
        raise RuntimeError("cairn reads by query text: see vector_text")

    def vector_text(self, query: str) -> list[int]:
        return self._rows(query, "vector")

    def hybrid(self, query: str, vec: Vectors) -> list[int]:
        return self._rows(query, "hybrid")

    def close(self) -> None:
        self.memory.close()

    def info(self) -> dict[str, Any]:
        return {"embedder_misses": self.embedder.misses, "batch": self.batch}


class LanceEngine(Engine):
    def __init__(self, folder: Path, index: str | None = None) -> None:
        shown = "exact (flat scan)" if index is None else f"{index} (approximate)"
        super().__init__("lancedb", folder=folder, vector_index=shown)
        self.index = index
        self.table: Any = None
        self.notes = [
            "create_table with every row, then create_index(text, FTS()): native BM25, "
            "stemming and stop words (its defaults)",
            "no vector index: a flat scan, exact like cairn's below 200k rows"
            if index is None
            else f"vector index {index} (cosine, its default partitions and probes), "
            "built after the table and timed with the ingest",
            "hybrid: search(query_type='hybrid') with its default RRF reranker",
        ]

    def prepare(self, data: Corpus) -> None:
        import lancedb
        import pyarrow as pa

        dim = data.vectors.shape[1]
        flat = pa.array(data.vectors.reshape(-1), type=pa.float32())
        self.table_data = pa.table({
            "id": pa.array(np.arange(len(data)), type=pa.int64()),
            "scope": [c.scope for c in data.contents],
            "text": data.texts,
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
        })  # fmt: skip
        self.db = lancedb.connect(str(self.folder))

    def ingest(self, data: Corpus) -> None:
        from lancedb.index import FTS

        started = time.perf_counter()
        self.table = self.db.create_table("docs", data=self.table_data)
        written = time.perf_counter()
        self.table.create_index("text", config=FTS())
        self.ingest_parts["write_s"] = written - started
        self.ingest_parts["fts_index_s"] = time.perf_counter() - written
        del self.table_data
        if self.index is not None:
            from lancedb.index import IvfHnswSq, IvfPq

            config = {"IVF_PQ": IvfPq, "IVF_HNSW_SQ": IvfHnswSq}[self.index]
            self.ingest_parts["vector_index_s"] = _timed(
                lambda: self.table.create_index("vector", config=config(distance_type="cosine"))
            )

    @staticmethod
    def _ids(result: Any) -> list[int]:
        ids: list[int] = result.column("id").to_pylist()
        return ids

    def keyword(self, query: str) -> list[int]:
        q = self.table.search(query, query_type="fts").limit(K)
        return self._ids(q.select(["id", "text", "_score"]).to_arrow())

    def vector(self, vec: Vectors) -> list[int]:
        q = self.table.search(vec, query_type="vector").distance_type("cosine").limit(K)
        return self._ids(q.select(["id", "text", "_distance"]).to_arrow())

    def hybrid(self, query: str, vec: Vectors) -> list[int]:
        q = self.table.search(query_type="hybrid").vector(vec).text(query)
        return self._ids(q.distance_type("cosine").limit(K).select(["id", "text"]).to_arrow())


class ChromaEngine(Engine):
    def __init__(self, folder: Path, ef_search: int | None = None) -> None:
        ef = "100, its default" if ef_search is None else str(ef_search)
        super().__init__("chroma", folder=folder, vector_index=f"HNSW (approximate, ef {ef})")
        self.hnsw: dict[str, object] = {"space": "cosine"}
        if ef_search is not None:
            self.hnsw["ef_search"] = ef_search
        self.notes = [
            "PersistentClient, telemetry off, no embedding function; add() in batches of "
            f"its maximum batch size; HNSW, cosine, M 16, ef_construction 100, ef_search {ef}",
        ]
        reason = ("the local client has no ranked keyword search (where_document $contains "
                  "is an unranked filter); Collection.search with BM25/RRF is for "
                  "distributed and hosted Chroma only")  # fmt: skip
        self.unsupported = {"keyword": reason, "hybrid": reason}

    def prepare(self, data: Corpus) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(
            path=str(self.folder), settings=Settings(anonymized_telemetry=False)
        )
        self.collection = self.client.create_collection(
            "docs",
            embedding_function=None,
            configuration={"hnsw": self.hnsw},  # type: ignore[arg-type]
        )
        step = self.client.get_max_batch_size()
        self.batches = [
            (
                [str(i) for i in range(start, min(len(data), start + step))],
                data.vectors[start : start + step],
                data.texts[start : start + step],
                [{"scope": c.scope} for c in data.contents[start : start + step]],
            )
            for start in range(0, len(data), step)
        ]
        self.step = step

    def ingest(self, data: Corpus) -> None:
        def run() -> None:
            for ids, vectors, texts, metadatas in self.batches:
                self.collection.add(ids=ids, embeddings=vectors, documents=texts,
                                    metadatas=metadatas)  # type: ignore[arg-type]  # fmt: skip

        self.ingest_parts["write_s"] = _timed(run)
        del self.batches

    def vector(self, vec: Vectors) -> list[int]:
        found = self.collection.query(query_embeddings=[vec], n_results=K,  # type: ignore[arg-type]
                                      include=["documents", "distances"])  # fmt: skip
        return [int(i) for i in found["ids"][0]]

    def info(self) -> dict[str, Any]:
        return {"batch": self.step}


def _sqlite_connection(path: Path) -> tuple[Any, str]:
    """A connection that can load sqlite-vec: the standard library's when this Python was
    built with extension loading, apsw's (with its own, newer SQLite) otherwise."""
    import sqlite3

    import sqlite_vec

    conn: Any
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        conn = sqlite3.connect(path, isolation_level=None)
        driver = f"sqlite3 (SQLite {sqlite3.sqlite_version})"
    else:
        import apsw

        conn = apsw.Connection(str(path))
        driver = f"apsw {apsw.apsw_version()} (SQLite {apsw.sqlite_lib_version()})"
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    return conn, driver


def _fts_query(query: str) -> str:
    """Every word, any of them (OR), each a quoted string: the FTS5 reading of a plain
    query (a question's own quotes and punctuation are not syntax; no word matches
    nothing)."""
    return " OR ".join(quote_term(word) for word in fts_tokens(query)) or '""'


class SqliteVecEngine(Engine):
    def __init__(self, folder: Path) -> None:
        super().__init__("sqlite_vec", folder=folder, vector_index="exact (vec0 scan)")

    def prepare(self, data: Corpus) -> None:
        assert self.folder is not None
        self.conn, self.driver = _sqlite_connection(self.folder / "peer.db")
        dim = data.vectors.shape[1]
        for sql in (
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = FULL",  # cairn's SqliteStore default
            "CREATE TABLE docs (id INTEGER PRIMARY KEY, scope TEXT, title TEXT, body TEXT)",
            "CREATE VIRTUAL TABLE docs_fts USING fts5(title, body, content='docs', "
            "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
            f"CREATE VIRTUAL TABLE docs_vec USING vec0(embedding float[{dim}] "
            "distance_metric=cosine)",
        ):
            self.conn.execute(sql)
        self.rows = [(i, c.scope, c.title, c.body) for i, c in enumerate(data.contents)]
        self.blobs = [(i, data.vectors[i].tobytes()) for i in range(len(data))]
        self.notes = [
            f"{self.driver}; one transaction: executemany into a table, its external-content "
            "FTS5 index (porter, as cairn's) and a vec0 table; WAL, synchronous FULL as cairn",
            f"hybrid: cairn's weighted RRF ({WEIGHTS['vector']:g} vector / "
            f"{WEIGHTS['keyword']:g} keyword, k 60) in one SQL statement",
        ]

    def ingest(self, data: Corpus) -> None:
        conn = self.conn

        def run() -> None:
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO docs (id, scope, title, body) VALUES (?, ?, ?, ?)",
                             self.rows)  # fmt: skip
            conn.execute("INSERT INTO docs_fts (rowid, title, body) SELECT id, title, body "
                         "FROM docs")  # fmt: skip
            conn.executemany("INSERT INTO docs_vec (rowid, embedding) VALUES (?, ?)",
                             self.blobs)  # fmt: skip
            conn.execute("COMMIT")

        self.ingest_parts["write_s"] = _timed(run)
        del self.rows, self.blobs

    def _ids(self, sql: str, params: Sequence[object]) -> list[int]:
        return [int(row[0]) for row in self.conn.execute(sql, params).fetchall()]

    def keyword(self, query: str) -> list[int]:
        return self._ids(
            "SELECT d.id, d.title, d.body FROM (SELECT rowid, rank FROM docs_fts "
            "WHERE docs_fts MATCH ? ORDER BY rank LIMIT ?) f JOIN docs d ON d.id = f.rowid "
            "ORDER BY f.rank",
            (_fts_query(query), K),
        )

    def vector(self, vec: Vectors) -> list[int]:
        return self._ids(
            "SELECT d.id, d.title, d.body FROM (SELECT rowid, distance FROM docs_vec "
            "WHERE embedding MATCH ? AND k = ?) v JOIN docs d ON d.id = v.rowid "
            "ORDER BY v.distance",
            (vec.tobytes(), K),
        )

    def hybrid(self, query: str, vec: Vectors) -> list[int]:
        return self._ids(
            "WITH kw AS (SELECT id, row_number() OVER (ORDER BY r) AS n FROM "
            "  (SELECT rowid AS id, rank AS r FROM docs_fts WHERE docs_fts MATCH ? "
            "   ORDER BY rank LIMIT ?)), "
            "vec AS (SELECT id, row_number() OVER (ORDER BY r) AS n FROM "
            "  (SELECT rowid AS id, distance AS r FROM docs_vec WHERE embedding MATCH ? "
            "   AND k = ?)), "
            "fused AS (SELECT id, sum(s) AS score FROM ("
            "  SELECT id, ? / (? + n) AS s FROM kw UNION ALL "
            "  SELECT id, ? / (? + n) AS s FROM vec) GROUP BY id) "
            "SELECT d.id, d.title, d.body FROM fused JOIN docs d ON d.id = fused.id "
            "ORDER BY fused.score DESC LIMIT ?",
            (_fts_query(query), HYBRID_CANDIDATES, vec.tobytes(), HYBRID_CANDIDATES,
             WEIGHTS["keyword"], RRF_K, WEIGHTS["vector"], RRF_K, K),
        )  # fmt: skip

    def close(self) -> None:
        self.conn.close()

    def info(self) -> dict[str, Any]:
        return {"driver": self.driver}


# Each peer: the packages it needs (import name, pip name) and how to make it.
REQUIREMENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "lancedb": (("lancedb", "lancedb"), ("pyarrow", "pyarrow")),
    "chroma": (("chromadb", "chromadb"),),
    "sqlite_vec": (("sqlite_vec", "sqlite-vec"),),
}
VERSIONS = {"lancedb": "lancedb", "chroma": "chromadb", "sqlite_vec": "sqlite-vec"}
MAKERS: dict[str, Callable[[Path, argparse.Namespace], Engine]] = {
    "lancedb": lambda folder, args: LanceEngine(folder, args.lance_index),
    "chroma": lambda folder, args: ChromaEngine(folder, args.chroma_ef_search),
    "sqlite_vec": lambda folder, args: SqliteVecEngine(folder),
}


def missing_packages(peer: str) -> list[str]:
    lacking = [
        pip for module, pip in REQUIREMENTS[peer] if importlib.util.find_spec(module) is None
    ]
    if peer == "sqlite_vec" and not lacking:
        import sqlite3

        # sqlite-vec is a loadable extension: it needs a driver that can load one.
        loads = hasattr(sqlite3.Connection, "enable_load_extension")
        if not loads and importlib.util.find_spec("apsw") is None:
            lacking.append("apsw (this Python's sqlite3 cannot load extensions)")
    return lacking


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def _disk_mb(folder: Path | None) -> float:
    if folder is None or not folder.exists():
        return 0.0
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return round(size / 2**20, 1)


# ---- measuring -------------------------------------------------------------------------------


def _recall(found: list[int], exact: npt.NDArray[np.int64]) -> float:
    return len(set(found) & {int(i) for i in exact}) / len(exact)


def _similarity_kept(found: list[int], exact: npt.NDArray[np.int64], data: Corpus, i: int) -> float:
    """The summed cosine of the answers over that of the true top k: near 1 when the
    answers missed are near-ties of the true ones (recall alone cannot tell)."""
    query = data.query_vectors[i]
    best = float(np.sum(data.vectors[exact] @ query))
    got = float(np.sum(data.vectors[found] @ query)) if found else 0.0
    return got / best if best > 0 else 1.0


def exact_top(data: Corpus) -> npt.NDArray[np.int64]:
    """The true top k of every query by cosine (unit vectors: a dot product)."""
    scores = data.query_vectors @ data.vectors.T
    top = np.argpartition(-scores, K, axis=1)[:, :K]
    return np.asarray(top, dtype=np.int64)


def _read(engine: Engine, mode: str, query: str, vec: Vectors) -> list[int]:
    if mode == "keyword":
        return engine.keyword(query)
    if mode == "vector":
        if isinstance(engine, CairnEngine):
            return engine.vector_text(query)
        return engine.vector(vec)
    return engine.hybrid(query, vec)


def measure_reads(
    engines: Sequence[Engine], data: Corpus, progress: Progress
) -> dict[str, dict[str, Any]]:
    exact = exact_top(data)
    results: dict[str, dict[str, Any]] = {e.name: {} for e in engines}
    for mode in MODES:
        serving = [e for e in engines if mode not in e.unsupported]
        for engine in serving:  # warm caches, lazy loads and first-query setup
            for q, vec in itertools.islice(zip(data.queries, data.query_vectors, strict=True), 3):
                _read(engine, mode, q, vec)
        samples: dict[str, list[float]] = {e.name: [] for e in serving}
        items: dict[str, int] = dict.fromkeys(samples, 0)
        recall: dict[str, float] = dict.fromkeys(samples, 0.0)
        kept: dict[str, float] = dict.fromkeys(samples, 0.0)
        answers: dict[str, list[list[int]]] = {name: [] for name in samples}
        task = progress.add_task(f"{mode} reads", total=len(data.queries))
        for i, (q, vec) in enumerate(zip(data.queries, data.query_vectors, strict=True)):
            for engine in serving:  # interleaved: noise falls on every engine alike
                started = time.perf_counter()
                found = _read(engine, mode, q, vec)
                samples[engine.name].append((time.perf_counter() - started) * 1000)
                items[engine.name] += len(found)
                answers[engine.name].append(found)
                if mode == "vector":
                    recall[engine.name] += _recall(found, exact[i])
                    kept[engine.name] += _similarity_kept(found, exact[i], data, i)
            progress.update(task, completed=i + 1)
        n = len(data.queries)
        for engine in engines:
            if engine.name not in samples:
                results[engine.name][mode] = None
                continue
            figures: dict[str, Any] = _percentiles(samples[engine.name])
            figures["mean_items"] = round(items[engine.name] / n, 2)
            if mode == "vector":
                figures["recall_at_10"] = round(recall[engine.name] / n, 4)
                figures["similarity_kept"] = round(kept[engine.name] / n, 4)
            elif REFERENCE in answers:
                figures["overlap_with_reference"] = _overlap(
                    answers[engine.name], answers[REFERENCE]
                )
            results[engine.name][mode] = figures
    return results


# Keyword and hybrid answers have no ground truth; the plainest engine's serve as the
# yardstick for how far the others' answers agree with it.
REFERENCE = "sqlite_vec"


def _overlap(found: list[list[int]], reference: list[list[int]]) -> float | None:
    """The mean share of the reference's answers that ``found`` has too, over the queries
    the reference answered at all."""
    shares = [len(set(a) & set(r)) / len(r) for a, r in zip(found, reference, strict=True) if r]
    return round(sum(shares) / len(shares), 4) if shares else None


# ---- LoCoMo: the same turns, the same vectors, each engine's best read ------------------------


def locomo_corpus(conversation: LocomoConversation, embedder: Embedder) -> Corpus:
    """One conversation as records (one a turn: the speaker as title, what was said, and
    the caption of an image shared, as body) and its scored questions as queries."""
    contents = [
        Content(kind="fact", scope=f"locomo/{conversation.sample_id}", title=turn.speaker,
                body=turn.text + (f" [shares an image: {turn.caption}]" if turn.caption else ""))
        for turn in conversation.turns
    ]  # fmt: skip
    texts = [embed_input(c.title, "", c.body) for c in contents]
    questions = [q.question for q in conversation.questions]
    vectors = embedder.embed(texts).astype(np.float32)
    asked = np.stack([embedder.embed_query(q) for q in questions]).astype(np.float32)
    return Corpus(contents, texts, vectors, questions, asked, 0.0, 0.0)


def locomo_recall(
    path: Path, args: argparse.Namespace, peers: Sequence[str], inner: Embedder,
    progress: Progress,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Turn recall@10 of every engine on LoCoMo: each conversation loaded into a fresh
    instance of every engine, each question answered by the engine's hybrid read (vector
    where it has none), the turns it returns scored against the question's evidence."""
    conversations = load_locomo(path)
    scored: dict[str, list[float]] = {}
    modes: dict[str, str] = {}
    task = progress.add_task("LoCoMo", total=sum(len(c.questions) for c in conversations))
    done = 0
    for conversation in conversations:
        data = locomo_corpus(conversation, inner)
        root = Path(tempfile.mkdtemp(prefix="cairn-peers-locomo-"))
        engines: list[Engine] = [CairnEngine(root / "cairn", inner, args.batch)]
        engines += [MAKERS[p](root / p, args) for p in peers]
        try:
            for engine in engines:
                assert engine.folder is not None
                engine.folder.mkdir()
                engine.prepare(data)
                engine.ingest(data)
            for question, vec in zip(conversation.questions, data.query_vectors, strict=True):
                for engine in engines:
                    mode = "hybrid" if "hybrid" not in engine.unsupported else "vector"
                    modes[engine.name] = mode
                    rows = _read(engine, mode, question.question, vec)[:K]
                    ranked = [conversation.turns[row].dia_id for row in rows]
                    scored.setdefault(engine.name, []).append(
                        recall_at_k(ranked, question.evidence, K)
                    )
                done += 1
                progress.update(task, completed=done)
        finally:
            for engine in engines:
                engine.close()
            shutil.rmtree(root, ignore_errors=True)
    return {
        name: {"mode": modes[name], "questions": len(values),
               "turn_recall_at_10": round(100 * sum(values) / len(values), 1)}
        for name, values in scored.items()
    }  # fmt: skip


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()] if args.peers else PEERS
    unknown = [p for p in wanted if p not in PEERS]
    if unknown:
        raise SystemExit(f"--peers: unknown {', '.join(unknown)} (known: {', '.join(PEERS)})")
    skipped: dict[str, str] = {}
    for peer in wanted:
        lacking = missing_packages(peer)
        if lacking:
            skipped[peer] = (f"not installed: {', '.join(lacking)} "
                             "(pip install -e '.[peers]')")  # fmt: skip
            console.print(f"[yellow]skipping {LABELS[peer]}[/]: {escape(skipped[peer])}")
    inner = make_embedder(args.embedder, cached=False)
    root = Path(tempfile.mkdtemp(prefix="cairn-peers-"))
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=True)  # fmt: skip
    engines: list[Engine] = []
    try:
        with progress:
            data = build_corpus(args.records, args.queries, args.seed, inner, progress)
            engines.append(CairnEngine(root / "cairn", inner, args.batch))
            engines += [MAKERS[p](root / p, args) for p in wanted if p not in skipped]
            for engine in engines:
                assert engine.folder is not None
                engine.folder.mkdir()
                engine.prepare(data)
                task = progress.add_task(f"ingest: {LABELS[engine.name]}", total=None)
                engine.ingest(data)
                progress.remove_task(task)
            reads = measure_reads(engines, data, progress)
            present = [p for p in wanted if p not in skipped]
            locomo = (
                locomo_recall(args.locomo, args, present, inner, progress)
                if args.locomo is not None
                else None
            )
        return _figures(args, data, inner, engines, reads, skipped) | {"locomo": locomo}
    finally:
        for engine in engines:
            engine.close()
        shutil.rmtree(root, ignore_errors=True)


def _figures(
    args: argparse.Namespace,
    data: Corpus,
    inner: Embedder,
    engines: Sequence[Engine],
    reads: dict[str, dict[str, Any]],
    skipped: dict[str, str],
) -> dict[str, Any]:
    n = len(data)
    out: dict[str, Any] = {
        "records": n,
        "queries": len(data.queries),
        "k": K,
        "seed": args.seed,
        "embedding": {
            "embedder": args.embedder,
            "model": inner.name,
            "dim": inner.dim,
            "documents_s": round(data.embed_docs_s, 2),
            "documents_per_s": round(n / data.embed_docs_s, 1),
            "query_ms": round(data.embed_query_ms, 3),
            "note": "computed once before anything is timed; every engine gets these vectors, "
            "so no ingest or read figure below includes embedding",
        },
        "engines": {},
        "skipped": skipped,
        "ratios": {},
        "ratio_meaning": "cairn / peer of the same quantity: ingest per_s below 1 = cairn "
        "ingests slower; latency ms above 1 = cairn answers slower",
    }
    for engine in engines:
        seconds = sum(engine.ingest_parts.values())
        out["engines"][engine.name] = {
            "label": LABELS[engine.name],
            "version": _version(VERSIONS.get(engine.name, "cairn")),
            "vector_index": engine.vector_index,
            "ingest": {
                "seconds": round(seconds, 3),
                "per_s": round(n / seconds, 1),
                "parts_s": {k: round(v, 3) for k, v in engine.ingest_parts.items()},
            },
            **reads[engine.name],
            "unsupported": engine.unsupported,
            "disk_mb": _disk_mb(engine.folder),
            "notes": engine.notes,
            **engine.info(),
        }
    cairn = out["engines"]["cairn"]
    for engine in engines[1:]:
        peer = out["engines"][engine.name]
        ratios: dict[str, float | None] = {
            "ingest_per_s": round(cairn["ingest"]["per_s"] / peer["ingest"]["per_s"], 4)
        }
        for mode in MODES:
            for q in ("p50_ms", "p95_ms"):
                mine, theirs = cairn[mode], peer[mode]
                ratios[f"{mode}_{q}"] = (
                    round(mine[q] / theirs[q], 3) if mine and theirs and theirs[q] > 0 else None
                )
        out["ratios"][engine.name] = ratios
    return out


# ---- output ----------------------------------------------------------------------------------


def _pair(figures: dict[str, Any] | None) -> str:
    return "n/a" if figures is None else f"{figures['p50_ms']:.2f} / {figures['p95_ms']:.2f}"


def _field(figures: dict[str, Any] | None, name: str) -> str:
    value = None if figures is None else figures.get(name)
    return "n/a" if value is None else f"{value:.1f}" if name == "mean_items" else f"{value:.3f}"


def _ratio(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}x"


def show(figures: dict[str, Any], console: Console) -> None:
    n = figures["records"]
    emb = figures["embedding"]
    engines = figures["engines"]
    title = (f"cairn and peers · {n:,} records · {figures['queries']} queries · "
             f"k = {figures['k']} · {emb['embedder']} vectors ({emb['dim']} dims), "
             "embedding excluded")  # fmt: skip
    table = Table(title=title, title_justify="left")
    for column in ("engine", "ingest rec/s", "ingest s", "keyword p50 / p95 ms",
                   "vector p50 / p95 ms", "hybrid p50 / p95 ms", "vector index",
                   "disk MB"):  # fmt: skip
        table.add_column(
            column, justify="left" if column in ("engine", "vector index") else "right"
        )
    for e in engines.values():
        table.add_row(
            f"{e['label']} {e['version']}", f"{e['ingest']['per_s']:,.0f}",
            f"{e['ingest']['seconds']:.2f}", _pair(e["keyword"]), _pair(e["vector"]),
            _pair(e["hybrid"]), e["vector_index"], f"{e['disk_mb']:,.1f}",
        )  # fmt: skip
    console.print(table)
    title = (f"answers: items returned (of {figures['k']}), vector recall@10 against exact "
             "search" + (f", overlap@10 with {LABELS[REFERENCE]}'s answers"
                         if REFERENCE in engines else ""))  # fmt: skip
    answers = Table(title=title, title_justify="left")
    for column in ("engine", "keyword items", "keyword overlap", "vector items",
                   "vector recall@10", "similarity kept", "hybrid items",
                   "hybrid overlap"):  # fmt: skip
        answers.add_column(column, justify="left" if column == "engine" else "right")
    for e in engines.values():
        answers.add_row(
            e["label"], _field(e["keyword"], "mean_items"),
            _field(e["keyword"], "overlap_with_reference"), _field(e["vector"], "mean_items"),
            _field(e["vector"], "recall_at_10"), _field(e["vector"], "similarity_kept"),
            _field(e["hybrid"], "mean_items"),
            _field(e["hybrid"], "overlap_with_reference"),
        )  # fmt: skip
    console.print(answers)
    if figures["ratios"]:
        ratios = Table(title="cairn ÷ peer (ingest rec/s: below 1 = cairn slower; "
                       "latency ms: above 1 = cairn slower)", title_justify="left")  # fmt: skip
        for column in ("peer", "ingest rec/s", "keyword p50", "keyword p95", "vector p50",
                       "vector p95", "hybrid p50", "hybrid p95"):  # fmt: skip
            ratios.add_column(column, justify="left" if column == "peer" else "right")
        for name, r in figures["ratios"].items():
            cells = [_ratio(r[f"{m}_{q}"]) for m in MODES for q in ("p50_ms", "p95_ms")]
            ratios.add_row(engines[name]["label"], _ratio(r["ingest_per_s"], 3), *cells)
        console.print(ratios)
    cairn = engines["cairn"]["ingest"]["parts_s"]
    console.print(
        f"cairn ingest = governed writes {cairn['write_s']:.2f} s + vectors stored and "
        f"catalogued {cairn['vectors_s']:.2f} s. Embedding ({emb['model']}), shared and "
        f"excluded: {emb['documents_s']:.2f} s for the corpus ({emb['documents_per_s']:,.0f} "
        f"texts/s), {emb['query_ms']:.3f} ms a query."
    )
    for e in engines.values():
        for mode, reason in e["unsupported"].items():
            console.print(f"{e['label']} {mode}: n/a, {escape(reason)}")
    for name, reason in figures["skipped"].items():
        console.print(f"skipped {LABELS[name]}: {escape(reason)}")
    if figures.get("locomo"):
        table = Table(title="LoCoMo turn recall@10: the same turns and vectors in every engine, "
                      "one conversation at a time", title_justify="left")  # fmt: skip
        for column in ("engine", "read", "questions", "turn recall@10"):
            table.add_column(column, justify="left" if column in ("engine", "read") else "right")
        for name, row in figures["locomo"].items():
            table.add_row(LABELS[name], row["mode"], str(row["questions"]),
                          f"{row['turn_recall_at_10']:.1f}")  # fmt: skip
        console.print(table)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch", type=int, default=1_000, help="cairn's store_many batch")
    parser.add_argument("--embedder", default="static", help="static or minilm (offline)")
    parser.add_argument("--peers", default=None, help=f"comma list of {', '.join(PEERS)}")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--lance-index",
        choices=("IVF_PQ", "IVF_HNSW_SQ"),
        default=None,
        help="give LanceDB a vector index (default: none, an exact scan)",
    )
    parser.add_argument(
        "--chroma-ef-search",
        type=int,
        default=None,
        help="Chroma's HNSW search breadth (default: its own, 100)",
    )
    parser.add_argument("--quick", action="store_true", help="2,000 records, 50 queries")
    parser.add_argument("--out", "--json", dest="out", type=Path, help="write the figures here")
    parser.add_argument(
        "--locomo",
        type=Path,
        default=None,
        help="also score turn recall@10 on this LoCoMo file (../shared/data/locomo/...)",
    )
    args = parser.parse_args(argv)
    if args.locomo is not None and not args.locomo.is_file():
        parser.error(f"--locomo: no file {args.locomo}")
    if args.quick:
        args.records, args.queries = 2_000, min(args.queries, 50)
    console = Console(width=None if sys.stdout.isatty() else 160)
    figures = run(args, console)
    show(figures, console)
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
