//! Deliveries: the insert that dedupes, loading, listing, outcomes, the sweeper's claim, replay.

use super::{Arg, Bound, Statement};

statement!(
    INSERT_DELIVERY,
    ["event_id", "resource_id", "event_type", "body"],
    // the primary key is the dedupe: a duplicate costs one index lookup, writes nothing and
    // returns no row. Through the view of migration 0016, whose trigger writes the delivery's
    // row and its body's row (and stops at a duplicate): no row written twice.
    "INSERT INTO incoming_delivery (event_id, resource_id, event_type, body) \
     VALUES (?1, ?2, ?3, ?4) RETURNING event_id"
);

statement!(
    LOAD_DELIVERY,
    ["event_id"],
    "SELECT ",
    delivery_columns!(),
    ", ",
    body_column!(),
    " FROM webhook_delivery WHERE event_id = ?1"
);

statement!(
    LOAD_DELIVERIES,
    ["event_ids"],
    // A consumer batch's deliveries in one query (a JSON array of distinct ids), for the
    // messages that do not carry their facts (a replay's, the sweeper's, a hand-back's: the
    // receipt's carry them, `envelope::Facts`). A join from the list, not `event_id IN
    // (SELECT value FROM json_each(?1))`: the IN builds a temporary index of the list first,
    // and D1 counts each of its rows as a row read (4 per delivery with the body, 3 this way:
    // the list's row, the delivery, its body). Only what the consumer decides from
    // (`rows::ConsumeRow`); whether a payment waits for a refund is the transaction's to see
    // (`delivery_open!`).
    "SELECT event_id, processed_at, ",
    body_column!(),
    " FROM json_each(?1) AS wanted CROSS JOIN webhook_delivery \
       ON webhook_delivery.event_id = wanted.value"
);

statement!(
    REFUND_WAITING,
    ["resource_id"],
    // Before an operator's transition into paid or overpaid: the invoice's refund on record,
    // not yet processed, refuses it (409 `refund_pending`, interface §5).
    "SELECT ",
    refund_waiting!("?1"),
    " AS waiting"
);

/// The deliveries list's filters, cursor, order and limit after its first condition (shared by
/// its three statements, which differ in the index they read along).
macro_rules! delivery_list_rest {
    () => {
        concat!(
            " ",
            delivery_filter!(),
            " AND (?4 IS NULL OR received_at < ?4 OR (received_at = ?4 AND event_id < ?5)) \
             ORDER BY received_at DESC, event_id DESC LIMIT ?6"
        )
    };
}

/// One of the deliveries list's statements: `$from` the table and the condition it starts
/// from, then the list's own (the same parameters for all three).
macro_rules! delivery_list {
    ($name:ident, $from:expr) => {
        statement!(
            $name,
            [
                "event_type",
                "resource_id",
                "status",
                "after_received_at",
                "after_event_id",
                "limit"
            ],
            "SELECT ",
            delivery_columns!(),
            " FROM webhook_delivery ",
            $from,
            delivery_list_rest!()
        );
    };
}

// newest first along webhook_delivery_received; a filter without an index of its own (an
// event type, an outcome) reads until the page is full
delivery_list!(LIST_DELIVERIES, "WHERE");

// `resource_id` given: its deliveries along webhook_delivery_resource, not the whole table
// (the OR of the general list hides the index from the planner: an audit read 200,000 rows
// for a resource's three)
delivery_list!(LIST_DELIVERIES_OF_RESOURCE, "WHERE resource_id = ?2 AND");

// `status=received`: the unprocessed, along their partial index
// webhook_delivery_unprocessed_received (its condition written out, as SQLite needs; named,
// or the planner walks the whole history newest first to spare the backlog's sort)
delivery_list!(
    LIST_DELIVERIES_RECEIVED,
    "INDEXED BY webhook_delivery_unprocessed_received WHERE processed_at IS NULL AND"
);

statement!(
    MARK_IGNORED,
    ["event_id", "reason"],
    // counted (ignored, and livemode mismatches) by the trigger `delivery_outcome_counted`
    // (migration 0018), only if it changed the row
    "UPDATE webhook_delivery SET processed_at = ",
    now!(),
    ", outcome = 'ignored', reason = ?2, \
       last_error = NULL \
     WHERE event_id = ?1 AND processed_at IS NULL"
);

/// A delivery recorded `ignored` with its reason: one transaction.
pub fn mark_ignored_batch<'a>(event_id: &'a str, reason: &'a str) -> Vec<Bound<'a>> {
    vec![MARK_IGNORED.bind(vec![Arg::text(event_id), Arg::text(reason)])]
}

statement!(
    RECORD_FAILURE,
    ["event_id", "error"],
    "UPDATE webhook_delivery SET attempts = attempts + 1, last_error = ?2 \
     WHERE event_id = ?1 RETURNING attempts"
);

