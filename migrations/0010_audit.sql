-- The audit log (interface §11): every admin write, who made it and how it ended. A row is
-- written in the same D1 batch as the change it records (statements/audit.rs), and it is
-- never changed or deleted by the receiver: the triggers below refuse both, so no later
-- statement (an archiving run, a retention sweep) can remove what the log says.
CREATE TABLE audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,  -- the list's order and its cursor
    at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    actor   TEXT NOT NULL,       -- the Access token's email / common_name, or 'token'
    action  TEXT NOT NULL,       -- transition | replay | bulk_replay | redeliver | alert_ack | …
    target  TEXT,                -- the event, resource, effect or alert id; NULL for bulk calls
    outcome TEXT NOT NULL,       -- applied | refused | replayed | not_found | conflict | …
    detail  TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))  -- the request's fields
);
-- GET /admin/api/audit, newest first (id DESC), filtered by actor, by action, or both: each
-- a range of one index read backwards from the cursor, never a sort of the whole log.
CREATE INDEX audit_actor ON audit (actor, id);
CREATE INDEX audit_action ON audit (action, id);
CREATE INDEX audit_actor_action ON audit (actor, action, id);

CREATE TRIGGER audit_rows_are_never_deleted BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit rows are never deleted');
END;
CREATE TRIGGER audit_rows_are_never_changed BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit rows are never changed');
END;

-- A manual entry in a resource's history names its operator (NULL for a delivery's or
-- reconciliation's).
ALTER TABLE resource_transition ADD COLUMN actor TEXT;
