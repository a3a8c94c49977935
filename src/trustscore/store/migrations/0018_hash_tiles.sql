-- Every FULL hash tile (docs/tiles.md), pre-folded: its complete subtree, heights 0..7, one row. Row
-- (level, idx) is tile L = level, N = idx: the stored nodes at tree levels 8L .. 8L+7 whose leaves fall in
-- tile N's span, concatenated level by level then by index (256 + 128 + ... + 2 = 510 hashes). A cold
-- proof or /tile of a full tile reads this one row instead of a range scan of 256 tree_nodes rows and a
-- fold (docs/tiles.md, "Proofs from the same tiles"). The integrator writes a tile's row in the
-- transaction that writes the last node at its level 8L (LogStore.integrate); partial tiles have none.
-- It repeats tree_nodes, so `trustscore log fsck` compares every row with them (store/log.py).
CREATE TABLE hash_tiles (
    level   smallint NOT NULL CHECK (level >= 0 AND level < 64),
    idx     bigint NOT NULL CHECK (idx >= 0),
    subtree bytea NOT NULL CHECK (length(subtree) = 510 * 32),
    PRIMARY KEY (level, idx)
);
-- Random hashes do not compress: store them out of line without trying (16 KiB, above any page).
ALTER TABLE hash_tiles ALTER COLUMN subtree SET STORAGE EXTERNAL;

CREATE TRIGGER hash_tiles_append_only BEFORE UPDATE OR DELETE ON hash_tiles FOR EACH ROW
    EXECUTE FUNCTION trustscore_refuse_change();
CREATE TRIGGER hash_tiles_no_truncate BEFORE TRUNCATE ON hash_tiles FOR EACH STATEMENT
    EXECUTE FUNCTION trustscore_refuse_change();

-- The full tiles of the tree stored so far (tree_nodes holds every complete node; a tile is full when all
-- 510 of its nodes are there). An integrator of an older version may still be running: the table lock
-- keeps tree_nodes still while this reads it. After this commits, such an integrator writes nodes but no
-- rows, so its checkpoint is refused when its batch makes a tile full (trigger below): upgrade every
-- process that integrates (--role worker or all) together with this migration.
LOCK TABLE tree_nodes IN SHARE MODE;
INSERT INTO hash_tiles (level, idx, subtree)
SELECT level / 8, idx >> (8 - level % 8), string_agg(hash, ''::bytea ORDER BY level, idx)
FROM tree_nodes
GROUP BY level / 8, idx >> (8 - level % 8)
HAVING count(*) = 510;

-- A checkpoint is refused unless every hash tile it makes full has its row (levels 0..6: a level-7 tile
-- would need 2^64 entries). An integrator older than this migration writes nodes but no rows: its
-- transaction now fails at the checkpoint (nothing is lost; an upgraded integrator redoes the batch)
-- instead of leaving full tiles without rows, which fsck would report for ever.
CREATE FUNCTION trustscore_checkpoint_has_tiles() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    prev bigint;
    lo bigint;
    hi bigint;
    have bigint;
BEGIN
    SELECT coalesce(max(size), 0) INTO prev FROM checkpoints;
    FOR lv IN 0..6 LOOP
        lo := prev >> (8 * (lv + 1));
        hi := NEW.size >> (8 * (lv + 1));
        EXIT WHEN hi = 0;
        IF hi > lo THEN
            SELECT count(*) INTO have FROM hash_tiles WHERE level = lv AND idx >= lo AND idx < hi;
            IF have <> hi - lo THEN
                RAISE EXCEPTION 'checkpoint %: % of the % level-% hash tiles it makes full have no row in hash_tiles (an integrator older than migration 0018?)',
                    NEW.size, hi - lo - have, hi - lo, lv USING ERRCODE = 'integrity_constraint_violation';
            END IF;
        END IF;
    END LOOP;
    RETURN NEW;
END;
$$;
CREATE TRIGGER checkpoints_have_tiles BEFORE INSERT ON checkpoints FOR EACH ROW
    EXECUTE FUNCTION trustscore_checkpoint_has_tiles();

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON hash_tiles TO trustscore_app;
    END IF;
END;
$$;

ANALYZE hash_tiles;
