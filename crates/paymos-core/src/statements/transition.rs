//! The guarded transition: the statements of one transaction, and the batch that runs them.

use super::{Arg, Bound, Statement};
use crate::machine::{CauseKind, EffectKind, State, TransitionPlan};

statement!(
    GUARDED_UPSERT,
    [
        "id",
        "kind",
        "to",
        "order_ref",
        "amount",
        "currency",
        "token",
        "allowed_from",
        "delivery",
        "held"
    ],
    // The guarded write of every plan: each guard accepts a first-seen resource (CONTRACT §3,
    // the "unknown resource" row), so the row is inserted or updated here. A first known
    // order_ref, amount or currency is never overwritten (an operator's typo on a later
    // transition included). `INSERT … SELECT … WHERE` instead of `VALUES`: SQLite's upsert
    // needs a WHERE to parse `ON CONFLICT` after a SELECT, and that WHERE is the delivery gate
    // below (no row selected: nothing inserted, nothing updated). The guard is the DO
    // UPDATE's WHERE, so no writer can slip between check and write; a refused update writes
    // nothing and leaves the old token, which the later statements test for.
    //
    // The delivery gate (?9, NULL for operators and reconciliation, `delivery_open!`): the
    // write happens only while the delivery is unprocessed (or dead: a copy decided before the
    // dead-letter verdict still applies, and its outcome overrides `dead`), and not while it
    // is a payment waiting for a refund received before it. Without it, a duplicate queue
    // message re-applies the delivery where the table has a cycle (confirming ->
    // partially_paid -> confirming): found by paymos-sim.
    //
    // The refund hold (?10, 1 for an operator's or reconciliation's change into paid or
    // overpaid, NULL otherwise): no write while the invoice has an `invoice.refunded` on
    // record, unprocessed (interface §3: the money went back). Checked here, in the
    // transaction, so a refund received after the operator's 409 check cannot slip between
    // it and the write; a delivery's payment is held by the delivery gate instead, by receipt
    // order.
    //
    // The write that wins also numbers the transition (`transitions`, migration 0019): the
    // id INSERT_HISTORY gives the history row.
    "INSERT INTO resource (id, kind, status, order_ref, amount, currency, transition_token, \
       transitions) \
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 1 \
     WHERE (?9 IS NULL OR ",
    delivery_open!("?9"),
    ") \
       AND (?10 IS NULL OR NOT ",
    refund_waiting!("?1"),
    ") \
     ON CONFLICT (id) DO UPDATE SET previous_status = resource.status, status = excluded.status, \
       order_ref = coalesce(resource.order_ref, excluded.order_ref), \
       amount = coalesce(resource.amount, excluded.amount), \
       currency = coalesce(resource.currency, excluded.currency), \
       transition_token = excluded.transition_token, transitions = resource.transitions + 1, \
       updated_at = ",
    now!(),
    " \
     WHERE resource.status IN (SELECT value FROM json_each(?8))"
);

statement!(
    INSERT_HISTORY,
    ["id", "token", "cause_kind", "cause", "actor"],
    // only if this attempt's write won: the token is this transaction's; `actor` names the
    // operator of a manual transition (NULL otherwise). Its id is the resource's count of
    // transitions, which that write raised: the history's key is (resource, id), migration
    // 0019.
    "INSERT INTO resource_transition (id, resource_id, from_status, to_status, cause_kind, \
       cause, actor) \
     SELECT transitions, id, previous_status, status, ?3, ?4, ?5 FROM resource \
     WHERE id = ?1 AND transition_token = ?2"
);

