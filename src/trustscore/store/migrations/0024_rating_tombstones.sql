-- A rating a model no longer gives (trustscore-v3 refusing an agent's evidence time, say: services/ratings.py,
-- _each_agent) is written as a row without a rating, so that every reader drops its copy: deleting the
-- row would leave the readers that already hold it serving it as current, since they read only rows
-- written after the version they have. A row without a rating has no medals either: NOT VALID, since
-- every existing row has a rating (the column was NOT NULL), so the check needs no scan of the table
-- (several GB at 10^6 agents) under the exclusive lock this transaction holds; new rows are checked.
ALTER TABLE current_ratings ALTER COLUMN rating DROP NOT NULL;
ALTER TABLE current_ratings ADD CONSTRAINT current_ratings_dropped_has_no_medals
    CHECK (rating IS NOT NULL OR medals IS NULL) NOT VALID;
COMMENT ON COLUMN current_ratings.rating IS
    'msgspec JSON of trustscore.scoring.ratings.Rating; NULL: the model no longer rates the agent';
