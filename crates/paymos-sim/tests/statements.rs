//! The shared statements' conditions that only a transaction against the migrated schema
//! shows, one test each: a mutation audit found each of them changeable with no test
//! failing. Every transaction is built as the product builds it (the transition's `prepare`,
//! the core's batch builders, the dead letter's `mark`); only the clock is set by hand.

use std::sync::atomic::{AtomicU8, Ordering};

use paymos_core::actors::dead_letter::{self, DEAD_AFTER_RECORDED_FAILURES};
use paymos_core::actors::transition::{prepare, Applied, Change, Prepared};
use paymos_core::statements::{self as st, Arg};
use paymos_core::{CauseKind, Outcome, ResourceKind, State};
use paymos_sim::clock::{set_now_ms, EPOCH_MS};
use paymos_sim::db::{as_json, Rows};
use paymos_sim::{Db, Edits, Fault};

fn open() -> Db {
    Db::open(Edits::default()).unwrap()
}

/// The receiver's insert of a new delivery (`event_id`, for `resource`).
fn insert(db: &mut Db, event_id: &str, resource: &str, event_type: &str) {
    let body = format!(
        r#"{{"event_id":"{event_id}","type":"{event_type}","created":1764450000,"livemode":true,"data":{{"id":"{resource}","object":"invoice"}}}}"#
    );
    let ex = db.run(
        &st::INSERT_DELIVERY.bind(vec![
            Arg::text(event_id),
            Arg::text(resource),
            Arg::text(event_type),
            Arg::text(&body),
        ]),
        Fault::None,
    );
    assert!(!ex.result.unwrap()[0].is_empty(), "{event_id} is new");
}

/// A consumer's transition of invoice `resource` to `to` for the delivery `event_id`, prepared
/// (plan, token, license code) as the consumer prepares it; committed by `commit`.
fn prepared(event_id: &str, resource: &str, to: State, order_ref: Option<&str>) -> Prepared {
    static DRAWN: AtomicU8 = AtomicU8::new(0);
    let mut draw = || [DRAWN.fetch_add(1, Ordering::Relaxed); 16];
    let change = Change {
        resource_id: resource.into(),
        kind: ResourceKind::Invoice,
        to,
        order_ref: order_ref.map(Into::into),
        amount: None,
        currency: None,
        cause_kind: CauseKind::Event,
        cause: event_id.into(),
        delivery: Some(event_id.into()),
        pull: false,
    };
    prepare(change, None, &mut draw).unwrap()
}

/// Runs the prepared transition as one batch, and reads back what happened.
fn commit(db: &mut Db, p: &Prepared) -> Applied {
    let statements = p.statements();
    let ex = db.batch(&statements, Fault::None);
    assert!(ex.committed, "{:?}", ex.result);
    Prepared::read(&statements, &as_json(&ex.result.unwrap()).unwrap()).unwrap()
}

fn transition(db: &mut Db, event_id: &str, resource: &str, to: State, order_ref: &str) -> Applied {
    commit(db, &prepared(event_id, resource, to, Some(order_ref)))
}

fn delivery(db: &mut Db, event_id: &str) -> Rows {
    db.read(&st::LOAD_DELIVERY.bind(vec![Arg::text(event_id)]))
}

/// The consumer failed on the delivery as often as a dead letter needs, then the
/// dead-letter consumer marked it dead (its `generation`). Returns whether it did.
fn fail_until_dead(db: &mut Db, event_id: &str) -> bool {
    for _ in 0..DEAD_AFTER_RECORDED_FAILURES {
        let failure = st::RECORD_FAILURE.bind(vec![Arg::text(event_id), Arg::text("boom")]);
        assert!(db.run(&failure, Fault::None).committed);
    }
    mark_dead(db, event_id)
}

fn mark_dead(db: &mut Db, event_id: &str) -> bool {
    let generation = delivery(db, event_id).int(0, "generation");
    let mark = dead_letter::mark(event_id, generation, &dead_letter::Mutation::default());
    !db.run(&mark, Fault::None).result.unwrap()[0].is_empty()
}

/// The invoice's effects, oldest first.
fn effects(db: &Db, resource: &str) -> Rows {
    db.inspect(&format!(
        "SELECT kind, dispatch, attempts, order_ref, effect_id FROM effect \
         WHERE resource_id = '{resource}' ORDER BY id"
    ))
}