statement!(
    INSERT_EFFECT,
    [
        "id",
        "token",
        "kind",
        "license_code",
        "cause",
        "from_unknown",
        "from",
        "requires"
    ],
    // once per (resource, kind) by the UNIQUE constraint; only if this attempt's write won,
    // from a state that triggers it (checked against the state the guard replaced), and only
    // when the effect it requires exists and may have reached the order system: delivered, or
    // attempted (an attempt is committed before its request starts, so this sees every one
    // that may be in flight; in pull mode, serving it in the feed counts as one: MARK_SERVED).
    // A revocation of a fulfilment that can never have left would revoke nothing; that one is
    // cancelled instead (CANCEL_EFFECT). Its outbox id is drawn here, in the transaction that
    // writes it: stable from then on.
    "INSERT INTO effect (resource_id, kind, license_code, order_ref, amount, currency, cause, \
       effect_id, dispatch) \
     SELECT r.id, ?3, ?4, r.order_ref, r.amount, r.currency, ?5, \
       'eff_' || lower(hex(randomblob(16))), 'pending' FROM resource r \
     WHERE r.id = ?1 AND r.transition_token = ?2 \
       AND ((r.previous_status IS NULL AND ?6 = 1) \
            OR r.previous_status IN (SELECT value FROM json_each(?7))) \
       AND (?8 IS NULL OR EXISTS (SELECT 1 FROM effect x WHERE x.resource_id = r.id AND x.kind = ?8 \
         AND (x.dispatch = 'delivered' OR x.attempts > 0))) \
     ON CONFLICT (resource_id, kind) DO NOTHING"
);

/// CANCEL_EFFECT's condition, which its tally predicts.
macro_rules! cancel_where {
    () => {
        "resource_id = ?1 AND kind = ?3 AND dispatch IN ('pending', 'dead') \
         AND EXISTS (SELECT 1 FROM resource WHERE id = ?1 AND transition_token = ?2)"
    };
}

statement!(
    CANCEL_EFFECT,
    ["id", "token", "kind"],
    // A refund's fulfilment not yet delivered (pending, awaiting its order_ref, or dead) is
    // cancelled in the refund's own transaction, if this attempt's write won: no dispatcher,
    // sweeper or redelivery sends it again, since each sends only a pending effect and an
    // attempt starts only from a pending row (interface §3).
    "UPDATE effect SET dispatch = 'cancelled', cancelled_at = ",
    now!(),
    ", next_attempt_at = NULL \
     WHERE ",
    cancel_where!()
);

statement!(
    TALLY_CANCEL,
    ["id", "token", "kind"],
    // just before CANCEL_EFFECT, on its condition: cancelled ones counted, a dismissed dead
    // one leaves the dismissed count (`tally`, migration 0009)
    "UPDATE tally SET effects_cancelled = effects_cancelled + x.n, \
       effects_dismissed = effects_dismissed - x.dismissed \
     FROM (SELECT count(*) AS n, \
       coalesce(sum(dispatch = 'dead' AND dismissed_at IS NOT NULL), 0) AS dismissed \
       FROM effect WHERE ",
    cancel_where!(),
    ") AS x WHERE tally.id = 1 AND x.n > 0"
);

statement!(
    FILL_RESOURCE,
    ["id", "order_ref", "amount", "currency", "delivery"],
    // Facts learned late (a stale event, reconciliation, an operator) fill what is missing
    // when the guard refused; a known value is never overwritten. The resource's effects get
    // what it learns from the trigger `resource_facts_to_effects` (migration 0018).
    //
    // It runs right after the guarded write (`transition_batch`), and only if that changed
    // nothing: a write that won has already filled every fact it carries (coalesce), the same
    // ones. `changes()` is the row count of the statement just before, in the same
    // transaction; as a scalar subquery it is evaluated once, and a NULL key reads no row
    // (D1 counts 0 rows read instead of 1, per transition). A delivery's facts fill only
    // through the delivery gate (?5, `delivery_open!`), as the guarded write: a copy already
    // processed, or a payment waiting for a refund, writes nothing.
    "UPDATE resource SET order_ref = coalesce(order_ref, ?2), \
       amount = coalesce(amount, ?3), currency = coalesce(currency, ?4), updated_at = ",
    now!(),
    " \
     WHERE id = (SELECT ?1 WHERE changes() = 0) AND ((order_ref IS NULL AND ?2 IS NOT NULL) \
       OR (amount IS NULL AND ?3 IS NOT NULL) OR (currency IS NULL AND ?4 IS NOT NULL)) \
       AND (?5 IS NULL OR ",
    delivery_open!("?5"),
    ")"
);

/// Whether this transaction's guarded write won (RECORD_OUTCOME: ?2 the resource, ?3 the
/// token).
macro_rules! outcome_won {
    () => {
        "EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3)"
    };
}

