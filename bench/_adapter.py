"""The one place where the benchmarks meet a retrieval implementation.

SWITCH-OVER POINT: :class:`BlockRetriever` runs the retrieval recipe directly on cairn's
building blocks (SQLite FTS5 + :func:`cairn.search.fts.build_match_query`,
:class:`cairn.search.vectors.ExactVectorIndex`, :func:`cairn.search.fusion.rrf`). When the
kernel's ``Memory.search`` exists, add a ``KernelRetriever`` with the same two methods
(``ingest`` and ``search``) and return it from :func:`make_retriever`; the bench scripts only
talk to the :class:`Retriever` protocol.

The recipe (measured on the dev sets, see the bench scripts' docstrings):

- every turn is one record; its keyword views are the turn and its neighbours within
  ``radius`` turns of the same session ("[date] Speaker: text [photo: caption]" per turn),
  one FTS5 row per (turn, radius), porter stemming;
- its vector view is the turn alone ("[date] Speaker: text ...") in each configured embedder;
- each view is searched to ``depth`` candidates and all views are fused with weighted RRF
  (k=60); the turn ranking is the fused list;
- optionally (LongMemEval) one more keyword view over the user's own turns only;
- sessions are ranked by RRF of (a) the order in which sessions first appear in the turn
  ranking and (b) optional whole-session keyword documents (all turns, or user turns only).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from cairn.search.embedder import CachedEmbedder, Embedder, LRUBytesCache, make_embedder
from cairn.search.fts import build_match_query
from cairn.search.fusion import rrf
from cairn.search.vector_cache import DiskVectorCache
from cairn.search.vectors import ExactVectorIndex

__all__ = [
    "BlockRetriever",
    "Captured",
    "KernelRetriever",
    "Mode",
    "Recipe",
    "Result",
    "Retriever",
    "Turn",
    "make_retriever",
    "parse_weights",
]

Mode = Literal["hybrid", "keyword", "vector"]

PORTER_TOKENIZE = "porter unicode61 remove_diacritics 2"
"""Stemming adds ~4 points of turn recall@10 on LoCoMo over plain unicode61."""

Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Turn:
    """One utterance to remember (a record of kind ``episode`` in the kernel)."""

    key: str  # unique within the scope: LoCoMo dia_id, LongMemEval "<session>:<index>"
    session: str
    speaker: str
    text: str
    date: str = ""  # session date as written
    caption: str | None = None  # e.g. the description of a shared photo


@dataclass(frozen=True, slots=True)
class Result:
    turns: list[str]  # turn keys, best first
    sessions: list[str]  # session ids, best first


@dataclass(frozen=True)
class Recipe:
    """What to index and how to fuse. Weights of 0 switch a view off."""

    keyword_radii: Mapping[int, float] = field(default_factory=lambda: {0: 1.0})
    vector_weights: Mapping[str, float] = field(default_factory=lambda: {"minilm": 1.0})
    #: Weight of a keyword view over the user's own turns only (speaker == user_speaker).
    user_turns: float = 0.0
    #: Whole-session keyword documents used for session ranking: "all" or "user" turns.
    session_docs: Mapping[str, float] = field(default_factory=dict)
    #: Weight of "sessions in order of first appearance in the turn ranking".
    session_from_turns: float = 1.0
    date_in_keyword_text: bool = True
    date_in_vector_text: bool = True
    depth: int = 100
    rrf_k: int = 60
    user_speaker: str | None = None  # speaker name of the user's turns ("user" in LME)

    def only(self, mode: Mode) -> Recipe:
        """The same recipe restricted to keyword or vector views."""
        if mode == "hybrid":
            return self
        if mode == "keyword":
            return replace(self, vector_weights={})
        return replace(
            self, keyword_radii={}, user_turns=0.0, session_docs={}, session_from_turns=1.0
        )


@dataclass(frozen=True)
class Captured:
    """One question's recall through the kernel, for replaying the later stages offline
    (``bench/_cv.py``): the keyword and vector ``(chunk id, score)`` lists, their chunks,
    the scope names and, per record id, what the bench knows it to be (``KernelRetriever``'s
    ``records``)."""

    query: str
    keyword: list[tuple[int, float]]
    vector: list[tuple[int, float]]
    rows: Mapping[int, object]  # chunk id -> cairn.store.base.ChunkRow
    scopes: Mapping[int, str]
    refs: Mapping[str, tuple[str, str, str]]
    #: how many candidates each list was asked for (captures made before it was kept
    #: were all made with the bench's 100)
    depth: int = 100
    #: whether the kernel found the vector list complete (fewer candidates than asked
    #: for, before its re-check); None in captures made before it was kept
    complete: bool | None = None

    @property
    def vector_complete(self) -> bool:
        """What ``rank`` and ``fuse`` are given: as the kernel decided, or (older
        captures) from the list's length, which only a re-check can have shortened."""
        if self.complete is not None:
            return self.complete
        return len(self.vector) < self.depth


