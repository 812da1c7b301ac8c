"""Versioned schema migrations for the PostgreSQL store. Append new steps; never edit old ones.

Zero bypass is enforced by the database itself, with two roles (both ``NOLOGIN`` groups that
login roles are made members of):

``cairn_owner``
    owns the ``cairn`` schema, every table and the ``cairn_commit(jsonb)`` function.
    Migrations and ``cairn import`` act as this role (``SET ROLE cairn_owner``).
``cairn_serving``
    what serving processes act as: ``SELECT`` on the tables and ``EXECUTE`` on
    ``cairn_commit``, nothing else. ``cairn_commit`` is ``SECURITY DEFINER``: it runs with the
    owner's rights, applies a batch of change sets in the caller's transaction, checks their
    preconditions under row locks and writes each change set's audit entry, so a serving
    process can change memory only in audited, precondition-checked units, and a plain
    ``INSERT``/``UPDATE``/``DELETE`` from it fails with ``insufficient_privilege``.

Versions and the audit log are append-only for everyone, owner included (triggers).

A step is SQL run as ``cairn_owner`` plus optional ``admin_sql`` run first as the connecting
login (for what only a superuser may do, such as ``CREATE EXTENSION vector``).

Steps: 1 ``kernel`` (memory tables, ``cairn_commit``); 2 ``retrieval`` (the derived index:
chunks with a weighted ``tsvector`` under GIN, interned ACLs and scopes, the embedding cache
with a pgvector column and per-dimension HNSW indexes; ``cairn_commit`` replaced to index
versions as it stores them, and ``cairn_put_vectors``, the one other function ``cairn_serving``
may call, which only adds to the embedding cache); 3 ``scope_reach`` (a btree on the chunks'
scope and a per-scope chunk count kept by a trigger, so keyword search of a few small scopes
keeps every query word: ``PostgresStore.keyword_reach``); 4 ``utc_times`` (a one-time repair:
validity times stored without a time zone are given UTC's).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import tuple_row

from cairn.errors import StoreError

SCHEMA = "cairn"
OWNER_ROLE = "cairn_owner"
SERVING_ROLE = "cairn_serving"

# pg_advisory_xact_lock keys (two int4 form). Advisory locks are per database.
LOCK_CLASS = 0x6361_6972  # "cair"
MIGRATION_LOCK = (LOCK_CLASS, 1)
AUDIT_LOCK = (LOCK_CLASS, 2)
PUBLISHED_LOCK_CLASS = LOCK_CLASS + 1  # second key: hashtext(scope)

# SQLSTATE raised by cairn_commit when a precondition no longer holds (mapped to Conflict).
CONFLICT_SQLSTATE = "CR409"


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str  # run as cairn_owner, inside the migration transaction
    admin_sql: str = ""  # run first as the connecting login (needs superuser for extensions)


_KERNEL = r"""
CREATE TABLE records (
    id text COLLATE "C" PRIMARY KEY,
    kind text NOT NULL,
    scope text COLLATE "C" NOT NULL,
    status text NOT NULL,
    current_version_id text COLLATE "C" NOT NULL,
    current_version integer NOT NULL,
    content_hash text NOT NULL,
    sensitivity smallint NOT NULL,
    superseded_by text COLLATE "C",
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    status_changed_at timestamptz NOT NULL,
    created_by text NOT NULL
);
CREATE INDEX records_scope_hash ON records (scope, content_hash);
CREATE INDEX records_kind_status ON records (kind, status);
CREATE INDEX records_created ON records (created_at);

CREATE TABLE versions (
    id text COLLATE "C" PRIMARY KEY,
    record_id text COLLATE "C" NOT NULL REFERENCES records (id),
    number integer NOT NULL,
    content jsonb NOT NULL,
    content_hash text NOT NULL,
    created_at timestamptz NOT NULL,
    created_by text NOT NULL,
    proposal_id text COLLATE "C",
    UNIQUE (record_id, number)
);

CREATE TABLE proposals (
    id text COLLATE "C" PRIMARY KEY,
    op text NOT NULL,
    scope text COLLATE "C" NOT NULL,
    record_id text COLLATE "C",
    base_version_id text COLLATE "C",
    base_baseline_id text COLLATE "C",
    principal_id text NOT NULL,
    principal_roles jsonb NOT NULL,
    status text NOT NULL,
    change jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    reason text,
    rule text,
    decided_by text,
    decided_at timestamptz,
    rebased_from text COLLATE "C",
    rebased_to text COLLATE "C",
    result_record_id text COLLATE "C",
    result_version_id text COLLATE "C"
);
CREATE INDEX proposals_status ON proposals (status, id);

-- seq is assigned by cairn_commit under a lock held until commit, so it is gapless and in
-- commit order: a reader tailing the log by seq never misses an entry committed later.
CREATE TABLE audit (
    seq bigint PRIMARY KEY,
    id text COLLATE "C" NOT NULL UNIQUE,
    at timestamptz NOT NULL,
    actor text NOT NULL,
    actor_roles jsonb NOT NULL,
    action text NOT NULL,
    subject_id text COLLATE "C",
    proposal_id text COLLATE "C",
    rule text,
    reason text,
    from_status text,
    to_status text,
    details jsonb NOT NULL
);
CREATE INDEX audit_subject ON audit (subject_id);

CREATE TABLE baselines (
    id text COLLATE "C" PRIMARY KEY,
    scope text COLLATE "C" NOT NULL,
    name text,
    created_at timestamptz NOT NULL,
    created_by text NOT NULL,
    proposal_id text COLLATE "C"
);
CREATE TABLE baseline_pins (
    baseline_id text COLLATE "C" NOT NULL REFERENCES baselines (id),
    record_id text COLLATE "C" NOT NULL,
    version_id text COLLATE "C" NOT NULL REFERENCES versions (id),
    PRIMARY KEY (baseline_id, record_id)
);
CREATE TABLE published (
    scope text COLLATE "C" PRIMARY KEY,
    baseline_id text COLLATE "C" NOT NULL REFERENCES baselines (id),
    updated_at timestamptz NOT NULL
);

