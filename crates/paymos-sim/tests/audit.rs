//! The audit log's statements (interface §11) on SQLite with the repository's migrations, run
//! as the Worker runs them on D1: each write and its audit row in one batch, the row's outcome
//! decided by that transaction; the list's pages and the indexes that bound them; rows that
//! cannot be changed or deleted.

use paymos_core::admin::audit::{Action, Outcome, Record};
use paymos_core::admin::{AuditQuery, Command};
use paymos_core::statements::{self as st, Arg, AuditRow, Bound, TransitionRequest};
use paymos_core::{plan, CauseKind, ResourceKind, State};
use paymos_sim::{Db, Edits, Fault};

fn db() -> Db {
    Db::open(Edits::default()).expect("the migrations apply")
}

fn record(method: &str, path: &str, body: &str, actor: &str) -> Record {
    let c = Command::parse(method, path, "", body.as_bytes()).unwrap();
    Record::of(&c, actor).unwrap()
}

/// Rows a test sets up directly (not a protocol step).
fn setup(db: &Db, sql: &str) {
    db.inspect(sql);
}

fn audit_rows(db: &Db) -> Vec<(String, String, Option<String>, String, String)> {
    let rows = db.inspect("SELECT actor, action, target, outcome, detail FROM audit ORDER BY id");
    (0..rows.rows.len())
        .map(|i| {
            (
                rows.text(i, "actor").unwrap(),
                rows.text(i, "action").unwrap(),
                rows.text(i, "target"),
                rows.text(i, "outcome").unwrap(),
                rows.text(i, "detail").unwrap(),
            )
        })
        .collect()
}

