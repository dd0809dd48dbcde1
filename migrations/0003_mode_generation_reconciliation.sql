-- Why a processed delivery ended as it did, when the outcome alone does not say it
-- (interface §8: `livemode_mismatch`; `unknown_event_type`).
ALTER TABLE webhook_delivery ADD COLUMN reason TEXT;

-- Bumped by every replay. A queue message carries the generation it was sent for, and the
-- dead-letter consumer marks a delivery dead only for its own generation: a dead-letter
-- message that arrives after an operator's replay cannot bury the replay.
ALTER TABLE webhook_delivery ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

-- Reconciliation runs (interface §6). A walk that cannot finish within one Worker
-- invocation's budget keeps its cursor here and is continued by the next cron run.
CREATE TABLE reconciliation_run (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    full_walk   INTEGER NOT NULL DEFAULT 0,     -- 1: every paid invoice; 0: paid_since window
    paid_since  INTEGER,                        -- unix seconds, for a windowed run
    cursor      TEXT,                           -- starting_after for the next page
    pages       INTEGER NOT NULL DEFAULT 0,
    checked     INTEGER NOT NULL DEFAULT 0,
    state       TEXT NOT NULL DEFAULT 'running'
                CHECK (state IN ('running', 'done', 'truncated', 'failed')),
    error       TEXT,                           -- why a run ended truncated or failed
    invocations INTEGER NOT NULL DEFAULT 0,
    started_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    finished_at TEXT
);
CREATE INDEX reconciliation_run_open ON reconciliation_run (id) WHERE state = 'running';

-- What a run found. The primary key is what keeps an invoice from being listed twice,
-- however often a misbehaving provider pages it.
CREATE TABLE reconciliation_finding (
    run_id          INTEGER NOT NULL REFERENCES reconciliation_run (id),
    finding         TEXT NOT NULL CHECK (finding IN ('missing', 'unprocessed')),
    invoice_id      TEXT NOT NULL,
    order_ref       TEXT,
    brought_to_paid INTEGER,                    -- missing: did the guard let reconciliation move it
    status          TEXT,                       -- the invoice's local status after the check
    event_id        TEXT,                       -- unprocessed: the invoice.paid delivery on record
    outcome         TEXT,                       -- unprocessed: its outcome (dead) or NULL
    seq             INTEGER NOT NULL,           -- report order
    PRIMARY KEY (run_id, finding, invoice_id)
);
