//! The outbox (interface §7): the dispatcher's load, its outcomes, redelivery, the sweeper's claim, the feed.

use super::{Arg, Bound, Statement};

statement!(
    LOAD_EFFECTS_FOR_DISPATCH,
    ["effect_ids"],
    // A dispatcher batch's effects in one query (a JSON array of ids), each with what its
    // order depends on: how many earlier effects of the same resource are neither delivered
    // nor cancelled (a revocation is not sent before the fulfilment it revokes is settled,
    // pending or dead alike: a dead fulfilment an operator redelivers later must not arrive
    // after its revocation; found by the simulator), and the last attempt started for an
    // earlier, cancelled one (it may be in flight until its timeout: the revocation goes
    // after it). `+p.dispatch`: by resource_id, not by scanning the dispatch index.
    "SELECT ",
    effect_columns!(),
    ", \
       (SELECT count(*) FROM effect p WHERE p.resource_id = e.resource_id AND p.id < e.id \
          AND +p.dispatch NOT IN ('delivered', 'cancelled')) AS earlier_undelivered, \
       (SELECT max(p.attempt_started_at) FROM effect p WHERE p.resource_id = e.resource_id \
          AND p.id < e.id AND +p.dispatch = 'cancelled') AS earlier_attempt_started_at \
     FROM effect e WHERE e.effect_id IN (SELECT value FROM json_each(?1))"
);

statement!(
    START_ATTEMPTS,
    ["effect_ids", "in_flight", "due_slack"],
    // An attempt is committed before its request starts (actors::dispatch explains why): only
    // from a pending row (a refund that cancelled the fulfilment meanwhile stops it), only
    // when its scheduled retry is due (`due_slack`, '+2 seconds') and no other attempt may be
    // in flight (`in_flight`, '-15 seconds': one started within the request timeout), so that
    // copies of a message cannot spend the ladder faster than it runs. The ids returned are
    // the ones to post. (`+dispatch`: the batch's ids looked up in the effect_id index, not
    // every pending effect through the dispatch index: by the benchmark's D1 meter, 412-432
    // rows read per dispatcher batch before, with a backlog of pending effects.)
    "UPDATE effect SET attempts = attempts + 1, rung = rung + 1, attempt_started_at = ",
    now!(),
    ", first_attempt_at = coalesce(first_attempt_at, ",
    now!(),
    "), next_attempt_at = NULL \
     WHERE effect_id IN (SELECT value FROM json_each(?1)) AND +dispatch = 'pending' \
       AND (kind <> 'fulfilment' OR order_ref IS NOT NULL) \
       AND (next_attempt_at IS NULL \
            OR next_attempt_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3)) \
       AND (attempt_started_at IS NULL \
            OR attempt_started_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2)) \
     RETURNING effect_id, attempts, rung, first_attempt_at"
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
    // the attempt was counted when it started (START_ATTEMPTS), and is over now
    "UPDATE effect SET dispatch = 'delivered', delivered_at = ",
    now!(),
    ", \
       last_error = NULL, next_attempt_at = NULL, attempt_started_at = NULL \
     WHERE effect_id = ?1 AND dispatch = 'pending'"
);

statement!(
    RECORD_EFFECT_FAILURE,
    ["effect_id", "error", "retry_in"],
    // `retry_in` is an SQLite modifier ('+600 seconds'): when the queue brings it back.
    // enqueued_at moves with it, so the sweeper leaves alone a message that is only waiting.
    // The attempt is over (answered, refused or timed out): none is in flight any more.
    "UPDATE effect SET last_error = ?2, attempt_started_at = NULL, \
       next_attempt_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3), \
       enqueued_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3) \
     WHERE effect_id = ?1 AND dispatch = 'pending'"
);

statement!(
    MARK_EFFECT_DEAD,
    ["effect_id", "error"],
    // the ladder is spent and 16 hours have passed since its first attempt (actors::dispatch)
    // (`dead_at`: the effect_dead alert's mark, a death after an acknowledgement reopens it)
    "UPDATE effect SET dispatch = 'dead', last_error = coalesce(?2, last_error), \
       next_attempt_at = NULL, attempt_started_at = NULL, dead_at = ",
    now!(),
    " \
     WHERE effect_id = ?1 AND dispatch = 'pending' RETURNING effect_id"
);

