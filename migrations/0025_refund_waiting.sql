-- The unprocessed refunds, by invoice: a payment finds whether its invoice has one.
--
-- A refund can only follow a payment, so an `invoice.refunded` on record means the money
-- has gone back. When it is received first but processed later (its enqueue failed and the
-- sweeper sends it minutes later, or its message waits on a retry), the `invoice.paid`
-- received after it was applied first and shipped goods, revoked only once the refund was
-- processed. The consumer's load (LOAD_DELIVERIES) now asks, for an unprocessed payment,
-- whether such a refund is on record; the payment then waits for it (interface §3).
--
-- Partial: only refunds not yet processed are in it, a few rows at most, so the question
-- costs a payment one probe that finds nothing, and every other delivery writes no entry.
CREATE INDEX webhook_delivery_refund_waiting ON webhook_delivery (resource_id)
    WHERE event_type = 'invoice.refunded' AND processed_at IS NULL;
