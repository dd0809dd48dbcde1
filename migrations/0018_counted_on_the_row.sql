-- Two follow-ups of a transition move from statements to triggers on the row they follow
-- (issue 27: rows read per new delivery).
--
-- 1. A delivery's outcome is counted by the row that records it.
--
-- Since 0009, RECORD_OUTCOME and MARK_IGNORED were each preceded by a TALLY_* statement
-- that predicted, on the same condition, what they would change: it read the delivery again
-- and the resource (6 rows per new delivery for TALLY_OUTCOME) to learn what the trigger
-- below is told as OLD and NEW. A trigger fires only for a row the statement did change, so
-- a copy that lost the race (its RECORD_OUTCOME finds the delivery processed) still counts
-- nothing, now by construction. It writes the tally row as TALLY_OUTCOME did and reads only
-- that row.
--
-- It fires when a delivery enters one of the counted outcomes (applied, stale, ignored),
-- which only RECORD_OUTCOME and MARK_IGNORED write, and counts the change in full: NEW's
-- bucket added, OLD's taken away (a dismissed dead delivery that a late copy applied leaves
-- the dismissed count). The other changes keep their statements (TALLY_REPLAY,
-- TALLY_REPLAY_CHUNK, TALLY_DISMISS_DELIVERY): they are operators' paths, and a bulk replay's
-- statement writes the tally once per chunk where a trigger would write it once per row.
-- An insert fires nothing: a delivery arrives unprocessed. (The WHEN spells the outcomes out
-- with OR; measured since, an IN list in a trigger's WHEN costs no row read, where one in a
-- CHECK does: docs/decisions.md, "A resource's history is keyed by the resource".)
CREATE TRIGGER delivery_outcome_counted
AFTER UPDATE OF outcome ON webhook_delivery
WHEN (NEW.outcome = 'applied' OR NEW.outcome = 'stale' OR NEW.outcome = 'ignored')
    AND OLD.outcome IS NOT NEW.outcome
BEGIN
    UPDATE tally SET
        deliveries_applied = deliveries_applied + (NEW.outcome IS 'applied')
            - (OLD.outcome IS 'applied'),
        deliveries_stale = deliveries_stale + (NEW.outcome IS 'stale')
            - (OLD.outcome IS 'stale'),
        deliveries_ignored = deliveries_ignored + (NEW.outcome IS 'ignored')
            - (OLD.outcome IS 'ignored'),
        livemode_mismatches = livemode_mismatches
            + (NEW.outcome IS 'ignored' AND NEW.reason IS 'livemode_mismatch')
            - (OLD.outcome IS 'ignored' AND OLD.reason IS 'livemode_mismatch'),
        deliveries_dismissed = deliveries_dismissed
            - (OLD.outcome IS 'dead' AND OLD.dismissed_at IS NOT NULL)
    WHERE id = 1;
END;

-- 2. A fact the resource learns late reaches its effects when the resource learns it.
--
-- FILL_EFFECTS ran in every transition that carried an order_ref, an amount or a currency
-- (nearly every one), to give an effect made before the fact was known the fact: 4 rows
-- read per new delivery, to find in almost every case that nothing was missing. An effect
-- copies the resource's facts when it is written (INSERT_EFFECT) and a resource's facts
-- only ever go from NULL to a value (coalesce everywhere), so an effect can lack a fact only
-- if its resource lacked it then; this trigger fills it at the moment the resource's fact
-- goes from NULL to a value, whichever statement did it (the guarded write, FILL_RESOURCE),
-- and reads nothing otherwise. Effects written later in the same transaction copy the
-- resource as before; RELEASE_EFFECTS, which hands a fulfilment to the queue once it has
-- its order_ref, still runs after both.
CREATE TRIGGER resource_facts_to_effects
AFTER UPDATE OF order_ref, amount, currency ON resource
WHEN (OLD.order_ref IS NULL AND NEW.order_ref IS NOT NULL)
    OR (OLD.amount IS NULL AND NEW.amount IS NOT NULL)
    OR (OLD.currency IS NULL AND NEW.currency IS NOT NULL)
BEGIN
    UPDATE effect SET order_ref = coalesce(order_ref, NEW.order_ref),
        amount = coalesce(amount, NEW.amount), currency = coalesce(currency, NEW.currency)
    WHERE resource_id = NEW.id
        AND ((order_ref IS NULL AND NEW.order_ref IS NOT NULL)
            OR (amount IS NULL AND NEW.amount IS NOT NULL)
            OR (currency IS NULL AND NEW.currency IS NOT NULL));
END;
