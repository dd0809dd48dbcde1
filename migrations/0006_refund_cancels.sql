-- A refund cancels its invoice's fulfilment while that is not yet delivered (interface §3,
-- amended): a new dispatch state, `cancelled`, that no dispatcher, sweeper or redelivery
-- sends again. SQLite cannot change a CHECK in place, so the table is rebuilt with the same
-- rows, ids and indexes (nothing references `effect`; the AUTOINCREMENT sequence follows
-- the rename). The dispatcher now commits each attempt before its request starts, so the
-- refund's transaction sees every attempt that may be in flight: the row keeps when the one
-- in flight started (until its outcome is recorded), when the current ladder's first did (an effect goes dead only 16 hours after
-- it), and the rung it is on (`attempts` counts every request in all and is never reset).
CREATE TABLE effect_rebuilt (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id        TEXT NOT NULL REFERENCES resource (id),
    kind               TEXT NOT NULL CHECK (kind IN ('fulfilment', 'revocation', 'settlement', 'credit')),
    license_code       TEXT,
    order_ref          TEXT,
    amount             TEXT,
    currency           TEXT,
    cause              TEXT NOT NULL,
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    effect_id          TEXT,                       -- eff_…: stable, the same on every attempt
    dispatch           TEXT NOT NULL DEFAULT 'pending'
                       CHECK (dispatch IN ('pending', 'delivered', 'dead', 'cancelled')),
    attempts           INTEGER NOT NULL DEFAULT 0, -- requests started to the order system, in all
    rung               INTEGER NOT NULL DEFAULT 0, -- attempts on the current retry ladder
    next_attempt_at    TEXT,                       -- when the dispatcher tries again
    last_error         TEXT,
    delivered_at       TEXT,
    enqueued_at        TEXT,                       -- last time a dispatch message was sent
    first_attempt_at   TEXT,                       -- the current ladder's first attempt (16 h count from it)
    attempt_started_at TEXT,                       -- the attempt in flight: when it started (NULL once over)
    cancelled_at       TEXT,                       -- when a refund cancelled it
    UNIQUE (resource_id, kind),
    CHECK (kind <> 'fulfilment' OR license_code IS NOT NULL)
);
INSERT INTO effect_rebuilt (id, resource_id, kind, license_code, order_ref, amount, currency,
        cause, created_at, effect_id, dispatch, attempts, rung, next_attempt_at, last_error,
        delivered_at, enqueued_at)
    SELECT id, resource_id, kind, license_code, order_ref, amount, currency, cause, created_at,
        effect_id, dispatch, attempts, attempts, next_attempt_at, last_error, delivered_at,
        enqueued_at
    FROM effect;
DROP TABLE effect;
ALTER TABLE effect_rebuilt RENAME TO effect;
CREATE UNIQUE INDEX effect_effect_id ON effect (effect_id);
CREATE INDEX effect_pending ON effect (enqueued_at) WHERE dispatch = 'pending';
CREATE INDEX effect_dispatch ON effect (dispatch, id);
CREATE INDEX effect_pending_created ON effect (created_at) WHERE dispatch = 'pending';
