-- Operations (interface §9): what the metrics read, what the alerts keep.

-- Indexes the metrics' counts read instead of the table.
CREATE INDEX webhook_delivery_outcome ON webhook_delivery (outcome);
CREATE INDEX webhook_delivery_unprocessed_received ON webhook_delivery (received_at)
    WHERE processed_at IS NULL;
CREATE INDEX webhook_delivery_reason ON webhook_delivery (reason, received_at)
    WHERE reason IS NOT NULL;
CREATE INDEX effect_pending_created ON effect (created_at) WHERE dispatch = 'pending';

-- Counters kept in the isolate and flushed here at most once a minute per isolate, so a
-- flood of refused requests is never a flood of writes. `bucket` is the minute
-- ('2026-11-30T04:12') or 'total' (since the beginning).
CREATE TABLE request_count (
    bucket TEXT NOT NULL,
    name   TEXT NOT NULL,        -- refused | signature_verified
    label  TEXT NOT NULL,        -- refused: '<status> <code>'; signature_verified: secret id
    count  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, name, label)
);

-- One alert per condition while it holds (interface §9).
CREATE TABLE alert (
    id              TEXT PRIMARY KEY,               -- alt_…
    kind            TEXT NOT NULL CHECK (kind IN ('delivery_dead', 'effect_dead',
                        'deliveries_backlog', 'effects_backlog', 'reconciliation',
                        'livemode_mismatch', 'signature_refusals')),
    severity        TEXT NOT NULL CHECK (severity IN ('critical', 'warning')),
    summary         TEXT NOT NULL,
    count           INTEGER NOT NULL,               -- how much of the condition, last seen
    acked_count     INTEGER,                        -- the count an operator acknowledged
    state           TEXT NOT NULL DEFAULT 'open'
                        CHECK (state IN ('open', 'acknowledged', 'resolved')),
    first_seen      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_seen       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    sent_at         TEXT,                           -- last successful send to ALERT_WEBHOOK_URL
    sends           INTEGER NOT NULL DEFAULT 0,
    last_send_error TEXT,
    acknowledged_at TEXT,
    resolved_at     TEXT
);
-- at most one unresolved alert per kind
CREATE UNIQUE INDEX alert_unresolved_kind ON alert (kind) WHERE state <> 'resolved';
CREATE INDEX alert_recent ON alert (state, last_seen);
