-- A rating a model no longer gives (trustscore-v3 refusing an agent's evidence time, say: services/ratings.py,
-- _each_agent) is written as a row without a rating, so that every reader drops its copy: deleting the
-- row would leave the readers that already hold it serving it as current, since they read only rows
-- written after the version they have. A row without a rating has no medals either.
ALTER TABLE current_ratings ALTER COLUMN rating DROP NOT NULL;
ALTER TABLE current_ratings ADD CONSTRAINT current_ratings_dropped_has_no_medals
    CHECK (rating IS NOT NULL OR medals IS NULL);
COMMENT ON COLUMN current_ratings.rating IS
    'msgspec JSON of trustscore.scoring.ratings.Rating; NULL: the model no longer rates the agent';