statement!(
    COUNT_HAND_BACK,
    ["event_id", "generation", "error"],
    // A dead letter handed back (actors::dead_letter) counts as a failure of its own: retries
    // spent with none recorded are a D1 outage, or a consumer that dies before it can record
    // (a delivery that exhausts its CPU or memory every time). The first is over within the
    // hour the contract allows, the second never: counted, it goes dead after
    // DEAD_AFTER_RECORDED_FAILURES hand-backs instead of being handed back for ever. A
    // failure the consumer recorded keeps its text.
    //
    // Not a payment that waits for a refund received before it (LOAD_DELIVERIES'
    // `refund_waiting`): its retries were spent waiting, not failing, and went as fast as
    // QUEUE_RETRY_BASE_SECONDS lets them (at 0, three hand-backs in seconds made it dead
    // before the sweeper could send the refund). Its wait ends with the refund's own fate:
    // processed, ignored or dead, each of which ends the refund's `processed_at IS NULL`.
    "UPDATE webhook_delivery SET attempts = attempts + 1, last_error = coalesce(last_error, ?3) \
     WHERE event_id = ?1 AND processed_at IS NULL AND (?2 IS NULL OR generation = ?2) \
       AND NOT (",
    payment_waits_for_refund!(),
    ") \
     RETURNING attempts"
);

statement!(
    MARK_DEAD,
    ["event_id", "generation", "min_failures"],
    // Only for the generation the dead-letter message was sent for (NULL: a message from
    // before generations, any): after an operator's replay the old verdict is void. And only
    // once at least `min_failures` failed attempts were recorded on the row in this
    // generation: a failure is recorded only while D1 answers, so a message that spent its
    // retries while D1 was down (or its consumer kept dying) is not a poison message and is
    // handed back instead, which counts one (COUNT_HAND_BACK; actors::dead_letter; interface
    // §3: a D1 outage makes no delivery dead).
    "UPDATE webhook_delivery SET outcome = 'dead', processed_at = ",
    now!(),
    ", \
       last_error = coalesce(last_error, 'queue retries exhausted') \
     WHERE event_id = ?1 AND processed_at IS NULL AND (?2 IS NULL OR generation = ?2) \
       AND attempts >= ?3 \
     RETURNING event_id"
);

statement!(
    CLAIM_UNPROCESSED,
    ["older_than", "limit"],
    // `older_than` is an SQLite modifier such as '-300 seconds'. Claiming moves enqueued_at,
    // so a second sweeper (or the next run) does not send the same rows again at once.
    "UPDATE webhook_delivery SET enqueued_at = ",
    now!(),
    " WHERE event_id IN ( \
       SELECT event_id FROM webhook_delivery \
       WHERE processed_at IS NULL \
         AND coalesce(enqueued_at, received_at) <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
       ORDER BY coalesce(enqueued_at, received_at) LIMIT ?2) \
     RETURNING event_id, generation"
);

statement!(
    RESET_FOR_REPLAY,
    ["event_id"],
    // a new generation: messages of the old one can no longer mark it dead; a dismissal is
    // over (if it goes dead again, that is a new instance). Not while its body is in the
    // archive: the replay restores it first, in the same batch (archive.rs)
    "UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL, reason = NULL, \
       attempts = 0, last_error = NULL, replays = replays + 1, generation = generation + 1, \
       dismissed_at = NULL, dismiss_reason = NULL, enqueued_at = ",
    now!(),
    " \
     WHERE event_id = ?1 AND archived_at IS NULL RETURNING generation"
);

statement!(
    TALLY_REPLAY,
    ["event_id"],
    // just before RESET_FOR_REPLAY, on its condition (not while archived): its outcome
    // leaves the counts
    "UPDATE tally SET ",
    untally_outcomes!(),
    " FROM (SELECT ",
    outcome_sums!(),
    " FROM webhook_delivery WHERE event_id = ?1 AND archived_at IS NULL \
       AND outcome IS NOT NULL) AS x \
     WHERE tally.id = 1 AND x.n > 0"
);

/// An operator's replay (reset, new generation), its tally first: one transaction. The
/// generation is the last statement's.
pub fn replay_batch(event_id: &str) -> Vec<Bound<'_>> {
    vec![
        TALLY_REPLAY.bind(vec![Arg::text(event_id)]),
        RESET_FOR_REPLAY.bind(vec![Arg::text(event_id)]),
    ]
}

statement!(
    DISMISS_DELIVERY,
    ["event_id", "reason"],
    // an operator has handled this dead delivery: out of the dead counts and alerts, on
    // record, replayable (interface §5); only a dead one not dismissed yet
    "UPDATE webhook_delivery SET dismissed_at = ",
    now!(),
    ", dismiss_reason = ?2 WHERE event_id = ?1 AND ",
    delivery_dismissable!(),
    " RETURNING event_id, dismissed_at, dismiss_reason"
);

statement!(
    TALLY_DISMISS_DELIVERY,
    ["event_id"],
    "UPDATE tally SET deliveries_dismissed = deliveries_dismissed + 1 \
     WHERE id = 1 AND EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = ?1 AND ",
    delivery_dismissable!(),
    ")"
);

/// A dismissal, its tally first; the last statement returns the row when it was dismissed now.
pub fn dismiss_delivery_batch<'a>(event_id: &'a str, reason: &'a str) -> Vec<Bound<'a>> {
    vec![
        TALLY_DISMISS_DELIVERY.bind(vec![Arg::text(event_id)]),
        DISMISS_DELIVERY.bind(vec![Arg::text(event_id), Arg::text(reason)]),
    ]
}
