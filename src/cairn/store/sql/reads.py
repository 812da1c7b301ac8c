"""The reads both SQL stores answer with the same statements.

``SqlReads`` is mixed into ``SqliteStore`` and ``PostgresStore``; each provides ``_read``
(one statement, one snapshot, in its dialect) and ``dialect``. What only one database can
say (keyword search, the chunk count, the pending-vector scan, writes) stays in its store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, Unpack

from cairn.model import (
    AuditEntry,
    AuditQuery,
    Baseline,
    PathLink,
    Proposal,
    ProposalFilter,
    Record,
    RecordQuery,
    Version,
)
from cairn.options import check_names, keys_of
from cairn.store.base import (
    VECTORS_FROM,
    AclRow,
    ChunkFilter,
    ChunkMeta,
    ChunkRow,
    Dumped,
    ProposalPage,
    RecordReach,
    embed_input,
)
from cairn.store.filters import to_sql
from cairn.store.sql import rows
from cairn.store.sql.part import Row, SqlPart, Where, any_of

__all__ = ["SqlReads"]

# Finalists' vectors are read in parts (``vector_read_parts``) from this many ids on.
_VECTOR_READ_SPREAD_FROM = 32


class SqlReads(SqlPart):
    # model -> where ``pending_vectors`` resumes: the first chunk still waiting for a vector
    _pending_cursor: dict[str, int]
    # The chunks column that follows commit order (see pending_vectors): seqs are stamped
    # in commit order under the commit lock, where an id taken earlier by a slower
    # transaction could land behind the cursor.
    _pending_order = "seq"
    # How many parts a search's finalist vectors are read in (``chunk_vectors``): more than
    # one only where the store runs a read's statements side by side (``_read_each``).
    vector_read_parts = 1

    # ---- statements ---------------------------------------------------------------------

    def _records_sql(self) -> str:
        content = self.dialect.json_text("v.content")
        return (
            "SELECT r.id, r.kind, r.scope, r.status, r.current_version_id, r.current_version, "
            "r.superseded_by, r.created_at, r.updated_at, r.status_changed_at, r.created_by, "
            f"{content} AS content FROM records r JOIN versions v ON v.id = r.current_version_id"
        )

    def _versions_sql(self) -> str:
        content = self.dialect.json_text("content")
        return (
            f"SELECT id, record_id, number, {content} AS content, content_hash, created_at, "
            "created_by, proposal_id FROM versions"
        )

    def _proposals_sql(self) -> str:
        columns = ", ".join(
            f"{self.dialect.json_text(c)} AS {c}" if c in ("change", "principal_roles") else c
            for c in rows.PROPOSAL_COLUMNS
        )
        return f"SELECT {columns} FROM proposals"

    def _by_ids(self, sql: str, ids: Sequence[Any], column: str) -> list[Row]:
        """``sql`` (ending before its WHERE) for many ids, ``BATCH`` at a time."""
        found: list[Row] = []
        for test, params in self._in_batches(column, ids):
            found += self._read(f"{sql} WHERE {test}", params)
        return found

    # ---- records and versions -------------------------------------------------------------

    def get_record(self, record_id: str) -> Record | None:
        found = self._read(f"{self._records_sql()} WHERE r.id = ?", (record_id,))
        return rows.to_record(found[0], self.dialect) if found else None

    def get_records(self, record_ids: Sequence[str]) -> dict[str, Record]:
        found = self._by_ids(self._records_sql(), record_ids, "r.id")
        return {row["id"]: rows.to_record(row, self.dialect) for row in found}

    def get_version(self, version_id: str) -> Version | None:
        found = self._read(f"{self._versions_sql()} WHERE id = ?", (version_id,))
        return rows.to_version(found[0], self.dialect) if found else None

    def get_version_by_number(self, record_id: str, number: int) -> Version | None:
        found = self._read(
            f"{self._versions_sql()} WHERE record_id = ? AND number = ?", (record_id, number)
        )
        return rows.to_version(found[0], self.dialect) if found else None

    def list_versions(
        self, record_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Version]:
        bound = "" if limit is None else f" LIMIT {int(limit)}"
        found = self._read(
            f"{self._versions_sql()} WHERE record_id = ? AND number > ? ORDER BY number{bound}",
            (record_id, after),
        )
        return [rows.to_version(row, self.dialect) for row in found]

    def query_records(self, query: RecordQuery, **reach: Unpack[RecordReach]) -> list[Record]:
        # a misspelt key would otherwise drop a filter, and with it a limit on who sees what
        check_names(reach, keys_of(RecordReach))
        d = self.dialect
        conditions = Where(self.dialect)
        add = conditions.add
        if scope_globs := reach["scope_globs"]:
            add(*any_of(d.glob("r.scope", glob) for glob in scope_globs))
        if query.scope:
            add(*d.glob("r.scope", query.scope))
        if query.kinds:
            add(*d.in_list("r.kind", list(query.kinds)))
        if query.statuses:
            add(*d.in_list("r.status", [s.value for s in query.statuses]))
        if query.created_after:
            add("r.created_at >= ?", [d.time(query.created_after)])
        if query.created_before:
            add("r.created_at < ?", [d.time(query.created_before)])
        for key, value in query.metadata.items():
            add(*d.json_equals("v.content", ("metadata", key), value))
        if query.after is not None:
            add("r.id > ?", [query.after])
        if (readable := reach.get("readable")) is not None:
            test, values = to_sql(readable, d)
            add(f"EXISTS (SELECT 1 FROM chunks c WHERE c.record_id = r.id AND {test})", values)
        found = self._read(
            f"{self._records_sql()}{conditions.sql()} ORDER BY r.id LIMIT ? OFFSET ?",
            [*conditions.params, query.limit, query.offset],
        )
        return [rows.to_record(row, d) for row in found]

    def records_by_graph_key(
        self, key: str, kinds: Sequence[str], scope_globs: Sequence[str]
    ) -> list[Record]:
        d = self.dialect
        if not scope_globs:
            return []
        in_scopes, scope_params = any_of(d.glob("r.scope", glob) for glob in scope_globs)
        # The versions that ever carried the key (the index), then their records whose
        # head still carries it. Kinds are checked on the few rows found: a test on the
        # kind here, or a plain join, has the planner walk every record instead.
        sql = (
            f"{self._records_sql()} WHERE r.id IN (SELECT g.record_id FROM versions g "
            f"WHERE {d.graph_key('g.content')} = ?) AND {d.graph_key('v.content')} = ? "
            f"AND {in_scopes} ORDER BY r.id LIMIT 100"
        )
        found = [rows.to_record(row, d) for row in self._read(sql, [key, key, *scope_params])]
        return [record for record in found if record.kind in kinds][:10]

    def find_by_hashes(self, scope: str, content_hashes: Sequence[str]) -> list[Record]:
        found: list[Row] = []
        for test, params in self._in_batches("r.content_hash", content_hashes):
            found += self._read(
                f"{self._records_sql()} WHERE r.scope = ? AND {test}", [scope, *params]
            )
        return [rows.to_record(row, self.dialect) for row in sorted(found, key=lambda r: r["id"])]

    # ---- proposals, audit, baselines, links ----------------------------------------------

    def get_proposal(self, proposal_id: str) -> Proposal | None:
        found = self._read(f"{self._proposals_sql()} WHERE id = ?", (proposal_id,))
        return rows.to_proposal(found[0], self.dialect) if found else None

    def list_proposals(self, **listing: Unpack[ProposalPage]) -> list[Proposal]:
        """Proposals by id, bounded here (``narrow``: the review queue's filters)."""
        # a misspelt key would otherwise drop a filter, and with it a limit on who sees what
        check_names(listing, keys_of(ProposalPage))
        conditions = Where(self.dialect)
        if (narrow := listing.get("narrow")) is not None:
            self._narrow_proposals(narrow, conditions)
        status = listing.get("status")
        conditions.equal("status", status.value if status is not None else None)
        if (after := listing.get("after")) is not None:
            conditions.add("id > ?", [after])
        proposer, scope_globs = listing.get("proposer"), listing.get("scope_globs")
        if proposer is not None or scope_globs is not None:
            conditions.add(*self._proposals_seen(proposer, scope_globs or ()))
        found = self._read(
            f"{self._proposals_sql()}{conditions.sql()} ORDER BY id LIMIT ? OFFSET ?",
            [*conditions.params, listing.get("limit", 100), listing.get("offset", 0)],
        )
        return [rows.to_proposal(row, self.dialect) for row in found]

    def _proposals_seen(
        self, proposer: str | None, scope_globs: Sequence[str]
    ) -> tuple[str, list[Any]]:
        """Proposals by ``proposer`` or in a scope one of ``scope_globs`` matches."""
        by_proposer = [] if proposer is None else [("principal_id = ?", [proposer])]
        in_scopes = [self.dialect.glob("scope", glob) for glob in scope_globs]
        return any_of([*by_proposer, *in_scopes])

    def _narrow_proposals(self, narrow: ProposalFilter, conditions: Where) -> None:
        conditions.equal("op", narrow.op)
        conditions.equal("principal_id", narrow.author)
        conditions.equal("rule", narrow.rule)
        if narrow.scope is not None:
            conditions.add(*self.dialect.glob("scope", narrow.scope))
        if narrow.created_before is not None:
            conditions.add("created_at < ?", [self.dialect.time(narrow.created_before)])
        if narrow.kind is not None:
            # new content names its kind; any other change is about a stored record's
            path = ("content", "kind")
            in_content, values = self.dialect.json_equals("change", path, narrow.kind)
            conditions.add(
                f"({in_content} OR record_id IN (SELECT id FROM records WHERE kind = ?))",
                [*values, narrow.kind],
            )

    def count_proposals(
        self, *, proposer: str, scope_globs: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Proposals by ``proposer`` or in a scope a glob matches, counted by status."""
        seen, params = self._proposals_seen(proposer, scope_globs or ())
        found = self._read(
            f"SELECT status, COUNT(*) AS n FROM proposals WHERE {seen} GROUP BY status", params
        )
        return {str(row["status"]): int(row["n"]) for row in found}

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        conditions = Where(self.dialect)
        conditions.equal("actor", query.actor)
        conditions.equal("action", query.action)
        conditions.equal("proposal_id", query.proposal_id)
        conditions.equal("rule", query.rule)
        if query.subject_id is not None:
            # a batch write's one entry names its records in details.records
            listed = self.dialect.json_array_has("details", "records")
            conditions.add(f"(subject_id = ? OR {listed})", [query.subject_id] * 2)
        if query.since:
            conditions.add("at >= ?", [self.dialect.time(query.since)])
        if query.until:
            conditions.add("at < ?", [self.dialect.time(query.until)])
        if query.after_seq is not None:
            conditions.add("seq > ?", [query.after_seq])
        found = self._read(
            f"SELECT * FROM audit{conditions.sql()} ORDER BY seq LIMIT ?",
            [*conditions.params, query.limit],
        )
        return [rows.to_audit(row, self.dialect) for row in found]

    def count_audit(self) -> int:
        return self._count("SELECT COUNT(*) AS n FROM audit")

    def audit_head(self) -> int:
        found = self._read("SELECT MAX(seq) AS n FROM audit")
        return int(found[0]["n"] or 0) if found else 0

    def _baselines(self, where: str, params: Sequence[Any]) -> list[Baseline]:
        found = self._read(f"SELECT * FROM baselines b {where} ORDER BY b.id", params)
        pins: dict[str, dict[str, str]] = {row["id"]: {} for row in found}
        if pins:
            for pin in self._by_ids(
                "SELECT baseline_id, record_id, version_id FROM baseline_pins",
                list(pins),
                "baseline_id",
            ):
                pins[pin["baseline_id"]][pin["record_id"]] = pin["version_id"]
        return [rows.to_baseline(row, pins[row["id"]], self.dialect) for row in found]

    def get_baseline(self, baseline_id: str) -> Baseline | None:
        found = self._baselines("WHERE b.id = ?", (baseline_id,))
        return found[0] if found else None

    def published_baseline_id(self, scope: str) -> str | None:
        found = self._read("SELECT baseline_id FROM published WHERE scope = ?", (scope,))
        return str(found[0]["baseline_id"]) if found else None

    def list_baselines(self, scope: str | None = None) -> list[Baseline]:
        if scope is None:
            return self._baselines("", ())
        return self._baselines("WHERE b.scope = ?", (scope,))

    def list_path_links(self, record_id: str | None = None) -> list[PathLink]:
        if record_id is None:
            found = self._read("SELECT * FROM path_links ORDER BY record_id, path")
        else:
            found = self._read(
                "SELECT * FROM path_links WHERE record_id = ? ORDER BY path", (record_id,)
            )
        return [rows.to_path_link(row, self.dialect) for row in found]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for table in ("records", "versions", "proposals", "audit", "baselines"):
            out[table] = self._count(f"SELECT COUNT(*) AS n FROM {table}")
        for table in ("records", "proposals"):
            for row in self._read(f"SELECT status, COUNT(*) AS n FROM {table} GROUP BY status"):
                out[f"{table}.{row['status']}"] = int(row["n"])
        return out

    # ---- the retrieval index --------------------------------------------------------------

    def acls(self) -> list[AclRow]:
        d = self.dialect
        return [
            AclRow(
                id=int(row["id"]),
                roles=tuple(d.json(row["roles"])),
                labels=tuple(d.json(row["labels"])),
                sensitivity=int(row["sensitivity"]),
            )
            for row in self._read("SELECT id, roles, labels, sensitivity FROM acls ORDER BY id")
        ]

    def scopes(self) -> dict[int, str]:
        return {int(row["id"]): row["scope"] for row in self._read("SELECT id, scope FROM scopes")}

    def record_ids(self, where: ChunkFilter, prefix: str, limit: int) -> list[str]:
        sql, params = to_sql(where, self.dialect)
        found = self._read(
            f"SELECT DISTINCT c.record_id AS id FROM chunks c WHERE {sql} AND c.record_id >= ? "
            "ORDER BY c.record_id LIMIT ?",
            [*params, prefix, limit],
        )
        return [str(row["id"]) for row in found if str(row["id"]).startswith(prefix)][:limit]

    def count_records(self, where: ChunkFilter) -> dict[str, int]:
        sql, params = to_sql(where, self.dialect)
        found = self._read(
            "SELECT c.status AS status, COUNT(DISTINCT c.record_id) AS n FROM chunks c "
            f"WHERE {sql} GROUP BY c.status",
            params,
        )
        return {str(row["status"]): int(row["n"]) for row in found}

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        title = self.dialect.json_field("v.content", "title")
        found = self._by_ids(
            f"SELECT {rows.META_COLUMNS}, c.version_no, c.chunk_key, c.heading, c.span_start, "
            f"c.span_end, c.text, {title} AS title "
            "FROM chunks c JOIN versions v ON v.id = c.version_id",
            [int(i) for i in chunk_ids],
            "c.id",
        )
        return {int(row["id"]): rows.to_chunk_row(row, self.dialect) for row in found}

    def chunk_metas(self, chunk_ids: Sequence[int]) -> dict[int, ChunkMeta]:
        found = self._by_ids(
            f"SELECT {rows.META_COLUMNS} FROM chunks c", [int(i) for i in chunk_ids], "c.id"
        )
        return {int(row["id"]): rows.to_meta(row, self.dialect) for row in found}

    def heads_readable(self, record_ids: Collection[str], acl_ids: Collection[int]) -> set[str]:
        if not record_ids or not acl_ids:
            return set()
        acl_sql, acl_params = self.dialect.in_list("c.acl_id", sorted(acl_ids))
        head = self.dialect.flag("c.is_head", True)
        readable: set[str] = set()
        for test, params in self._in_batches("c.record_id", sorted(record_ids)):
            found = self._read(
                f"SELECT DISTINCT c.record_id FROM chunks c WHERE {test} AND {head} AND {acl_sql}",
                [*params, *acl_params],
            )
            readable.update(str(row["record_id"]) for row in found)
        return readable

    def index_seq(self) -> int:
        return self._count("SELECT COALESCE(MAX(seq), 0) AS n FROM chunks")

    def chunk_changes(self, since_seq: int, limit: int = 50_000) -> list[ChunkMeta]:
        found = self._read(
            f"SELECT {rows.META_COLUMNS} FROM chunks c WHERE c.seq > ? "
            "ORDER BY c.seq, c.id LIMIT ?",
            (since_seq, limit),
        )
        return [rows.to_meta(row, self.dialect) for row in found]

    def vector_lag(self, model: str) -> int:
        # Counted from where a scan for waiting chunks starts (``vectors_from``): what waits
        # lies there or after, so a status read costs the backlog, not the whole store.
        order = f"c.{self._pending_order}"
        return self._count(
            f"SELECT COUNT(DISTINCT c.text_hash) AS n FROM chunks c WHERE {order} >= ? "
            "AND NOT EXISTS "
            "(SELECT 1 FROM vectors x WHERE x.text_hash = c.text_hash AND x.model = ?)",
            (self.vectors_from(model), model),
        )

    def vectors_from(self, model: str) -> int:
        """Where a scan for chunks still waiting for ``model``'s vector may start (in
        ``_pending_order``): every chunk before it has one. The furthest of this process's
        cursor and the one the store kept at its last write of vectors (``put_vectors``),
        so a new process neither scans nor counts from the first chunk again."""
        kept = self._read("SELECT value FROM index_meta WHERE key = ?", (VECTORS_FROM + model,))
        return max(self._pending_cursor.get(model, 0), int(kept[0]["value"]) if kept else 0)

    def count_unembedded(
        self, model: str, where: ChunkFilter, after_seq: int, most: int
    ) -> int | None:
        # The scan stops after ``most`` chunks, whatever the reader may see, so that a read
        # during a large import costs a bounded look, not one that grows with the backlog;
        # one more row is read to tell whether it stopped short. The order makes PostgreSQL
        # walk the seq index from ``after_seq`` (without it, it may scan the whole table).
        sql, params = to_sql(where, self.dialect)
        (found,) = self._read(
            "SELECT COUNT(*) AS scanned, coalesce(SUM(CASE WHEN "
            f"{sql} AND NOT EXISTS (SELECT 1 FROM vectors x "
            "WHERE x.text_hash = c.text_hash AND x.model = ?) THEN 1 ELSE 0 END), 0) AS n "
            f"FROM (SELECT {rows.META_COLUMNS} FROM chunks c WHERE c.seq > ? ORDER BY c.seq "
            "LIMIT ?) AS c",
            [*params, model, after_seq, most + 1],
        )
        return None if int(found["scanned"]) > most else int(found["n"])

    def pending_vectors(self, model: str, limit: int) -> list[tuple[str, str]]:
        # Scan forward, in commit order, from the first chunk that was still waiting last
        # time: everything before it had a vector, so catching up costs O(chunks), not
        # O(chunks²) (a rescan of every chunk per batch took over eight minutes for 240k
        # timeline chunks at 1M events). ``_pending_order`` names the column that follows
        # commit order on this store, so no chunk committed later can appear behind the
        # cursor.
        order = f"c.{self._pending_order}"
        title = self.dialect.json_field("v.content", "title")
        cursors = self._pending_cursor
        found = self._read(
            f"SELECT {order}, c.text_hash, c.heading, c.text, coalesce({title}, '') AS title "
            "FROM chunks c LEFT JOIN versions v ON v.id = c.version_id "
            f"WHERE {order} >= ? AND NOT EXISTS (SELECT 1 FROM vectors x "
            f"WHERE x.text_hash = c.text_hash AND x.model = ?) ORDER BY {order} LIMIT ?",
            (self.vectors_from(model), model, limit),
        )
        if found:
            cursors[model] = int(found[0][self._pending_order])
        texts: dict[str, str] = {}
        for r in found:
            texts.setdefault(r["text_hash"], embed_input(r["title"], r["heading"], r["text"]))
        return list(texts.items())

    def get_vectors(self, model: str, text_hashes: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for test, params in self._in_batches("text_hash", text_hashes):
            for row in self._read(
                f"SELECT text_hash, vector FROM vectors WHERE model = ? AND {test}",
                [model, *params],
            ):
                found[row["text_hash"]] = bytes(row["vector"])
        return found

    def chunk_vectors(self, model: str, chunk_ids: Sequence[int]) -> dict[int, bytes]:
        # A large store's searches read their finalists' vectors here (``Indexer``): a
        # random row or two of the largest table each, which the operating system may have
        # paged out. Cut into a few reads that the store may run side by side, the waits
        # on the disk overlap (150 rows of a 1M-chunk store, page cache dropped: median
        # 161 ms in one read, 87 ms in four; bench/vector_reads.py, docs/benchmarks.md).
        ids = list(dict.fromkeys(chunk_ids))
        parts = self.vector_read_parts if len(ids) >= _VECTOR_READ_SPREAD_FROM else 1
        statements = [
            (
                "SELECT c.id, x.vector FROM chunks c JOIN vectors x "
                f"ON x.text_hash = c.text_hash AND x.model = ? WHERE {test}",
                [model, *params],
            )
            for part in range(parts)
            for test, params in self._in_batches("c.id", ids[part::parts])
        ]
        return {
            int(row["id"]): bytes(row["vector"])
            for found in self._read_each(statements)
            for row in found
        }

    # ---- the whole store, in load order ---------------------------------------------------

    def _dump(self, run: Callable[[str], Iterator[Row]]) -> Iterator[Dumped]:
        """Every stored row in ``import_rows`` order; ``run`` streams one statement's rows
        from the store's snapshot."""
        d = self.dialect
        for row in run(f"{self._records_sql()} ORDER BY r.id"):
            yield rows.to_record(row, d)
        for row in run(f"{self._versions_sql()} ORDER BY record_id, number"):
            yield rows.to_version(row, d)
        for row in run(f"{self._proposals_sql()} ORDER BY id"):
            yield rows.to_proposal(row, d)
        for row in run("SELECT * FROM audit ORDER BY seq"):
            yield rows.to_audit(row, d)
        baseline_rows = list(run("SELECT * FROM baselines ORDER BY id"))
        pins: dict[str, dict[str, str]] = {row["id"]: {} for row in baseline_rows}
        for pin in run("SELECT baseline_id, record_id, version_id FROM baseline_pins"):
            pins[pin["baseline_id"]][pin["record_id"]] = pin["version_id"]
        for row in baseline_rows:
            yield rows.to_baseline(row, pins[row["id"]], d)
        for row in run("SELECT * FROM published ORDER BY scope"):
            yield rows.to_published(row, d)
        for row in run("SELECT * FROM edges ORDER BY id"):
            yield rows.to_edge(row, d)
        for row in run("SELECT * FROM path_links ORDER BY record_id, path"):
            yield rows.to_path_link(row, d)
        for row in run("SELECT * FROM events ORDER BY seq"):
            yield rows.to_event(row, d)
