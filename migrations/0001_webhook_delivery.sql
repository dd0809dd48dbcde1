-- One row per delivery (one endpoint's copy of one state change), keyed by its evt_ id.
-- The primary key is the dedupe: a duplicate costs one index lookup.
CREATE TABLE webhook_delivery (
    event_id     TEXT PRIMARY KEY,                 -- evt_…: this delivery
    resource_id  TEXT NOT NULL,                    -- inv_… / wdr_… / pcd_…: where the money is
    event_type   TEXT NOT NULL,
    body         TEXT NOT NULL,                    -- the raw bytes as received (verified UTF-8 JSON)
    received_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    processed_at TEXT,
    outcome      TEXT CHECK (outcome IN ('applied', 'stale', 'ignored', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,       -- consumer attempts that failed
    last_error   TEXT,
    enqueued_at  TEXT,                             -- last time a queue message was sent for it
    replays      INTEGER NOT NULL DEFAULT 0
);

-- the archive, newest first, cursor-paged on (received_at, event_id)
CREATE INDEX webhook_delivery_received ON webhook_delivery (received_at DESC, event_id DESC);
CREATE INDEX webhook_delivery_resource ON webhook_delivery (resource_id, received_at);
CREATE INDEX webhook_delivery_type ON webhook_delivery (event_type, received_at);
-- the sweeper only ever looks at unprocessed rows
CREATE INDEX webhook_delivery_unprocessed ON webhook_delivery (enqueued_at) WHERE processed_at IS NULL;
