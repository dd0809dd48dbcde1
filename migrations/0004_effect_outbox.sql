-- The transactional outbox (interface §7): each effect row is written in the transaction of
-- its transition, with a stable id and a dispatch state, and is delivered to the order
-- system at least once after that transaction committed.
ALTER TABLE effect ADD COLUMN effect_id TEXT;           -- eff_…: stable, the same on every attempt
ALTER TABLE effect ADD COLUMN dispatch TEXT NOT NULL DEFAULT 'pending'
    CHECK (dispatch IN ('pending', 'delivered', 'dead'));
ALTER TABLE effect ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;  -- requests sent to the order system
ALTER TABLE effect ADD COLUMN next_attempt_at TEXT;     -- when the dispatcher tries again
ALTER TABLE effect ADD COLUMN last_error TEXT;
ALTER TABLE effect ADD COLUMN delivered_at TEXT;
ALTER TABLE effect ADD COLUMN enqueued_at TEXT;         -- last time a dispatch message was sent

-- effects written before the outbox existed get their id now
UPDATE effect SET effect_id = 'eff_' || lower(hex(randomblob(16))) WHERE effect_id IS NULL;
CREATE UNIQUE INDEX effect_effect_id ON effect (effect_id);
-- the sweeper and the metrics only look at pending effects
CREATE INDEX effect_pending ON effect (enqueued_at) WHERE dispatch = 'pending';
-- the feed filtered by dispatch state, oldest first
CREATE INDEX effect_dispatch ON effect (dispatch, id);
