//! The outbox (CONTRACT §7): the dispatcher's load, its outcomes, redelivery, the sweeper's claim, the feed.

use super::Statement;

statement!(
    LOAD_EFFECTS_FOR_DISPATCH,
    ["effect_ids"],
    // a dispatcher batch's effects in one query (a JSON array of ids), each with how many
    // earlier effects of the same resource are not delivered yet: a revocation is not sent
    // before the fulfilment it revokes has been, whether that one is pending or dead (a dead
    // fulfilment an operator redelivers later must not arrive after its revocation; found by
    // the simulator). `+p.dispatch`: by resource_id, not by scanning the dispatch index.
    "SELECT ",
    effect_columns!(),
    ", \
       (SELECT count(*) FROM effect p WHERE p.resource_id = e.resource_id AND p.id < e.id \
          AND +p.dispatch <> 'delivered') AS earlier_undelivered \
     FROM effect e WHERE e.effect_id IN (SELECT value FROM json_each(?1))"
);

statement!(
    DEFER_EFFECT,
    ["effect_id", "look_in"],
    // An effect waiting for an earlier one of its resource is looked at again in `look_in`
    // ('+N seconds'), from a fresh queue message: waiting spends none of the queue's retries.
    // enqueued_at moves to that time, so the sweeper leaves the effect alone meanwhile and
    // recovers it if that message is lost. One message at a time holds the wait: a copy
    // finding it already deferred into the future returns nothing and sends nothing, so
    // duplicates cannot multiply the looks.
    "UPDATE effect SET enqueued_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2) \
     WHERE effect_id = ?1 AND dispatch = 'pending' \
       AND (enqueued_at IS NULL OR enqueued_at <= ",
    now!(),
    ") RETURNING effect_id"
);

statement!(
    MARK_EFFECT_DELIVERED,
    ["effect_id"],
    "UPDATE effect SET dispatch = 'delivered', delivered_at = ",
    now!(),
    ", attempts = attempts + 1, \
       last_error = NULL, next_attempt_at = NULL \
     WHERE effect_id = ?1 AND dispatch = 'pending'"
);

statement!(
    RECORD_EFFECT_FAILURE,
    ["effect_id", "error", "retry_in"],
    // `retry_in` is an SQLite modifier ('+600 seconds'): when the queue brings it back.
    // enqueued_at moves with it, so the sweeper leaves alone a message that is only waiting.
    "UPDATE effect SET attempts = attempts + 1, last_error = ?2, \
       next_attempt_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3), \
       enqueued_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3) \
     WHERE effect_id = ?1 AND dispatch = 'pending'"
);

statement!(
    MARK_EFFECT_DEAD,
    ["effect_id", "error", "attempted"],
    // `attempted` is 1 when a request to the order system was the last straw
    "UPDATE effect SET dispatch = 'dead', last_error = coalesce(?2, last_error), \
       attempts = attempts + ?3, next_attempt_at = NULL \
     WHERE effect_id = ?1 AND dispatch = 'pending' RETURNING effect_id"
);

statement!(
    REDELIVER_EFFECT,
    ["effect_id"],
    // an operator's redelivery: pending again, same id, a fresh retry ladder
    // (one still awaiting its order_ref is left for the transition that fills it to release)
    "UPDATE effect SET dispatch = 'pending', attempts = 0, last_error = NULL, \
       next_attempt_at = NULL, \
       enqueued_at = CASE WHEN kind = 'fulfilment' AND order_ref IS NULL THEN NULL ELSE ",
    now!(),
    " END \
     WHERE effect_id = ?1 \
     RETURNING effect_id, (kind = 'fulfilment' AND order_ref IS NULL) AS awaiting_order_ref"
);

statement!(
    CLAIM_EFFECTS,
    ["older_than", "limit"],
    // Pending effects whose message was lost or whose dispatcher died: handed to the queue
    // longer than `older_than` ago (or never), a scheduled retry counting as handed over
    // until it is due. A fulfilment awaiting its order_ref is not claimed: nothing to send.
    "UPDATE effect SET enqueued_at = ",
    now!(),
    " WHERE id IN ( \
       SELECT id FROM effect \
       WHERE dispatch = 'pending' AND (kind <> 'fulfilment' OR order_ref IS NOT NULL) \
         AND (enqueued_at IS NULL \
              OR enqueued_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)) \
       ORDER BY id LIMIT ?2) \
     RETURNING effect_id"
);

statement!(
    LIST_EFFECTS,
    ["kind", "dispatch", "after_seq", "limit"],
    // the feed, oldest first; the cursor is the last row's sequence number
    "SELECT ",
    effect_columns!(),
    " FROM effect e \
     WHERE (?1 IS NULL OR e.kind = ?1) AND (?2 IS NULL OR e.dispatch = ?2) \
       AND (?3 IS NULL OR e.id > ?3) \
     ORDER BY e.id LIMIT ?4"
);
