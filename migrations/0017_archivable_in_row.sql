-- The archive's index holds only the bodies still in their delivery row (issue 27: rows per
-- new delivery).
--
-- `webhook_delivery_archivable` (0011) held every processed delivery not yet archived, so
-- each outcome (RECORD_OUTCOME, MARK_DEAD, …) added an entry: one of the 2 rows a new
-- delivery's outcome wrote. Since 0013 a new delivery's body is a row of `delivery_body`
-- from its receipt (0016), keyed by (received_at, event_id), the archive's own order; that
-- key already lists every such body, processed or not, and archiving deletes it. What it
-- does not list are the bodies in their delivery row: those received before 0013 and those
-- a replay restored from the archive (RESTORE_BODY). The index now holds just those, and a
-- delivery whose row holds '' (every delivery received since 0013) never enters it.
--
-- ARCHIVE_CANDIDATES and ARCHIVE_BACKLOG read both places, merged in (received_at,
-- event_id) order: this index for the bodies in rows, `delivery_body`'s key joined to the
-- delivery (by its primary key) for the rest. The second also walks the unprocessed
-- deliveries received before the cutoff (they are not archived yet); those are the
-- deliveries backlog, which has its own alert, a few rows where the archive's candidates
-- are thousands.
DROP INDEX webhook_delivery_archivable;
CREATE INDEX webhook_delivery_archivable ON webhook_delivery (received_at, event_id)
    WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body <> '';
