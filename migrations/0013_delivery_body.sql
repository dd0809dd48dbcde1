-- Bodies in rows of their own, so that archiving frees their space (interface §10).
--
-- Until now a body lived in its delivery's row, and archiving emptied it in place
-- (`body = ''`, 0011). The growth benchmark showed what that frees: ~66 B of a delivery's
-- ~1.5 KB in D1, though bodies average 677 B. SQLite merges a table's pages only when rows
-- are deleted and a page falls below a third full, so a row that shrinks leaves its page
-- as full as before (bench/README.md, "Growth"). A body that is a row of its own is
-- deleted when archived, and a page of them goes back to the database.
--
-- Keyed by (received_at, event_id), the order in which deliveries arrive and in which
-- archiving removes them (oldest first): the rows an archiving run deletes are neighbours,
-- so whole pages empty and are freed, where keys in random order (evt_ ids) would leave
-- holes in every page. received_at is set once, at the insert, and never changes.
-- WITHOUT ROWID: the key is the table's one B-tree, so a body is one row written, not a
-- row and a primary key entry.
CREATE TABLE delivery_body (
    received_at TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    body        TEXT NOT NULL,                     -- the raw bytes as received
    PRIMARY KEY (received_at, event_id)
) WITHOUT ROWID;

-- Where a body is. A delivery received from now on: in delivery_body, its own row's `body`
-- being ''. A delivery received before this migration, or one whose body a replay brought
-- back from the archive (RESTORE_BODY): in its row's `body`, as before (moving the existing
-- bodies here would copy every one, on exactly the databases close to the cap). Archived:
-- in neither. The statements read it through `body_column!` (`coalesce` of the two places,
-- NULL once archived), so no reader knows where it was.
--
-- INSERT_DELIVERY is unchanged (one statement, so a duplicate still costs one index lookup
-- and writes nothing): this trigger moves a new delivery's body to its own row, in the
-- insert's statement. An insert that dedupes (ON CONFLICT DO NOTHING) inserts nothing and
-- runs no trigger.
CREATE TRIGGER webhook_delivery_body_out AFTER INSERT ON webhook_delivery
WHEN NEW.body <> ''
BEGIN
    INSERT INTO delivery_body (received_at, event_id, body)
    VALUES (NEW.received_at, NEW.event_id, NEW.body);
    UPDATE webhook_delivery SET body = '' WHERE rowid = NEW.rowid;
END;

-- 0011's rule was "body is '' exactly when archived"; a new delivery's row now holds ''
-- too. What stays a rule of the database, whoever writes (a statement, a script,
-- `wrangler d1 execute`): archived_at and archive_key are set together, and an archived
-- delivery holds no body, neither in its row nor in delivery_body. So the archive's batch
-- deletes the body rows (DROP_BODY_ROWS) before it marks the deliveries archived
-- (REMOVE_ARCHIVED_BODIES). The lookup in delivery_body runs only for a row being marked
-- archived (AND stops at the first false), never for a delivery received. The other way
-- round (a body row inserted for an archived delivery) is left to the statements: only the
-- move trigger above inserts one, for a delivery just received, and a check on every such
-- insert would cost each new delivery a read.
DROP TRIGGER webhook_delivery_archived_insert;
DROP TRIGGER webhook_delivery_archived_update;
CREATE TRIGGER webhook_delivery_archived_insert BEFORE INSERT ON webhook_delivery
WHEN (NEW.archived_at IS NULL) <> (NEW.archive_key IS NULL)
  OR (NEW.archived_at IS NOT NULL AND (NEW.body <> '' OR EXISTS (
        SELECT 1 FROM delivery_body b
        WHERE b.received_at = NEW.received_at AND b.event_id = NEW.event_id)))
BEGIN
    SELECT RAISE(ABORT, 'webhook_delivery: archived_at and archive_key are set together, and an archived delivery holds no body');
END;
CREATE TRIGGER webhook_delivery_archived_update
BEFORE UPDATE OF body, archived_at, archive_key ON webhook_delivery
WHEN (NEW.archived_at IS NULL) <> (NEW.archive_key IS NULL)
  OR (NEW.archived_at IS NOT NULL AND (NEW.body <> '' OR EXISTS (
        SELECT 1 FROM delivery_body b
        WHERE b.received_at = NEW.received_at AND b.event_id = NEW.event_id)))
BEGIN
    SELECT RAISE(ABORT, 'webhook_delivery: archived_at and archive_key are set together, and an archived delivery holds no body');
END;