/// RECORD_OUTCOME's condition. The outcome it writes is counted by the trigger
/// `delivery_outcome_counted` (migration 0018), for the rows it did change.
macro_rules! outcome_where {
    () => {
        concat!(
            "event_id = ?1 AND (processed_at IS NULL OR (outcome = 'dead' AND ",
            outcome_won!(),
            ")) AND NOT (processed_at IS NULL AND ",
            payment_waits_for_refund!(),
            ")"
        )
    };
}

statement!(
    RECORD_OUTCOME,
    ["event_id", "id", "token"],
    // Written once: a second consumer of the same delivery finds processed_at set and changes
    // nothing. One exception: a copy that applied the transition after the dead-letter
    // consumer marked the delivery dead (it loaded the row before) overrides `dead`, so the
    // archive never says dead of what was applied. A payment waiting for a refund is not
    // recorded (it is retried). Its row returned: this transaction recorded the outcome (a
    // copy already processed, or gone, returns none).
    "UPDATE webhook_delivery SET processed_at = ",
    now!(),
    ", last_error = NULL, reason = NULL, \
       outcome = CASE WHEN ",
    outcome_won!(),
    " THEN 'applied' ELSE 'stale' END \
     WHERE ",
    outcome_where!(),
    " RETURNING event_id"
);

statement!(
    RELEASE_EFFECTS,
    ["id"],
    // (`+dispatch`: look the resource's few effects up by resource_id, not every pending
    // effect through the dispatch index; measured by the benchmark's D1 meter: 2,036 rows
    // read per new delivery before, 38 after)
    // The resource's effects ready to go out and not yet handed to the queue: the ones this
    // transaction wrote, and a fulfilment whose order_ref it just filled. Marking them
    // enqueued here, inside the transaction, means the ids returned are sent once after the
    // commit; a send that fails leaves them to the sweeper. A fulfilment without its
    // order_ref waits (`awaiting_order_ref`).
    "UPDATE effect SET enqueued_at = ",
    now!(),
    " \
     WHERE resource_id = ?1 AND +dispatch = 'pending' AND enqueued_at IS NULL \
       AND (kind <> 'fulfilment' OR order_ref IS NOT NULL) \
     RETURNING effect_id"
);

statement!(
    READ_BACK,
    ["id", "token", "event_id"],
    // the resource's row found once (one LEFT JOIN, not a subquery per column: two rows read
    // fewer per transition, by the benchmark's D1 meter); no row: NULL, NULL, 0. `held`: the
    // delivery is a payment waiting for a refund received before it, so nothing was written
    // (`delivery_open!`); the consumer retries it.
    "SELECT r.status AS status, r.order_ref AS order_ref, \
            coalesce(r.transition_token = ?2, 0) AS applied, \
            webhook_delivery.outcome AS outcome, \
            coalesce(webhook_delivery.processed_at IS NULL AND ",
    payment_waits_for_refund!(),
    ", 0) AS held \
     FROM (SELECT 1) LEFT JOIN resource r ON r.id = ?1 \
       LEFT JOIN webhook_delivery ON webhook_delivery.event_id = ?3"
);

/// One guarded transition, everything it writes, as data.
#[derive(Debug, Clone)]
pub struct TransitionRequest<'a> {
    pub plan: &'a TransitionPlan,
    pub resource_id: &'a str,
    pub order_ref: Option<&'a str>,
    pub amount: Option<&'a str>,
    pub currency: Option<&'a str>,
    pub cause_kind: CauseKind,
    /// The `evt_` id, the operator's reason, or reconciliation's note.
    pub cause: &'a str,
    /// Random per attempt: the later statements find the row only if this attempt's write won.
    pub token: &'a str,
    /// The license code, drawn by the caller (the core has no RNG), when the plan may fulfil.
    pub license_code: Option<&'a str>,
    /// The delivery whose outcome this transaction records, if any.
    pub delivery: Option<&'a str>,
    /// Pull mode (no `ORDER_SYSTEM_URL`): nothing is released to the effects queue; the feed
    /// offers the effects instead.
    pub pull: bool,
    /// The operator of a manual transition (interface §11: its history entry names them);
    /// `None` for a delivery's or reconciliation's.
    pub actor: Option<&'a str>,
}

