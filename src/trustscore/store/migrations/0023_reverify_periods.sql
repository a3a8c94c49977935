-- The checkpoint each period's scheduled re-verification runs are seeded by (services/reverify.py,
-- ``Reverifier.schedule_period``). The first worker to schedule a period fixes it here; any other
-- scheduling of the same period (a retry after a failure part-way, a restart, a worker that took the
-- "re-verification" lease over, or an old holder still finishing its step beside the new one) reads the
-- same checkpoint, so it derives the same seeds and its runs are the rows already added (the primary key
-- of reverify_runs): one scheduled round per agent and period, whoever schedules it and however often.
-- Before, each scheduling drew its seeds from the newest checkpoint, so a takeover added a second round
-- and two schedulers racing could log two re-verifications of one report, each of whose mismatches counts.
CREATE TABLE reverify_periods (
    period_start_ms bigint PRIMARY KEY,  -- the period's start, milliseconds since the Unix epoch
    checkpoint_size bigint NOT NULL CHECK (checkpoint_size >= 0),
    created_at      timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON reverify_periods TO trustscore_app;
    END IF;
END;
$$;