/// Invoice `inv_1` paid (`evt_paid`, order `ord_A`), and its fulfilment's first attempt started
/// by the dispatcher (`START_ATTEMPTS`, committed before the request): the fulfilment's id.
fn paid_and_attempted(db: &mut Db) -> String {
    insert(db, "evt_paid", "inv_1", "invoice.paid");
    assert!(transition(db, "evt_paid", "inv_1", State::Paid, "ord_A").applied);
    let fulfilment = effects(db, "inv_1").text(0, "effect_id").unwrap();
    let ids = Arg::json_list(&[&fulfilment]);
    let start =
        st::START_ATTEMPTS.bind(vec![ids, Arg::text("-15 seconds"), Arg::text("+2 seconds")]);
    assert!(!db.run(&start, Fault::None).result.unwrap()[0].is_empty());
    fulfilment
}

/// **A refund cancels a dead fulfilment, and its revocation is not held behind it**
/// (CONTRACT §3: entering `refunded`, "a fulfilment not yet delivered is cancelled: it is
/// never sent again, by the dispatcher, the sweeper or a redelivery"; a revocation is sent
/// "once the fulfilment is delivered or cancelled"). A dead fulfilment was never delivered,
/// but it was attempted, so the order system may have it: the refund records a revocation and
/// must cancel the fulfilment too. Left `dead`, it could be redelivered by an operator, and
/// the revocation would wait behind it (LOAD_EFFECTS_FOR_DISPATCH's `earlier_undelivered`)
/// until someone dismissed or redelivered it.
#[test]
fn a_refund_cancels_a_dead_fulfilment_and_its_revocation_goes_out() {
    let mut db = open();
    // the dispatcher's attempt (committed before its request), then its ladder spent
    let fulfilment = paid_and_attempted(&mut db);
    let dead = st::MARK_EFFECT_DEAD.bind(vec![Arg::text(&fulfilment), Arg::text("timeout")]);
    assert!(!db.run(&dead, Fault::None).result.unwrap()[0].is_empty());

    insert(&mut db, "evt_refund", "inv_1", "invoice.refunded");
    assert!(transition(&mut db, "evt_refund", "inv_1", State::Refunded, "ord_A").applied);

    let e = effects(&db, "inv_1");
    assert_eq!(e.rows.len(), 2, "a fulfilment and its revocation");
    assert_eq!(
        (e.text(0, "kind").as_deref(), e.int(0, "attempts")),
        (Some("fulfilment"), Some(1))
    );
    assert_eq!(
        e.text(0, "dispatch").as_deref(),
        Some("cancelled"),
        "the refund left the dead fulfilment {}",
        e.text(0, "dispatch").unwrap()
    );
    assert_eq!(e.text(1, "kind").as_deref(), Some("revocation"));
    let revocation = e.text(1, "effect_id").unwrap();
    let load = db.read(&st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&[&revocation])]));
    assert_eq!(
        load.int(0, "earlier_undelivered"),
        Some(0),
        "the revocation is held behind its fulfilment"
    );
}

/// **A copy that applies after the dead-letter verdict records `applied`** (CONTRACT §5: a
/// delivery's `outcome` is `applied` when the transition was written, `dead` only when
/// processing kept failing). A consumer loaded the delivery unprocessed; meanwhile its
/// earlier failures sent a message to the dead-letter queue, which marked it dead; then the
/// consumer's transaction commits and its guarded write wins (the delivery gate lets a dead
/// one through for this). Its outcome must override `dead`: otherwise the invoice moved, its
/// fulfilment was made, and the delivery that did it says dead (alerted, replayable).
#[test]
fn a_transition_applied_after_the_dead_letter_records_applied() {
    let mut db = open();
    insert(&mut db, "evt_paid", "inv_1", "invoice.paid");
    // the consumer that will win loads it unprocessed, after earlier attempts failed
    let p = prepared("evt_paid", "inv_1", State::Paid, Some("ord_A"));
    assert!(delivery(&mut db, "evt_paid")
        .text(0, "processed_at")
        .is_none());
    assert!(
        fail_until_dead(&mut db, "evt_paid"),
        "the dead letter marks it"
    );

    let applied = commit(&mut db, &p);
    assert!(applied.applied, "the consumer's guarded write wins");
    assert_eq!(
        applied.outcome,
        Some(Outcome::Applied),
        "the delivery whose transition was applied is recorded {:?}",
        applied.outcome
    );
    let row = delivery(&mut db, "evt_paid");
    assert_eq!(row.text(0, "outcome").as_deref(), Some("applied"));
}

