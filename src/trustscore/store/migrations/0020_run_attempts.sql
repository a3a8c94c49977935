-- Pending scope and re-verification runs are claimed fewest attempts first, then oldest
-- (services/scope_runs.py, services/reverify.py): a run that keeps failing goes behind every run that
-- has failed less often, so it cannot hold the queue, and a short outage costs each run at most an
-- attempt or two instead of all of one run's attempts back to back.
CREATE INDEX scope_runs_pending_attempts ON scope_runs (attempts, created_at) WHERE state = 'pending';
CREATE INDEX reverify_runs_pending_attempts ON reverify_runs (attempts, created_at) WHERE state = 'pending';