class Retriever(Protocol):
    def ingest(self, scope: str, turns: Sequence[Turn], progress: Progress | None = None) -> None:
        """Remember ``turns`` (in conversation order) under ``scope``."""
        ...

    def search(self, scope: str, query: str, *, mode: Mode, k: int) -> Result:
        """Rank the turns and sessions of ``scope`` for ``query``."""
        ...


def turn_text(turn: Turn) -> str:
    text = f"{turn.speaker}: {turn.text}"
    if turn.caption:
        text += f" [shares a photo: {turn.caption}]"
    return text


class BlockRetriever:
    """The recipe on the building blocks: one FTS5 table, one exact vector index per scope.

    ``embedders`` maps a name used in :attr:`Recipe.vector_weights` to an embedder; by default
    the names are embedder specs for :func:`make_embedder` with a shared in-memory cache (so
    content repeated across scopes, as LongMemEval sessions are, is embedded once).
    """

    def __init__(
        self, recipe: Recipe, embedders: Mapping[str, Embedder] | None = None, *, batch: int = 128
    ) -> None:
        self.recipe = recipe
        self.batch = batch
        if embedders is None:
            embedders = {
                name: make_embedder(name, cache=LRUBytesCache(500_000))
                for name, weight in recipe.vector_weights.items()
                if weight > 0
            }
        self.embedders = dict(embedders)
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(key UNINDEXED, scope UNINDEXED, "
            f"view UNINDEXED, body, tokenize='{PORTER_TOKENIZE}')"
        )
        self.vectors: dict[tuple[str, str], ExactVectorIndex] = {}
        self.session_of: dict[tuple[str, str], str] = {}
        self.rows = 0

    # ------------------------------------------------------------------ ingest

    def ingest(self, scope: str, turns: Sequence[Turn], progress: Progress | None = None) -> None:
        recipe = self.recipe
        by_session: dict[str, list[Turn]] = defaultdict(list)
        for turn in turns:
            by_session[turn.session].append(turn)
            self.session_of[(scope, turn.key)] = turn.session
        rows: list[tuple[str, str, str, str]] = []
        for session, items in by_session.items():
            texts = [turn_text(t) for t in items]
            head = f"[{items[0].date}] " if recipe.date_in_keyword_text and items[0].date else ""
            for radius, weight in recipe.keyword_radii.items():
                if weight <= 0:
                    continue
                for i, turn in enumerate(items):
                    window = "\n".join(texts[max(0, i - radius) : i + radius + 1])
                    rows.append((turn.key, scope, f"r{radius}", head + window))
            if recipe.user_turns > 0:
                for turn, text in zip(items, texts, strict=True):
                    if turn.speaker == recipe.user_speaker:
                        rows.append((turn.key, scope, "user", head + text))
            for which, weight in recipe.session_docs.items():
                if weight <= 0:
                    continue
                chosen = [
                    text
                    for turn, text in zip(items, texts, strict=True)
                    if which == "all" or turn.speaker == recipe.user_speaker
                ]
                if chosen:
                    rows.append((session, scope, f"s_{which}", head + "\n".join(chosen)))
        self.conn.executemany("INSERT INTO docs(key, scope, view, body) VALUES (?, ?, ?, ?)", rows)
        self.rows += len(rows)
        for name, embedder in self.embedders.items():
            index = self.vectors.setdefault((scope, name), ExactVectorIndex(embedder.dim))
            for start in range(0, len(turns), self.batch):
                chunk = turns[start : start + self.batch]
                matrix = embedder.embed([self._vector_text(t) for t in chunk])
                keep = [i for i, row in enumerate(matrix) if float(np.linalg.norm(row)) > 0]
                if keep:
                    index.upsert_many([chunk[i].key for i in keep], matrix[keep])
                if progress is not None:
                    progress(len(chunk))
        if progress is not None and not self.embedders:
            progress(len(turns))

    def _vector_text(self, turn: Turn) -> str:
        if self.recipe.date_in_vector_text and turn.date:
            return f"[{turn.date}] {turn_text(turn)}"
        return turn_text(turn)

    # ------------------------------------------------------------------ search

    def _keyword(self, scope: str, view: str, query: str, limit: int) -> list[str]:
        match = build_match_query(query)
        if match is None:
            return []
        rows = self.conn.execute(
            "SELECT key FROM docs WHERE docs MATCH ? AND scope = ? AND view = ? "
            "ORDER BY bm25(docs) LIMIT ?",
            (match, scope, view, limit),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def search(self, scope: str, query: str, *, mode: Mode, k: int) -> Result:
        recipe = self.recipe.only(mode)
        depth = max(recipe.depth, k)
        lists: dict[str, list[str]] = {}
        weights: dict[str, float] = {}
        for radius, weight in recipe.keyword_radii.items():
            if weight > 0:
                lists[f"kw{radius}"] = self._keyword(scope, f"r{radius}", query, depth)
                weights[f"kw{radius}"] = weight
        if recipe.user_turns > 0:
            lists["kw_user"] = self._keyword(scope, "user", query, depth)
            weights["kw_user"] = recipe.user_turns
        for name, weight in recipe.vector_weights.items():
            index = self.vectors.get((scope, name))
            if weight > 0 and index is not None and len(index):
                qv = self.embedders[name].embed_query(query)
                if float(np.linalg.norm(qv)) > 0:
                    lists[f"vec_{name}"] = [key for key, _ in index.search(qv, depth)]
                    weights[f"vec_{name}"] = weight
        turns = [hit.key for hit in rrf(lists, weights, recipe.rrf_k)] if lists else []
        session_lists: dict[str, list[str]] = {}
        session_weights: dict[str, float] = {}
        if recipe.session_from_turns > 0:
            session_lists["turns"] = list(
                dict.fromkeys(self.session_of[(scope, key)] for key in turns)
            )
            session_weights["turns"] = recipe.session_from_turns
        for which, weight in recipe.session_docs.items():
            if weight > 0:
                session_lists[f"doc_{which}"] = self._keyword(scope, f"s_{which}", query, depth)
                session_weights[f"doc_{which}"] = weight
        sessions = [hit.key for hit in rrf(session_lists, session_weights, recipe.rrf_k)]
        return Result(turns[:k] if k else turns, sessions)


class KernelRetriever:
    """cairn itself: a :class:`cairn.memory.Memory` on a temporary SQLite store.

    Every turn is written through the governed gate (``remember_many``, a curator principal)
    as a record of kind ``episode`` in scope ``bench/<scope>``: title ``"Speaker · date ·
    #tag"``, where the tag is a digest of the turn's key that keeps identical lines of one
    scope from being rejected as duplicates without putting the dataset's ids in searchable
    text (LongMemEval's evidence sessions are named ``answer_…``: a title holding the id
    would hand the embedder the label),
    body ``"[date] Speaker: text [shares a photo: caption]"`` (``date_in_body``: the kernel
    embeds the body only, and the date helps LoCoMo's "when" questions), metadata (key,
    session, speaker, date) and ``valid_from`` = the session date. With ``session_records``
    each session is also written as one episode holding its whole transcript (chunked by the
    kernel). A question is one ``Memory.search`` call; the turn ranking is the turn records
    among the hits; a session scores the sum of the fused scores of its hits (its turns and
    its session record), so a session that several hits point to outranks one that a single
    turn touched.
    """

    def __init__(
        self,
        embedder: str = "minilm",
        *,
        session_records: bool = True,
        candidates: int = 100,
        hits: int = 100,
        weights: Mapping[str, float] | None = None,
        workdir: str | None = None,
        date_in_body: bool = True,
        windows: Sequence[int] = (1, 2, 3),
        db: str | None = None,
        vector_cache: Path | None = None,
    ) -> None:
        import tempfile

        from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
        from cairn.memory import Memory
        from cairn.model import Principal, PrincipalKind, Sensitivity
        from cairn.store.factory import open_store

        self._tmp = tempfile.TemporaryDirectory(prefix="cairn-bench-", dir=workdir)
        root = Path(self._tmp.name)
        self._disk: DiskVectorCache | None = None
        vectors: Embedder | None = None
        if embedder and vector_cache is None:
            vectors = make_embedder(embedder, cache=LRUBytesCache(500_000))
        elif embedder:
            # vector_cache: a file that keeps every vector between runs, so that a run the
            # machine could not finish (MiniLM over LongMemEval is hours) resumes where it
            # stopped. The kernel's indexer looks through one cache layer (the store keeps
            # document vectors itself), so the file goes beneath the in-memory one.
            self._disk = DiskVectorCache(vector_cache, max_items=5_000_000)
            vectors = CachedEmbedder(
                make_embedder(embedder, cache=self._disk), LRUBytesCache(500_000)
            )
        # db: a PostgreSQL URL (an empty database); default an embedded SQLite store.
        self.store = open_store(db, root)
        self.memory = Memory(
            self.store,
            parse_policy(DEFAULT_POLICY_YAML),
            root=root,
            embedder=vectors,
        )
        self.principal = Principal(
            id="bench-curator",
            kind=PrincipalKind.HUMAN,
            roles=("curator",),
            scopes=("*",),
            labels=("*",),
            sensitivity=Sensitivity.HIGH,
        )
        self.session_records = session_records
        self.date_in_body = date_in_body
        self.windows = tuple(windows)
        self.candidates = candidates
        self.hits = hits
        self.weights = weights
        self.has_vectors = vectors is not None
        # record id -> ("turn", key, session) or ("session", session, session)
        self.records: dict[str, tuple[str, str, str]] = {}
        self.rejected = 0

    def close(self) -> None:
        self.memory.close()
        if self._disk is not None:
            self._disk.close()
        self._tmp.cleanup()

    def ingest(self, scope: str, turns: Sequence[Turn], progress: Progress | None = None) -> None:
        from bench._data import parse_any_date

        from cairn.model import Content

        kernel_scope = f"bench/{scope}"
        contents: list[Content] = []
        refs: list[tuple[str, str, str]] = []
        by_session: dict[str, list[Turn]] = defaultdict(list)
        for turn in turns:
            by_session[turn.session].append(turn)
        position = {
            id(t): (t.session, i) for items in by_session.values() for i, t in enumerate(items)
        }
        for turn in turns:
            session, at = position[id(turn)]
            neighbours = by_session[session]
            # the turns around this one, as search context (see Content.context)
            context = tuple(
                " ".join(turn_text(t) for t in neighbours[max(0, at - w) : at + w + 1])
                for w in self.windows
            )
            contents.append(
                Content(
                    kind="episode",
                    scope=kernel_scope,
                    title=" · ".join(x for x in (turn.speaker, turn.date, _tag(turn.key)) if x),
                    body=f"[{turn.date}] {turn_text(turn)}"
                    if self.date_in_body and turn.date
                    else turn_text(turn),
                    metadata={
                        "key": turn.key,
                        "session": turn.session,
                        "speaker": turn.speaker,
                        "date": turn.date,
                    },
                    valid_from=parse_any_date(turn.date),
                    context=context,
                )
            )
            refs.append(("turn", turn.key, turn.session))
        if self.session_records:
            for session, items in by_session.items():
                contents.append(
                    Content(
                        kind="episode",
                        scope=kernel_scope,
                        title=" · ".join(x for x in ("Session", items[0].date, _tag(session)) if x),
                        body="\n\n".join(turn_text(t) for t in items),
                        metadata={"session": session, "date": items[0].date, "turns": len(items)},
                        valid_from=parse_any_date(items[0].date),
                    )
                )
                refs.append(("session", session, session))
        outcomes = self.memory.remember_many(contents, principal=self.principal)
        for outcome, ref in zip(outcomes, refs, strict=True):
            if outcome.record is None:
                self.rejected += 1
                continue
            self.records[outcome.record.id] = ref
        if self.has_vectors:
            self.memory.index_pending()
        if progress is not None:
            progress(len(turns))

    def search(self, scope: str, query: str, *, mode: Mode, k: int) -> Result:
        if mode != "keyword" and not self.has_vectors:
            return Result([], [])
        result = self.memory.search(
            query,
            principal=self.principal,
            mode=mode,
            scope=f"bench/{scope}",
            k=max(k, self.hits),
            candidates=self.candidates,
            weights=self.weights,
        )
        turns: list[str] = []
        session_scores: dict[str, float] = defaultdict(float)
        for hit in result.hits:
            ref = self.records.get(hit.record_id)
            if ref is None:
                continue
            if ref[0] == "turn":
                turns.append(ref[1])
            session_scores[ref[2]] += hit.scores.fused
        # sorted() is stable: equal sums keep the order in which the sessions first appeared
        sessions = sorted(session_scores, key=lambda session: -session_scores[session])
        return Result(turns[:k] if k else turns, sessions)

    def capture(self, scope: str, query: str) -> Captured:
        """Recall for ``query`` as ``search`` would (hybrid: both lists), without ranking:
        ``Memory.recall``, permission-trimmed as ``Memory.search`` is."""
        mode: Mode = "hybrid" if self.has_vectors else "keyword"
        recalled = self.memory.recall(
            query,
            principal=self.principal,
            mode=mode,
            k=self.hits,
            candidates=self.candidates,
            weights=self.weights,
            scope=f"bench/{scope}",
        )
        refs = {
            row.meta.record_id: self.records[row.meta.record_id]
            for row in recalled.rows.values()
            if row.meta.record_id in self.records
        }
        return Captured(
            query,
            list(recalled.keyword),
            list(recalled.vector),
            dict(recalled.rows),
            dict(recalled.scopes),
            refs,
            complete=recalled.vector_complete,
        )


def _tag(key: str) -> str:
    return "#" + hashlib.sha256(key.encode()).hexdigest()[:10]


def parse_weights(text: str | None) -> dict[str, float] | None:
    """``"keyword=0.6,vector=0.4"`` -> ``{"keyword": 0.6, "vector": 0.4}``; ``None`` stays."""
    if not text:
        return None
    out: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        out[name.strip()] = float(value)
    return out


def make_retriever(recipe: Recipe, embedders: Mapping[str, Embedder] | None = None) -> Retriever:
    """The building-block recipe (see the module docstring)."""
    return BlockRetriever(recipe, embedders)
