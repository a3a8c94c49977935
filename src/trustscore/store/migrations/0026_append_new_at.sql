-- trustscore_append_new (migrations 0022, 0025) at an index the caller expected.
--
-- A report's graded evidence names the report's index and is signed, so it can only be made once the
-- report's index is known. The general path therefore appends a report under a transaction of the
-- client's: BEGIN, lock the sequence row, a savepoint, one insert per report of the commit group, release,
-- move the sequence, COMMIT; at least seven round trips with the sequence row locked, during which every
-- other append waits (bench/README.md, "Report ingest, session 24"). A process that appends alone knows the
-- next index: it makes the graded evidence for the indexes it expects and writes everything with this one
-- call, which writes only if the log's next index is indeed ``expected``.
--
-- Returns what trustscore_append_new returns (the first index, or NULL having written nothing) when the
-- next index is ``expected``; otherwise writes nothing and returns -1 - (the next index), the index the
-- caller now knows. The sequence row is locked first (a writer holding it is waited for, and its index
-- read once it commits) and held until the call's transaction ends, so no other writer can move the index
-- between the check and the insert. trustscore_append_new's probes for logged statements and nonces then
-- run under the lock (~0.26 ms of it per call), where 0022 runs them before locking.
CREATE FUNCTION trustscore_append_new_at(
    expected bigint,
    leaves bytea[], leaf_hashes bytea[], statement_hashes bytea[], signers text[], nonces text[],
    kinds text[], subjects text[], covered bigint,
    key_ids text[], key_publics bytea[], key_offsets bigint[], key_kinds text[], key_controllers text[],
    key_roles text[]
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    start bigint;
BEGIN
    SELECT next_index INTO start FROM log_sequence FOR UPDATE;
    IF start IS DISTINCT FROM expected THEN
        RETURN -1 - start;
    END IF;
    RETURN trustscore_append_new(leaves, leaf_hashes, statement_hashes, signers, nonces, kinds, subjects,
                                 covered, key_ids, key_publics, key_offsets, key_kinds, key_controllers,
                                 key_roles);
END;
$$;

-- Only the app role (where it exists) and the owner may call it, as with trustscore_append_new.
REVOKE ALL ON FUNCTION trustscore_append_new_at(bigint, bytea[], bytea[], bytea[], text[], text[], text[],
    text[], bigint, text[], bytea[], bigint[], text[], text[], text[]) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT EXECUTE ON FUNCTION trustscore_append_new_at(bigint, bytea[], bytea[], bytea[], text[], text[],
            text[], text[], bigint, text[], bytea[], bigint[], text[], text[], text[]) TO trustscore_app;
    END IF;
END;
$$;
