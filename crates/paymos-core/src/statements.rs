//! Every SQL statement the receiver runs, defined once, as data: the text and the order of
//! its parameters. The Worker binds and runs them on D1; the simulator (`paymos-sim`) runs
//! the very same text on SQLite (which is what D1 is). Nothing here does I/O.
//!
//! Times are ISO-8601 UTC text written by SQLite itself (`now!()`), so one clock orders
//! everything.

use std::borrow::Cow;

use crate::machine::{CauseKind, EffectKind, TransitionPlan};

/// One statement: its text and what its `?N` parameters are, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Statement {
    pub name: &'static str,
    pub sql: &'static str,
    pub params: &'static [&'static str],
}

/// A parameter value, as both D1 and SQLite take it.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    Null,
    Int(i64),
    Text(Cow<'a, str>),
}

impl<'a> Arg<'a> {
    pub fn text(s: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(s))
    }

    pub fn opt(s: Option<&'a str>) -> Self {
        s.map_or(Arg::Null, Arg::text)
    }

    pub fn opt_int(i: Option<i64>) -> Self {
        i.map_or(Arg::Null, Arg::Int)
    }

    /// A JSON array of strings, read in SQL with `json_each` (one parameter for a list).
    pub fn json_list<S: AsRef<str>>(items: &[S]) -> Arg<'static> {
        let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
        Arg::Text(Cow::Owned(
            serde_json::to_string(&items).expect("a list of strings serialises"),
        ))
    }
}

/// A statement with its arguments, ready for D1 or SQLite.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound<'a> {
    pub statement: &'static Statement,
    pub args: Vec<Arg<'a>>,
}

impl Statement {
    /// Binds `args` in the order of [`Statement::params`]; a wrong count is a bug here.
    pub fn bind<'a>(&'static self, args: Vec<Arg<'a>>) -> Bound<'a> {
        assert_eq!(
            args.len(),
            self.params.len(),
            "{}: {} arguments for {:?}",
            self.name,
            args.len(),
            self.params
        );
        Bound {
            statement: self,
            args,
        }
    }
}

macro_rules! now {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    };
}

macro_rules! statement {
    ($name:ident, [$($param:literal),* $(,)?], $($sql:expr),+ $(,)?) => {
        pub static $name: Statement = Statement {
            name: stringify!($name),
            sql: concat!($($sql),+),
            params: &[$($param),*],
        };
    };
}

// ---------------------------------------------------------------- deliveries

statement!(
    INSERT_DELIVERY,
    ["event_id", "resource_id", "event_type", "body"],
    // the primary key is the dedupe: a duplicate costs one index lookup, writes nothing and
    // returns no row
    "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, enqueued_at) \
     VALUES (?1, ?2, ?3, ?4, ",
    now!(),
    ") ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
);

/// The archive's columns of a delivery.
macro_rules! delivery_columns {
    () => {
        "event_id, resource_id, event_type, received_at, processed_at, outcome, attempts, \
         last_error, enqueued_at, replays, reason, generation"
    };
}

statement!(
    LOAD_DELIVERY,
    ["event_id"],
    "SELECT ",
    delivery_columns!(),
    ", body FROM webhook_delivery WHERE event_id = ?1"
);

statement!(
    LOAD_DELIVERIES,
    ["event_ids"],
    // a consumer batch's deliveries in one query (a JSON array of ids)
    "SELECT ",
    delivery_columns!(),
    ", body FROM webhook_delivery \
     WHERE event_id IN (SELECT value FROM json_each(?1))"
);

statement!(
    LIST_DELIVERIES,
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
    " FROM webhook_delivery \
     WHERE (?1 IS NULL OR event_type = ?1) AND (?2 IS NULL OR resource_id = ?2) \
       AND (?3 IS NULL \
            OR (?3 = 'received' AND processed_at IS NULL) \
            OR (?3 = 'processed' AND outcome IN ('applied', 'ignored')) \
            OR outcome = ?3) \
       AND (?4 IS NULL OR received_at < ?4 OR (received_at = ?4 AND event_id < ?5)) \
     ORDER BY received_at DESC, event_id DESC LIMIT ?6"
);