CREATE TABLE edges (
    src text COLLATE "C" NOT NULL,
    dst text COLLATE "C" NOT NULL,
    type text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    ord bigint GENERATED ALWAYS AS IDENTITY,  -- insertion order, to break created_at ties
    PRIMARY KEY (src, dst, type)
);
CREATE INDEX edges_dst ON edges (dst);

CREATE TABLE path_links (
    record_id text COLLATE "C" NOT NULL REFERENCES records (id),
    path text COLLATE "C" NOT NULL,
    content_hash text,
    drifted boolean NOT NULL DEFAULT false,
    PRIMARY KEY (record_id, path)
);

-- Append-only by construction: history can be added to, never rewritten, by anyone.
CREATE FUNCTION forbid_rewrite() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'CR423';
END
$fn$;
CREATE TRIGGER versions_append_only BEFORE UPDATE OR DELETE ON versions
    FOR EACH ROW EXECUTE FUNCTION forbid_rewrite();
CREATE TRIGGER versions_no_truncate BEFORE TRUNCATE ON versions
    FOR EACH STATEMENT EXECUTE FUNCTION forbid_rewrite();
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION forbid_rewrite();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION forbid_rewrite();

-- The one write path. ``changesets`` is a JSON array of
--   {"audit": {audit row}, "expects": [{"t": ...}], "writes": [{"t": ..., "row": {...}}]}
-- built by cairn.store.postgres from the kernel's ChangeSets. Preconditions are checked
-- under row locks (or a per-scope advisory lock for a scope's published pointer, which may
-- not exist yet), so two concurrent commits cannot both pass one; audit entries are
-- appended last, under a database-wide lock held until commit.
CREATE FUNCTION cairn_commit(changesets jsonb) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = cairn, pg_temp
SET TimeZone = 'UTC'
AS $fn$
DECLARE
    cs jsonb;
    e jsonb;
    w jsonb;
    audits jsonb[] := '{}';
    a jsonb;
    seqs bigint[] := '{}';
    next_seq bigint;
    cur_version text;
    cur_status text;
    cur_baseline text;
