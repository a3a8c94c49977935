-- An agent's sittings by request time, for the once-a-period check of scope sittings (services/sittings.py):
-- it reads the agent's sittings of the last period whatever their exam (an exam prefix cannot use 0027's
-- (agent, exam, created_at), so that check read every sitting the agent ever had: 40 ms at 200,000, under
-- the agent's lock; found by review). 0027's index served nothing else.
DROP INDEX IF EXISTS sittings_agent_exam;
CREATE INDEX sittings_agent_created ON sittings (agent, created_at);