statement!(
    TALLY_DELIVERED,
    ["effect_ids"],
    // first in the dispatcher's outcome batch: the effects of `effect_ids` (a JSON array,
    // each once) that its MARK_EFFECT_DELIVERED statements will mark (pending now, in the
    // same transaction), counted as delivered (`tally`, migration 0009); `+dispatch`: by the
    // ids' unique index, not through every pending effect
    "UPDATE tally SET effects_delivered = effects_delivered + x.n \
     FROM (SELECT count(*) AS n FROM effect \
       WHERE effect_id IN (SELECT value FROM json_each(?1)) AND +dispatch = 'pending') AS x \
     WHERE tally.id = 1 AND x.n > 0"
);

/// REDELIVER_EFFECT's condition, which its tally predicts: not refused as
/// `redelivery_refused!` says (which the redelivery's audit row reads too).
macro_rules! redeliver_where {
    () => {
        concat!("effect_id = ?1 AND NOT ", redelivery_refused!("effect"))
    };
}

statement!(
    REDELIVER_EFFECT,
    ["effect_id"],
    // an operator's redelivery: pending again, same id, a fresh retry ladder
    // (one still awaiting its order_ref is left for the transition that fills it to release).
    // Never a cancelled effect, nor a fulfilment whose invoice has a revocation: its refund
    // was recorded, and sending it again would ship goods for money returned (interface §5).
    // `attempts` is kept: it counts every request that may have reached the order system.
    // A dismissal is over.
    "UPDATE effect SET dispatch = 'pending', rung = 0, first_attempt_at = NULL, \
       last_error = NULL, next_attempt_at = NULL, dismissed_at = NULL, dismiss_reason = NULL, \
       enqueued_at = CASE WHEN kind = 'fulfilment' AND order_ref IS NULL THEN NULL ELSE ",
    now!(),
    " END \
     WHERE ",
    redeliver_where!(),
    " \
     RETURNING effect_id, (kind = 'fulfilment' AND order_ref IS NULL) AS awaiting_order_ref"
);

statement!(
    TALLY_REDELIVER,
    ["effect_id"],
    // just before REDELIVER_EFFECT, on its condition: a delivered one leaves the delivered
    // count, a dismissed dead one the dismissed count
    "UPDATE tally SET effects_delivered = effects_delivered - x.delivered, \
       effects_dismissed = effects_dismissed - x.dismissed \
     FROM (SELECT dispatch = 'delivered' AS delivered, \
       (dispatch = 'dead' AND dismissed_at IS NOT NULL) AS dismissed FROM effect WHERE ",
    redeliver_where!(),
    ") AS x WHERE tally.id = 1"
);

/// An operator's redelivery, its tally first (one transaction); the last statement returns
/// the row when it was redelivered.
pub fn redeliver_batch(effect_id: &str) -> Vec<Bound<'_>> {
    vec![
        TALLY_REDELIVER.bind(vec![Arg::text(effect_id)]),
        REDELIVER_EFFECT.bind(vec![Arg::text(effect_id)]),
    ]
}

/// ACK_EFFECT's condition (`ackable!`, which its audit row reads too).
macro_rules! ack_where {
    () => {
        concat!("effect_id = ?1 AND ", ackable!())
    };
}

statement!(
    ACK_EFFECT,
    ["effect_id"],
    // Pull mode (interface §5, §7): the order system that pulled the effect from the feed says
    // it has it. An attempt in flight meanwhile records nothing over it (each outcome
    // statement is guarded by `dispatch = 'pending'`), and no attempt starts from it again.
    "UPDATE effect SET dispatch = 'delivered', delivered_at = ",
    now!(),
    ", acknowledged_at = ",
    now!(),
    ", \
       last_error = NULL, next_attempt_at = NULL \
     WHERE ",
    ack_where!(),
    " RETURNING effect_id"
);

statement!(
    TALLY_ACK,
    ["effect_id"],
    "UPDATE tally SET effects_delivered = effects_delivered + 1, \
       effects_dismissed = effects_dismissed - x.dismissed \
     FROM (SELECT (dispatch = 'dead' AND dismissed_at IS NOT NULL) AS dismissed FROM effect \
       WHERE ",
    ack_where!(),
    ") AS x WHERE tally.id = 1"
);

/// A pull-mode acknowledgement, its tally first; the last statement returns the row when it
/// was marked delivered now.
pub fn ack_effect_batch(effect_id: &str) -> Vec<Bound<'_>> {
    vec![
        TALLY_ACK.bind(vec![Arg::text(effect_id)]),
        ACK_EFFECT.bind(vec![Arg::text(effect_id)]),
    ]
}

