-- Pending scope and re-verification runs are claimed by when they are due (services/scope_runs.py,
-- services/reverify.py): a new run is due at once; a run that failed is due again after a delay that
-- grows with its attempts. So a run that keeps failing cannot hold the queue (runs due before it go
-- first), it is not starved either (runs scheduled after its retry time go after it), and a short outage
-- costs each run at most one attempt. Existing rows are due from the migration on.
ALTER TABLE scope_runs ADD COLUMN not_before timestamptz NOT NULL DEFAULT now();
ALTER TABLE reverify_runs ADD COLUMN not_before timestamptz NOT NULL DEFAULT now();
CREATE INDEX scope_runs_due ON scope_runs (not_before, created_at) WHERE state = 'pending';
CREATE INDEX reverify_runs_due ON reverify_runs (not_before, created_at) WHERE state = 'pending';
