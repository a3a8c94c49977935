-- Re-verification runs: resumable and idempotent (docs/reverification.md). The only mutable rows are
-- the runs' states; what a run found is a signed statement in the log.
CREATE TABLE reverify_runs (
    agent           text     NOT NULL,
    report_index    bigint   NOT NULL,
    seed            bytea    NOT NULL,
    trigger         text     NOT NULL CHECK (trigger IN ('report', 'schedule')),
    checkpoint_size bigint   NOT NULL,
    endpoint        text     NOT NULL,
    state           text     NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
    entry_index     bigint,
    same_as_index   bigint,
    attempts        integer  NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, report_index, seed)
);
CREATE INDEX reverify_runs_pending ON reverify_runs (created_at) WHERE state = 'pending';

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT, UPDATE ON reverify_runs TO trustscore_app;
    END IF;
END;
$$;
