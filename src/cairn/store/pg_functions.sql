-- cairn's PostgreSQL functions, defined once. ``pg_migrations.migrate`` applies this file
-- after the schema steps whenever its text changed (its digest is kept in
-- ``installed_functions``), as the schema's owner, so every statement here must be safe to run
-- again: CREATE OR REPLACE, REVOKE and GRANT. Migrations hold only schema changes.

-- (pg_migrations.functions_sql puts the statement resolving pgvector's schema first.)

-- A scope's interned id (chunks and edges filter by it), created on first use.
CREATE OR REPLACE FUNCTION cairn_scope_id(p_scope text) RETURNS integer
LANGUAGE sql
SET search_path = cairn, pg_temp
AS $fn$
    INSERT INTO scopes (scope) VALUES (p_scope) ON CONFLICT (scope) DO NOTHING;
    SELECT id FROM scopes WHERE scope = p_scope;
$fn$;

-- An ACL's interned id (roles and labels sorted, so the same ACL is one row), created on
-- first use.
CREATE OR REPLACE FUNCTION cairn_acl_id(p_acl jsonb) RETURNS integer
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
DECLARE
    v_roles jsonb;
    v_labels jsonb;
    v_sensitivity smallint;
    found integer;
BEGIN
    SELECT coalesce(jsonb_agg(x ORDER BY x COLLATE "C"), '[]') INTO v_roles
        FROM jsonb_array_elements_text(coalesce(p_acl -> 'roles', '[]')) x;
    SELECT coalesce(jsonb_agg(x ORDER BY x COLLATE "C"), '[]') INTO v_labels
        FROM jsonb_array_elements_text(coalesce(p_acl -> 'labels', '[]')) x;
    v_sensitivity := CASE p_acl ->> 'sensitivity'
        WHEN 'low' THEN 0 WHEN 'medium' THEN 1 WHEN 'high' THEN 2 END;
    IF v_sensitivity IS NULL THEN
        RAISE EXCEPTION 'an ACL without a known sensitivity' USING ERRCODE = '22023';
    END IF;
    INSERT INTO acls (roles, labels, sensitivity) VALUES (v_roles, v_labels, v_sensitivity)
        ON CONFLICT (roles, labels, sensitivity) DO NOTHING;
    SELECT id INTO STRICT found FROM acls
        WHERE roles = v_roles AND labels = v_labels AND sensitivity = v_sensitivity;
    RETURN found;
END
$fn$;

-- Write a JSON array of rows of one table with one statement: a commit's single write passes
-- an array of one, a batch of new records an array of thousands. The rows are the ones
-- cairn.store.sql.rows builds, all with the same keys, and those keys are the columns
-- written: the columns of each table are listed once, there. A row whose ``p_key`` is stored
-- already takes the new values of the ``p_update`` columns (NULL: of every column written);
-- with none ('{}') a stored key fails the statement.
CREATE OR REPLACE FUNCTION cairn_put_rows(p_table text, p_rows jsonb,
                                          p_key text[] DEFAULT '{id}', p_update text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
DECLARE
    cols text[] := ARRAY(SELECT jsonb_object_keys(p_rows -> 0));
    listed text := (SELECT string_agg(quote_ident(c), ', ') FROM unnest(cols) c);
    changed text[] := coalesce(p_update, ARRAY(SELECT unnest(cols) EXCEPT SELECT unnest(p_key)));
    upsert text := '';
BEGIN
    IF listed IS NULL THEN  -- no rows
        RETURN;
    END IF;
    IF cardinality(changed) > 0 THEN
        upsert := format(' ON CONFLICT (%s) DO UPDATE SET %s',
            (SELECT string_agg(quote_ident(k), ', ') FROM unnest(p_key) k),
            (SELECT string_agg(format('%1$I = excluded.%1$I', c), ', ') FROM unnest(changed) c));
    END IF;
    EXECUTE format('INSERT INTO %1$I (%2$s) SELECT %2$s '
                   'FROM jsonb_populate_recordset(NULL::%1$I, $1)%3$s', p_table, listed, upsert)
        USING p_rows;
END
$fn$;

-- Refuse rows of ``p_table`` (keyed by ``id``) that are stored already: a batch writes only
-- new rows, so a stored id fails its commit instead of being overwritten.
CREATE OR REPLACE FUNCTION cairn_refuse_stored(p_table text, p_rows jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
DECLARE
    clash text;
BEGIN
    EXECUTE format('SELECT t.id FROM %I t WHERE t.id IN '
                   '(SELECT x ->> ''id'' FROM jsonb_array_elements($1) x) LIMIT 1', p_table)
        INTO clash USING p_rows;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CR409',
            MESSAGE = format('%s %s already exists', rtrim(p_table, 's'), clash),
            DETAIL = jsonb_build_object('id', clash)::text;
    END IF;
END
$fn$;

-- Records' state rows (a stored record changes only its state). The chunks of each record
-- whose state changed get its filter columns; returns the ids of the chunks that changed
-- (only those get a new seq).
CREATE OR REPLACE FUNCTION cairn_put_records(p_rows jsonb) RETURNS bigint[]
LANGUAGE sql
SET search_path = cairn, pg_temp
AS $fn$
    SELECT cairn_put_rows('records', p_rows, '{id}', '{status, current_version_id,
        current_version, content_hash, sensitivity, superseded_by, updated_at,
        status_changed_at}');
    WITH changed AS (
        UPDATE chunks c SET status = r.status,
            is_head = (c.version_id = r.current_version_id),
            superseded = (r.superseded_by IS NOT NULL)
        FROM records r
        WHERE r.id IN (SELECT x ->> 'id' FROM jsonb_array_elements(p_rows) x)
          AND c.record_id = r.id
          AND (c.status <> r.status OR c.is_head <> (c.version_id = r.current_version_id)
               OR c.superseded <> (r.superseded_by IS NOT NULL))
        RETURNING c.id
    )
    SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM changed;
$fn$;

-- Index stored versions' chunks (a JSON array of {version_id, chunk_key, heading, start,
-- end, text, text_hash} cut by the kernel's chunker), in the array's order. Everything else
-- (kind, scope, ACL, validity, title, the record's state) is read from the stored version
-- and record, so a chunk's filter columns cannot disagree with the memory they index. New
-- chunks get seq 0 until cairn_stamp_chunks numbers them at commit. Returns their ids.
CREATE OR REPLACE FUNCTION cairn_index_versions(p_chunks jsonb) RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
SET TimeZone = 'UTC'
AS $fn$
DECLARE
    ids bigint[];
BEGIN
    IF p_chunks IS NULL OR jsonb_typeof(p_chunks) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_chunks) = 0 THEN
        RETURN '{}';
    END IF;
    WITH indexed AS (  -- each version's interned scope and ACL, looked up once per version
        SELECT v.id, cairn_scope_id(v.content ->> 'scope') AS scope_id,
            cairn_acl_id(v.content -> 'acl') AS acl_id
        FROM versions v
        WHERE v.id IN (SELECT DISTINCT c ->> 'version_id' FROM jsonb_array_elements(p_chunks) c)
    ), added AS (
        INSERT INTO chunks (record_id, version_id, version_no, chunk_key, heading, span_start,
            span_end, text, text_hash, kind, scope_id, acl_id, status, is_head, superseded,
            valid_from, valid_to, created_at, seq, tsv, source_kind, source_time)
        SELECT v.record_id, v.id, v.number, d.c ->> 'chunk_key', d.c ->> 'heading',
            (d.c ->> 'start')::integer, (d.c ->> 'end')::integer, d.c ->> 'text',
            d.c ->> 'text_hash', v.content ->> 'kind', i.scope_id, i.acl_id, st.status,
            st.current_version_id = v.id, st.superseded_by IS NOT NULL,
            (v.content ->> 'valid_from')::timestamptz, (v.content ->> 'valid_to')::timestamptz,
            v.created_at, 0,
            setweight(to_tsvector('english', coalesce(v.content ->> 'title', '')), 'A')
                || setweight(to_tsvector('english', d.c ->> 'heading'), 'B')
                || setweight(to_tsvector('english', d.c ->> 'text'), 'C'),
            'record', coalesce((v.content ->> 'valid_from')::timestamptz, v.created_at)
        FROM jsonb_array_elements(p_chunks) WITH ORDINALITY AS d(c, n)
        JOIN versions v ON v.id = d.c ->> 'version_id'
        JOIN records st ON st.id = v.record_id
        JOIN indexed i ON i.id = v.id
        ORDER BY d.n
        RETURNING id
    )
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM added;
    IF cardinality(ids) <> jsonb_array_length(p_chunks) THEN
        RAISE EXCEPTION 'cairn_index_versions: a chunk names a version that is not stored'
            USING ERRCODE = '22023';
    END IF;
    RETURN ids;
END
$fn$;

-- Edges, with their scope and ACL interned (once per distinct value) so that walks filter
-- them as the index filters chunks. A stored edge only changes state (its removal).
CREATE OR REPLACE FUNCTION cairn_put_edges(p_rows jsonb) RETURNS void
LANGUAGE sql
SET search_path = cairn, pg_temp
AS $fn$
    WITH g AS (SELECT * FROM jsonb_populate_recordset(NULL::edges, p_rows)),
    s AS (SELECT u.scope, cairn_scope_id(u.scope) AS id FROM (SELECT DISTINCT scope FROM g) u),
    a AS (SELECT u.acl, cairn_acl_id(u.acl) AS id FROM (SELECT DISTINCT acl FROM g) u)
    INSERT INTO edges (id, type, src, dst, scope, scope_id, acl, acl_id, metadata, valid_from,
        valid_to, origin, status, created_at, created_by, proposal_id, removed_at, removed_by)
    SELECT g.id, g.type, g.src, g.dst, g.scope, s.id, g.acl, a.id, g.metadata, g.valid_from,
        g.valid_to, g.origin, g.status, g.created_at, g.created_by, g.proposal_id,
        g.removed_at, g.removed_by
    FROM g JOIN s ON s.scope = g.scope JOIN a ON a.acl = g.acl
    ON CONFLICT (id) DO UPDATE SET status = excluded.status,
        removed_at = excluded.removed_at, removed_by = excluded.removed_by;
$fn$;

-- Replaced by the functions above, which take many rows.
DROP FUNCTION IF EXISTS cairn_index_version(text, jsonb);
DROP FUNCTION IF EXISTS cairn_reflect_record(text);
-- Replaced by cairn_put_rows.
DROP FUNCTION IF EXISTS cairn_put_proposals(jsonb);
DROP FUNCTION IF EXISTS cairn_put_versions(jsonb);
DROP FUNCTION IF EXISTS cairn_put_path_links(jsonb);

-- Number the chunks a transaction inserted or changed, in order of first touch, from the
-- 'seq' counter. Called at the end of a commit (under the audit lock, held until commit), so
-- chunk seqs follow commit order: a reader tailing chunk_changes by seq misses nothing.
CREATE OR REPLACE FUNCTION cairn_stamp_chunks(p_touched bigint[], p_inserted bigint) RETURNS void
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
CREATE OR REPLACE FUNCTION cairn_put_vectors(p_model text, p_dim integer, p_hashes text[],
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

-- Where a scan for chunks waiting for a model's vector may start: every chunk with a lower
-- seq has one (the kernel's ``vectors_from``; the key prefix is ``store.base.VECTORS_FROM``).
-- It only moves forward, and never past the last seq stamped.
CREATE OR REPLACE FUNCTION cairn_vectors_from(p_model text, p_from bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = cairn, pg_temp
AS $fn$
    INSERT INTO index_meta (key, value)
    SELECT 'vectors_from:' || p_model, LEAST(p_from, s.value + 1)
    FROM index_meta s WHERE s.key = 'seq' AND p_model IS NOT NULL AND p_from IS NOT NULL
    ON CONFLICT (key) DO UPDATE SET value = GREATEST(index_meta.value, excluded.value);
$fn$;
REVOKE ALL ON FUNCTION cairn_vectors_from(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cairn_vectors_from(text, bigint) TO cairn_serving;
REVOKE ALL ON FUNCTION cairn_scope_id(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_acl_id(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_put_rows(text, jsonb, text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_refuse_stored(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_put_records(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_index_versions(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_put_edges(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION cairn_stamp_chunks(bigint[], bigint) FROM PUBLIC;

-- The one write path. ``changesets`` is a JSON array of
--   {"audit": {audit row}, "expects": [{"t": ...}], "writes": [{"t": ..., "row": {...}}]}
-- built by cairn.store.postgres from the kernel's ChangeSets. Preconditions are checked
-- under row locks (or a per-scope advisory lock for a scope's published pointer, which may
-- not exist yet), so two concurrent commits cannot both pass one. It stores each version,
-- indexes its chunks ("chunks" of a version write), re-filters a record's chunks when its
-- state row changes, and appends the audit entries and numbers the chunks last, under a
-- database-wide lock held until commit.
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
    cur_successor text;
    lock_scope text;
    cur_baseline text;
    touched bigint[] := '{}';  -- chunks inserted or re-filtered: stamped with seqs at the end
    appended bigint[] := '{}';  -- events stored by this commit: outbox rows at the end
    clash text;
    inserted bigint := 0;
    ids bigint[];
    v_scope_id integer;
    v_acl_id integer;
BEGIN
    IF jsonb_typeof(changesets) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'cairn_commit takes a JSON array of change sets' USING ERRCODE = '22023';
    END IF;
    -- One writer of new content per scope at a time, until it commits, so that a copy
    -- another commits meanwhile is seen by the 'copies' check below, not stored beside this
    -- one. Every scope's lock is taken here, in one order and before any row lock: two
    -- commits then never hold one lock each while waiting for the other's.
    FOR lock_scope IN
        SELECT DISTINCT expected ->> 'scope'
        FROM jsonb_array_elements(changesets) AS sets(change_set),
             jsonb_array_elements(coalesce(change_set -> 'expects', '[]')) AS wants(expected)
        WHERE expected ->> 't' = 'copies'
        ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(1667328372, hashtext(lock_scope));
    END LOOP;
    FOR cs IN SELECT value FROM jsonb_array_elements(changesets) LOOP
        IF jsonb_typeof(cs -> 'audit') IS DISTINCT FROM 'object'
           OR coalesce(cs -> 'audit' ->> 'id', '') = '' THEN
            RAISE EXCEPTION 'every change set carries exactly one audit entry'
                USING ERRCODE = '22023';
        END IF;
        FOR e IN SELECT value FROM jsonb_array_elements(coalesce(cs -> 'expects', '[]')) LOOP
            CASE e ->> 't'
            WHEN 'record' THEN
                SELECT current_version_id, status, superseded_by
                    INTO cur_version, cur_status, cur_successor
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
                ELSIF coalesce((e ->> 'unsuperseded')::boolean, false)
                      AND cur_successor IS NOT NULL THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('record %s was superseded meanwhile', e ->> 'record_id'),
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
            WHEN 'copies' THEN
                -- (the scope's lock for new content is held since the start: see above)
                IF EXISTS (
                    SELECT 1 FROM records
                    WHERE scope = e ->> 'scope'
                      AND content_hash IN (SELECT jsonb_array_elements_text(e -> 'hashes'))
                      AND status NOT IN (SELECT jsonb_array_elements_text(e -> 'not_copies'))
                      AND id NOT IN (SELECT jsonb_array_elements_text(e -> 'holders'))
                ) THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('the same content was stored in %s meanwhile: read '
                                         'again before proposing it', e ->> 'scope'),
                        DETAIL = jsonb_build_object('scope', e ->> 'scope', 'copied', true)::text;
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
                touched := touched || cairn_put_records(jsonb_build_array(w -> 'row'));
            WHEN 'version' THEN
                PERFORM cairn_put_rows('versions', jsonb_build_array(w -> 'row'),
                                       p_update => '{}');
                ids := cairn_index_versions(w -> 'chunks');
                touched := touched || ids;
                inserted := inserted + cardinality(ids);
            WHEN 'proposal' THEN
                PERFORM cairn_put_rows('proposals', jsonb_build_array(w -> 'row'));
            WHEN 'batch' THEN
                -- new rows only, table by table (see cairn.store.base.PutBatch)
                PERFORM cairn_refuse_stored('proposals', w -> 'proposals');
                PERFORM cairn_refuse_stored('records', w -> 'records');
                PERFORM cairn_refuse_stored('edges', w -> 'edges');
                PERFORM cairn_put_rows('proposals', w -> 'proposals');
                PERFORM cairn_put_records(w -> 'records');
                PERFORM cairn_put_rows('versions', w -> 'versions', p_update => '{}');
                ids := cairn_index_versions(w -> 'chunks');
                touched := touched || ids;
                inserted := inserted + cardinality(ids);
                PERFORM cairn_put_edges(w -> 'edges');
                PERFORM cairn_put_rows('path_links', w -> 'path_links', '{record_id, path}');
            WHEN 'baseline' THEN
                PERFORM cairn_put_rows('baselines', jsonb_build_array(w -> 'row'),
                                       p_update => '{}');
                INSERT INTO baseline_pins (baseline_id, record_id, version_id)
                SELECT w -> 'row' ->> 'id', p.key, p.value
                FROM jsonb_each_text(coalesce(w -> 'pins', '{}')) p;
            WHEN 'published' THEN
                PERFORM pg_advisory_xact_lock(1667328371, hashtext(w -> 'row' ->> 'scope'));
                PERFORM cairn_put_rows('published', jsonb_build_array(w -> 'row'), '{scope}');
            WHEN 'edge' THEN
                PERFORM cairn_put_edges(jsonb_build_array(w -> 'row'));
            WHEN 'events' THEN
                WITH added AS (
                    INSERT INTO events (event_id, ts, session_id, scope, scope_id, agent, role,
                        kind, text, metadata, acl, acl_id, digest, appended_at, appended_by)
                    SELECT n.event_id, n.ts, n.session_id, n.scope, cairn_scope_id(n.scope),
                        n.agent, n.role, n.kind, n.text, n.metadata, n.acl,
                        cairn_acl_id(n.acl), n.digest, n.appended_at, n.appended_by
                    FROM jsonb_populate_recordset(NULL::events, w -> 'rows') WITH ORDINALITY
                        AS n(seq, event_id, ts, session_id, scope, scope_id, agent, role, kind,
                             text, metadata, acl, acl_id, digest, appended_at, appended_by, i)
                    ORDER BY n.i
                    ON CONFLICT (scope_id, event_id) DO NOTHING
                    RETURNING seq
                )
                SELECT appended || coalesce(array_agg(seq ORDER BY seq), '{}') INTO appended
                    FROM added;
                -- An id sent again to its scope with other content: events are never
                -- rewritten.
                SELECT n.event_id INTO clash
                    FROM jsonb_populate_recordset(NULL::events, w -> 'rows') n
                    JOIN events e ON e.scope = n.scope AND e.event_id = n.event_id
                    WHERE e.digest IS DISTINCT FROM n.digest LIMIT 1;
                IF clash IS NOT NULL THEN
                    RAISE EXCEPTION USING ERRCODE = 'CR409',
                        MESSAGE = format('event %s was appended before with other content; '
                            'events are never rewritten: send a correction as a new event',
                            clash),
                        DETAIL = jsonb_build_object('field', 'event_id')::text;
                END IF;
            WHEN 'toc_node' THEN
                -- A timeline node's new version (never an update of an old one), its latest
                -- pointer, its grips, and the chunks indexing it; earlier chunks leave the head.
                IF EXISTS (SELECT 1 FROM records WHERE id = w -> 'row' ->> 'node_id') THEN
                    RAISE EXCEPTION 'a timeline node may not take the id of a record'
                        USING ERRCODE = '22023';
                END IF;
                v_scope_id := cairn_scope_id(w -> 'row' ->> 'scope');
                v_acl_id := cairn_acl_id(w -> 'row' -> 'acl');
                INSERT INTO toc_nodes (node_id, version, level, node_key, partition_key, scope,
                    scope_id, acl, acl_id, agent, parent_id, starts_at, ends_at, first_ts,
                    last_ts, event_count, body, digest, retired, built_at)
                SELECT n.node_id, n.version, n.level, n.node_key, n.partition_key, n.scope,
                    v_scope_id, n.acl, v_acl_id, n.agent, n.parent_id, n.starts_at, n.ends_at,
                    n.first_ts, n.last_ts, n.event_count, n.body, n.digest, n.retired,
                    n.built_at
                FROM jsonb_populate_record(NULL::toc_nodes, w -> 'row') n;
                INSERT INTO toc_latest (node_id, version, level, partition_key, parent_id,
                    starts_at, last_ts, scope_id, acl_id, retired, digest)
                SELECT n.node_id, n.version, n.level, n.partition_key, n.parent_id,
                    n.starts_at, n.last_ts, v_scope_id, v_acl_id, n.retired, n.digest
                FROM jsonb_populate_record(NULL::toc_nodes, w -> 'row') n
                ON CONFLICT (node_id) DO UPDATE SET version = excluded.version,
                    level = excluded.level, partition_key = excluded.partition_key,
                    parent_id = excluded.parent_id, starts_at = excluded.starts_at,
                    last_ts = excluded.last_ts, scope_id = excluded.scope_id,
                    acl_id = excluded.acl_id, retired = excluded.retired,
                    digest = excluded.digest;
                INSERT INTO grips (grip_id, node_id, excerpt, event_id_start, event_id_end,
                    event_id, ts, source, scope_id, acl_id)
                SELECT g.grip_id, w -> 'row' ->> 'node_id', g.excerpt, g.event_id_start,
                    g.event_id_end, g.event_id, g.ts, g.source, v_scope_id, v_acl_id
                FROM jsonb_populate_recordset(NULL::grips, coalesce(w -> 'grips', '[]')) g
                ON CONFLICT (grip_id) DO NOTHING;
                -- only the node's own timeline chunks leave the head: a node id that named a
                -- record must not take that record's chunks out of search
                WITH left_head AS (
                    UPDATE chunks SET is_head = false
                    WHERE record_id = w -> 'row' ->> 'node_id' AND is_head
                      AND source_kind = 'timeline'
                    RETURNING id
                )
                SELECT touched || coalesce(array_agg(id ORDER BY id), '{}') INTO touched
                    FROM left_head;
                WITH added AS (
                    INSERT INTO chunks (record_id, version_id, version_no, chunk_key, heading,
                        span_start, span_end, text, text_hash, kind, scope_id, acl_id, status,
                        is_head, superseded, valid_from, valid_to, created_at, seq, tsv,
                        source_kind, source_time)
                    SELECT w -> 'row' ->> 'node_id',
                        (w -> 'row' ->> 'node_id') || '@' || (w -> 'row' ->> 'version'),
                        (w -> 'row' ->> 'version')::integer, d.chunk_key, d.heading, d.start,
                        d."end", d.text, d.text_hash, 'timeline_' || (w -> 'row' ->> 'level'),
                        v_scope_id, v_acl_id, 'active', true, false, NULL, NULL,
                        (w -> 'row' ->> 'built_at')::timestamptz, 0,
                        setweight(to_tsvector('english', w -> 'row' -> 'body' ->> 'title'), 'A')
                            || setweight(to_tsvector('english', d.heading), 'B')
                            || setweight(to_tsvector('english', d.text), 'C'),
                        'timeline', coalesce((w -> 'row' ->> 'first_ts')::timestamptz,
                                             (w -> 'row' ->> 'starts_at')::timestamptz)
                    FROM jsonb_to_recordset(coalesce(w -> 'chunks', '[]')) AS d(chunk_key text,
                        heading text, start integer, "end" integer, text text, text_hash text)
                    RETURNING id
                )
                SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM added;
                touched := touched || ids;
                inserted := inserted + cardinality(ids);
            WHEN 'path_link' THEN
                PERFORM cairn_put_rows('path_links', jsonb_build_array(w -> 'row'),
                                       '{record_id, path}');
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
    -- Still under the lock: chunk seqs follow commit order too (see cairn_stamp_chunks), and
    -- so do outbox positions, so an indexer following the outbox never skips an event that
    -- a slower transaction committed later.
    PERFORM cairn_stamp_chunks(touched, inserted);
    INSERT INTO event_outbox (position, event_seq)
    SELECT (SELECT coalesce(max(position), 0) FROM event_outbox) + o.n, o.seq
    FROM unnest(appended) WITH ORDINALITY AS o(seq, n);
    RETURN seqs;
END
$fn$;

REVOKE ALL ON FUNCTION cairn_commit(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cairn_commit(jsonb) TO cairn_serving;
