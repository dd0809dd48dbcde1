//! Every index on the tables a delivery writes earns its place (migrations/0012_indexes.sql).
//!
//! D1 bills, and its single writer spends, one row written per index entry an insert or an
//! update adds: an index nobody reads is a cost on every delivery. So each index of
//! `webhook_delivery`, `effect` and `resource_transition` is listed here with the statements
//! that need it, and SQLite's plan of each of those statements (`EXPLAIN QUERY PLAN` on the
//! migrated schema, the parameters unbound as when D1 prepares them) must use it. An index
//! missing from the list fails (name the query that needs it, or drop it); an index dropped
//! while a statement needs it fails too, by that statement's plan.

use paymos_core::statements::{self as st, Statement};
use rusqlite::types::Value;
use rusqlite::Connection;

fn db() -> Connection {
    let c = Connection::open_in_memory().expect("an in-memory SQLite");
    c.execute_batch(paymos_sim::db::migrations())
        .expect("the migrations apply");
    c
}

/// SQLite's plan of `s`, one `detail` per step joined by " | ", every parameter NULL.
fn plan(c: &Connection, s: &Statement) -> String {
    let mut stmt = c
        .prepare(&format!("EXPLAIN QUERY PLAN {}", s.sql))
        .unwrap_or_else(|e| panic!("{}: {e}", s.name));
    let nulls = vec![Value::Null; stmt.parameter_count()];
    let details = stmt
        .query_map(rusqlite::params_from_iter(nulls), |row| {
            row.get::<_, String>("detail")
        })
        .unwrap_or_else(|e| panic!("{}: {e}", s.name))
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap_or_else(|e| panic!("{}: {e}", s.name));
    details.join(" | ")
}

/// Each index, and the statements whose plans use it (the reason it is kept).
fn needed() -> Vec<(&'static str, Vec<&'static Statement>)> {
    vec![
        // the primary key: the dedupe (INSERT_DELIVERY's lookup, migration 0016) and every
        // lookup by id
        (
            "sqlite_autoindex_webhook_delivery_1",
            vec![&st::LOAD_DELIVERIES, &st::RECORD_OUTCOME, &st::MARK_DEAD],
        ),
        // the archive listing and the bulk replay, newest first, cursor-paged
        (
            "webhook_delivery_received",
            vec![&st::LIST_DELIVERIES, &st::REPLAY_CHUNK],
        ),
        // reconciliation, and the list filtered by resource: an invoice's deliveries (a few),
        // not every invoice.paid, not the table
        (
            "webhook_delivery_resource",
            vec![&st::PAID_ON_RECORD, &st::LIST_DELIVERIES_OF_RESOURCE],
        ),
        // the sweeper, the metrics' unprocessed counts and the list's `status=received`: the
        // backlog, not the history
        (
            "webhook_delivery_unprocessed_received",
            vec![
                &st::CLAIM_UNPROCESSED,
                &st::METRICS_FACTS,
                &st::LIST_DELIVERIES_RECEIVED,
            ],
        ),
        // has the invoice an unprocessed refund on record (migration 0025): a delivery's
        // transition (its gate, its outcome, its read-back: `delivery_open!`), reconciliation,
        // an operator's transition into paid; partial: only such refunds have an entry
        (
            "webhook_delivery_refund_waiting",
            vec![
                &st::GUARDED_UPSERT,
                &st::FILL_RESOURCE,
                &st::RECORD_OUTCOME,
                &st::READ_BACK,
                &st::COUNT_HAND_BACK,
                &st::PAID_ON_RECORD,
                &st::REFUND_WAITING,
            ],
        ),
        // livemode mismatches for the metrics; partial: no entry for a delivery without reason
        ("webhook_delivery_reason", vec![&st::METRICS_FACTS]),
        // UNIQUE (resource_id, kind): once per kind, and a resource's effects
        (
            "sqlite_autoindex_effect_1",
            vec![&st::INSERT_EFFECT, &st::CANCEL_EFFECT, &st::RELEASE_EFFECTS],
        ),
        // the outbox id: the dispatcher's load and outcomes
        (
            "effect_effect_id",
            vec![
                &st::LOAD_EFFECTS_FOR_DISPATCH,
                &st::START_ATTEMPTS,
                &st::MARK_EFFECT_DELIVERED,
                &st::RECORD_EFFECT_FAILURE,
            ],
        ),
        // pending effects for the effects sweeper, counts by dispatch state for the metrics
        (
            "effect_dispatch",
            vec![&st::CLAIM_EFFECTS, &st::METRICS_FACTS],
        ),
        // the dead not yet dismissed, for the bounded health checks (migration 0009); partial:
        // a delivery or an effect that is not dead writes no entry
        ("webhook_delivery_dead_open", vec![&st::METRICS_FACTS]),
        ("effect_dead_open", vec![&st::METRICS_FACTS]),
        // the archive's working set, processed and still holding a body (migration 0011):
        // an archiving run's candidates, oldest first, and the backlog the metrics show
        (
            "webhook_delivery_archivable",
            vec![&st::ARCHIVE_CANDIDATES, &st::ARCHIVE_BACKLOG],
        ),
    ]
}