statement!(
    MARK_IGNORED,
    ["event_id", "reason"],
    "UPDATE webhook_delivery SET processed_at = ",
    now!(),
    ", outcome = 'ignored', reason = ?2, \
       last_error = NULL \
     WHERE event_id = ?1 AND processed_at IS NULL"
);

statement!(
    RECORD_FAILURE,
    ["event_id", "error"],
    "UPDATE webhook_delivery SET attempts = attempts + 1, last_error = ?2 \
     WHERE event_id = ?1 RETURNING attempts"
);

statement!(
    MARK_DEAD,
    ["event_id", "generation"],
    // only for the generation the dead-letter message was sent for (NULL: a message from
    // before generations, any): after an operator's replay the old verdict is void
    "UPDATE webhook_delivery SET outcome = 'dead', processed_at = ",
    now!(),
    ", \
       last_error = coalesce(last_error, 'queue retries exhausted') \
     WHERE event_id = ?1 AND processed_at IS NULL AND (?2 IS NULL OR generation = ?2) \
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
    // a new generation: messages of the old one can no longer mark it dead
    "UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL, reason = NULL, \
       attempts = 0, last_error = NULL, replays = replays + 1, generation = generation + 1, \
       enqueued_at = ",
    now!(),
    " \
     WHERE event_id = ?1 RETURNING generation"
);

// ---------------------------------------------------------------- resources

statement!(
    LOAD_RESOURCE,
    ["id"],
    "SELECT id, kind, status, order_ref, amount, currency, created_at, updated_at \
     FROM resource WHERE id = ?1"
);

/// An effect's columns as the admin API and the dispatcher read them.
macro_rules! effect_columns {
    () => {
        "e.id AS seq, e.effect_id AS id, e.kind, e.resource_id, e.created_at, e.license_code, \
         e.order_ref, e.amount, e.currency, e.cause, e.dispatch, e.attempts, e.next_attempt_at, \
         e.last_error, e.delivered_at, \
         (e.dispatch = 'pending' AND e.kind = 'fulfilment' AND e.order_ref IS NULL) AS awaiting_order_ref"
    };
}

statement!(
    LOAD_EFFECTS,
    ["resource_id"],
    "SELECT ",
    effect_columns!(),
    " FROM effect e WHERE e.resource_id = ?1 ORDER BY e.id"
);

statement!(
    LOAD_HISTORY,
    ["resource_id"],
    "SELECT to_status AS state, from_status AS \"from\", cause_kind, cause, at \
     FROM resource_transition WHERE resource_id = ?1 ORDER BY id"
);

// ---------------------------------------------------------------- the guarded transition

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
        "delivery"
    ],
    // For plans whose guard accepts a first-seen resource. `INSERT … SELECT … WHERE` instead
    // of `VALUES`: SQLite's upsert needs a WHERE to parse `ON CONFLICT` after a SELECT, and
    // that WHERE is the delivery gate below (no row selected: nothing inserted, nothing
    // updated). The guard is the DO UPDATE's WHERE, so no writer can slip between check and
    // write; a refused update writes nothing and leaves the old token, which the later
    // statements test for.
    //
    // The delivery gate (?9, NULL for operators and reconciliation): the write happens only
    // while the delivery is unprocessed (or dead: a copy that loaded it before the dead-letter
    // verdict still applies, and its outcome overrides `dead`). Without it, a duplicate queue
    // message that loaded the delivery before another copy committed re-applies it where the
    // table has a cycle (confirming -> partially_paid -> confirming): found by paymos-sim.
    "INSERT INTO resource (id, kind, status, order_ref, amount, currency, transition_token) \
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
     WHERE (?9 IS NULL OR EXISTS (SELECT 1 FROM webhook_delivery \
       WHERE event_id = ?9 AND (processed_at IS NULL OR outcome = 'dead'))) \
     ON CONFLICT (id) DO UPDATE SET previous_status = resource.status, status = excluded.status, \
       order_ref = coalesce(resource.order_ref, excluded.order_ref), \
       amount = coalesce(excluded.amount, resource.amount), \
       currency = coalesce(excluded.currency, resource.currency), \
       transition_token = excluded.transition_token, updated_at = ",
    now!(),
    " \
     WHERE resource.status IN (SELECT value FROM json_each(?8))"
);