statement!(
    DISMISS_EFFECT,
    ["effect_id", "reason"],
    // an operator has handled this dead effect: out of the dead counts and alerts, on
    // record, redeliverable (interface §5)
    "UPDATE effect SET dismissed_at = ",
    now!(),
    ", dismiss_reason = ?2 WHERE effect_id = ?1 AND ",
    effect_dismissable!(),
    " RETURNING effect_id, dismissed_at, dismiss_reason"
);

statement!(
    TALLY_DISMISS_EFFECT,
    ["effect_id"],
    "UPDATE tally SET effects_dismissed = effects_dismissed + 1 \
     WHERE id = 1 AND EXISTS (SELECT 1 FROM effect WHERE effect_id = ?1 AND ",
    effect_dismissable!(),
    ")"
);

/// A dismissal, its tally first; the last statement returns the row when it was dismissed now.
pub fn dismiss_effect_batch<'a>(effect_id: &'a str, reason: &'a str) -> Vec<Bound<'a>> {
    vec![
        TALLY_DISMISS_EFFECT.bind(vec![Arg::text(effect_id)]),
        DISMISS_EFFECT.bind(vec![Arg::text(effect_id), Arg::text(reason)]),
    ]
}

statement!(
    LOAD_EFFECT,
    ["effect_id"],
    // one effect by its id, and whether a revocation of its resource exists (why a
    // redelivery is refused)
    "SELECT ",
    effect_columns!(),
    ", EXISTS (SELECT 1 FROM effect v WHERE v.resource_id = e.resource_id \
         AND v.kind = 'revocation') AS revoked \
     FROM effect e WHERE e.effect_id = ?1"
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

/// A feed page's rows: its filter, order and limit, shared by its list and by its mark in
/// pull mode (MARK_SERVED), so that the mark covers exactly the page the list reads.
macro_rules! feed_page {
    // the feed, oldest first; the cursor is the last row's sequence number
    (all) => {
        concat!(
            "(?1 IS NULL OR e.kind = ?1) AND (?2 IS NULL OR e.dispatch = ?2) \
             AND (?3 IS NULL OR e.id > ?3) AND ",
            not_held!(),
            " ORDER BY e.id LIMIT ?4"
        )
    };
    // filtered by dispatch state (an order system pulling `pending`): the range of the
    // (dispatch, id) index after the cursor, so a page reads about its own rows however many
    // effects were delivered before it
    (by_dispatch) => {
        concat!(
            "e.dispatch = ?2 AND e.id > coalesce(?3, 0) AND (?1 IS NULL OR e.kind = ?1) AND ",
            not_held!(),
            " ORDER BY e.id LIMIT ?4"
        )
    };
}

/// Pull mode (`?5`, an SQLite modifier such as '-15 seconds'; NULL when the feed is only
/// listed): an effect is not served while an earlier, cancelled effect of its resource may
/// still have a pushed attempt in flight, so that a revocation never reaches the order system
/// before the fulfilment it revokes. Only a switch from push to pull leaves such an attempt
/// (the dispatcher waits for it the same way: LOAD_EFFECTS_FOR_DISPATCH's
/// `earlier_attempt_started_at`). One probe of the resource's effects per row of the page.
/// A held effect is served by a later poll: an order system reads `dispatch=pending` from
/// its start each time, as what it acknowledged leaves it.
macro_rules! not_held {
    () => {
        "(?5 IS NULL OR NOT EXISTS (SELECT 1 FROM effect p \
           WHERE p.resource_id = e.resource_id AND p.id < e.id AND +p.dispatch = 'cancelled' \
             AND p.attempt_started_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?5)))"
    };
}

statement!(
    LIST_DEAD_EFFECTS_OPEN,
    ["kind", "dispatch", "after_seq", "limit"],
    // `dispatch=dead&dismissed=false` (?2 is 'dead'): the dead effects no operator dismissed,
    // along effect_dead_open, however many were dismissed before them (the admin page's
    // health view read pages of them and dropped the dismissed: past 2,000 it found none).
    // The partial index's condition is written out: SQLite uses one only for the literal.
    "SELECT ",
    effect_columns!(),
    " FROM effect e INDEXED BY effect_dead_open \
     WHERE e.dispatch = 'dead' AND ?2 = 'dead' AND e.dismissed_at IS NULL \
       AND e.id > coalesce(?3, 0) \
       AND (?1 IS NULL OR e.kind = ?1) ORDER BY e.id LIMIT ?4"
);

statement!(
    LIST_DEAD_EFFECTS_DISMISSED,
    ["kind", "dispatch", "after_seq", "limit"],
    // `dispatch=dead&dismissed=true`: the (dispatch, id) range of the dead, the dismissed ones
    "SELECT ",
    effect_columns!(),
    " FROM effect e WHERE e.dismissed_at IS NOT NULL AND e.dispatch = ?2 \
       AND e.id > coalesce(?3, 0) AND (?1 IS NULL OR e.kind = ?1) ORDER BY e.id LIMIT ?4"
);

statement!(
    LIST_EFFECTS,
    ["kind", "dispatch", "after_seq", "limit", "held_after"],
    "SELECT ",
    effect_columns!(),
    " FROM effect e WHERE ",
    feed_page!(all)
);

statement!(
    LIST_EFFECTS_BY_DISPATCH,
    ["kind", "dispatch", "after_seq", "limit", "held_after"],
    "SELECT ",
    effect_columns!(),
    " FROM effect e WHERE ",
    feed_page!(by_dispatch)
);

/// Which of a feed page's effects an order system may now hold, marked first (see
/// [`feed_page`]): the page's own rows, as its list reads them.
macro_rules! mark_served {
    ($page:ident) => {
        concat!(
            "UPDATE effect SET attempts = 1 WHERE id IN (SELECT e.id FROM effect e WHERE ",
            feed_page!($page),
            ") AND attempts = 0 AND dispatch = 'pending' \
             AND (kind <> 'fulfilment' OR order_ref IS NOT NULL)"
        )
    };
}

statement!(
    MARK_SERVED,
    ["kind", "dispatch", "after_seq", "limit", "held_after"],
    // Pull mode: what the feed serves an order system may hold. Serving a pending effect is
    // its first attempt (interface §3: a refund revokes a fulfilment that "may have been
    // received", and only cancels one never sent). Written once per effect, so a feed polled
    // again costs no write for what it served before.
    mark_served!(all)
);

statement!(
    MARK_SERVED_BY_DISPATCH,
    ["kind", "dispatch", "after_seq", "limit", "held_after"],
    // MARK_SERVED for LIST_EFFECTS_BY_DISPATCH's page, through the same index range
    mark_served!(by_dispatch)
);

/// A page of the effects feed (`limit + 1` rows, so the caller knows about a next page), its
/// list last. In pull mode its rows are marked served first, in the same batch: one
/// transaction, so a refund commits either before (the fulfilment is cancelled, and listed
/// so) or after (it sees the attempt and records the revocation), never between the read and
/// the mark.
/// `dismissed` (with `dispatch` dead) lists the dead effects an operator did or did not
/// dismiss; nothing dead is marked served.
pub fn feed_page<'a>(
    kind: Option<&'a str>,
    dispatch: Option<&'a str>,
    dismissed: Option<bool>,
    after_seq: Option<i64>,
    limit: u32,
    pull: Option<InFlight>,
) -> Vec<Bound<'a>> {
    let (mark, list) = match (dispatch, dismissed) {
        (_, Some(false)) => (None, &LIST_DEAD_EFFECTS_OPEN),
        (_, Some(true)) => (None, &LIST_DEAD_EFFECTS_DISMISSED),
        (Some(_), None) => (Some(&MARK_SERVED_BY_DISPATCH), &LIST_EFFECTS_BY_DISPATCH),
        (None, None) => (Some(&MARK_SERVED), &LIST_EFFECTS),
    };
    // the pages that pull mode marks take `?5`: NULL when only listed, or served and held
    // back behind an attempt in flight
    let held = mark.is_some();
    let args = |n: u32| {
        let mut args = vec![
            Arg::opt(kind),
            Arg::opt(dispatch),
            Arg::opt_int(after_seq),
            Arg::Int(i64::from(n)),
        ];
        if held {
            args.push(pull.map_or(Arg::Null, |p| Arg::Text(p.modifier().into())));
        }
        args
    };
    let mut page = Vec::with_capacity(2);
    if let Some(mark) = mark.filter(|_| pull.is_some()) {
        page.push(mark.bind(args(limit)));
    }
    page.push(list.bind(args(limit + 1)));
    page
}

/// Pull mode's feed: how long after its start a pushed attempt may still be in flight (the
/// dispatcher's `in_flight_seconds`), left by a switch from push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    pub seconds: i64,
}

impl InFlight {
    /// As `?5` of the feed's statements takes it: an SQLite modifier, '-N seconds'.
    fn modifier(self) -> String {
        super::seconds_ago(self.seconds)
    }
}