/// **A known order_ref is never overwritten** (CONTRACT §5: "a known `order_ref` is never
/// overwritten"). An invoice learned its order_ref A from its first event; a later event
/// that moves it on carries B. The transition applies, and the invoice, its read-back and the
/// fulfilment it makes keep A (the order system ships against the order it knows).
#[test]
fn a_later_transition_keeps_the_known_order_ref() {
    let mut db = open();
    insert(&mut db, "evt_1", "inv_1", "invoice.confirming");
    insert(&mut db, "evt_2", "inv_1", "invoice.paid");
    assert!(transition(&mut db, "evt_1", "inv_1", State::Confirming, "ord_A").applied);
    let paid = transition(&mut db, "evt_2", "inv_1", State::Paid, "ord_B");
    assert!(paid.applied, "confirming → paid is allowed");

    let resource = db.inspect("SELECT order_ref FROM resource WHERE id = 'inv_1'");
    let kept = (
        resource.text(0, "order_ref"),
        paid.order_ref,
        effects(&db, "inv_1").text(0, "order_ref"),
    );
    let a = Some("ord_A".to_string());
    assert_eq!(
        kept,
        (a.clone(), a.clone(), a),
        "(resource, read-back, fulfilment): the known order_ref was overwritten"
    );
}

/// **Only an `applied` or `stale` invoice.paid is on record** (CONTRACT §6, amended: "an
/// `invoice.paid` on record counts only if it was processed `applied` or `stale`: one
/// `ignored` (a livemode mismatch) or `dead` did not bring the invoice to paid"). An invoice
/// whose only invoice.paid went dead, and one whose only invoice.paid was ignored, are
/// missing for reconciliation; one applied is on record.
#[test]
fn a_dead_or_ignored_payment_is_not_on_record() {
    let mut db = open();
    insert(&mut db, "evt_dead", "inv_dead", "invoice.paid");
    assert!(fail_until_dead(&mut db, "evt_dead"));
    insert(&mut db, "evt_ignored", "inv_ignored", "invoice.paid");
    let ignored = st::mark_ignored_batch("evt_ignored", "livemode mismatch");
    assert!(db.batch(&ignored, Fault::None).committed);
    insert(&mut db, "evt_applied", "inv_applied", "invoice.paid");
    assert!(transition(&mut db, "evt_applied", "inv_applied", State::Paid, "ord_A").applied);

    let ids = ["inv_dead", "inv_ignored", "inv_applied"];
    let rows = db.read(&st::PAID_ON_RECORD.bind(vec![Arg::json_list(&ids)]));
    let on_record: Vec<(String, i64)> = (0..rows.rows.len())
        .map(|i| {
            (
                rows.text(i, "id").unwrap(),
                rows.int(i, "on_record").unwrap(),
            )
        })
        .collect();
    let expected = [("inv_dead", 0), ("inv_ignored", 0), ("inv_applied", 1)]
        .map(|(id, n)| (id.to_string(), n));
    assert_eq!(
        on_record, expected,
        "an invoice.paid that went dead or was ignored counted as on record"
    );
}

/// **A replay starts the delivery's failures over** (CONTRACT §3: messages that keep failing
/// mark the delivery dead, and it is "replayable"; a D1 outage makes no delivery dead). The
/// dead-letter consumer buries a delivery only once enough failures were recorded in its
/// generation (DEAD_AFTER_RECORDED_FAILURES); a replay is a new generation, so its count is
/// reset: otherwise the first dead letter of the replay (an outage's, with nothing recorded)
/// buries it again at once.
#[test]
fn a_replay_resets_the_attempts() {
    let mut db = open();
    insert(&mut db, "evt_1", "inv_1", "invoice.paid");
    assert!(fail_until_dead(&mut db, "evt_1"));
    let before = delivery(&mut db, "evt_1");
    assert_eq!(
        before.int(0, "attempts"),
        Some(DEAD_AFTER_RECORDED_FAILURES)
    );

    let ex = db.batch(&st::replay_batch("evt_1"), Fault::None);
    assert!(ex.committed, "{:?}", ex.result);
    let after = delivery(&mut db, "evt_1");
    assert_eq!(
        after.int(0, "generation"),
        before.int(0, "generation").map(|g| g + 1),
        "a new generation"
    );
    assert_eq!(
        after.int(0, "attempts"),
        Some(0),
        "the replay kept the old generation's failures"
    );
    assert!(
        !mark_dead(&mut db, "evt_1"),
        "a dead letter of the replay, with no failure recorded, buried it again"
    );
}

