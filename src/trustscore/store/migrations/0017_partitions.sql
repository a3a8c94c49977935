-- Entries and evidence partitioned by ranges of log index (docs/operations.md, "Ingest and partitioning"),
-- converted in place: the rows are copied in this migration's transaction, which holds both tables
-- exclusively until it commits.
--
-- Every partition spans `partition_span` log indexes (log_meta; 2^20 unless set before this migration ran,
-- as tests do with a tiny span). A unique index of a partitioned table must include the partition key, so
-- the two global uniqueness rules of the log move to side tables written in the same transaction as the
-- entries: entry_statements (a statement is logged once) and entry_nonces (a signer uses a nonce once).

INSERT INTO log_meta (key, value) VALUES ('partition_span', '1048576') ON CONFLICT (key) DO NOTHING;

DO $$
DECLARE span text := (SELECT value FROM log_meta WHERE key = 'partition_span');
BEGIN
    IF span !~ '^[0-9]{1,18}$' OR span::bigint < 1 OR (span::bigint & (span::bigint - 1)) <> 0 THEN
        RAISE EXCEPTION 'log_meta partition_span must be a power of two, not %', span;
    END IF;
END;
$$;

-- Creates the missing partitions of entries and evidence up to the one after the partition holding
-- `last_index` (so an append reaching into the last partition leaves an empty one ahead). Returns the
-- first index not covered, how many partitions it created and the span. Appenders call it under the sequence-row
-- lock (store/partitions.py); it runs as the tables' owner because the app role may not create tables.
-- A partition is created on its own and then attached: ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on
-- the parent (readers and writers go on), where CREATE TABLE .. PARTITION OF would take ACCESS EXCLUSIVE.
-- Either way the tables with foreign keys into the parent are locked SHARE ROW EXCLUSIVE (their writes
-- wait, their reads do not) until the transaction ends.
CREATE FUNCTION trustscore_extend_partitions(
    last_index bigint, OUT covered bigint, OUT created integer, OUT span bigint
)
LANGUAGE plpgsql SECURITY DEFINER AS $$
-- Every call, operator and literal below has exactly the types of a built-in one: the app role calls this
-- with its owner's rights, and where it may create in the schema on the search_path (every role may in
-- `public` before PostgreSQL 15), a function or operator it made that matched a call better (an implicit
-- conversion, a polymorphic or variadic built-in: text || integer, oid = regclass, format) would run as
-- the owner. pg_catalog, searched first, wins every exact tie. No format(): it is variadic.
DECLARE
    want bigint;
    t text;
    have bigint;
    part text;
    k bigint;
    missing boolean := false;
BEGIN
    IF last_index < 0::bigint THEN
        RAISE EXCEPTION 'no log index is negative: %', last_index;
    END IF;
    PERFORM pg_advisory_xact_lock(1953657712::bigint);  -- one creator at a time (callers hold the sequence lock too)
    span := (SELECT value::bigint FROM log_meta WHERE key = 'partition_span'::text);
    want := last_index / span + 2::bigint;  -- partitions [0, want): the one holding last_index and the next
    created := 0;
    -- Attaching a partition locks every table with a foreign key into the parent against writes, one after
    -- another in catalogue order (and entries itself, for evidence's key). A projector step writes them
    -- in its own order, in one transaction: an append holding one it locked while waiting for another the
    -- step holds, which the step then wants, deadlocks, and PostgreSQL fails the append. So where a
    -- partition is missing they are locked first, in the step's order (evidence, ladder, snapshots, webhook
    -- rows; keys are written only by appends, under the sequence lock). A new table referencing entries
    -- belongs in this list, in the order the projector writes it.
    FOR pass IN 1..2 LOOP
        covered := NULL;
        FOREACH t IN ARRAY ARRAY['entries'::text, 'evidence'::text] LOOP
            -- The end of the newest partition (older ones may have been detached to archive them).
            SELECT coalesce(max(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''(\d+)''\)'::text)::bigint),
                            0::bigint)
                INTO have
                FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = t::regclass::oid;
            missing := missing OR have < want * span;
            k := have / span;
            WHILE pass = 2 AND k < want LOOP
                part := t || '_p'::text || k::text;
                EXECUTE 'CREATE TABLE '::text || quote_ident(part) || ' (LIKE '::text || quote_ident(t)
                    || ' INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'::text;
                -- Statement triggers are not cloned to partitions: TRUNCATE of a partition must be refused here.
                EXECUTE 'CREATE TRIGGER '::text || quote_ident(part || '_no_truncate'::text)
                    || ' BEFORE TRUNCATE ON '::text || quote_ident(part)
                    || ' FOR EACH STATEMENT EXECUTE FUNCTION trustscore_refuse_change()'::text;
                EXECUTE 'ALTER TABLE '::text || quote_ident(t) || ' ATTACH PARTITION '::text || quote_ident(part)
                    || ' FOR VALUES FROM ('::text || (k * span)::text || ') TO ('::text
                    || ((k + 1::bigint) * span)::text || ')'::text;
                created := created + 1;
                k := k + 1::bigint;
            END LOOP;
            covered := least(coalesce(covered, greatest(have, want * span)), greatest(have, want * span));
        END LOOP;
        IF pass = 1 THEN
            EXIT WHEN NOT missing;  -- no partition missing: nothing is locked
            LOCK TABLE evidence, ladder, snapshots, webhook_subscriptions, webhook_events, keys
                IN SHARE ROW EXCLUSIVE MODE;
        END IF;
    END LOOP;
