-- Operations that do not grow with history (interface §9, §10 "Health checks do not grow with
-- history"), alerts that an acknowledgement cannot silence for good, dismiss, pull-mode ack.
--
-- What each health fact reads, decided per fact (paymos_core::statements::operations,
-- METRICS_FACTS, says the same next to the SQL):
--   * the working set, through partial indexes whose size is the backlog, not the history:
--     unprocessed deliveries, pending effects, and the dead not yet dismissed (new below),
--   * a point or a short range of an index: the last delivery (max), livemode mismatches of
--     the last 24 hours, open alerts,
--   * counts kept in `tally`, a one-row table written by the statements that change them, in
--     their own transaction, where no index over the working set can give the figure: the
--     processed deliveries by outcome, the livemode mismatches on record, the delivered,
--     cancelled and dismissed effects, the dismissed deliveries.

-- ---------------------------------------------------------------- alerts

-- Rebuilt (SQLite cannot change a CHECK in place) so that `kind` admits the kinds interface
-- §9 and §10 add: `database_unavailable`, `database_size`, `archive`. The CHECK is kept, not
-- dropped in favour of the core's enum: the database refuses a kind no one defined, and the
-- simulator's schema test fails when the core names a kind this list lacks (a new kind then
-- needs its migration, before it can be raised). Nothing references `alert`.
-- New columns: `mark`, the newest instance of the condition as last seen (unix ms of the
-- newest open dead delivery or effect, of the newest livemode mismatch, the finding count for
-- reconciliation, NULL for conditions without instances), and `acked_mark`, the mark an
-- acknowledgement covered: a later instance reopens the alert (interface §9, amended).
CREATE TABLE alert_rebuilt (
    id              TEXT PRIMARY KEY,               -- alt_…
    kind            TEXT NOT NULL CHECK (kind IN ('delivery_dead', 'effect_dead',
                        'deliveries_backlog', 'effects_backlog', 'reconciliation',
                        'livemode_mismatch', 'signature_refusals', 'database_unavailable',
                        'database_size', 'archive')),
    severity        TEXT NOT NULL CHECK (severity IN ('critical', 'warning')),
    summary         TEXT NOT NULL,
    count           INTEGER NOT NULL,               -- how much of the condition, last seen
    mark            INTEGER,                        -- the newest instance, last seen
    acked_count     INTEGER,                        -- the count an operator acknowledged
    acked_mark      INTEGER,                        -- the newest instance the ack covered
    state           TEXT NOT NULL DEFAULT 'open'
                        CHECK (state IN ('open', 'acknowledged', 'resolved')),
    first_seen      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_seen       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    sent_at         TEXT,                           -- last successful send to ALERT_WEBHOOK_URL
    sends           INTEGER NOT NULL DEFAULT 0,
    last_send_error TEXT,
    acknowledged_at TEXT,
    resolved_at     TEXT,
    reopened_at     TEXT,                           -- last time a new instance reopened it
    reopens         INTEGER NOT NULL DEFAULT 0
);
INSERT INTO alert_rebuilt (id, kind, severity, summary, count, acked_count, state, first_seen,
        last_seen, sent_at, sends, last_send_error, acknowledged_at, resolved_at)
    SELECT id, kind, severity, summary, count, acked_count, state, first_seen, last_seen,
        sent_at, sends, last_send_error, acknowledged_at, resolved_at
    FROM alert;
DROP TABLE alert;
ALTER TABLE alert_rebuilt RENAME TO alert;
-- at most one unresolved alert per kind
CREATE UNIQUE INDEX alert_unresolved_kind ON alert (kind) WHERE state <> 'resolved';
CREATE INDEX alert_recent ON alert (state, last_seen);

-- ---------------------------------------------------------------- dismiss, dead times

