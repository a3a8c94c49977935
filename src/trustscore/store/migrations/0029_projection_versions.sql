-- The versions of the derivation the evidence table was derived under (the reporter-standing policy, the
-- work-record derivation: evidence/project_log.py, DERIVATION). When a release derives differently, the
-- start-up derives the evidence of every projected entry again from the log, with the owner's privileges
-- (the app role may not delete evidence), so that served ratings are the offline recompute's
-- (store/projection_tables.py, rederive). A database from before this table has no rows: derived again.
CREATE TABLE projection_versions (
    part     text PRIMARY KEY,
    version  text NOT NULL
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT ON projection_versions TO trustscore_app;
    END IF;
END;
$$;

-- Once versions are recorded, the projection moves on only in a transaction that names the same versions
-- (the setting trustscore.derivation, which every projector step sets: store/projection_tables.py). A
-- process of an earlier release still running after a later one derived the evidence again would
-- otherwise go on adding evidence derived under its own versions, for good and unnoticed (found by
-- review); now its steps fail, and say why, until it is stopped.
CREATE FUNCTION trustscore_check_derivation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    recorded text;
    mine text := coalesce(nullif(current_setting('trustscore.derivation', true), ''), 'unnamed versions');
BEGIN
    SELECT string_agg(part || ' ' || version, ', ' ORDER BY part COLLATE "C") INTO recorded
        FROM projection_versions;
    IF recorded IS NOT NULL AND recorded IS DISTINCT FROM mine THEN
        RAISE EXCEPTION 'the evidence is derived under %; this process derives under %: it may not project '
                        '(stop the processes of the other release)', recorded, mine
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER projection_derivation BEFORE UPDATE ON projection_state
    FOR EACH ROW WHEN (NEW.name = 'log') EXECUTE FUNCTION trustscore_check_derivation();