BEGIN
    IF jsonb_typeof(changesets) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'cairn_commit takes a JSON array of change sets' USING ERRCODE = '22023';
    END IF;
    FOR cs IN SELECT value FROM jsonb_array_elements(changesets) LOOP
        IF jsonb_typeof(cs -> 'audit') IS DISTINCT FROM 'object'
           OR coalesce(cs -> 'audit' ->> 'id', '') = '' THEN
            RAISE EXCEPTION 'every change set carries exactly one audit entry'
                USING ERRCODE = '22023';
        END IF;
        FOR e IN SELECT value FROM jsonb_array_elements(coalesce(cs -> 'expects', '[]')) LOOP
            CASE e ->> 't'
            WHEN 'record' THEN
                SELECT current_version_id, status INTO cur_version, cur_status
                    FROM records WHERE id = e ->> 'record_id' FOR UPDATE;
                IF e -> 'version_id' IS NULL OR e -> 'version_id' = 'null' THEN
                    IF FOUND THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR409',
                            MESSAGE = format('record %s already exists', e ->> 'record_id'),
                            DETAIL = jsonb_build_object('record_id', e ->> 'record_id')::text;
                    END IF;
                ELSIF NOT FOUND OR cur_version IS DISTINCT FROM e ->> 'version_id' THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('record %s changed since version %s was read',
                                         e ->> 'record_id', e ->> 'version_id'),
                        DETAIL = jsonb_build_object('record_id', e ->> 'record_id')::text;
                ELSIF e ->> 'status' IS NOT NULL AND cur_status IS DISTINCT FROM e ->> 'status'
                THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('record %s is now %s', e ->> 'record_id', cur_status),
                        DETAIL = jsonb_build_object('record_id', e ->> 'record_id')::text;
                END IF;
            WHEN 'proposal' THEN
                SELECT status INTO cur_status
                    FROM proposals WHERE id = e ->> 'proposal_id' FOR UPDATE;
                IF NOT FOUND OR cur_status IS DISTINCT FROM e ->> 'status' THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('proposal %s was decided by someone else meanwhile',
                                         e ->> 'proposal_id'),
                        DETAIL = jsonb_build_object('proposal_id', e ->> 'proposal_id')::text;
                END IF;
            WHEN 'published' THEN
                PERFORM pg_advisory_xact_lock(1667328371, hashtext(e ->> 'scope'));
                SELECT baseline_id INTO cur_baseline FROM published WHERE scope = e ->> 'scope';
                IF cur_baseline IS DISTINCT FROM e ->> 'baseline_id' THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('the published baseline of %s changed meanwhile',
                                         e ->> 'scope'),
                        DETAIL = jsonb_build_object('scope', e ->> 'scope')::text;
                END IF;
            ELSE
                RAISE EXCEPTION 'unknown precondition %', e ->> 't' USING ERRCODE = '22023';
            END CASE;
        END LOOP;

        FOR w IN SELECT value FROM jsonb_array_elements(coalesce(cs -> 'writes', '[]')) LOOP
            CASE w ->> 't'
            WHEN 'record' THEN
                INSERT INTO records (id, kind, scope, status, current_version_id,
                    current_version, content_hash, sensitivity, superseded_by, created_at,
                    updated_at, status_changed_at, created_by)
                SELECT r.id, r.kind, r.scope, r.status, r.current_version_id,
                    r.current_version, r.content_hash, r.sensitivity, r.superseded_by,
                    r.created_at, r.updated_at, r.status_changed_at, r.created_by
                FROM jsonb_populate_record(NULL::records, w -> 'row') r
                ON CONFLICT (id) DO UPDATE SET status = excluded.status,
                    current_version_id = excluded.current_version_id,
                    current_version = excluded.current_version,
                    content_hash = excluded.content_hash, sensitivity = excluded.sensitivity,
                    superseded_by = excluded.superseded_by, updated_at = excluded.updated_at,
                    status_changed_at = excluded.status_changed_at;
            WHEN 'version' THEN
                INSERT INTO versions (id, record_id, number, content, content_hash,
                    created_at, created_by, proposal_id)
                SELECT v.id, v.record_id, v.number, v.content, v.content_hash, v.created_at,
                    v.created_by, v.proposal_id
                FROM jsonb_populate_record(NULL::versions, w -> 'row') v;
            WHEN 'proposal' THEN
                INSERT INTO proposals (id, op, scope, record_id, base_version_id,
                    base_baseline_id, principal_id, principal_roles, status, change,
                    created_at, reason, rule, decided_by, decided_at, rebased_from, rebased_to,
                    result_record_id, result_version_id)
                SELECT p.id, p.op, p.scope, p.record_id, p.base_version_id,
                    p.base_baseline_id, p.principal_id, p.principal_roles, p.status, p.change,
                    p.created_at, p.reason, p.rule, p.decided_by, p.decided_at,
                    p.rebased_from, p.rebased_to, p.result_record_id, p.result_version_id
                FROM jsonb_populate_record(NULL::proposals, w -> 'row') p
                ON CONFLICT (id) DO UPDATE SET
                    (op, scope, record_id, base_version_id, base_baseline_id, principal_id,
                     principal_roles, status, change, created_at, reason, rule, decided_by,
                     decided_at, rebased_from, rebased_to, result_record_id,
                     result_version_id)
                  = (excluded.op, excluded.scope, excluded.record_id,
                     excluded.base_version_id, excluded.base_baseline_id,
                     excluded.principal_id, excluded.principal_roles, excluded.status,
                     excluded.change, excluded.created_at, excluded.reason, excluded.rule,
                     excluded.decided_by, excluded.decided_at, excluded.rebased_from,
                     excluded.rebased_to, excluded.result_record_id,
                     excluded.result_version_id);
            WHEN 'baseline' THEN
                INSERT INTO baselines (id, scope, name, created_at, created_by, proposal_id)
                SELECT b.id, b.scope, b.name, b.created_at, b.created_by, b.proposal_id
                FROM jsonb_populate_record(NULL::baselines, w -> 'row') b;
                INSERT INTO baseline_pins (baseline_id, record_id, version_id)
                SELECT w -> 'row' ->> 'id', p.key, p.value
                FROM jsonb_each_text(coalesce(w -> 'pins', '{}')) p;
            WHEN 'published' THEN
                PERFORM pg_advisory_xact_lock(1667328371, hashtext(w -> 'row' ->> 'scope'));
                INSERT INTO published (scope, baseline_id, updated_at)
                SELECT p.scope, p.baseline_id, p.updated_at
                FROM jsonb_populate_record(NULL::published, w -> 'row') p
                ON CONFLICT (scope) DO UPDATE SET baseline_id = excluded.baseline_id,
                    updated_at = excluded.updated_at;
            WHEN 'edge' THEN
                INSERT INTO edges (src, dst, type, created_at)
                SELECT g.src, g.dst, g.type, g.created_at
                FROM jsonb_populate_record(NULL::edges, w -> 'row') g
                ON CONFLICT DO NOTHING;
            WHEN 'path_link' THEN
                INSERT INTO path_links (record_id, path, content_hash, drifted)
                SELECT l.record_id, l.path, l.content_hash, l.drifted
                FROM jsonb_populate_record(NULL::path_links, w -> 'row') l
                ON CONFLICT (record_id, path) DO UPDATE SET
                    content_hash = excluded.content_hash, drifted = excluded.drifted;
            ELSE
                RAISE EXCEPTION 'unknown write %', w ->> 't' USING ERRCODE = '22023';
            END CASE;
        END LOOP;
        audits := audits || (cs -> 'audit');
    END LOOP;

    -- Held until commit: seqs are gapless and follow commit order.
    PERFORM pg_advisory_xact_lock(1667328370, 2);
    SELECT coalesce(max(seq), 0) INTO next_seq FROM audit;
    FOREACH a IN ARRAY audits LOOP
        next_seq := next_seq + 1;
        INSERT INTO audit (seq, id, at, actor, actor_roles, action, subject_id, proposal_id,
            rule, reason, from_status, to_status, details)
        SELECT next_seq, x.id, x.at, x.actor, x.actor_roles, x.action, x.subject_id,
            x.proposal_id, x.rule, x.reason, x.from_status, x.to_status, x.details
        FROM jsonb_populate_record(NULL::audit, a) x;
        seqs := seqs || next_seq;
    END LOOP;
    RETURN seqs;
END
$fn$;

