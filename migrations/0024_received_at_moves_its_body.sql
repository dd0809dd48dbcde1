-- A delivery's `received_at` edited in place moves its body row along.
--
-- Since 0013 a body is a row of `delivery_body`, keyed by a copy of its delivery's
-- `received_at` (the archive's order). No statement of the receiver changes `received_at`,
-- but anyone may, in the seed's table (interface §3): a script, `wrangler d1 execute`, a test
-- that ages a delivery to see it archived. With the copy left behind, the delivery read as
-- bodiless: absent from `GET /admin/api/deliveries/{id}`, not counted past retention, an
-- archiving run stopped at it (a row without a body does not parse) and a replay gone dead.
-- The receiver's own paths never run this trigger.
CREATE TRIGGER webhook_delivery_received_at_moves_body
AFTER UPDATE OF received_at ON webhook_delivery
WHEN NEW.received_at IS NOT OLD.received_at
BEGIN
    UPDATE delivery_body SET received_at = NEW.received_at
    WHERE received_at = OLD.received_at AND event_id = OLD.event_id;
END;