#[test]
fn every_index_of_the_delivery_tables_is_used_by_the_statements_named_for_it() {
    let c = db();
    let needed = needed();
    for (index, statements) in &needed {
        assert!(!statements.is_empty(), "{index}: no statement named");
        for s in statements {
            let p = plan(&c, s);
            // the name followed by a space or the end: `effect_dispatch` is not `effect_dispatch_x`
            let uses = p
                .split(" | ")
                .any(|step| step.split(' ').any(|word| word == *index));
            assert!(uses, "{} does not use {index}: {p}", s.name);
        }
    }
    let mut stmt = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' \
             AND tbl_name IN ('webhook_delivery', 'effect', 'resource_transition') ORDER BY name",
        )
        .unwrap();
    let indexes: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for index in &indexes {
        assert!(
            needed.iter().any(|(n, _)| n == index),
            "index {index} is written on every insert that enters it, and no statement is named \
             for it here: name the query that needs it (with its plan), or drop it"
        );
    }
    for (index, _) in &needed {
        assert!(indexes.contains(&index.to_string()), "{index} is gone");
    }
}

/// A resource's history is the key's range, in its order (migration 0019: the table is keyed
/// by (resource_id, id) and has no index of its own): no sort, no other B-tree.
#[test]
fn a_history_is_read_by_its_key_in_order() {
    let c = db();
    assert_eq!(
        plan(&c, &st::LOAD_HISTORY),
        "SEARCH resource_transition USING PRIMARY KEY (resource_id=?)"
    );
}

/// The indexes 0012 dropped stay dropped, and the statements that could have used them plan
/// as well without: no table scanned whole, no sort of the whole backlog.
#[test]
fn the_dropped_indexes_leave_no_statement_scanning() {
    let c = db();
    for gone in [
        "webhook_delivery_type",
        "webhook_delivery_unprocessed",
        "effect_pending",
        "effect_pending_created",
    ] {
        let n: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1",
                [gone],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0, "{gone} is back");
    }
    for s in [
        &st::PAID_ON_RECORD,
        &st::CLAIM_UNPROCESSED,
        &st::CLAIM_EFFECTS,
        &st::START_ATTEMPTS,
    ] {
        let p = plan(&c, s);
        for step in p.split(" | ") {
            let scans_a_table = step.starts_with("SCAN ")
                && !step.contains("VIRTUAL TABLE")
                && !step.contains("USING INDEX")
                && !step.contains("USING COVERING INDEX")
                && !step.contains("CONSTANT ROW");
            assert!(!scans_a_table, "{} scans a table: {p}", s.name);
        }
    }
}

/// The archive's selections read both places a body can be (migration 0017) in key order,
/// from the cursor: `delivery_body` through its primary key and the bodies in rows through
/// the partial index, merged, so their LIMIT stops both. A sort or a table scan would read
/// every body in D1 before the first candidate.
#[test]
fn the_archive_walks_both_places_in_key_order() {
    let c = db();
    for s in [&st::ARCHIVE_CANDIDATES, &st::ARCHIVE_BACKLOG] {
        let p = plan(&c, s);
        assert!(
            p.contains("webhook_delivery_archivable"),
            "{}: the bodies in rows: {p}",
            s.name
        );
        let on_bodies: Vec<&str> = p.split(" | ").filter(|step| step.contains(" b ")).collect();
        assert!(
            !on_bodies.is_empty(),
            "{}: no step on delivery_body: {p}",
            s.name
        );
        for step in &on_bodies {
            assert!(
                step.starts_with("SEARCH b USING PRIMARY KEY") || step.starts_with("SCAN b"),
                "{}: {step}",
                s.name
            );
        }
        for step in p.split(" | ") {
            assert!(!step.contains("TEMP B-TREE"), "{}: sorts: {p}", s.name);
            // the partial index in order (its first entry) is a walk of the working set
            let scans_deliveries = (step.starts_with("SCAN d")
                || step.starts_with("SCAN webhook_delivery"))
                && !step.contains("USING INDEX webhook_delivery_archivable");
            assert!(!scans_deliveries, "{}: scans the deliveries: {p}", s.name);
        }
    }
}
