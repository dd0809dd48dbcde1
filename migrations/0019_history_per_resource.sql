-- A resource's history is one B-tree, keyed by the resource (issue 27: rows per new delivery).
--
-- `resource_transition` was a rowid table with an index on (resource_id, id): each applied
-- transition wrote two rows (the row, its index entry), and its one reader, LOAD_HISTORY,
-- reads a resource's rows in order through that index. As a WITHOUT ROWID table keyed by
-- (resource_id, id), the key is that order: one row written per transition, one range read
-- per history, and the index is gone. Rows are small (eight short columns), the case
-- WITHOUT ROWID is for.
--
-- What `id` means from here: a number unique within its resource, increasing in insert
-- order within it. The resource numbers its own transitions: `resource.transitions`, added
-- below, is raised by the guarded write that wins (GUARDED_UPSERT, GUARDED_UPDATE: a row
-- they write anyway), and INSERT_HISTORY, which already reads the resource, takes it as the
-- id. (Taking the resource's largest history id plus one instead reads the table it inserts
-- into, which SQLite answers by copying the selected row aside first: two rows read more.)
-- Rows from before keep their ids, global numbers that already increase within each
-- resource, and each resource's count starts at its largest, so its order is what it was.
-- Nothing reads the id across resources and no reader shows it: LOAD_HISTORY orders by it,
-- and only INSERT_HISTORY writes the table (paymos_core::statements, every SQL text of the
-- receiver).
--
-- The CHECK on `cause_kind` is the same set spelled with OR: D1 counts a row read for the
-- temporary index SQLite builds for an IN list, on every insert.
--
-- How: as 0014 rebuilt it, a new table with the same columns in the same order and the same
-- foreign key; every row copied with its id; the old table dropped (its index goes with it)
-- and the new one renamed. No table references `resource_transition` and no trigger or view
-- names it, so the drop checks no foreign key and the rename rewrites nothing else.
-- crates/paymos-sim/tests/rowids.rs applies it over a filled database and compares the rows.
ALTER TABLE resource ADD COLUMN transitions INTEGER NOT NULL DEFAULT 0;
UPDATE resource SET transitions = coalesce(
    (SELECT max(h.id) FROM resource_transition h WHERE h.resource_id = resource.id), 0);

CREATE TABLE resource_transition_rebuilt (
    id          INTEGER NOT NULL,                  -- within the resource, increasing
    resource_id TEXT NOT NULL REFERENCES resource (id),
    from_status TEXT,
    to_status   TEXT NOT NULL,
    cause_kind  TEXT NOT NULL CHECK (cause_kind = 'event' OR cause_kind = 'manual'
                    OR cause_kind = 'reconciliation'),
    cause       TEXT NOT NULL,                     -- evt_… id, or the operator's reason
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    actor       TEXT,                              -- a manual entry's operator (0010)
    PRIMARY KEY (resource_id, id)
) WITHOUT ROWID;
INSERT INTO resource_transition_rebuilt (id, resource_id, from_status, to_status, cause_kind,
        cause, at, actor)
    SELECT id, resource_id, from_status, to_status, cause_kind, cause, at, actor
    FROM resource_transition;
DROP TABLE resource_transition;
ALTER TABLE resource_transition_rebuilt RENAME TO resource_transition;
