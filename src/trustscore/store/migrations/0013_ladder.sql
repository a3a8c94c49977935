-- The evidence ladder (docs/evidence-ladder.md): every evidence item's rung, and one row per work record,
-- each under the rule version it was written with (old rows keep theirs).
CREATE TABLE ladder (
    idx              bigint NOT NULL REFERENCES entries (idx),
    pos              integer NOT NULL,
    seq              integer,
    agent            text NOT NULL,
    dimension        text NOT NULL,
    rung             smallint NOT NULL,
    rule             text NOT NULL,
    attested         text NOT NULL,
    cover            text NOT NULL,
    issuer           text,
    outcome_detected boolean NOT NULL,
    summary          text NOT NULL,
    kind             text NOT NULL,
    model            text,
    adapter          text,
    exam             text,
    marketplace      text,
    PRIMARY KEY (idx, pos)
);
CREATE INDEX ladder_agent ON ladder (agent, idx);

-- Rows are never changed: a rule change writes new rows under the new rule, old rows keep theirs.
CREATE TRIGGER ladder_append_only BEFORE UPDATE OR DELETE ON ladder
    FOR EACH ROW EXECUTE FUNCTION trustscore_refuse_change();
CREATE TRIGGER ladder_no_truncate BEFORE TRUNCATE ON ladder
    FOR EACH STATEMENT EXECUTE FUNCTION trustscore_refuse_change();

-- Entries projected before this migration have no ladder rows yet: the projector derives them once at
-- start-up (services/projector.py) and sets this back to 0.
INSERT INTO projection_state (name, next_index)
    SELECT 'ladder_backfill', next_index FROM projection_state WHERE name = 'log';

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON ladder TO trustscore_app;
    END IF;
END;
$$;
