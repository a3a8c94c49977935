-- Where the scope runner's sweep of new agent cards stopped (services/scope_runs.py, sweep_cards): every
-- card below it has been considered for a declarations run. Kept here rather than in the runner's
-- memory, so that a restart or a takeover of the "scope runs" lease resumes instead of sweeping every
-- card in the log again (at 10^7 entries that sweep, one 10,000-card page per poll, competed with
-- ingest for a minute after each start). Starting at 0 repeats nothing: scheduling is keyed by card.
INSERT INTO projection_state (name, next_index) VALUES ('scope_cards', 0);