REVOKE ALL ON FUNCTION cairn_commit(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cairn_commit(jsonb) TO cairn_serving;
GRANT USAGE ON SCHEMA cairn TO cairn_serving;
GRANT SELECT ON ALL TABLES IN SCHEMA cairn TO cairn_serving;
-- Tables added by later steps are readable by the serving role without another GRANT;
-- functions are not executable by PUBLIC unless a step grants it explicitly.
ALTER DEFAULT PRIVILEGES FOR ROLE cairn_owner IN SCHEMA cairn
    GRANT SELECT ON TABLES TO cairn_serving;
ALTER DEFAULT PRIVILEGES FOR ROLE cairn_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
"""

_RETRIEVAL = r"""
-- The pgvector extension may live in any schema (a superuser installed it, or admin_sql
-- did, in public): resolve its types and operator classes for this step.
DO $do$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector';
    IF ext_schema IS NULL THEN
        RAISE EXCEPTION 'the pgvector extension is not installed (CREATE EXTENSION vector)'
            USING ERRCODE = '42704';
    END IF;
    PERFORM set_config('search_path', format('cairn, %I, public', ext_schema), true);
END
$do$;

-- Retrieval indexes. Chunks are derived from versions (never edited, never deleted); their
-- filter columns (status, head, superseded) follow the record's state so that permission
-- and lifecycle trimming happen inside the index, before ranking. Only cairn_commit (and
-- import, as the owner) writes them; the serving role reads them.
CREATE TABLE acls (
    id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    roles jsonb NOT NULL,
    labels jsonb NOT NULL,
    sensitivity smallint NOT NULL,
    UNIQUE (roles, labels, sensitivity)
);
CREATE TABLE scopes (
    id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    scope text COLLATE "C" NOT NULL UNIQUE
);
-- 'seq': the last chunk change number; 'chunks': how many chunks exist (chunk_count).
CREATE TABLE index_meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO index_meta (key, value) VALUES ('seq', 0), ('chunks', 0);

CREATE TABLE chunks (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    record_id text COLLATE "C" NOT NULL REFERENCES records (id),
    version_id text COLLATE "C" NOT NULL REFERENCES versions (id),
    version_no integer NOT NULL,
    chunk_key text COLLATE "C" NOT NULL,
    heading text NOT NULL,
    span_start integer NOT NULL,
    span_end integer NOT NULL,
    text text NOT NULL,
    text_hash text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    scope_id integer NOT NULL REFERENCES scopes (id),
    acl_id integer NOT NULL REFERENCES acls (id),
    status text NOT NULL,
    is_head boolean NOT NULL,
    superseded boolean NOT NULL,
    valid_from timestamptz,
    valid_to timestamptz,
    created_at timestamptz NOT NULL,
    seq bigint NOT NULL,
    -- title 'A', heading 'B', text 'C'; 'english' stems and drops stopwords.
    tsv tsvector NOT NULL,
    UNIQUE (version_id, chunk_key)
);
CREATE INDEX chunks_record ON chunks (record_id);
CREATE INDEX chunks_seq ON chunks (seq);
CREATE INDEX chunks_text_hash ON chunks (text_hash);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);

-- The embedding cache, keyed by content hash: "vector" (float32 little-endian bytes) is what
-- the kernel's in-memory catalog loads; "embedding" is the same vector as a pgvector value
-- for server-side search. Models differ in dimension, so the column is untyped and each
-- common dimension has its own partial HNSW index over a typed cast; a query uses one with
--   WHERE dim = 384 AND model = $1 ORDER BY embedding::vector(384) <=> $2 LIMIT k
CREATE TABLE vectors (
    text_hash text COLLATE "C" NOT NULL,
    model text COLLATE "C" NOT NULL,
    dim integer NOT NULL CHECK (dim > 0),
    vector bytea NOT NULL CHECK (octet_length(vector) = 4 * dim),
    embedding vector NOT NULL CHECK (vector_dims(embedding) = dim),
    PRIMARY KEY (text_hash, model)
);
CREATE INDEX vectors_hnsw_384 ON vectors USING hnsw ((embedding::vector(384)) vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE dim = 384;
CREATE INDEX vectors_hnsw_768 ON vectors USING hnsw ((embedding::vector(768)) vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE dim = 768;
CREATE INDEX vectors_hnsw_1536 ON vectors
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE dim = 1536;

-- Index one version's chunks (a JSON array of {chunk_key, heading, start, end, text,
-- text_hash} cut by the kernel's chunker). Everything else (kind, scope, ACL, validity,
-- title, the record's state) is read from the stored version and record, so a chunk's
-- filter columns cannot disagree with the memory they index. New chunks get seq 0 until
-- cairn_stamp_chunks numbers them at commit. Returns the new chunk ids.
CREATE FUNCTION cairn_index_version(p_version_id text, p_chunks jsonb) RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
SET TimeZone = 'UTC'
AS $fn$
DECLARE
    v versions%ROWTYPE;
    st records%ROWTYPE;
    v_scope_id integer;
    v_acl_id integer;
    v_roles jsonb;
    v_labels jsonb;
    v_sensitivity smallint;
    ids bigint[];
BEGIN
    IF p_chunks IS NULL OR jsonb_typeof(p_chunks) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_chunks) = 0 THEN
        RETURN '{}';
    END IF;
    SELECT * INTO STRICT v FROM versions WHERE id = p_version_id;
    SELECT * INTO STRICT st FROM records WHERE id = v.record_id;

    INSERT INTO scopes (scope) VALUES (v.content ->> 'scope') ON CONFLICT (scope) DO NOTHING;
    SELECT id INTO STRICT v_scope_id FROM scopes WHERE scope = v.content ->> 'scope';

    SELECT coalesce(jsonb_agg(x ORDER BY x COLLATE "C"), '[]') INTO v_roles
        FROM jsonb_array_elements_text(coalesce(v.content -> 'acl' -> 'roles', '[]')) x;
    SELECT coalesce(jsonb_agg(x ORDER BY x COLLATE "C"), '[]') INTO v_labels
        FROM jsonb_array_elements_text(coalesce(v.content -> 'acl' -> 'labels', '[]')) x;
    v_sensitivity := CASE v.content -> 'acl' ->> 'sensitivity'
        WHEN 'low' THEN 0 WHEN 'medium' THEN 1 WHEN 'high' THEN 2 END;
    IF v_sensitivity IS NULL THEN
        RAISE EXCEPTION 'version % has no known ACL sensitivity', p_version_id
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO acls (roles, labels, sensitivity) VALUES (v_roles, v_labels, v_sensitivity)
        ON CONFLICT (roles, labels, sensitivity) DO NOTHING;
    SELECT id INTO STRICT v_acl_id FROM acls
        WHERE roles = v_roles AND labels = v_labels AND sensitivity = v_sensitivity;

    WITH added AS (
        INSERT INTO chunks (record_id, version_id, version_no, chunk_key, heading, span_start,
            span_end, text, text_hash, kind, scope_id, acl_id, status, is_head, superseded,
            valid_from, valid_to, created_at, seq, tsv)
        SELECT v.record_id, v.id, v.number, d.chunk_key, d.heading, d.start, d."end", d.text,
            d.text_hash, v.content ->> 'kind', v_scope_id, v_acl_id, st.status,
            st.current_version_id = v.id, st.superseded_by IS NOT NULL,
            (v.content ->> 'valid_from')::timestamptz, (v.content ->> 'valid_to')::timestamptz,
            v.created_at, 0,
            setweight(to_tsvector('english', coalesce(v.content ->> 'title', '')), 'A')
                || setweight(to_tsvector('english', d.heading), 'B')
                || setweight(to_tsvector('english', d.text), 'C')
        FROM jsonb_to_recordset(p_chunks) AS d(chunk_key text, heading text, start integer,
            "end" integer, text text, text_hash text)
        RETURNING id
    )
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM added;
    RETURN ids;
