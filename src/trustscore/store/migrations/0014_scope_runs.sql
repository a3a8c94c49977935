-- Server scope-honesty runs (docs/scope-honesty.md, "Server runs"): one row per agent and run key
-- ("week:<n>" for the weekly schedule, "card:<index>" after a declaration change), so two processes or a
-- restart never run the same week twice. What a run found is a signed scope-run/v1 statement in the log.
CREATE TABLE scope_runs (
    agent        text        NOT NULL,
    run_key      text        NOT NULL,
    trigger      text        NOT NULL CHECK (trigger IN ('schedule', 'declarations')),
    state        text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'skipped')),
    entry_index  bigint,
    reason       text,
    attempts     integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, run_key)
);
-- At most one pending run per agent (a declaration change while one waits replaces nothing: the
-- pending run reads the newest card when it starts).
CREATE UNIQUE INDEX scope_runs_one_pending ON scope_runs (agent) WHERE state = 'pending';
CREATE TABLE scope_run_sweep (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    next_index bigint  NOT NULL
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT, UPDATE ON scope_runs, scope_run_sweep TO trustscore_app;
    END IF;
END;
$$;
