-- Indexes that earn their place (issue 27). D1 counts one row written per index entry an
-- insert or an update adds, and its single writer spends the time: each index a new
-- delivery or effect enters costs every delivery a row. Measured by the benchmark's D1 meter
-- (`node bench/run.mjs --only=cost`), a new delivery wrote 7 rows in INSERT_DELIVERY (the row
-- and six index entries) and 7 in INSERT_EFFECT; SQLite's plans (EXPLAIN QUERY PLAN, checked
-- by crates/paymos-sim/tests/indexes.rs) showed that four of those indexes serve no statement.
--
-- What stays, and the query that needs it:
--   webhook_delivery (PRIMARY KEY event_id)   INSERT_DELIVERY's dedupe, every lookup by id
--   webhook_delivery_received                 LIST_DELIVERIES, REPLAY_CHUNK (newest first, paged)
--   webhook_delivery_resource                 PAID_ON_RECORD (reconciliation: an invoice's deliveries)
--   webhook_delivery_unprocessed_received     CLAIM_UNPROCESSED (the sweeper), METRICS_FACTS (backlog)
--   webhook_delivery_reason (partial)         METRICS_FACTS (livemode mismatches); no entry without a reason
--   webhook_delivery_dead_open (partial)      METRICS_FACTS (the dead not dismissed); no entry unless dead
--   webhook_delivery_archivable (partial)     ARCHIVE_CANDIDATES, ARCHIVE_BACKLOG; no entry once archived
--   effect UNIQUE (resource_id, kind)         the once-per-kind rule; INSERT_EFFECT, CANCEL/FILL/RELEASE_EFFECTS
--   effect_effect_id                          LOAD_EFFECTS_FOR_DISPATCH and the dispatcher's outcomes
--   effect_dispatch (dispatch, id)            CLAIM_EFFECTS (the effects sweeper), METRICS_FACTS, the feed by state
--   effect_dead_open (partial)                METRICS_FACTS (the dead not dismissed); no entry unless dead
--   resource_transition_resource              LOAD_HISTORY

-- Read by no statement: PAID_ON_RECORD (resource_id = ? AND event_type = 'invoice.paid') chose
-- it over webhook_delivery_resource, walking every invoice.paid delivery ever received for each
-- invoice of a reconciliation page; without it, the plan walks the invoice's own deliveries.
-- LIST_DELIVERIES' optional filter `(?1 IS NULL OR event_type = ?1)` cannot use it.
DROP INDEX IF EXISTS webhook_delivery_type;
-- Read by no statement: the sweeper's CLAIM_UNPROCESSED and the metrics read
-- webhook_delivery_unprocessed_received, the same rows (processed_at IS NULL).
DROP INDEX IF EXISTS webhook_delivery_unprocessed;
-- Read by no statement: CLAIM_EFFECTS, START_ATTEMPTS and the metrics read effect_dispatch.
DROP INDEX IF EXISTS effect_pending;
DROP INDEX IF EXISTS effect_pending_created;