END
$fn$;

-- After a record's state row changed: bring its chunks' filter columns in line. Returns the
-- ids of the chunks that changed (only those get a new seq).
CREATE FUNCTION cairn_reflect_record(p_record_id text) RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
DECLARE
    ids bigint[];
BEGIN
    WITH changed AS (
        UPDATE chunks c SET status = r.status,
            is_head = (c.version_id = r.current_version_id),
            superseded = (r.superseded_by IS NOT NULL)
        FROM records r
        WHERE r.id = p_record_id AND c.record_id = r.id
          AND (c.status <> r.status OR c.is_head <> (c.version_id = r.current_version_id)
               OR c.superseded <> (r.superseded_by IS NOT NULL))
        RETURNING c.id
    )
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM changed;
    RETURN ids;
END
$fn$;

-- Number the chunks a transaction inserted or changed, in order of first touch, from the
-- 'seq' counter. Called at the end of a commit (under the audit lock, held until commit), so
-- chunk seqs follow commit order: a reader tailing chunk_changes by seq misses nothing.
CREATE FUNCTION cairn_stamp_chunks(p_touched bigint[], p_inserted bigint) RETURNS void
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
DECLARE
    n bigint;
    base bigint;
BEGIN
    IF p_inserted <> 0 THEN
        UPDATE index_meta SET value = value + p_inserted WHERE key = 'chunks';
    END IF;
    IF p_touched IS NULL OR cardinality(p_touched) = 0 THEN
        RETURN;
    END IF;
    SELECT count(DISTINCT t) INTO n FROM unnest(p_touched) t;
    UPDATE index_meta SET value = value + n WHERE key = 'seq' RETURNING value - n INTO base;
    UPDATE chunks c SET seq = base + o.n
    FROM (
        SELECT u.id, row_number() OVER (ORDER BY min(u.ord)) AS n
        FROM unnest(p_touched) WITH ORDINALITY AS u(id, ord)
        GROUP BY u.id
    ) o
    WHERE c.id = o.id;
END
$fn$;

-- The derived vector cache: what the serving role may add without an audit entry (a vector
-- is a function of text already in memory, not memory itself). Existing entries are kept.
-- p_embeddings is the same batch as a (count, dim) real array, for the pgvector column.
CREATE FUNCTION cairn_put_vectors(p_model text, p_dim integer, p_hashes text[],
                                  p_blobs bytea[], p_embeddings real[])
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = cairn, pg_temp
AS $fn$
DECLARE
    n integer := coalesce(cardinality(p_hashes), 0);
    added integer;
BEGIN
    IF n = 0 THEN
        RETURN 0;
    END IF;
    IF p_model IS NULL OR p_dim IS NULL OR p_dim < 1
       OR coalesce(cardinality(p_blobs), 0) <> n
       OR array_ndims(p_embeddings) IS DISTINCT FROM 2
       OR array_length(p_embeddings, 1) <> n OR array_length(p_embeddings, 2) <> p_dim THEN
        RAISE EXCEPTION 'cairn_put_vectors: % hashes need as many % float vectors', n, p_dim
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO vectors (text_hash, model, dim, vector, embedding)
    SELECT u.h, p_model, p_dim, u.b,
        ARRAY(SELECT e.x FROM unnest(p_embeddings[u.i:u.i][1:p_dim]) WITH ORDINALITY AS e(x, k)
              ORDER BY e.k)
    FROM unnest(p_hashes, p_blobs) WITH ORDINALITY AS u(h, b, i)
    ON CONFLICT (text_hash, model) DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$fn$;
