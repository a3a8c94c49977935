-- Webhooks and feeds (docs/webhooks.md). Events are derived from the log by the projector, in the same
-- transaction that advances projection_state, so a crash loses none and repeats none. Each event is
-- fanned out to the subscriptions that want it (as of its log index) as one delivery row; the dispatcher
-- moves a delivery from pending to delivered or dead, and logs every attempt.
CREATE TABLE webhook_subscriptions (
    id          bigint PRIMARY KEY REFERENCES entries (idx),  -- the subscription's log index
    subscriber  text     NOT NULL,
    url         text     NOT NULL,
    events      text[]   NOT NULL,
    agents      text[]   NOT NULL,  -- empty: every agent
    threshold   integer  NOT NULL,
    revoked_at  bigint   REFERENCES entries (idx)  -- the revocation's log index
);
CREATE INDEX webhook_subscriptions_active ON webhook_subscriptions (id) WHERE revoked_at IS NULL;

CREATE TABLE webhook_events (
    seq         bigserial PRIMARY KEY,  -- order of derivation: log order, then position within an entry
    id          text     NOT NULL UNIQUE,  -- stable: derived from the cause (log index, type, agent, model)
    idx         bigint   NOT NULL REFERENCES entries (idx),
    type        text     NOT NULL,
    agent       text     NOT NULL,
    at          timestamptz NOT NULL,  -- the cause's own time (issued_at, taken_at), not the server's
    payload     bytea    NOT NULL  -- the JSON body delivered and shown in feeds
);
CREATE INDEX webhook_events_agent ON webhook_events (agent, seq);

CREATE TABLE webhook_deliveries (
    subscription bigint   NOT NULL REFERENCES webhook_subscriptions (id),
    event_seq    bigint   NOT NULL REFERENCES webhook_events (seq),
    agent        text     NOT NULL,
    state        text     NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts     integer  NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subscription, event_seq)
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (subscription, agent, event_seq)
    WHERE state = 'pending';

CREATE TABLE webhook_attempts (
    subscription bigint   NOT NULL,
    event_seq    bigint   NOT NULL,
    attempt      integer  NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    status       integer,  -- the receiver's HTTP status; null when no answer
    error        text,
    millis       integer  NOT NULL,
    PRIMARY KEY (subscription, event_seq, attempt),
    FOREIGN KEY (subscription, event_seq) REFERENCES webhook_deliveries (subscription, event_seq)
);
CREATE INDEX webhook_attempts_recent ON webhook_attempts (subscription, at DESC, event_seq DESC, attempt DESC);

CREATE TRIGGER webhook_events_append_only BEFORE UPDATE OR DELETE ON webhook_events
    FOR EACH ROW EXECUTE FUNCTION trustscore_refuse_change();
CREATE TRIGGER webhook_attempts_append_only BEFORE UPDATE OR DELETE ON webhook_attempts
    FOR EACH ROW EXECUTE FUNCTION trustscore_refuse_change();

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trustscore_app') THEN
        GRANT SELECT, INSERT ON webhook_events, webhook_attempts TO trustscore_app;
        GRANT SELECT, INSERT, UPDATE ON webhook_subscriptions, webhook_deliveries TO trustscore_app;
        GRANT USAGE ON SEQUENCE webhook_events_seq_seq TO trustscore_app;
    END IF;
END;
$$;