/// Whether a change waits for a refund on record (GUARDED_UPSERT's ?10, and the operator's
/// 409 before it): an operator's or reconciliation's change into paid or overpaid. A
/// delivery's payment is held at the consumer's load instead, by receipt order.
pub fn held_for_refund(cause_kind: CauseKind, to: State) -> bool {
    cause_kind != CauseKind::Event && matches!(to, State::Paid | State::Overpaid)
}

/// The batch (one transaction) for one guarded transition; its last statement reads back
/// `(status, order_ref, applied, outcome)`.
pub fn transition_batch<'a>(r: &TransitionRequest<'a>) -> Vec<Bound<'a>> {
    let p = r.plan;
    let mut batch = Vec::with_capacity(10);
    let allowed: Vec<&str> = p.guard.from.iter().map(|s| s.as_str()).collect();
    batch.push(GUARDED_UPSERT.bind(vec![
        Arg::text(r.resource_id),
        Arg::text(p.kind.as_str()),
        Arg::text(p.to.as_str()),
        Arg::opt(r.order_ref),
        Arg::opt(r.amount),
        Arg::opt(r.currency),
        Arg::text(r.token),
        Arg::json_list(&allowed),
        Arg::opt(r.delivery),
        Arg::opt_int(held_for_refund(r.cause_kind, p.to).then_some(1)),
    ]));
    if r.order_ref.is_some() || r.amount.is_some() || r.currency.is_some() {
        // right after the guarded write: it reads that statement's `changes()`
        batch.push(FILL_RESOURCE.bind(vec![
            Arg::text(r.resource_id),
            Arg::opt(r.order_ref),
            Arg::opt(r.amount),
            Arg::opt(r.currency),
            Arg::opt(r.delivery),
        ]));
    }
    batch.push(INSERT_HISTORY.bind(vec![
        Arg::text(r.resource_id),
        Arg::text(r.token),
        Arg::text(r.cause_kind.as_str()),
        Arg::text(r.cause),
        Arg::opt(r.actor),
    ]));
    if let Some(e) = &p.effect {
        let from: Vec<&str> = e.from.iter().map(|s| s.as_str()).collect();
        let license = (e.kind == EffectKind::Fulfilment)
            .then_some(r.license_code)
            .flatten();
        batch.push(INSERT_EFFECT.bind(vec![
            Arg::text(r.resource_id),
            Arg::text(r.token),
            Arg::text(e.kind.as_str()),
            Arg::opt(license),
            Arg::text(r.cause),
            Arg::Int(i64::from(e.from_unknown)),
            Arg::json_list(&from),
            Arg::opt(e.requires.map(EffectKind::as_str)),
        ]));
    }
    if let Some(kind) = p.cancels {
        // after INSERT_EFFECT, which reads the fulfilment's attempts before it is cancelled
        let args = vec![
            Arg::text(r.resource_id),
            Arg::text(r.token),
            Arg::text(kind.as_str()),
        ];
        batch.push(TALLY_CANCEL.bind(args.clone()));
        batch.push(CANCEL_EFFECT.bind(args));
    }
    // In pull mode nothing is handed to a queue: the feed offers a pending effect whatever its
    // `enqueued_at`, and CLAIM_EFFECTS takes one never enqueued (NULL) as soon as an order
    // system is configured. So the release, a row written and five read per transition, is
    // left out.
    if (p.effect.is_some() || r.order_ref.is_some()) && !r.pull {
        batch.push(RELEASE_EFFECTS.bind(vec![Arg::text(r.resource_id)]));
    }
    if let Some(event_id) = r.delivery {
        batch.push(RECORD_OUTCOME.bind(vec![
            Arg::text(event_id),
            Arg::text(r.resource_id),
            Arg::text(r.token),
        ]));
    }
    batch.push(READ_BACK.bind(vec![
        Arg::text(r.resource_id),
        Arg::text(r.token),
        Arg::opt(r.delivery),
    ]));
    batch
}
