-- A new delivery's body goes straight to its own row (issue 27: rows per new delivery).
--
-- Since 0013, INSERT_DELIVERY inserted the delivery with its body, and the AFTER INSERT
-- trigger `webhook_delivery_body_out` copied the body to `delivery_body` and then emptied the
-- delivery row's copy: that UPDATE is one of the 7 rows a new delivery wrote at receipt, and
-- it exists only because an insert cannot leave a column out of the row it writes.
--
-- INSERT_DELIVERY now inserts into this view, and its INSTEAD OF trigger writes each part
-- where it belongs: the delivery row with `body = ''`, the body in `delivery_body`. Nothing
-- is written twice. What stays as it was:
-- - a duplicate costs one primary-key lookup and writes nothing: the trigger's first
--   statement abandons the insert when the event id is on record (RAISE(IGNORE): nothing
--   was written yet, and nothing after it runs);
-- - the statement returns the event id for a new delivery and no row for a duplicate:
--   RAISE(IGNORE) drops the row from RETURNING, which is how the receiver tells them apart
--   (it never reads `changes()`, which does not count what INSTEAD OF triggers write);
-- - still one statement, so receiving is still one D1 query.
--
-- Both rows take their `received_at` from `'now'`, which SQLite evaluates once per
-- statement step ("the same value for multiple invocations within the same
-- sqlite3_step()"), triggers included: the body row's key is the delivery's arrival, as
-- `body_column!` looks it up.
--
-- Read through, the view is what a delivery was received as: its body from whichever place
-- holds it (NULL once archived), as `body_column!` reads it. `webhook_delivery_body_out`
-- stays for any other writer that inserts a body into the table directly.
CREATE VIEW incoming_delivery AS
    SELECT event_id, resource_id, event_type,
        CASE WHEN archived_at IS NULL THEN coalesce(nullif(body, ''),
            (SELECT b.body FROM delivery_body b
             WHERE b.received_at = webhook_delivery.received_at
               AND b.event_id = webhook_delivery.event_id)) END AS body
    FROM webhook_delivery;

CREATE TRIGGER incoming_delivery_insert INSTEAD OF INSERT ON incoming_delivery
BEGIN
    SELECT RAISE(IGNORE)
    WHERE EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = NEW.event_id);
    INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at,
            enqueued_at)
        VALUES (NEW.event_id, NEW.resource_id, NEW.event_type, '',
            strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
    INSERT INTO delivery_body (received_at, event_id, body)
        VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), NEW.event_id, NEW.body);
END;