/// A batch's results, committed.
fn commit(db: &mut Db, batch: &[Bound<'_>]) -> Vec<paymos_sim::db::Rows> {
    let ex = db.batch(batch, Fault::None);
    assert!(ex.committed);
    ex.result.unwrap()
}

fn returned_outcome(rows: &paymos_sim::db::Rows) -> String {
    rows.text(0, "outcome").expect("RETURNING outcome")
}

fn manual(db: &mut Db, id: &str, to: State, token: &str, actor: &str) -> (bool, String) {
    let p = plan(ResourceKind::Invoice, to).unwrap();
    let body = format!(r#"{{"to":"{}","reason":"bank statement"}}"#, to.as_str());
    let rec = record("POST", &format!("resources/{id}/transition"), &body, actor);
    let r = TransitionRequest {
        plan: &p,
        resource_id: id,
        order_ref: None,
        amount: None,
        currency: None,
        cause_kind: CauseKind::Manual,
        cause: "bank statement",
        token,
        license_code: Some("LIC-1"),
        delivery: None,
        pull: false,
        actor: Some(actor),
    };
    let batch = st::audited_transition_batch(&r, &rec);
    let audit_at = batch.len() - 2;
    let rows = commit(db, &batch);
    let applied = rows.last().unwrap().int(0, "applied") == Some(1);
    (applied, returned_outcome(&rows[audit_at]))
}

#[test]
fn a_manual_transition_and_its_row_agree_and_the_history_names_the_operator() {
    let mut db = db();
    assert_eq!(
        manual(&mut db, "inv_1", State::Paid, "t1", "ada@example.com"),
        (true, "applied".into())
    );
    // paid → paid: the guard refuses it; recorded as refused, no history row
    assert_eq!(
        manual(&mut db, "inv_1", State::Paid, "t2", "bob@example.com"),
        (false, "refused".into())
    );
    let rows = audit_rows(&db);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].0, "ada@example.com");
    assert_eq!(rows[0].1, "transition");
    assert_eq!(rows[0].2.as_deref(), Some("inv_1"));
    assert_eq!(rows[0].3, "applied");
    assert_eq!(rows[0].4, r#"{"reason":"bank statement","to":"paid"}"#);
    assert_eq!(
        (rows[1].0.as_str(), rows[1].3.as_str()),
        ("bob@example.com", "refused")
    );
    let history = db.read(&st::LOAD_HISTORY.bind(vec![Arg::text("inv_1")]));
    assert_eq!(history.rows.len(), 1);
    assert_eq!(history.text(0, "actor").as_deref(), Some("ada@example.com"));
    assert_eq!(history.text(0, "cause_kind").as_deref(), Some("manual"));
}

#[test]
fn a_delivery_history_entry_has_no_actor() {
    let mut db = db();
    let p = plan(ResourceKind::Invoice, State::Confirming).unwrap();
    let batch = st::transition_batch(&TransitionRequest {
        plan: &p,
        resource_id: "inv_2",
        order_ref: None,
        amount: None,
        currency: None,
        cause_kind: CauseKind::Event,
        cause: "evt_1",
        token: "t",
        license_code: None,
        delivery: None,
        pull: false,
        actor: None,
    });
    commit(&mut db, &batch);
    let history = db.read(&st::LOAD_HISTORY.bind(vec![Arg::text("inv_2")]));
    assert_eq!(history.rows.len(), 1);
    assert_eq!(history.text(0, "actor"), None);
    assert!(
        audit_rows(&db).is_empty(),
        "a delivery is not an admin write"
    );
}

#[test]
fn the_write_and_its_row_commit_or_roll_back_together() {
    let mut db = db();
    let p = plan(ResourceKind::Invoice, State::Paid).unwrap();
    let rec = record(
        "POST",
        "resources/inv_3/transition",
        r#"{"to":"paid","reason":"r"}"#,
        "ada@example.com",
    );
    let r = TransitionRequest {
        plan: &p,
        resource_id: "inv_3",
        order_ref: None,
        amount: None,
        currency: None,
        cause_kind: CauseKind::Manual,
        cause: "r",
        token: "t",
        license_code: Some("LIC"),
        delivery: None,
        pull: false,
        actor: Some("ada@example.com"),
    };
    let batch = st::audited_transition_batch(&r, &rec);
    // the read-back fails after the audit row was inserted: nothing of either stays
    let ex = db.batch(&batch, Fault::At(batch.len() - 1));
    assert!(!ex.committed);
    assert!(audit_rows(&db).is_empty());
    assert!(db
        .read(&st::LOAD_RESOURCE.bind(vec![Arg::text("inv_3")]))
        .is_empty());
}

#[test]
fn a_replay_is_recorded_replayed_or_not_found() {
    let mut db = db();
    db.run(
        &st::INSERT_DELIVERY.bind(vec![
            Arg::text("evt_1"),
            Arg::text("inv_1"),
            Arg::text("invoice.paid"),
            Arg::text("{}"),
        ]),
        Fault::None,
    );
    for (id, outcome, reset) in [("evt_1", "replayed", true), ("evt_404", "not_found", false)] {
        let rec = record("POST", &format!("deliveries/{id}/replay"), "", "token");
        // the tally, the reset, the row last: as the Worker runs it
        let rows = commit(&mut db, &st::audited_replay_batch(id, &rec));
        let n = rows.len();
        assert_eq!(!rows[n - 2].is_empty(), reset, "{id}");
        assert_eq!(returned_outcome(&rows[n - 1]), outcome);
    }
    let rows = audit_rows(&db);
    assert_eq!(rows[0].2.as_deref(), Some("evt_1"));
    assert_eq!(rows[0].4, "{}");
}

/// The redelivery and its row decide alike for every kind of effect: redelivered exactly
/// when REDELIVER_EFFECT returned a row.
#[test]
fn a_redelivery_is_recorded_as_the_update_decided() {
    let mut db = db();
    setup(
        &db,
        "INSERT INTO resource (id, kind, status) VALUES ('inv_a', 'invoice', 'paid'), \
           ('inv_b', 'invoice', 'refunded'), ('inv_c', 'invoice', 'refunded'), \
           ('wdr_d', 'withdrawal', 'completed')",
    );
    setup(
        &db,
        "INSERT INTO effect (resource_id, kind, license_code, cause, effect_id, dispatch) VALUES \
           ('inv_a', 'fulfilment', 'L1', 'evt', 'eff_dead', 'dead'), \
           ('inv_b', 'fulfilment', 'L2', 'evt', 'eff_revoked', 'delivered'), \
           ('inv_b', 'revocation', NULL, 'evt', 'eff_revocation', 'dead'), \
           ('inv_c', 'fulfilment', 'L3', 'evt', 'eff_cancelled', 'cancelled'), \
           ('wdr_d', 'settlement', NULL, 'evt', 'eff_delivered', 'delivered')",
    );
    let cases = [
        ("eff_dead", "redelivered"),
        ("eff_revoked", "conflict"),
        ("eff_revocation", "redelivered"),
        ("eff_cancelled", "conflict"),
        ("eff_delivered", "redelivered"),
        ("eff_none", "not_found"),
    ];
    for (id, outcome) in cases {
        let rec = record(
            "POST",
            &format!("effects/{id}/redeliver"),
            "",
            "ops@example.com",
        );
        let rows = commit(&mut db, &st::audited_redeliver_batch(id, &rec));
        let n = rows.len();
        assert_eq!(returned_outcome(&rows[n - 1]), outcome, "{id}");
        assert_eq!(!rows[n - 2].is_empty(), outcome == "redelivered", "{id}");
    }
}

fn tally(db: &Db, column: &str) -> i64 {
    db.inspect(&format!("SELECT {column} AS n FROM tally WHERE id = 1"))
        .int(0, "n")
        .expect("the tally's row")
}

/// The ack's row comes before the ack (a repeat and a first ack leave the same row): it
/// says `delivered` exactly when the ack that follows marks it, for every kind of effect.
#[test]
fn a_pull_ack_is_recorded_as_the_ack_decides() {
    let mut db = db();
    setup(
        &db,
        "INSERT INTO resource (id, kind, status) VALUES ('inv_a', 'invoice', 'paid'), \
           ('inv_b', 'invoice', 'paid'), ('inv_c', 'invoice', 'refunded'), \
           ('wdr_1', 'withdrawal', 'completed'), ('wdr_2', 'withdrawal', 'completed'), \
           ('wdr_3', 'withdrawal', 'completed')",
    );
    // (one effect of a kind per resource)
    setup(
        &db,
        "INSERT INTO effect (resource_id, kind, license_code, cause, effect_id, dispatch, \
           order_ref) VALUES \
           ('wdr_1', 'settlement', NULL, 'evt', 'eff_pending', 'pending', NULL), \
           ('wdr_2', 'settlement', NULL, 'evt', 'eff_dead', 'dead', NULL), \
           ('wdr_3', 'settlement', NULL, 'evt', 'eff_pushed', 'delivered', NULL), \
           ('inv_a', 'fulfilment', 'L1', 'evt', 'eff_awaiting', 'pending', NULL), \
           ('inv_b', 'fulfilment', 'L2', 'evt', 'eff_ordered', 'pending', 'ord_1'), \
           ('inv_c', 'fulfilment', 'L3', 'evt', 'eff_cancelled', 'cancelled', 'ord_2')",
    );
    let before = tally(&db, "effects_delivered");
    let cases = [
        ("eff_pending", "delivered"),
        ("eff_pending", "already"),
        ("eff_dead", "delivered"),
        ("eff_pushed", "already"),
        ("eff_awaiting", "conflict"),
        ("eff_ordered", "delivered"),
        ("eff_cancelled", "conflict"),
        ("eff_none", "not_found"),
    ];
    for (id, outcome) in cases {
        let rec = record(
            "POST",
            &format!("effects/{id}/ack"),
            "",
            "orders@example.com",
        );
        let rows = commit(&mut db, &st::audited_ack_effect_batch(id, &rec));
        let n = rows.len();
        assert_eq!(returned_outcome(&rows[n - 2]), outcome, "{id}");
        assert_eq!(!rows[n - 1].is_empty(), outcome == "delivered", "{id}");
    }
    assert_eq!(
        tally(&db, "effects_delivered") - before,
        3,
        "each ack counted once"
    );
    let rows = audit_rows(&db);
    assert_eq!(rows.len(), cases.len());
    assert!(rows.iter().all(|r| r.1 == "effect_ack" && r.4 == "{}"));
    let state = db.inspect("SELECT dispatch FROM effect WHERE effect_id = 'eff_cancelled'");
    assert_eq!(state.text(0, "dispatch").as_deref(), Some("cancelled"));
}

/// Dismissals of deliveries and effects: the row (before the write, on its condition) says
/// `dismissed` exactly when the write dismisses, `already` for a repeat, which keeps the
/// first reason and counts once.
#[test]
fn a_dismissal_is_recorded_as_the_dismissal_decides() {
    let mut db = db();
    for id in ["evt_dead", "evt_new"] {
        db.run(
            &st::INSERT_DELIVERY.bind(vec![
                Arg::text(id),
                Arg::text("inv_1"),
                Arg::text("invoice.paid"),
                Arg::text("{}"),
            ]),
            Fault::None,
        );
    }
    setup(
        &db,
        "UPDATE webhook_delivery SET outcome = 'dead', processed_at = received_at \
         WHERE event_id = 'evt_dead'",
    );
    setup(
        &db,
        "INSERT INTO resource (id, kind, status) VALUES ('wdr_1', 'withdrawal', 'completed'), \
           ('wdr_2', 'withdrawal', 'completed')",
    );
    setup(
        &db,
        "INSERT INTO effect (resource_id, kind, cause, effect_id, dispatch) VALUES \
           ('wdr_1', 'settlement', 'evt', 'eff_dead', 'dead'), \
           ('wdr_2', 'settlement', 'evt', 'eff_pending', 'pending')",
    );
    let deliveries = [
        ("evt_dead", "a test event", "dismissed"),
        ("evt_dead", "again", "already"),
        ("evt_new", "x", "conflict"),
        ("evt_none", "x", "not_found"),
    ];
    for (id, reason, outcome) in deliveries {
        let body = format!(r#"{{"reason":"{reason}"}}"#);
        let rec = record("POST", &format!("deliveries/{id}/dismiss"), &body, "token");
        let rows = commit(
            &mut db,
            &st::audited_dismiss_delivery_batch(id, reason, &rec),
        );
        let n = rows.len();
        assert_eq!(returned_outcome(&rows[n - 2]), outcome, "{id}");
        assert_eq!(!rows[n - 1].is_empty(), outcome == "dismissed", "{id}");
    }
    let effects = [
        ("eff_dead", "settled by hand", "dismissed"),
        ("eff_dead", "again", "already"),
        ("eff_pending", "x", "conflict"),
        ("eff_none", "x", "not_found"),
    ];
    for (id, reason, outcome) in effects {
        let body = format!(r#"{{"reason":"{reason}"}}"#);
        let rec = record("POST", &format!("effects/{id}/dismiss"), &body, "token");
        let rows = commit(&mut db, &st::audited_dismiss_effect_batch(id, reason, &rec));
        let n = rows.len();
        assert_eq!(returned_outcome(&rows[n - 2]), outcome, "{id}");
        assert_eq!(!rows[n - 1].is_empty(), outcome == "dismissed", "{id}");
    }
    assert_eq!(tally(&db, "deliveries_dismissed"), 1);
    assert_eq!(tally(&db, "effects_dismissed"), 1);
    let kept =
        db.inspect("SELECT dismiss_reason FROM webhook_delivery WHERE event_id = 'evt_dead'");
    assert_eq!(
        kept.text(0, "dismiss_reason").as_deref(),
        Some("a test event")
    );
    let rows = audit_rows(&db);
    assert_eq!(rows.len(), deliveries.len() + effects.len());
    assert_eq!(
        (rows[0].1.as_str(), rows[0].4.as_str()),
        ("delivery_dismiss", r#"{"reason":"a test event"}"#)
    );
    assert_eq!(rows[4].1, "effect_dismiss");
}

#[test]
fn an_alert_ack_is_recorded_acknowledged_conflict_or_not_found() {
    let mut db = db();
    for (id, kind) in [("alt_open", "effect_dead"), ("alt_done", "delivery_dead")] {
        db.run(
            &st::OPEN_ALERT.bind(vec![
                Arg::text(id),
                Arg::text(kind),
                Arg::text("critical"),
                Arg::text("s"),
                Arg::Int(1),
                Arg::Null,
            ]),
            Fault::None,
        );
    }
    db.run(
        &st::RESOLVE_ALERT.bind(vec![Arg::text("alt_done")]),
        Fault::None,
    );
    for (id, outcome, acked) in [
        ("alt_open", "acknowledged", true),
        ("alt_open", "acknowledged", true),
        ("alt_done", "conflict", false),
        ("alt_none", "not_found", false),
    ] {
        let rec = record("POST", &format!("alerts/{id}/ack"), "", "token");
        let rows = commit(
            &mut db,
            &[
                st::ACK_ALERT.bind(vec![Arg::text(id)]),
                st::audit_after(&st::AUDIT_ALERT_ACK, &rec),
            ],
        );
        assert_eq!(!rows[0].is_empty(), acked, "{id}");
        assert_eq!(returned_outcome(&rows[1]), outcome, "{id}");
    }
}

#[test]
fn rows_are_never_changed_or_deleted() {
    let mut db = db();
    let rec = record("POST", "reconcile", "", "token");
    commit(&mut db, &[st::insert_audit(&rec, Outcome::Ok)]);
    for sql in [
        "DELETE FROM audit",
        "UPDATE audit SET actor = 'someone else'",
    ] {
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.inspect(sql)));
        assert!(refused.is_err(), "{sql} was allowed");
    }
    assert_eq!(audit_rows(&db).len(), 1);
    assert_eq!(audit_rows(&db)[0].0, "token");
}

#[test]
fn the_detail_must_be_json() {
    let mut db = db();
    let mut rec = record("POST", "reconcile", "", "token");
    rec.detail = "not json".into();
    let ex = db.batch(&[st::insert_audit(&rec, Outcome::Ok)], Fault::None);
    assert!(!ex.committed);
}

fn page(db: &mut Db, q: &AuditQuery) -> Vec<AuditRow> {
    db.read(&st::list_audit(q)).to().unwrap()
}

/// Newest first, filtered, cursor-paged: every page of every filter equals the matching rows
/// in descending id order, cut where the cursor says.
#[test]
fn the_list_pages_newest_first_under_each_filter() {
    let mut db = db();
    let actors = ["ada@example.com", "token", "svc.deploy"];
    let writes = [
        ("POST", "reconcile", ""),
        ("POST", "alerts/alt_1/ack", ""),
        ("POST", "deliveries/evt_1/replay", ""),
    ];
    let mut all = Vec::new();
    for i in 0..40 {
        let actor = actors[i % 3];
        let (m, p, b) = writes[(i / 2) % 3];
        let rec = record(m, p, b, actor);
        commit(&mut db, &[st::insert_audit(&rec, Outcome::Ok)]);
        all.push((i as i64 + 1, actor, rec.action));
    }
    let filters: Vec<(Option<&str>, Option<Action>)> = vec![
        (None, None),
        (Some("token"), None),
        (None, Some(Action::Replay)),
        (Some("ada@example.com"), Some(Action::AlertAck)),
        (Some("nobody"), None),
    ];
    for (actor, action) in filters {
        let mut expected: Vec<i64> = all
            .iter()
            .filter(|(_, a, x)| actor.is_none_or(|f| f == *a) && action.is_none_or(|f| f == *x))
            .map(|(id, _, _)| *id)
            .collect();
        expected.reverse();
        let mut seen: Vec<i64> = Vec::new();
        let mut after = None;
        loop {
            let q = AuditQuery {
                actor: actor.map(str::to_string),
                action,
                after,
                limit: 4,
            };
            let rows = page(&mut db, &q);
            assert!(rows.len() <= 5, "limit + 1 rows");
            let more = rows.len() > 4;
            let kept: Vec<i64> = rows.iter().take(4).map(|r| r.id).collect();
            seen.extend(&kept);
            if !more {
                break;
            }
            after = kept.last().copied();
        }
        assert_eq!(seen, expected, "{actor:?} {action:?}");
    }
}

/// Each list statement reads a range of an index backwards: no scan of the table, no sort.
#[test]
fn each_list_is_an_index_range_without_a_sort() {
    let db = db();
    for (s, index) in [
        (&st::LIST_AUDIT, "INTEGER PRIMARY KEY"),
        (&st::LIST_AUDIT_BY_ACTOR, "audit_actor "),
        (&st::LIST_AUDIT_BY_ACTION, "audit_action "),
        (&st::LIST_AUDIT_BY_ACTOR_ACTION, "audit_actor_action "),
    ] {
        let n = s.params.len();
        let args: Vec<String> = (0..n)
            .map(|i| match s.params[i] {
                "after_id" => "NULL".to_string(),
                "limit" => "51".to_string(),
                _ => "'x'".to_string(),
            })
            .collect();
        let mut sql = s.sql.to_string();
        for i in (1..=n).rev() {
            sql = sql.replace(&format!("?{i}"), &args[i - 1]);
        }
        let plan = db.inspect(&format!("EXPLAIN QUERY PLAN {sql}"));
        let details: Vec<String> = (0..plan.rows.len())
            .map(|i| plan.text(i, "detail").unwrap())
            .collect();
        let text = details.join(" | ");
        assert!(
            text.contains("SEARCH audit USING") && text.contains(index),
            "{}: {text}",
            s.name
        );
        assert!(!text.contains("TEMP B-TREE"), "{}: {text}", s.name);
    }
}
