-- An agent's sittings of an exam family by time: the once-a-period check of agent-started scope@1
-- sittings (services/sittings.py, SittingConfig.scope_interval_s) reads the newest one, closed or not.
CREATE INDEX sittings_agent_exam ON sittings (agent, exam, created_at);
