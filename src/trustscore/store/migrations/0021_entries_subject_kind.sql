-- Entries by subject and kind, in log order, replacing the index by subject alone (entries_subject).
-- Every lookup by subject also names the kinds it wants (an agent's newest cards, its sittings, its
-- re-verifications). With (subject, idx) and (kind, idx) apart, PostgreSQL's planner, its statistics behind a
-- log that grows fast, intersected the two: each lookup of one agent's newest card read the kind index over
-- every card of the partition (1.3 ms an agent at 30,000 cards, growing with the log; most of PostgreSQL's
-- time during card ingest). One index on both columns answers such a lookup from the agent's own entries.
-- Built here on every partition (new partitions get it when they are attached); the table is held against
-- writes while it builds: upgrade when ingest is quiet.
CREATE INDEX entries_subject_kind ON entries (subject, kind, idx);
DROP INDEX entries_subject;
