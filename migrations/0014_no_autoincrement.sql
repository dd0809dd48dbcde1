-- resource_transition and effect without AUTOINCREMENT (issue 27: rows per new delivery).
--
-- Each new delivery that applies a transition inserts one resource_transition row
-- (INSERT_HISTORY) and one effect row (INSERT_EFFECT). With `INTEGER PRIMARY KEY
-- AUTOINCREMENT`, SQLite also reads and rewrites the table's row in `sqlite_sequence` on each
-- of those inserts: 2 of the 20 rows a new delivery wrote, and their reads (bench/README.md,
-- "Rows per delivery"). A plain `INTEGER PRIMARY KEY` is the same rowid, allocated as
-- max(rowid) + 1, without that row.
--
-- Why the ids mean what they meant (docs/decisions.md, "No AUTOINCREMENT"). The two differ
-- only after the row holding the largest id is deleted (AUTOINCREMENT never hands that id out
-- again; max(rowid) + 1 would), or once an id reaches 2^63 - 1. Neither happens here:
-- - no statement deletes from either table: none in paymos_core::statements (every SQL text
--   of the receiver), none under src/, no trigger, no foreign key with ON DELETE, no
--   `INSERT OR REPLACE` nor a REPLACE conflict clause on them (INSERT_EFFECT's conflict is
--   DO NOTHING, which deletes nothing); the history and the outbox are kept for good.
-- - no statement inserts an id of its own: every id is the rowid SQLite picks.
-- So the ids keep increasing in insert order, which is all their readers rely on: the
-- effects feed's cursor (`seq` = effect.id, LIST_EFFECTS and LIST_EFFECTS_BY_DISPATCH:
-- `id > cursor`), reconciliation's doubled-effects watermark (tally.effects_checked_through,
-- CHECK_DOUBLED_EFFECTS: `id > watermark`), an effect's earlier siblings
-- (LOAD_EFFECTS_FOR_DISPATCH: `p.id < e.id`), the sweeper's order (CLAIM_EFFECTS) and a
-- resource's history in order (LOAD_HISTORY). One visible difference at the upgrade: a
-- conflicting insert (INSERT_EFFECT ... DO NOTHING) consumed a sequence number without a row,
-- so a database's sequence may stand above its largest id; the next id is now max(id) + 1,
-- a number no row ever held and no reader ever saw, above every cursor and watermark given.
--
-- Not rebuilt: `audit` (0010) is written by admin writes, not by deliveries; `archive_run`
-- (0011) once per archiving run; `reconciliation_run` (0003) once per reconciliation run.
-- Their sequence row costs nothing per delivery, and audit's id is its list's cursor, whose
-- "never reused" AUTOINCREMENT states outright (its triggers refuse deletes anyway).
--
-- How: as 0006 rebuilt `effect`, a new table with the same columns in the same order, the
-- same constraints, CHECKs and foreign keys; every row copied with its id; the old table
-- dropped (its sequence row goes with it) and the new one renamed; the indexes recreated as
-- 0004, 0009 and 0012 left them. No table references either one and no trigger or view
-- names them, so the drop checks no foreign key (no `PRAGMA defer_foreign_keys` needed) and
-- the rename rewrites nothing else. crates/paymos-sim/tests/rowids.rs applies it over a
-- filled 0013 schema and compares tables, indexes, foreign keys and rows.

-- ---------------------------------------------------------------- resource_transition

-- Every applied transition: the state entered and what caused it (0002, 0010).
CREATE TABLE resource_transition_rebuilt (
    id          INTEGER PRIMARY KEY,
    resource_id TEXT NOT NULL REFERENCES resource (id),
    from_status TEXT,
    to_status   TEXT NOT NULL,
    cause_kind  TEXT NOT NULL CHECK (cause_kind IN ('event', 'manual', 'reconciliation')),
    cause       TEXT NOT NULL,                     -- evt_… id, or the operator's reason
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    actor       TEXT                               -- a manual entry's operator (0010)
);
INSERT INTO resource_transition_rebuilt (id, resource_id, from_status, to_status, cause_kind,
        cause, at, actor)
    SELECT id, resource_id, from_status, to_status, cause_kind, cause, at, actor
    FROM resource_transition;
DROP TABLE resource_transition;
ALTER TABLE resource_transition_rebuilt RENAME TO resource_transition;
CREATE INDEX resource_transition_resource ON resource_transition (resource_id, id);

-- ---------------------------------------------------------------- effect

-- Effects that must happen exactly once per resource (0002, 0004, 0006, 0009).
CREATE TABLE effect_rebuilt (
    id                 INTEGER PRIMARY KEY,
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
    dismissed_at       TEXT,                       -- an operator handled it (dead)
    dismiss_reason     TEXT,
    dead_at            TEXT,                       -- when it went dead
    acknowledged_at    TEXT,                       -- pull mode: when the order system acked it
    UNIQUE (resource_id, kind),
    CHECK (kind <> 'fulfilment' OR license_code IS NOT NULL)
);
INSERT INTO effect_rebuilt (id, resource_id, kind, license_code, order_ref, amount, currency,
        cause, created_at, effect_id, dispatch, attempts, rung, next_attempt_at, last_error,
        delivered_at, enqueued_at, first_attempt_at, attempt_started_at, cancelled_at,
        dismissed_at, dismiss_reason, dead_at, acknowledged_at)
    SELECT id, resource_id, kind, license_code, order_ref, amount, currency, cause, created_at,
        effect_id, dispatch, attempts, rung, next_attempt_at, last_error, delivered_at,
        enqueued_at, first_attempt_at, attempt_started_at, cancelled_at, dismissed_at,
        dismiss_reason, dead_at, acknowledged_at
    FROM effect;
DROP TABLE effect;
ALTER TABLE effect_rebuilt RENAME TO effect;
CREATE UNIQUE INDEX effect_effect_id ON effect (effect_id);
CREATE INDEX effect_dispatch ON effect (dispatch, id);
CREATE INDEX effect_dead_open ON effect (dead_at) WHERE dispatch = 'dead' AND dismissed_at IS NULL;
