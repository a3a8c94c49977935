-- Current ratings, materialised by the process holding the "ratings" lease (docs/operations.md, "Roles
-- and leases") so that API processes serve ratings without holding any evidence. One row per (model,
-- agent): the rating and medals as JSON bytes, when it was computed and the log size of its evidence.
-- Every write bumps ratings_state.version, stamps the rows it writes with it and NOTIFYs
-- trustscore_ratings in the same transaction; readers fetch the rows newer than the version they have.
CREATE TABLE current_ratings (
    model        text        NOT NULL,
    agent        text        NOT NULL,
    rating       bytea       NOT NULL,  -- msgspec JSON of trustscore.scoring.ratings.Rating
    medals       bytea,                 -- msgspec JSON of Medals; NULL: the model has no medals file
    computed_at  timestamptz NOT NULL,
    log_size     bigint      NOT NULL,  -- the evidence of entries [0, log_size) when it was computed
    version      bigint      NOT NULL,
    PRIMARY KEY (model, agent)
);
CREATE INDEX current_ratings_version ON current_ratings (version);

CREATE TABLE ratings_state (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    version   bigint  NOT NULL,
    log_size  bigint  NOT NULL  -- every rating holds for the log prefix [0, log_size)
);
INSERT INTO ratings_state (version, log_size) VALUES (0, 0);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT, UPDATE ON current_ratings, ratings_state TO trustscore_app;
    END IF;
END;
$$;
