-- The evidence log: sequenced entries, the keys they introduce, Merkle nodes and signed checkpoints.
-- Every table here is append-only, enforced by triggers (and by privileges for the app role).

CREATE TABLE log_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- One row holding the next index to assign; appenders lock it, so indexes are contiguous.
CREATE TABLE log_sequence (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    next_index bigint NOT NULL CHECK (next_index >= 0)
);
INSERT INTO log_sequence (id, next_index) VALUES (true, 0);

CREATE TABLE entries (
    idx            bigint PRIMARY KEY CHECK (idx >= 0),
    leaf           bytea NOT NULL,
    leaf_hash      bytea NOT NULL CHECK (length(leaf_hash) = 32),
    statement_hash bytea NOT NULL UNIQUE CHECK (length(statement_hash) = 32),
    signer         text NOT NULL,
    nonce          text NOT NULL,
    kind           text NOT NULL,
    subject        text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (signer, nonce)
);
CREATE INDEX entries_subject ON entries (subject, idx);
CREATE INDEX entries_kind ON entries (kind, idx);

CREATE TABLE keys (
    id         text PRIMARY KEY,
    public_key bytea NOT NULL CHECK (length(public_key) = 32),
    first_idx  bigint NOT NULL REFERENCES entries (idx)
);

-- Hash of every complete aligned subtree: node (level, idx) covers leaves [idx*2^level, (idx+1)*2^level).
CREATE TABLE tree_nodes (
    level smallint NOT NULL CHECK (level >= 0 AND level < 64),
    idx   bigint NOT NULL CHECK (idx >= 0),
    hash  bytea NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (level, idx)
);

CREATE TABLE checkpoints (
    size        bigint PRIMARY KEY CHECK (size >= 0),
    root        bytea NOT NULL CHECK (length(root) = 32),
    signed_note text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION trustscore_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'table % is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['entries', 'keys', 'tree_nodes', 'checkpoints', 'log_meta'] LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW '
                       'EXECUTE FUNCTION trustscore_refuse_change()', t || '_append_only', t);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                       'EXECUTE FUNCTION trustscore_refuse_change()', t || '_no_truncate', t);
    END LOOP;
END;
$$;

-- The sequence row may only move forward, one batch at a time, and never be removed.
CREATE FUNCTION trustscore_sequence_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'UPDATE' OR NEW.next_index < OLD.next_index THEN
        RAISE EXCEPTION 'log_sequence only moves forward' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER log_sequence_forward BEFORE UPDATE OR DELETE ON log_sequence
    FOR EACH ROW EXECUTE FUNCTION trustscore_sequence_forward();
CREATE TRIGGER log_sequence_no_truncate BEFORE TRUNCATE ON log_sequence
    FOR EACH STATEMENT EXECUTE FUNCTION trustscore_refuse_change();

-- Where the deployment allows it, the service runs as a role that can only read and insert.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        CREATE ROLE trustscore_app NOLOGIN;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'cannot create role trustscore_app; relying on triggers alone';
END;
$$;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        EXECUTE 'GRANT USAGE ON SCHEMA ' || quote_ident(current_schema()) || ' TO trustscore_app';
        GRANT SELECT, INSERT ON entries, keys, tree_nodes, checkpoints, log_meta TO trustscore_app;
        GRANT SELECT, UPDATE ON log_sequence TO trustscore_app;
        GRANT SELECT ON schema_migrations TO trustscore_app;
    END IF;
END;
$$;