/// **An unprocessed delivery's body is never archived** (CONTRACT §10: the archive moves "the
/// bodies of processed deliveries (outcome set …) received more than RETENTION_DAYS ago";
/// "an unprocessed delivery's body is never archived"). Two deliveries received 40 days ago,
/// one processed, one not (a payment still waiting): only the processed one is a candidate,
/// and only it is counted in the backlog of bodies past retention (and is its oldest).
#[test]
fn an_unprocessed_delivery_is_not_archivable() {
    set_now_ms(EPOCH_MS); // 2025-12-01
    let mut db = open();
    insert(&mut db, "evt_waiting", "inv_1", "invoice.paid");
    set_now_ms(EPOCH_MS + 3_600_000);
    insert(&mut db, "evt_done", "inv_2", "invoice.paid");
    assert!(transition(&mut db, "evt_done", "inv_2", State::Paid, "ord_A").applied);
    let done_at = delivery(&mut db, "evt_done").text(0, "received_at");
    set_now_ms(EPOCH_MS + 40 * 86_400_000);
    let before = "2025-12-11T00:00:00.000Z"; // 30 days' retention

    let candidates = db.read(&st::ARCHIVE_CANDIDATES.bind(vec![
        Arg::text(before),
        Arg::Null,
        Arg::Null,
        Arg::Int(100),
    ]));
    let ids: Vec<String> = (0..candidates.rows.len())
        .map(|i| candidates.text(i, "event_id").unwrap())
        .collect();
    let backlog = db.read(&st::ARCHIVE_BACKLOG.bind(vec![Arg::text(before), Arg::Int(1000)]));
    set_now_ms(EPOCH_MS);
    assert_eq!(ids, ["evt_done"], "archive candidates");
    assert_eq!(
        (
            backlog.int(0, "bodies"),
            backlog.text(0, "oldest_received_at")
        ),
        (Some(1), done_at),
        "the backlog (bodies, oldest) counts an unprocessed delivery"
    );
}

/// **After a switch from push to pull, the feed holds a revocation behind its fulfilment's
/// pushed attempt in flight** (CONTRACT §3: a revocation goes out "once the fulfilment is
/// delivered or cancelled", and the order system must never get the fulfilment after it; §7:
/// with `ORDER_SYSTEM_URL` unset the order system pulls the feed). A dispatcher's POST of the
/// fulfilment started just before the redeploy may still land for up to the request timeout
/// and its margin; a refund meanwhile cancels the fulfilment and records the revocation. The
/// feed serving that revocation at once would let the order system take it before the
/// fulfilment. An operator's listing (not pull mode) still shows it.
#[test]
fn the_pull_feed_holds_a_revocation_behind_an_attempt_in_flight() {
    set_now_ms(EPOCH_MS);
    let mut db = open();
    // pushed: the dispatcher's attempt is committed, its request under way
    paid_and_attempted(&mut db);
    insert(&mut db, "evt_refund", "inv_1", "invoice.refunded");
    assert!(transition(&mut db, "evt_refund", "inv_1", State::Refunded, "ord_A").applied);
    let e = effects(&db, "inv_1");
    assert_eq!(e.text(0, "dispatch").as_deref(), Some("cancelled"));
    assert_eq!(e.text(1, "kind").as_deref(), Some("revocation"));

    // what a poll of `dispatch=pending` is served (its list's rows), and the listing alone
    let poll = |db: &mut Db, pull: Option<st::InFlight>| {
        let page = st::feed_page(None, Some("pending"), None, None, 10, pull);
        let ex = db.batch(&page, Fault::None);
        let rows = ex.result.unwrap().pop().unwrap();
        (0..rows.rows.len())
            .filter_map(|i| rows.text(i, "kind"))
            .collect::<Vec<_>>()
    };
    let pull = Some(st::InFlight { seconds: 15 });
    set_now_ms(EPOCH_MS + 14_000);
    assert_eq!(
        poll(&mut db, pull),
        Vec::<String>::new(),
        "the feed served the revocation while the fulfilment's POST may still land"
    );
    assert_eq!(
        effects(&db, "inv_1").int(1, "attempts"),
        Some(0),
        "marked served"
    );
    assert_eq!(poll(&mut db, None), ["revocation"], "the listing hides it");
    set_now_ms(EPOCH_MS + 16_000);
    assert_eq!(
        poll(&mut db, pull),
        ["revocation"],
        "served once the attempt is over"
    );
    assert_eq!(effects(&db, "inv_1").int(1, "attempts"), Some(1));
}
