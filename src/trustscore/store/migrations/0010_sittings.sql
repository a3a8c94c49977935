-- Fresh exam sittings (docs/exams.md, "Sittings"). The secret stays here, and only here, until the
-- sitting closes and the server logs it; the log holds its SHA-256 from the moment the sitting opens.
-- States: opening (row written, sitting-open not yet known to be logged), open, closed, void (the
-- append never happened). The version number leaves room for other branches' migrations.
CREATE TABLE sittings (
    request_sha256 bytea       PRIMARY KEY,
    agent          text        NOT NULL,
    exam           text        NOT NULL,
    secret         bytea       NOT NULL,
    token_sha256   bytea       NOT NULL,
    deadline       timestamptz NOT NULL,
    open_index     bigint      UNIQUE,
    root           bytea,
    transcripts    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    state          text        NOT NULL DEFAULT 'opening'
                               CHECK (state IN ('opening', 'open', 'closed', 'void')),
    close_index    bigint,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sittings_due ON sittings (deadline) WHERE state = 'open';
CREATE INDEX sittings_unsettled ON sittings (agent) WHERE state IN ('opening', 'open');

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT, UPDATE ON sittings TO trustscore_app;
    END IF;
END;
$$;