REVOKE ALL ON FUNCTION cairn_put_vectors(text, integer, text[], bytea[], real[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cairn_put_vectors(text, integer, text[], bytea[], real[])
    TO cairn_serving;
REVOKE ALL ON FUNCTION cairn_index_version(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_reflect_record(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_stamp_chunks(bigint[], bigint) FROM PUBLIC;

-- The one write path again (same contract as step 1), now also indexing each version's
-- chunks ("chunks" of a version write), re-filtering a record's chunks when its state row
-- changes, and numbering all of them at the end, under the audit lock.
CREATE OR REPLACE FUNCTION cairn_commit(changesets jsonb) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = cairn, pg_temp
SET TimeZone = 'UTC'
AS $fn$
DECLARE
    cs jsonb;
    e jsonb;
    w jsonb;
    audits jsonb[] := '{}';
    a jsonb;
    seqs bigint[] := '{}';
    next_seq bigint;
    cur_version text;
    cur_status text;
    cur_baseline text;
    touched bigint[] := '{}';  -- chunks inserted or re-filtered: stamped with seqs at the end
    inserted bigint := 0;
    ids bigint[];
BEGIN
    IF jsonb_typeof(changesets) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'cairn_commit takes a JSON array of change sets' USING ERRCODE = '22023';
    END IF;
    FOR cs IN SELECT value FROM jsonb_array_elements(changesets) LOOP
        IF jsonb_typeof(cs -> 'audit') IS DISTINCT FROM 'object'
           OR coalesce(cs -> 'audit' ->> 'id', '') = '' THEN
            RAISE EXCEPTION 'every change set carries exactly one audit entry'
                USING ERRCODE = '22023';
        END IF;
        FOR e IN SELECT value FROM jsonb_array_elements(coalesce(cs -> 'expects', '[]')) LOOP
            CASE e ->> 't'
            WHEN 'record' THEN
                SELECT current_version_id, status INTO cur_version, cur_status
                    FROM records WHERE id = e ->> 'record_id' FOR UPDATE;
                IF e -> 'version_id' IS NULL OR e -> 'version_id' = 'null' THEN
                    IF FOUND THEN
                        RAISE EXCEPTION USING ERRCODE = 'CR409',
                            MESSAGE = format('record %s already exists', e ->> 'record_id'),
                            DETAIL = jsonb_build_object('record_id', e ->> 'record_id')::text;
                    END IF;
                ELSIF NOT FOUND OR cur_version IS DISTINCT FROM e ->> 'version_id' THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('record %s changed since version %s was read',
                                         e ->> 'record_id', e ->> 'version_id'),
                        DETAIL = jsonb_build_object('record_id', e ->> 'record_id')::text;
                ELSIF e ->> 'status' IS NOT NULL AND cur_status IS DISTINCT FROM e ->> 'status'
                THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('record %s is now %s', e ->> 'record_id', cur_status),
                        DETAIL = jsonb_build_object('record_id', e ->> 'record_id')::text;
                END IF;
            WHEN 'proposal' THEN
                SELECT status INTO cur_status
                    FROM proposals WHERE id = e ->> 'proposal_id' FOR UPDATE;
                IF NOT FOUND OR cur_status IS DISTINCT FROM e ->> 'status' THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('proposal %s was decided by someone else meanwhile',
                                         e ->> 'proposal_id'),
                        DETAIL = jsonb_build_object('proposal_id', e ->> 'proposal_id')::text;
                END IF;
            WHEN 'published' THEN
                PERFORM pg_advisory_xact_lock(1667328371, hashtext(e ->> 'scope'));
                SELECT baseline_id INTO cur_baseline FROM published WHERE scope = e ->> 'scope';
                IF cur_baseline IS DISTINCT FROM e ->> 'baseline_id' THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('the published baseline of %s changed meanwhile',
                                         e ->> 'scope'),
                        DETAIL = jsonb_build_object('scope', e ->> 'scope')::text;
                END IF;
            ELSE
                RAISE EXCEPTION 'unknown precondition %', e ->> 't' USING ERRCODE = '22023';
            END CASE;
        END LOOP;

        FOR w IN SELECT value FROM jsonb_array_elements(coalesce(cs -> 'writes', '[]')) LOOP
            CASE w ->> 't'
            WHEN 'record' THEN
                INSERT INTO records (id, kind, scope, status, current_version_id,
                    current_version, content_hash, sensitivity, superseded_by, created_at,
                    updated_at, status_changed_at, created_by)
                SELECT r.id, r.kind, r.scope, r.status, r.current_version_id,
                    r.current_version, r.content_hash, r.sensitivity, r.superseded_by,
                    r.created_at, r.updated_at, r.status_changed_at, r.created_by
                FROM jsonb_populate_record(NULL::records, w -> 'row') r
                ON CONFLICT (id) DO UPDATE SET status = excluded.status,
                    current_version_id = excluded.current_version_id,
                    current_version = excluded.current_version,
                    content_hash = excluded.content_hash, sensitivity = excluded.sensitivity,
                    superseded_by = excluded.superseded_by, updated_at = excluded.updated_at,
                    status_changed_at = excluded.status_changed_at;
                touched := touched || cairn_reflect_record(w -> 'row' ->> 'id');
            WHEN 'version' THEN
                INSERT INTO versions (id, record_id, number, content, content_hash,
                    created_at, created_by, proposal_id)
                SELECT v.id, v.record_id, v.number, v.content, v.content_hash, v.created_at,
                    v.created_by, v.proposal_id
                FROM jsonb_populate_record(NULL::versions, w -> 'row') v;
                ids := cairn_index_version(w -> 'row' ->> 'id', w -> 'chunks');
                touched := touched || ids;
                inserted := inserted + cardinality(ids);
            WHEN 'proposal' THEN
                INSERT INTO proposals (id, op, scope, record_id, base_version_id,
                    base_baseline_id, principal_id, principal_roles, status, change,
                    created_at, reason, rule, decided_by, decided_at, rebased_from, rebased_to,
                    result_record_id, result_version_id)
                SELECT p.id, p.op, p.scope, p.record_id, p.base_version_id,
                    p.base_baseline_id, p.principal_id, p.principal_roles, p.status, p.change,
                    p.created_at, p.reason, p.rule, p.decided_by, p.decided_at,
                    p.rebased_from, p.rebased_to, p.result_record_id, p.result_version_id
                FROM jsonb_populate_record(NULL::proposals, w -> 'row') p
                ON CONFLICT (id) DO UPDATE SET
                    (op, scope, record_id, base_version_id, base_baseline_id, principal_id,
                     principal_roles, status, change, created_at, reason, rule, decided_by,
                     decided_at, rebased_from, rebased_to, result_record_id,
                     result_version_id)
                  = (excluded.op, excluded.scope, excluded.record_id,
                     excluded.base_version_id, excluded.base_baseline_id,
                     excluded.principal_id, excluded.principal_roles, excluded.status,
                     excluded.change, excluded.created_at, excluded.reason, excluded.rule,
                     excluded.decided_by, excluded.decided_at, excluded.rebased_from,
                     excluded.rebased_to, excluded.result_record_id,
                     excluded.result_version_id);
            WHEN 'baseline' THEN
                INSERT INTO baselines (id, scope, name, created_at, created_by, proposal_id)
                SELECT b.id, b.scope, b.name, b.created_at, b.created_by, b.proposal_id
                FROM jsonb_populate_record(NULL::baselines, w -> 'row') b;
                INSERT INTO baseline_pins (baseline_id, record_id, version_id)
                SELECT w -> 'row' ->> 'id', p.key, p.value
                FROM jsonb_each_text(coalesce(w -> 'pins', '{}')) p;
            WHEN 'published' THEN
                PERFORM pg_advisory_xact_lock(1667328371, hashtext(w -> 'row' ->> 'scope'));
                INSERT INTO published (scope, baseline_id, updated_at)
                SELECT p.scope, p.baseline_id, p.updated_at
                FROM jsonb_populate_record(NULL::published, w -> 'row') p
                ON CONFLICT (scope) DO UPDATE SET baseline_id = excluded.baseline_id,
                    updated_at = excluded.updated_at;
            WHEN 'edge' THEN
                INSERT INTO edges (src, dst, type, created_at)
                SELECT g.src, g.dst, g.type, g.created_at
                FROM jsonb_populate_record(NULL::edges, w -> 'row') g
                ON CONFLICT DO NOTHING;
            WHEN 'path_link' THEN
                INSERT INTO path_links (record_id, path, content_hash, drifted)
                SELECT l.record_id, l.path, l.content_hash, l.drifted
                FROM jsonb_populate_record(NULL::path_links, w -> 'row') l
                ON CONFLICT (record_id, path) DO UPDATE SET
                    content_hash = excluded.content_hash, drifted = excluded.drifted;
            ELSE
                RAISE EXCEPTION 'unknown write %', w ->> 't' USING ERRCODE = '22023';
            END CASE;
        END LOOP;
        audits := audits || (cs -> 'audit');
    END LOOP;

    -- Held until commit: seqs are gapless and follow commit order.
    PERFORM pg_advisory_xact_lock(1667328370, 2);
    SELECT coalesce(max(seq), 0) INTO next_seq FROM audit;
    FOREACH a IN ARRAY audits LOOP
        next_seq := next_seq + 1;
        INSERT INTO audit (seq, id, at, actor, actor_roles, action, subject_id, proposal_id,
            rule, reason, from_status, to_status, details)
        SELECT next_seq, x.id, x.at, x.actor, x.actor_roles, x.action, x.subject_id,
            x.proposal_id, x.rule, x.reason, x.from_status, x.to_status, x.details
        FROM jsonb_populate_record(NULL::audit, a) x;
        seqs := seqs || next_seq;
    END LOOP;
    -- Still under the lock: chunk seqs follow commit order too (see cairn_stamp_chunks).
    PERFORM cairn_stamp_chunks(touched, inserted);
    RETURN seqs;
END
$fn$;
"""

# Keyword search confined to the reader's scopes: a btree on the scope lets the planner
# intersect (BitmapAnd) or replace the GIN match with the scope's rows, so a small scope's
# search costs what the scope holds whatever its words' frequency in the store; and a kept
# count per scope tells keyword recall how small the scope is (PostgresStore.keyword_reach)
# without counting rows at read time. A statement trigger keeps the count, so every way
# chunks are written (cairn_commit, import as the owner) keeps it in the same transaction.
_SCOPE_REACH = r"""
CREATE INDEX chunks_scope ON chunks (scope_id);

CREATE TABLE scope_chunks (
    scope_id integer PRIMARY KEY REFERENCES scopes (id),
    chunks bigint NOT NULL
);
INSERT INTO scope_chunks (scope_id, chunks)
SELECT scope_id, count(*) FROM chunks GROUP BY scope_id;

CREATE FUNCTION cairn_count_scope_chunks() RETURNS trigger
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
BEGIN
    INSERT INTO scope_chunks AS s (scope_id, chunks)
    SELECT scope_id, count(*) FROM new_chunks GROUP BY scope_id
    ON CONFLICT (scope_id) DO UPDATE SET chunks = s.chunks + excluded.chunks;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION cairn_count_scope_chunks() FROM PUBLIC;
CREATE TRIGGER chunks_count_scopes AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION cairn_count_scope_chunks();
"""


def _utc_repair(table: str, column: str, paths: tuple[tuple[str, ...], ...]) -> str:
    """UPDATEs that add a UTC zone to date-times stored without one at the JSON ``paths``
    of ``table.column`` (cairn accepted such times before it required a zone)."""
    statements = []
    for path in paths:
        at = "{" + ",".join(path) + "}"
        statements.append(
            f"UPDATE {table} SET {column} = jsonb_set({column}, '{at}', "
            f"to_jsonb(({column} #>> '{at}') || 'Z')) "
            f"WHERE {column} #>> '{at}' ~ '^\\d{{4}}-\\d{{2}}-\\d{{2}}[T ][0-9:.]+$';"
        )
    return "\n".join(statements)


_TIMES = (("valid_from",), ("valid_to",))

# A one-time repair. Validity times given without a time zone were accepted once and broke
# later reads; they are read as UTC, the rule the index's timestamptz casts applied to them
# (the server's time zone is UTC by default). The repair rewrites how those versions spell
# the same instants, nothing else, so the append-only trigger steps aside for it.
_UTC_TIMES = (
    "ALTER TABLE versions DISABLE TRIGGER versions_append_only;\n"
    + _utc_repair("versions", "content", _TIMES)
    + "\n"
    + _utc_repair(
        "proposals",
        "change",
        tuple((part, *path) for part in ("content", "patch") for path in _TIMES),
    )
    + "\nALTER TABLE versions ENABLE TRIGGER versions_append_only;\n"
)

PG_MIGRATIONS: tuple[Migration, ...] = (
    Migration("kernel", _KERNEL),
    # pgvector is not a trusted extension: creating it needs a superuser (or a DBA did it).
    Migration(
        "retrieval", _RETRIEVAL, admin_sql="CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"
    ),
    Migration("scope_reach", _SCOPE_REACH),
    Migration("utc_times", _UTC_TIMES),
)

# Tables holding memory: the serving role has SELECT only (tests/store/test_pg_bypass.py).
PG_MEMORY_TABLES: tuple[str, ...] = (
    "records",
    "versions",
    "proposals",
    "audit",
    "baselines",
    "baseline_pins",
    "published",
    "edges",
    "path_links",
)

# Retrieval index tables, derived from memory: written only by cairn_commit (chunks, with the
# versions they index) and cairn_put_vectors (the vector cache); SELECT only for serving.
PG_INDEX_TABLES: tuple[str, ...] = ("acls", "scopes", "index_meta", "chunks", "vectors")

_BOOTSTRAP_ROLES = f"""
DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OWNER_ROLE}') THEN
        CREATE ROLE {OWNER_ROLE} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{SERVING_ROLE}') THEN
        CREATE ROLE {SERVING_ROLE} NOLOGIN;
    END IF;
END
$do$
"""


@dataclass(frozen=True)
class MigrationResult:
    before: int
    after: int
    latest: int

    @property
    def applied(self) -> int:
        return self.after - self.before


def latest_version() -> int:
    return len(PG_MIGRATIONS)


def current_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version of the database ``conn`` points at (0: never migrated)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_migrations",))
        exists = cur.fetchone()
        if not exists or not exists[0]:
            return 0
        cur.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_migrations")
        found = cur.fetchone()
        return int(found[0]) if found else 0


def _bootstrap(conn: psycopg.Connection[Any]) -> None:
    """Roles, schema and the migrations table; each created only when missing, so a login
    without CREATEROLE can migrate once a DBA has created the roles (docs/operations.md)."""
    for attempt in range(3):
        try:
            with conn.transaction():
                conn.execute(_BOOTSTRAP_ROLES)
            break
        except (pg_errors.UniqueViolation, pg_errors.DuplicateObject):
            # Another process created the roles between our check and CREATE ROLE.
            if attempt == 2:
                raise
    with conn.transaction():
        row = conn.execute(
            "SELECT rolsuper OR pg_has_role(current_user, %s, 'MEMBER') "
            "FROM pg_roles WHERE rolname = current_user",
            (OWNER_ROLE,),
        ).fetchone()
        if not row or not row[0]:
            conn.execute(f"GRANT {OWNER_ROLE} TO current_user")
    with conn.transaction():
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA} AUTHORIZATION {OWNER_ROLE}")
        conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations ("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
        )
        conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {SERVING_ROLE}")
        conn.execute(f"GRANT SELECT ON {SCHEMA}.schema_migrations TO {SERVING_ROLE}")


def migrate(url: str, *, target: int | None = None) -> MigrationResult:
    """Bring the database at ``url`` to ``target`` (default: the latest version).

    ``url`` must log in as a superuser or as a member of ``cairn_owner`` (the first run also
    needs CREATEROLE, unless the roles exist). Safe to run from many processes at once: an
    advisory lock serialises them and the later ones find nothing to do.
    """
    goal = latest_version() if target is None else target
    if not 0 <= goal <= latest_version():
        raise StoreError(f"no schema version {goal}; this cairn knows 0..{latest_version()}")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _bootstrap(conn)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", MIGRATION_LOCK)
                before = current_version(conn)
                if before > latest_version():
                    raise StoreError(
                        f"database schema version {before} is newer than this cairn "
                        f"({latest_version()}): upgrade cairn"
                    )
                for number in range(before + 1, goal + 1):
                    step = PG_MIGRATIONS[number - 1]
                    if step.admin_sql:
                        conn.execute(step.admin_sql.encode())
                    conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
                    conn.execute(f"SET LOCAL search_path = {SCHEMA}, public")
                    conn.execute(step.sql.encode())
                    conn.execute(
                        f"INSERT INTO {SCHEMA}.schema_migrations (version, name, applied_at) "
                        "VALUES (%s, %s, %s)",
                        (number, step.name, datetime.now(UTC)),
                    )
                    conn.execute("RESET ROLE")
                after = max(before, goal)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"cannot migrate the cairn schema as this login: {exc.diag.message_primary}. "
            f"Run 'cairn migrate' with a superuser or a member of {OWNER_ROLE} "
            "(see docs/operations.md)"
        ) from exc
    except psycopg.OperationalError as exc:
        raise StoreError(f"cannot connect to PostgreSQL to migrate: {exc}") from exc
    except psycopg.Error as exc:  # e.g. pgvector missing from the server (UndefinedFile)
        raise StoreError(
            f"migrating the cairn schema failed: {exc.diag.message_primary or exc}"
        ) from exc
    return MigrationResult(before=before, after=after, latest=latest_version())
