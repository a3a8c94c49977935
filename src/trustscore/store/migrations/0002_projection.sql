-- Projections of the log: derived, append-only, rebuildable from the entries alone. Cards need no
-- projection: the keys table and the newest card entry of a key say everything about it.

-- Scoring evidence derived from log statements (docs/evidence-mapping.md).
CREATE TABLE evidence (
    idx          bigint NOT NULL REFERENCES entries (idx),
    seq          integer NOT NULL,
    agent        text NOT NULL,
    dimension    text NOT NULL,
    source       text NOT NULL,
    value        double precision,
    result       text,
    key          text,
    at           timestamptz NOT NULL,
    issuer       text,
    extra_weight double precision NOT NULL,
    PRIMARY KEY (idx, seq)
);
CREATE INDEX evidence_agent ON evidence (agent, idx);

-- Rating snapshots derived from rating-snapshot statements.
CREATE TABLE snapshots (
    idx           bigint NOT NULL REFERENCES entries (idx),
    agent         text NOT NULL,
    at            timestamptz NOT NULL,
    total         integer,
    adjusted      integer,
    model_version text NOT NULL,
    PRIMARY KEY (idx, agent)
);
CREATE INDEX snapshots_agent ON snapshots (agent, idx);

-- How far each projection has read the log. The only table here that changes in place.
CREATE TABLE projection_state (
    name       text PRIMARY KEY,
    next_index bigint NOT NULL CHECK (next_index >= 0)
);
INSERT INTO projection_state (name, next_index) VALUES ('log', 0);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['evidence', 'snapshots'] LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW '
                       'EXECUTE FUNCTION trustscore_refuse_change()', t || '_append_only', t);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                       'EXECUTE FUNCTION trustscore_refuse_change()', t || '_no_truncate', t);
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON evidence, snapshots TO trustscore_app;
        GRANT SELECT, UPDATE ON projection_state TO trustscore_app;
    END IF;
END;
$$;

-- What admission needs to know of a registered key, fixed at its first card.
ALTER TABLE keys
    ADD COLUMN kind text NOT NULL DEFAULT 'agent',
    ADD COLUMN controller text,
    ADD COLUMN roles text[] NOT NULL DEFAULT '{}';