END;
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION trustscore_extend_partitions(bigint) SET search_path = %I, pg_temp',
                   current_schema());
END;
$$;
REVOKE ALL ON FUNCTION trustscore_extend_partitions(bigint) FROM PUBLIC;

-- No append may commit between the copies below (its entry would have no side rows): both tables are held
-- from here on, before anything is read from them.
LOCK TABLE entries, evidence IN ACCESS EXCLUSIVE MODE;

-- The global uniqueness of statements and nonces, each row naming its entry.
CREATE TABLE entry_statements (
    statement_hash bytea  NOT NULL CHECK (length(statement_hash) = 32),
    idx            bigint NOT NULL
);
INSERT INTO entry_statements (statement_hash, idx) SELECT statement_hash, idx FROM entries;
ALTER TABLE entry_statements ADD PRIMARY KEY (statement_hash);

CREATE TABLE entry_nonces (
    signer text   NOT NULL,
    nonce  text   NOT NULL,
    idx    bigint NOT NULL
);
INSERT INTO entry_nonces (signer, nonce, idx) SELECT signer, nonce, idx FROM entries;
ALTER TABLE entry_nonces ADD PRIMARY KEY (signer, nonce);

-- Foreign keys into entries and evidence from other tables: kept aside, dropped, re-created at the end.
CREATE TEMPORARY TABLE trustscore_saved_fks ON COMMIT DROP AS
    SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def
    FROM pg_constraint
    WHERE contype = 'f' AND confrelid IN ('entries'::regclass, 'evidence'::regclass)
      AND conrelid NOT IN ('entries'::regclass, 'evidence'::regclass);

DO $$
DECLARE fk record; ix record;
BEGIN
    FOR fk IN SELECT * FROM trustscore_saved_fks LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.tbl, fk.conname);
    END LOOP;
    -- The old tables keep their rows until copied; their index names are freed for the new tables.
    ALTER TABLE entries RENAME TO entries_unpartitioned;
    ALTER TABLE evidence RENAME TO evidence_unpartitioned;
    FOR ix IN SELECT indexrelid::regclass::text AS name FROM pg_index
              WHERE indrelid IN ('entries_unpartitioned'::regclass, 'evidence_unpartitioned'::regclass) LOOP
        EXECUTE format('ALTER INDEX %s RENAME TO %I', ix.name, ix.name || '_unpartitioned');
    END LOOP;
END;
$$;

-- Same columns, defaults and checks; indexes and keys come after the copy (faster than row by row).
CREATE TABLE entries (LIKE entries_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (idx);
CREATE TABLE evidence (LIKE evidence_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (idx);
SELECT trustscore_extend_partitions(greatest((SELECT next_index FROM log_sequence) - 1, 0));

INSERT INTO entries SELECT * FROM entries_unpartitioned;
INSERT INTO evidence SELECT * FROM evidence_unpartitioned;
DROP TABLE evidence_unpartitioned;
DROP TABLE entries_unpartitioned;

ALTER TABLE entries ADD PRIMARY KEY (idx);
CREATE INDEX entries_subject ON entries (subject, idx);
CREATE INDEX entries_kind ON entries (kind, idx);
ALTER TABLE evidence ADD PRIMARY KEY (idx, seq);
ALTER TABLE evidence ADD FOREIGN KEY (idx) REFERENCES entries (idx);
CREATE INDEX evidence_agent ON evidence (agent, idx);

DO $$
DECLARE fk record; t text;
BEGIN
    FOR fk IN SELECT * FROM trustscore_saved_fks LOOP
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.tbl, fk.conname, fk.def);
    END LOOP;
    -- Row triggers of a partitioned table are cloned to every partition, present and future.
    FOREACH t IN ARRAY ARRAY['entries', 'evidence', 'entry_statements', 'entry_nonces'] LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW '
                       'EXECUTE FUNCTION trustscore_refuse_change()', t || '_append_only', t);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                       'EXECUTE FUNCTION trustscore_refuse_change()', t || '_no_truncate', t);
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON entries, evidence, entry_statements, entry_nonces TO trustscore_app;
        GRANT EXECUTE ON FUNCTION trustscore_extend_partitions(bigint) TO trustscore_app;
    END IF;
END;
$$;

ANALYZE entries, evidence, entry_statements, entry_nonces;
