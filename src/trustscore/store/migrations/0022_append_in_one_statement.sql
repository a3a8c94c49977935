-- The common append in one statement (store/log.py, LogStore._append_new): new entries, none of them in the
-- log yet, written with the keys their cards introduce, from a single call in a transaction of its own.
--
-- Appends serialise on the log_sequence row. Written from the client, an append held that lock across
-- six to eight round trips (BEGIN, the lock, the entries, the keys, the sequence, COMMIT, savepoints),
-- each also waiting for the appending process's event loop to come back to it; here the lock is held for
-- the statements below and the commit, whatever the distance to the database or the load on the caller.
--
-- Returns the index of the first entry written, or NULL having written nothing when the common case does
-- not hold, and the caller then takes the general path, which says why (a statement or a nonce already
-- in the log, a key registered otherwise, an index no partition covers yet):
--   * the indexes from the sequence on must lie below `covered` (the caller's knowledge of the
--     partitions: every index below it has one);
--   * no statement hash and no (signer, nonce) of the batch may be in the log;
--   * a key the batch introduces may be registered already only exactly as the batch would register it
--     (same card type, controller and roles; a card replaced by a newer one), and is then left as it is.
-- The caller has checked that no statement hash and no (signer, nonce) is twice in the batch, and that
-- each key id is introduced once (`key_offsets`: the position in the batch of its first card).
--
-- The statements and nonces are probed before the lock is taken: the log is append-only, so one found
-- then is a final answer, and a resubmission or a replay returns without locking anything. One logged
-- meanwhile (by an append that held the lock while this call waited for it) makes an insert below fail
-- on its unique index, and the whole call with it: the caller then takes the general path. The keys are
-- probed under the lock (in READ COMMITTED each statement here sees what committed before it began, so
-- every append that held the lock before), and a key is inserted only if absent, never "on conflict do
-- nothing": a key row written meanwhile by a writer that skipped the lock (none does) fails the call on
-- keys_pkey instead of letting a card contradict its key's registration.
--
-- It runs with the caller's rights (the app role may lock the sequence row and insert into these tables).
CREATE FUNCTION trustscore_append_new(
    leaves bytea[], leaf_hashes bytea[], statement_hashes bytea[], signers text[], nonces text[],
    kinds text[], subjects text[], covered bigint,
    key_ids text[], key_publics bytea[], key_offsets bigint[], key_kinds text[], key_controllers text[],
    key_roles text[]
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    start bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(statement_hashes) AS t(h) JOIN entry_statements s ON s.statement_hash = t.h)
       OR EXISTS (SELECT 1 FROM unnest(signers, nonces) AS t(signer, nonce)
                  JOIN entry_nonces o ON o.signer = t.signer AND o.nonce = t.nonce)
    THEN
        RETURN NULL;
    END IF;
    SELECT next_index INTO start FROM log_sequence FOR UPDATE;
    IF start + cardinality(leaves) > covered THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(key_ids, key_kinds, key_controllers, key_roles)
                      AS t(id, kind, controller, roles)
                  JOIN keys k ON k.id = t.id
                  WHERE (k.kind, k.controller, k.roles)
                        IS DISTINCT FROM (t.kind, t.controller, ARRAY(SELECT jsonb_array_elements_text(t.roles::jsonb))))
    THEN
        RETURN NULL;
    END IF;
    WITH e AS (
        INSERT INTO entries (idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject)
        SELECT start + t.o - 1, t.leaf, t.leaf_hash, t.statement_hash, t.signer, t.nonce, t.kind, t.subject
        FROM unnest(leaves, leaf_hashes, statement_hashes, signers, nonces, kinds, subjects)
            WITH ORDINALITY AS t(leaf, leaf_hash, statement_hash, signer, nonce, kind, subject, o)
        RETURNING idx, statement_hash, signer, nonce
    ), s AS (
        INSERT INTO entry_statements (statement_hash, idx) SELECT statement_hash, idx FROM e
    ), o AS (
        INSERT INTO entry_nonces (signer, nonce, idx) SELECT signer, nonce, idx FROM e
    )
    INSERT INTO keys (id, public_key, first_idx, kind, controller, roles)
    SELECT t.id, t.public_key, start + t.offset_, t.kind, t.controller,
           ARRAY(SELECT jsonb_array_elements_text(t.roles::jsonb))
    FROM unnest(key_ids, key_publics, key_offsets, key_kinds, key_controllers, key_roles)
        AS t(id, public_key, offset_, kind, controller, roles)
    WHERE NOT EXISTS (SELECT 1 FROM keys k WHERE k.id = t.id);
    UPDATE log_sequence SET next_index = start + cardinality(leaves);
    RETURN start;
END;
$$;

-- Only the app role (where it exists) and the owner may call it, as with trustscore_extend_partitions.
REVOKE ALL ON FUNCTION trustscore_append_new(bytea[], bytea[], bytea[], text[], text[], text[], text[], bigint,
    text[], bytea[], bigint[], text[], text[], text[]) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT EXECUTE ON FUNCTION trustscore_append_new(bytea[], bytea[], bytea[], text[], text[], text[], text[],
            bigint, text[], bytea[], bigint[], text[], text[], text[]) TO trustscore_app;
    END IF;
END;
$$;
