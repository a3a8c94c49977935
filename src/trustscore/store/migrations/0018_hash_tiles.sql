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
-- rows (proofs fall back to the nodes; fsck reports the missing rows): upgrade every process that
-- integrates (--role worker or all) together with this migration.
LOCK TABLE tree_nodes IN SHARE MODE;
INSERT INTO hash_tiles (level, idx, subtree)
SELECT level / 8, idx >> (8 - level % 8), string_agg(hash, ''::bytea ORDER BY level, idx)
FROM tree_nodes
GROUP BY level / 8, idx >> (8 - level % 8)
HAVING count(*) = 510;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON hash_tiles TO trustscore_app;
    END IF;
END;
$$;

ANALYZE hash_tiles;