statement!(
    GUARDED_UPDATE,
    [
        "id",
        "kind",
        "to",
        "order_ref",
        "amount",
        "currency",
        "token",
        "allowed_from",
        "delivery"
    ],
    // For plans that need an existing row. A first known order_ref is never overwritten.
    // The delivery gate (?9) as in GUARDED_UPSERT.
    "UPDATE resource SET previous_status = status, status = ?3, \
       order_ref = coalesce(order_ref, ?4), amount = coalesce(?5, amount), \
       currency = coalesce(?6, currency), transition_token = ?7, updated_at = ",
    now!(),
    " \
     WHERE id = ?1 AND kind = ?2 AND status IN (SELECT value FROM json_each(?8)) \
       AND (?9 IS NULL OR EXISTS (SELECT 1 FROM webhook_delivery \
         WHERE event_id = ?9 AND (processed_at IS NULL OR outcome = 'dead')))"
);

statement!(
    INSERT_HISTORY,
    ["id", "token", "cause_kind", "cause"],
    // only if this attempt's write won: the token is this transaction's
    "INSERT INTO resource_transition (resource_id, from_status, to_status, cause_kind, cause) \
     SELECT id, previous_status, status, ?3, ?4 FROM resource \
     WHERE id = ?1 AND transition_token = ?2"
);

statement!(
    INSERT_EFFECT,
    ["id", "token", "kind", "license_code", "cause", "from_unknown", "from", "requires"],
    // once per (resource, kind) by the UNIQUE constraint; only if this attempt's write won,
    // from a state that triggers it (checked against the state the guard replaced), and only
    // when the effect it requires exists (a revocation needs a fulfilment). Its outbox id is
    // drawn here, in the transaction that writes it: stable from then on.
    "INSERT INTO effect (resource_id, kind, license_code, order_ref, amount, currency, cause, \
       effect_id, dispatch) \
     SELECT r.id, ?3, ?4, r.order_ref, r.amount, r.currency, ?5, \
       'eff_' || lower(hex(randomblob(16))), 'pending' FROM resource r \
     WHERE r.id = ?1 AND r.transition_token = ?2 \
       AND ((r.previous_status IS NULL AND ?6 = 1) \
            OR r.previous_status IN (SELECT value FROM json_each(?7))) \
       AND (?8 IS NULL OR EXISTS (SELECT 1 FROM effect x WHERE x.resource_id = r.id AND x.kind = ?8)) \
     ON CONFLICT (resource_id, kind) DO NOTHING"
);

statement!(
    FILL_RESOURCE,
    ["id", "order_ref", "amount", "currency"],
    // facts learned late (a stale event, reconciliation, an operator) fill what is missing,
    // whatever the guard decided; a known value is never overwritten
    "UPDATE resource SET order_ref = coalesce(order_ref, ?2), \
       amount = coalesce(amount, ?3), currency = coalesce(currency, ?4), updated_at = ",
    now!(),
    " \
     WHERE id = ?1 AND ((order_ref IS NULL AND ?2 IS NOT NULL) \
       OR (amount IS NULL AND ?3 IS NOT NULL) OR (currency IS NULL AND ?4 IS NOT NULL))"
);

statement!(
    FILL_EFFECTS,
    ["id"],
    // a fulfilment made before the order_ref was known gets it now
    "UPDATE effect SET order_ref = coalesce(effect.order_ref, r.order_ref), \
       amount = coalesce(effect.amount, r.amount), currency = coalesce(effect.currency, r.currency) \
     FROM resource r \
     WHERE effect.resource_id = ?1 AND r.id = ?1 \
       AND ((effect.order_ref IS NULL AND r.order_ref IS NOT NULL) \
         OR (effect.amount IS NULL AND r.amount IS NOT NULL) \
         OR (effect.currency IS NULL AND r.currency IS NOT NULL))"
);

