-- The outcome stats group work records by repository too (docs/evidence-ladder.md, "Rates and their sample
-- size"): a work record's row names its first commit's repository. Rows written before have none until
-- the start-up re-derivation writes them again (this release's derivation versions differ from theirs).
ALTER TABLE ladder ADD COLUMN IF NOT EXISTS repo text;
