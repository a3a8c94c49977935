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

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON ladder TO trustscore_app;
    END IF;
END;
$$;