statement!(
    RECORD_OUTCOME,
    ["event_id", "id", "token"],
    // Written once: a second consumer of the same delivery finds processed_at set and changes
    // nothing. One exception: a copy that applied the transition after the dead-letter
    // consumer marked the delivery dead (it loaded the row before) overrides `dead`, so the
    // archive never says dead of what was applied.
    "UPDATE webhook_delivery SET processed_at = ",
    now!(),
    ", last_error = NULL, reason = NULL, \
       outcome = CASE WHEN EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3) \
                      THEN 'applied' ELSE 'stale' END \
     WHERE event_id = ?1 AND (processed_at IS NULL OR (outcome = 'dead' \
       AND EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3)))"
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
    "SELECT (SELECT status FROM resource WHERE id = ?1) AS status, \
            EXISTS (SELECT 1 FROM resource WHERE id = ?1 AND transition_token = ?2) AS applied, \
            (SELECT outcome FROM webhook_delivery WHERE event_id = ?3) AS outcome"
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
}

/// The batch (one transaction) for one guarded transition; its last statement reads back
/// `(status, applied, outcome)`.
pub fn transition_batch<'a>(r: &TransitionRequest<'a>) -> Vec<Bound<'a>> {
    let p = r.plan;
    let mut batch = Vec::with_capacity(7);
    let guarded = if p.guard.from_unknown {
        &GUARDED_UPSERT
    } else {
        &GUARDED_UPDATE
    };
    let allowed: Vec<&str> = p.guard.from.iter().map(|s| s.as_str()).collect();
    batch.push(guarded.bind(vec![
        Arg::text(r.resource_id),
        Arg::text(p.kind.as_str()),
        Arg::text(p.to.as_str()),
        Arg::opt(r.order_ref),
        Arg::opt(r.amount),
        Arg::opt(r.currency),
        Arg::text(r.token),
        Arg::json_list(&allowed),
        Arg::opt(r.delivery),
    ]));
    batch.push(INSERT_HISTORY.bind(vec![
        Arg::text(r.resource_id),
        Arg::text(r.token),
        Arg::text(r.cause_kind.as_str()),
        Arg::text(r.cause),
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
    if r.order_ref.is_some() || r.amount.is_some() || r.currency.is_some() {
        batch.push(FILL_RESOURCE.bind(vec![
            Arg::text(r.resource_id),
            Arg::opt(r.order_ref),
            Arg::opt(r.amount),
            Arg::opt(r.currency),
        ]));
        batch.push(FILL_EFFECTS.bind(vec![Arg::text(r.resource_id)]));
    }
    if p.effect.is_some() || r.order_ref.is_some() {
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

// ---------------------------------------------------------------- the outbox (CONTRACT §7)

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

// ---------------------------------------------------------------- reconciliation

/// A run's columns, as `ReconciliationRun` reads them.
macro_rules! run_columns {
    () => {
        "id, full_walk, paid_since, cursor, pages"
    };
}

statement!(
    OPEN_RECONCILIATION,
    [],
    // the unfinished run to continue, if any (the newest; older ones were superseded)
    "UPDATE reconciliation_run SET invocations = invocations + 1, updated_at = ",
    now!(),
    " \
     WHERE id = (SELECT max(id) FROM reconciliation_run WHERE state = 'running') \
     RETURNING ",
    run_columns!()
);

statement!(
    SUPERSEDE_RECONCILIATIONS,
    [],
    "UPDATE reconciliation_run SET state = 'truncated', error = 'superseded by a newer run', \
       finished_at = ",
    now!(),
    ", updated_at = ",
    now!(),
    " \
     WHERE state = 'running'"
);

statement!(
    START_RECONCILIATION,
    ["full_walk", "paid_since"],
    "INSERT INTO reconciliation_run (full_walk, paid_since, invocations) VALUES (?1, ?2, 1) \
     RETURNING ",
    run_columns!()
);

statement!(
    FINISH_RECONCILIATION,
    ["id", "state", "error"],
    "UPDATE reconciliation_run SET state = ?2, error = ?3, finished_at = ",
    now!(),
    ", \
       updated_at = ",
    now!(),
    " WHERE id = ?1"
);

statement!(
    LATEST_RECONCILIATION,
    [],
    "SELECT ",
    run_columns!(),
    ", state, error, started_at, finished_at FROM reconciliation_run \
     ORDER BY id DESC LIMIT 1"
);

statement!(
    PAID_ON_RECORD,
    ["invoice_ids", "stuck_after"],
    // For each of a page's paid invoices: whether an invoice.paid delivery is on record, the
    // local status, and an invoice.paid that shipped nothing (dead, or unprocessed for longer
    // than `stuck_after`, an SQLite modifier) while the invoice is not paid here.
    "SELECT x.id, x.on_record, x.status, x.stuck_event_id, d.outcome AS stuck_outcome FROM ( \
       SELECT j.value AS id, \
         EXISTS (SELECT 1 FROM webhook_delivery w \
                 WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid') AS on_record, \
         (SELECT status FROM resource WHERE id = j.value) AS status, \
         (SELECT w.event_id FROM webhook_delivery w \
          WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid' \
            AND (w.outcome = 'dead' OR (w.processed_at IS NULL \
                 AND w.received_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2))) \
            AND NOT EXISTS (SELECT 1 FROM resource r WHERE r.id = j.value \
                            AND r.status IN ('paid', 'overpaid', 'refunded')) \
          ORDER BY w.received_at LIMIT 1) AS stuck_event_id \
       FROM json_each(?1) j) x \
     LEFT JOIN webhook_delivery d ON d.event_id = x.stuck_event_id"
);

statement!(
    INSERT_FINDING,
    [
        "run_id",
        "finding",
        "invoice_id",
        "order_ref",
        "brought_to_paid",
        "status",
        "event_id",
        "outcome"
    ],
    // the primary key (run, finding, invoice) keeps an invoice from being listed twice
    "INSERT INTO reconciliation_finding \
       (run_id, finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome, seq) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
       (SELECT coalesce(max(seq), 0) + 1 FROM reconciliation_finding WHERE run_id = ?1)) \
     ON CONFLICT (run_id, finding, invoice_id) DO NOTHING"
);

statement!(
    RECORD_RECONCILIATION_PAGE,
    ["id", "cursor", "pages", "checked"],
    "UPDATE reconciliation_run SET cursor = ?2, pages = pages + ?3, checked = checked + ?4, \
       updated_at = ",
    now!(),
    " WHERE id = ?1"
);

statement!(
    RECONCILIATION_TOTALS,
    ["id"],
    "SELECT checked, pages FROM reconciliation_run WHERE id = ?1"
);

statement!(
    RECONCILIATION_FINDINGS,
    ["run_id"],
    "SELECT finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome \
     FROM reconciliation_finding WHERE run_id = ?1 ORDER BY seq"
);

statement!(
    DOUBLED_EFFECTS,
    [],
    // empty by construction (UNIQUE (resource_id, kind)); reconciliation asks anyway
    "SELECT resource_id, kind, count(*) AS count FROM effect \
     GROUP BY resource_id, kind HAVING count(*) > 1"
);

// ---------------------------------------------------------------- operations (CONTRACT §9)

statement!(
    METRICS_FACTS,
    [],
    // every count reads an index (outcome, the unprocessed and pending partial indexes,
    // dispatch, reason), never the table
    "SELECT \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied') AS applied, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale') AS stale, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored') AS ignored, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead') AS dead, \
       (SELECT count(*) FROM webhook_delivery WHERE processed_at IS NULL) AS unprocessed, \
       (SELECT CAST(round((julianday('now') - julianday(min(received_at))) * 86400) AS INTEGER) \
          FROM webhook_delivery WHERE processed_at IS NULL) AS oldest_unprocessed_seconds, \
       (SELECT max(received_at) FROM webhook_delivery) AS last_received_at, \
       (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch') AS livemode_mismatches, \
       (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch' \
          AND received_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-24 hours')) AS livemode_mismatches_recent, \
       (SELECT count(*) FROM effect WHERE dispatch = 'pending') AS effects_pending, \
       (SELECT count(*) FROM effect WHERE dispatch = 'delivered') AS effects_delivered, \
       (SELECT count(*) FROM effect WHERE dispatch = 'dead') AS effects_dead, \
       (SELECT count(*) FROM effect WHERE dispatch = 'pending' AND kind = 'fulfilment' \
          AND order_ref IS NULL) AS effects_awaiting_order_ref, \
       (SELECT CAST(round((julianday('now') - julianday(min(created_at))) * 86400) AS INTEGER) \
          FROM effect WHERE dispatch = 'pending') AS oldest_pending_effect_seconds, \
       (SELECT count(*) FROM alert WHERE state = 'open') AS alerts_open"
);

statement!(
    METRICS_COUNTERS,
    ["hour_bucket", "burst_bucket"],
    // flushed counters: the last hour, the last 15 minutes, and since the beginning
    // ('total' sorts after every minute bucket, hence the explicit exclusion)
    "SELECT 'hour' AS scope, name, label, sum(count) AS count FROM request_count \
       WHERE bucket <> 'total' AND bucket >= ?1 GROUP BY name, label \
     UNION ALL \
     SELECT 'burst', name, label, sum(count) FROM request_count \
       WHERE bucket <> 'total' AND bucket >= ?2 GROUP BY name, label \
     UNION ALL \
     SELECT 'total', name, label, count FROM request_count WHERE bucket = 'total'"
);

statement!(
    FLUSH_COUNT,
    ["bucket", "name", "label", "count"],
    // an isolate's counts, added: one statement per counter and bucket, at most once a minute
    "INSERT INTO request_count (bucket, name, label, count) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (bucket, name, label) DO UPDATE SET count = count + excluded.count"
);

statement!(
    PRUNE_COUNTS,
    ["before"],
    "DELETE FROM request_count WHERE bucket <> 'total' AND bucket < ?1"
);

statement!(
    KEPT_ALERTS,
    [],
    "SELECT id, kind, state, count, \
       CAST(strftime('%s', sent_at) AS INTEGER) AS sent_at_unix \
     FROM alert WHERE state <> 'resolved'"
);

statement!(
    OPEN_ALERT,
    ["id", "kind", "severity", "summary", "count"],
    // the unique index on unresolved kinds makes a second open alert of a kind impossible
    "INSERT INTO alert (id, kind, severity, summary, count) VALUES (?1, ?2, ?3, ?4, ?5) \
     ON CONFLICT DO NOTHING"
);

statement!(
    UPDATE_ALERT,
    ["id", "summary", "count"],
    "UPDATE alert SET summary = ?2, count = ?3, last_seen = ",
    now!(),
    " WHERE id = ?1 AND state <> 'resolved'"
);

statement!(
    RESOLVE_ALERT,
    ["id"],
    "UPDATE alert SET state = 'resolved', resolved_at = ",
    now!(),
    " \
     WHERE id = ?1 AND state <> 'resolved'"
);

statement!(
    ALERT_SENT,
    ["id"],
    "UPDATE alert SET sent_at = ",
    now!(),
    ", sends = sends + 1, last_send_error = NULL WHERE id = ?1"
);

statement!(
    ALERT_SEND_FAILED,
    ["id", "error"],
    // sent_at stays: the next cron run tries again
    "UPDATE alert SET last_send_error = ?2 WHERE id = ?1"
);

statement!(
    ACK_ALERT,
    ["id"],
    // silent until resolved (CONTRACT §9); acked_count keeps the count the operator saw
    "UPDATE alert SET state = 'acknowledged', acknowledged_at = ",
    now!(),
    ", acked_count = count \
     WHERE id = ?1 AND state <> 'resolved' RETURNING id, state"
);

/// An alert's columns as the admin API shows them.
macro_rules! alert_columns {
    () => {
        "id, kind, severity, summary, count, state, first_seen, last_seen, sent_at, sends, \
         last_send_error, acknowledged_at, resolved_at"
    };
}

statement!(
    LOAD_ALERT,
    ["id"],
    "SELECT ",
    alert_columns!(),
    " FROM alert WHERE id = ?1"
);

statement!(
    LIST_ALERTS,
    ["limit"],
    // open first, then acknowledged, then the recently resolved (a week)
    "SELECT ",
    alert_columns!(),
    " FROM alert \
     WHERE state <> 'resolved' OR resolved_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-7 days') \
     ORDER BY CASE state WHEN 'open' THEN 0 WHEN 'acknowledged' THEN 1 ELSE 2 END, last_seen DESC \
     LIMIT ?1"
);

/// The bulk replay's filter: ?1 type, ?2 resource, ?3 status, ?4 received at or after,
/// ?5 received before (ISO-8601, normalised by SQLite to the stored form).
macro_rules! replay_filter {
    () => {
        "(?1 IS NULL OR event_type = ?1) AND (?2 IS NULL OR resource_id = ?2) \
         AND (?3 IS NULL \
              OR (?3 = 'received' AND processed_at IS NULL) \
              OR (?3 = 'processed' AND outcome IN ('applied', 'ignored')) \
              OR outcome = ?3) \
         AND (?4 IS NULL OR received_at >= strftime('%Y-%m-%dT%H:%M:%fZ', ?4)) \
         AND (?5 IS NULL OR received_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?5))"
    };
}

statement!(
    COUNT_REPLAY,
    [
        "event_type",
        "resource_id",
        "status",
        "received_after",
        "received_before"
    ],
    "SELECT count(*) AS matched FROM webhook_delivery WHERE ",
    replay_filter!()
);

statement!(
    REPLAY_CHUNK,
    [
        "event_type",
        "resource_id",
        "status",
        "received_after",
        "received_before",
        "after_received_at",
        "after_event_id",
        "limit"
    ],
    // the next chunk after the cursor, oldest first, reset for replay as RESET_FOR_REPLAY
    // does (a new generation each); the caller sends the returned ids
    "UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL, reason = NULL, \
       attempts = 0, last_error = NULL, replays = replays + 1, generation = generation + 1, \
       enqueued_at = ",
    now!(),
    " \
     WHERE event_id IN (SELECT event_id FROM webhook_delivery WHERE ",
    replay_filter!(),
    " \
       AND (?6 IS NULL OR received_at > ?6 OR (received_at = ?6 AND event_id > ?7)) \
       ORDER BY received_at, event_id LIMIT ?8) \
     RETURNING event_id, generation, received_at"
);

/// Every statement, for checks that run them all (parameter counts here; the simulator
/// prepares each against the migrated schema).
pub static ALL: &[&Statement] = &[
    &INSERT_DELIVERY,
    &LOAD_DELIVERY,
    &LOAD_DELIVERIES,
    &LIST_DELIVERIES,
    &MARK_IGNORED,
    &RECORD_FAILURE,
    &MARK_DEAD,
    &CLAIM_UNPROCESSED,
    &RESET_FOR_REPLAY,
    &LOAD_RESOURCE,
    &LOAD_EFFECTS,
    &LOAD_HISTORY,
    &GUARDED_UPSERT,
    &GUARDED_UPDATE,
    &INSERT_HISTORY,
    &INSERT_EFFECT,
    &FILL_RESOURCE,
    &FILL_EFFECTS,
    &RELEASE_EFFECTS,
    &RECORD_OUTCOME,
    &READ_BACK,
    &LOAD_EFFECTS_FOR_DISPATCH,
    &DEFER_EFFECT,
    &MARK_EFFECT_DELIVERED,
    &RECORD_EFFECT_FAILURE,
    &MARK_EFFECT_DEAD,
    &REDELIVER_EFFECT,
    &CLAIM_EFFECTS,
    &LIST_EFFECTS,
    &OPEN_RECONCILIATION,
    &SUPERSEDE_RECONCILIATIONS,
    &START_RECONCILIATION,
    &FINISH_RECONCILIATION,
    &LATEST_RECONCILIATION,
    &PAID_ON_RECORD,
    &INSERT_FINDING,
    &RECORD_RECONCILIATION_PAGE,
    &RECONCILIATION_TOTALS,
    &RECONCILIATION_FINDINGS,
    &DOUBLED_EFFECTS,
    &METRICS_FACTS,
    &METRICS_COUNTERS,
    &FLUSH_COUNT,
    &PRUNE_COUNTS,
    &KEPT_ALERTS,
    &OPEN_ALERT,
    &UPDATE_ALERT,
    &RESOLVE_ALERT,
    &ALERT_SENT,
    &ALERT_SEND_FAILED,
    &ACK_ALERT,
    &LOAD_ALERT,
    &LIST_ALERTS,
    &COUNT_REPLAY,
    &REPLAY_CHUNK,
];

/// The SQLite modifier for "`seconds` ago", as `CLAIM_UNPROCESSED` and `PAID_ON_RECORD` take it.
pub fn seconds_ago(seconds: i64) -> String {
    format!("-{} seconds", seconds.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ResourceKind;
    use crate::machine::{plan, State};

    /// The highest `?N` in a statement's text.
    fn max_param(sql: &str) -> usize {
        let bytes = sql.as_bytes();
        let mut max = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'?' {
                let digits: String = sql[i + 1..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                assert!(!digits.is_empty(), "unnumbered ? in {sql}");
                max = max.max(digits.parse().unwrap());
            }
        }
        max
    }

    #[test]
    fn every_statement_names_each_of_its_parameters() {
        let mut names = std::collections::HashSet::new();
        for s in ALL {
            assert!(names.insert(s.name), "{} listed twice", s.name);
            assert_eq!(max_param(s.sql), s.params.len(), "{}", s.name);
            assert!(!s.sql.contains("  "), "{}: stray double space", s.name);
        }
    }

    #[test]
    fn a_transition_batch_reads_back_last_and_fulfils_with_the_license() {
        let p = plan(ResourceKind::Invoice, State::Paid).unwrap();
        let r = TransitionRequest {
            plan: &p,
            resource_id: "inv_1",
            order_ref: Some("o"),
            amount: None,
            currency: None,
            cause_kind: CauseKind::Event,
            cause: "evt_1",
            token: "t",
            license_code: Some("LIC"),
            delivery: Some("evt_1"),
        };
        let b = transition_batch(&r);
        let names: Vec<&str> = b.iter().map(|x| x.statement.name).collect();
        assert_eq!(
            names,
            [
                "GUARDED_UPSERT",
                "INSERT_HISTORY",
                "INSERT_EFFECT",
                "FILL_RESOURCE",
                "FILL_EFFECTS",
                "RELEASE_EFFECTS",
                "RECORD_OUTCOME",
                "READ_BACK"
            ]
        );
        assert_eq!(b[2].args[3], Arg::text("LIC"));
        assert_eq!(
            b[0].args[7],
            Arg::json_list(&[
                "created",
                "confirming",
                "partially_paid",
                "expired",
                "failed"
            ])
        );
        // a revocation carries no license code and requires a fulfilment
        let p = plan(ResourceKind::Invoice, State::Refunded).unwrap();
        let b = transition_batch(&TransitionRequest {
            plan: &p,
            delivery: None,
            order_ref: None,
            ..r
        });
        let effect = b
            .iter()
            .find(|x| x.statement.name == "INSERT_EFFECT")
            .unwrap();
        assert_eq!(effect.args[3], Arg::Null);
        assert_eq!(effect.args[7], Arg::text("fulfilment"));
        let names: Vec<&str> = b.iter().map(|x| x.statement.name).collect();
        assert_eq!(
            names,
            [
                "GUARDED_UPSERT",
                "INSERT_HISTORY",
                "INSERT_EFFECT",
                "RELEASE_EFFECTS",
                "READ_BACK"
            ],
            "no fill, no outcome without order_ref and delivery"
        );
    }
}