-- A dead delivery or effect an operator has handled: out of the dead counts and their
-- alerts, still on record and replayable (interface §5). A replay or redelivery clears it.
ALTER TABLE webhook_delivery ADD COLUMN dismissed_at TEXT;
ALTER TABLE webhook_delivery ADD COLUMN dismiss_reason TEXT;
ALTER TABLE effect ADD COLUMN dismissed_at TEXT;
ALTER TABLE effect ADD COLUMN dismiss_reason TEXT;
-- when the effect went dead (a delivery's is its processed_at): the delivery_dead and
-- effect_dead alerts' mark
ALTER TABLE effect ADD COLUMN dead_at TEXT;
-- when an order system that pulls the feed acknowledged it (POST /effects/{id}/ack)
ALTER TABLE effect ADD COLUMN acknowledged_at TEXT;
UPDATE effect SET dead_at = coalesce(attempt_started_at, first_attempt_at, created_at)
    WHERE dispatch = 'dead';

-- The dead not yet dismissed: the operators' to-do list, not the history.
CREATE INDEX webhook_delivery_dead_open ON webhook_delivery (processed_at)
    WHERE outcome = 'dead' AND dismissed_at IS NULL;
CREATE INDEX effect_dead_open ON effect (dead_at) WHERE dispatch = 'dead' AND dismissed_at IS NULL;
-- The outcome index (0005) served only the metrics' counts by outcome, which `tally` keeps
-- now, every other filter on outcome reads the time-ordered index. One index write fewer
-- per processed delivery.
DROP INDEX webhook_delivery_outcome;

-- ---------------------------------------------------------------- kept counts

-- One row. Each column is changed only by the statement that precedes its change in the same
-- transaction (paymos_core::statements: TALLY_*), predicting it from the same condition, so
-- a statement that changes nothing (a copy that lost the race) counts nothing. The simulator
-- checks after every step that these equal a full count.
CREATE TABLE tally (
    id                      INTEGER PRIMARY KEY CHECK (id = 1),
    deliveries_applied      INTEGER NOT NULL DEFAULT 0,
    deliveries_stale        INTEGER NOT NULL DEFAULT 0,
    deliveries_ignored      INTEGER NOT NULL DEFAULT 0,
    deliveries_dismissed    INTEGER NOT NULL DEFAULT 0, -- dead and dismissed
    livemode_mismatches     INTEGER NOT NULL DEFAULT 0, -- ignored for livemode_mismatch
    effects_delivered       INTEGER NOT NULL DEFAULT 0,
    effects_cancelled       INTEGER NOT NULL DEFAULT 0,
    effects_dismissed       INTEGER NOT NULL DEFAULT 0, -- dead and dismissed
    -- the bounded doubled-effects check has looked at every effect up to this id
    effects_checked_through INTEGER NOT NULL DEFAULT 0
);
INSERT INTO tally (id, deliveries_applied, deliveries_stale, deliveries_ignored,
        livemode_mismatches, effects_delivered, effects_cancelled)
    SELECT 1,
        (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied'),
        (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale'),
        (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored'),
        (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch'),
        (SELECT count(*) FROM effect WHERE dispatch = 'delivered'),
        (SELECT count(*) FROM effect WHERE dispatch = 'cancelled');

-- Alerts acknowledged before this migration: the acknowledgement covers every instance up
-- to now (a later one reopens).
UPDATE alert SET acked_mark = CASE kind
        WHEN 'delivery_dead' THEN (SELECT CAST(round((julianday(max(processed_at)) - 2440587.5)
            * 86400000) AS INTEGER) FROM webhook_delivery WHERE outcome = 'dead')
        WHEN 'effect_dead' THEN (SELECT CAST(round((julianday(max(dead_at)) - 2440587.5)
            * 86400000) AS INTEGER) FROM effect WHERE dispatch = 'dead')
        WHEN 'livemode_mismatch' THEN (SELECT CAST(round((julianday(max(received_at))
            - 2440587.5) * 86400000) AS INTEGER) FROM webhook_delivery
            WHERE reason = 'livemode_mismatch')
        WHEN 'reconciliation' THEN acked_count
        END
    WHERE state = 'acknowledged';

-- ---------------------------------------------------------------- doubled effects

-- More than one effect of a kind for a resource, as found. Empty by construction (the
-- UNIQUE (resource_id, kind)), reconciliation asks anyway, over the effects written since it
-- last asked (tally.effects_checked_through), each looked up in the UNIQUE index, and keeps
-- what it found here: a report reads this table, never the whole effect table.
CREATE TABLE doubled_effect (
    resource_id TEXT NOT NULL,
    kind        TEXT NOT NULL,
    count       INTEGER NOT NULL,
    found_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (resource_id, kind)
);
-- once, at the upgrade: the whole table
INSERT INTO doubled_effect (resource_id, kind, count)
    SELECT resource_id, kind, count(*) FROM effect GROUP BY resource_id, kind HAVING count(*) > 1;
UPDATE tally SET effects_checked_through = (SELECT coalesce(max(id), 0) FROM effect);

-- ---------------------------------------------------------------- the health charts

-- What the 5-minute cron's alert run saw, one row per run (its minute): the backlog and the
-- outbox over time, which no table keeps otherwise. Pruned after 8 days by the daily cron.
CREATE TABLE health_sample (
    at                            TEXT PRIMARY KEY,   -- the minute, 'YYYY-MM-DDTHH:MM'
    unprocessed                   INTEGER NOT NULL,
    oldest_unprocessed_seconds    INTEGER,
    deliveries_dead               INTEGER NOT NULL,   -- dead, not dismissed
    effects_pending               INTEGER NOT NULL,
    effects_delivered             INTEGER NOT NULL,   -- in all (tally)
    effects_dead                  INTEGER NOT NULL,   -- dead, not dismissed
    oldest_pending_effect_seconds INTEGER
);
