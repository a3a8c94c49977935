-- trustscore_append_new (migration 0022) with the foreign-key checks of its keys planned once.
--
-- PostgreSQL checks each new key's first_idx against entries with one query per row through the plan
-- cache, and the sessions plan every statement anew (store/db.py, force_custom_plan): the check of a
-- card's key was planned at every append, 22 µs of the database's ~140 µs per single card (bench/README.md,
-- "Report ingest, session 23"). The keys are now written by a statement of their own, run as
-- store/db.py's checked_inserts runs bulk inserts: while entries has at most 16 partitions
-- (db.GENERIC_CHECKS_UP_TO; a generic plan locks every partition at each run on PostgreSQL 15, and costs
-- more than planning per row from about 25), one generic plan, made with sequential scans disabled (a
-- primary-key lookup; a plan made while the log held a few entries would otherwise scan the partition at
-- every check as the log grew), and the settings put back after it.
--
-- So that the key insert's own plan has nothing to choose, it no longer looks keys up: the keys of the
-- batch already registered are read once, under the lock, by the statement that checks they are
-- registered exactly as the batch would register them (it is planned for its parameters as before), and
-- the insert leaves those out. Keys are only written under the sequence lock, so the list holds until
-- the insert; a key row written meanwhile by a writer that skipped the lock (none does) still fails the
-- call on keys_pkey. Everything else is as in 0022: the same arguments, result and refusals.
CREATE OR REPLACE FUNCTION trustscore_append_new(
    leaves bytea[], leaf_hashes bytea[], statement_hashes bytea[], signers text[], nonces text[],
    kinds text[], subjects text[], covered bigint,
    key_ids text[], key_publics bytea[], key_offsets bigint[], key_kinds text[], key_controllers text[],
    key_roles text[]
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    start bigint;
    present text[];
    contradicted boolean;
    plan_mode text;
    seqscan text;
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
    SELECT coalesce(array_agg(k.id), '{}'::text[]),
           coalesce(bool_or((k.kind, k.controller, k.roles)
                            IS DISTINCT FROM (t.kind, t.controller,
                                              ARRAY(SELECT jsonb_array_elements_text(t.roles::jsonb)))), false)
      INTO present, contradicted
      FROM unnest(key_ids, key_kinds, key_controllers, key_roles) AS t(id, kind, controller, roles)
      JOIN keys k ON k.id = t.id;
    IF contradicted THEN
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
    )
    INSERT INTO entry_nonces (signer, nonce, idx) SELECT signer, nonce, idx FROM e;
    -- Any key array not empty: as 0022, whose insert ran whatever their lengths (unnest pads the shorter
    -- ones with NULLs, and a NULL id is refused); the caller builds them of one length.
    IF greatest(cardinality(key_ids), cardinality(key_publics), cardinality(key_offsets),
                cardinality(key_kinds), cardinality(key_controllers), cardinality(key_roles)) > 0 THEN
        plan_mode := current_setting('plan_cache_mode');
        seqscan := current_setting('enable_seqscan');
        PERFORM set_config('plan_cache_mode',
                           CASE WHEN (SELECT count(*) FROM pg_inherits WHERE inhparent = 'entries'::regclass) <= 16
                                THEN 'force_generic_plan' ELSE plan_mode END, true),
                set_config('enable_seqscan', 'off', true);
        INSERT INTO keys (id, public_key, first_idx, kind, controller, roles)
        SELECT t.id, t.public_key, start + t.offset_, t.kind, t.controller,
               ARRAY(SELECT jsonb_array_elements_text(t.roles::jsonb))
        FROM unnest(key_ids, key_publics, key_offsets, key_kinds, key_controllers, key_roles)
            AS t(id, public_key, offset_, kind, controller, roles)
        WHERE NOT coalesce(t.id = ANY (present), false);  -- a NULL id is inserted, and refused, as in 0022
        PERFORM set_config('plan_cache_mode', plan_mode, true), set_config('enable_seqscan', seqscan, true);
    END IF;
    UPDATE log_sequence SET next_index = start + cardinality(leaves);
    RETURN start;
END;
$$;
