-- Where the scope runner stopped (services/scope_runs.py), kept in the database rather than in the runner's
-- memory, so that a restart or a takeover of the "scope runs" lease resumes instead of starting over:
-- * scope_cards: every agent card below this index has been considered for a declarations run (before,
--   each start swept every card of the log again, 10,000 per poll);
-- * scope_period: the start (Unix seconds) of the latest period whose scheduled runs were all added
--   (before, each start read the newest cards of every agent again to schedule the current period).
-- Starting at 0 repeats nothing: runs are keyed by card and by period.
INSERT INTO projection_state (name, next_index) VALUES ('scope_cards', 0), ('scope_period', 0);
