//! Where a delivery's body lives (migrations/0013_delivery_body.sql), on the migrated schema
//! with the shared statements: a new body in its own row, read through the same statements
//! as before, and archiving that frees its pages; a body from before 0013 (in its delivery
//! row) still read, archived and restored.

use paymos_core::statements::{self as st, Arg, Bound};
use paymos_sim::{Db, Edits, Fault};

fn body_of(n: usize) -> String {
    // about the benchmark's 677 B average
    format!(
        r#"{{"event_id":"evt_{n:06}","type":"invoice.paid","created":1764450000,"livemode":true,"data":{{"id":"inv_{n:06}","object":"invoice","pad":"{}"}}}}"#,
        "x".repeat(560)
    )
}

fn insert(db: &mut Db, n: usize) -> bool {
    let ex = db.run(
        &st::INSERT_DELIVERY.bind(vec![
            Arg::Text(format!("evt_{n:06}").into()),
            Arg::Text(format!("inv_{n:06}").into()),
            Arg::text("invoice.paid"),
            Arg::Text(body_of(n).into()),
        ]),
        Fault::None,
    );
    !ex.result.expect("the insert runs")[0].is_empty()
}

/// Into the table itself, as INSERT_DELIVERY did before 0016 sent it through the view
/// `incoming_delivery`, and as scripts/rebuild-from-archive.mjs still writes.
fn insert_into_table(db: &mut Db, n: usize) {
    db.execute_raw(&format!(
        "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body) \
         VALUES ('evt_{n:06}', 'inv_{n:06}', 'invoice.paid', '{}')",
        body_of(n)
    ))
    .unwrap();
}

fn int(db: &Db, sql: &str) -> i64 {
    db.inspect(sql).int(0, "n").expect("a count")
}

fn loaded_body(db: &mut Db, n: usize) -> Option<String> {
    let rows = db.read(&st::LOAD_DELIVERY.bind(vec![Arg::Text(format!("evt_{n:06}").into())]));
    rows.text(0, "body")
}

/// Marks the deliveries `numbers` processed (what the consumer's RECORD_OUTCOME does), then
/// archives them in chunks of 500 under one key per chunk with the archive's own removal
/// statements.
fn archive(db: &mut Db, numbers: &[usize]) {
    db.execute_raw(
        "UPDATE webhook_delivery SET processed_at = '2026-01-02T00:00:00.000Z', outcome = 'applied'",
    )
    .unwrap();
    for (c, chunk) in numbers.chunks(500).enumerate() {
        let ids: Vec<String> = chunk.iter().map(|i| format!("evt_{i:06}")).collect();
        let processed = format!(
            "{{{}}}",
            ids.iter()
                .map(|id| format!(r#""{id}":"2026-01-02T00:00:00.000Z""#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let key = format!("deliveries/2026/01/01/chunk-{c}.ndjson.gz");
        let batch: Vec<Bound<'_>> = vec![
            st::DROP_BODY_ROWS.bind(vec![Arg::Text(processed.clone().into())]),
            st::REMOVE_ARCHIVED_BODIES.bind(vec![Arg::Text(processed.into()), Arg::text(&key)]),
        ];
        let ex = db.batch(&batch, Fault::None);
        assert!(ex.committed, "{:?}", ex.result);
        assert_eq!(
            ex.result.unwrap()[1].rows.len(),
            ids.len(),
            "every line archived"
        );
    }
}

#[test]
fn a_new_body_is_a_row_of_its_own_and_a_duplicate_writes_nothing() {
    let mut db = Db::open(Edits::default()).unwrap();
    let before = int(&db, "SELECT total_changes() AS n");
    assert!(insert(&mut db, 1));
    // the delivery's row and its body's row, each written once (migration 0016): no update
    // emptying a body copied into the delivery's row
    assert_eq!(int(&db, "SELECT total_changes() AS n") - before, 2);
    assert_eq!(
        int(
            &db,
            "SELECT count(*) AS n FROM webhook_delivery d JOIN delivery_body b \
             ON b.received_at = d.received_at AND b.event_id = d.event_id"
        ),
        1,
        "the body's key is the delivery's arrival"
    );
    let row = db.inspect("SELECT body FROM webhook_delivery WHERE event_id = 'evt_000001'");
    assert_eq!(
        row.text(0, "body").as_deref(),
        Some(""),
        "not in the delivery's row"
    );
    let own = db.inspect("SELECT body FROM delivery_body WHERE event_id = 'evt_000001'");
    assert_eq!(own.text(0, "body"), Some(body_of(1)), "in its own row");
    assert_eq!(loaded_body(&mut db, 1), Some(body_of(1)), "read as before");

    let before = int(&db, "SELECT total_changes() AS n");
    assert!(!insert(&mut db, 1), "the second copy is a duplicate");
    assert_eq!(
        int(&db, "SELECT total_changes() AS n"),
        before,
        "nothing written"
    );
    assert_eq!(int(&db, "SELECT count(*) AS n FROM delivery_body"), 1);
}

#[test]
fn archiving_deletes_the_body_rows_and_frees_their_pages() {
    let mut db = Db::open(Edits::default()).unwrap();
    let n = 2000;
    for i in 0..n {
        assert!(insert(&mut db, i));
    }
    let page_count = int(&db, "SELECT page_count AS n FROM pragma_page_count");
    let free_before = int(&db, "SELECT freelist_count AS n FROM pragma_freelist_count");
    let body_bytes = (0..n).map(|i| body_of(i).len() as i64).sum::<i64>();
    archive(&mut db, &(0..n).collect::<Vec<_>>());
    assert_eq!(int(&db, "SELECT count(*) AS n FROM delivery_body"), 0);
    assert_eq!(loaded_body(&mut db, 7), None, "archived: no body in D1");
    let freed = int(&db, "SELECT freelist_count AS n FROM pragma_freelist_count") - free_before;
    // the bodies' pages go back to the database (what emptying them in place did not do:
    // bench/README.md, "Growth"); at least 80 % of the pages they filled
    let body_pages = body_bytes / 4096;
    assert!(
        freed * 10 >= body_pages * 8,
        "{freed} pages freed of {page_count}, the bodies filled about {body_pages}"
    );
}

/// The migration's move trigger, as it creates it.
fn move_trigger() -> String {
    let sql = include_str!("../../../migrations/0013_delivery_body.sql");
    let start = sql
        .find("CREATE TRIGGER webhook_delivery_body_out")
        .unwrap();
    let end = start + sql[start..].find("END;").unwrap() + "END;".len();
    sql[start..end].to_string()
}

#[test]
fn a_body_inserted_into_the_table_directly_still_moves_to_its_own_row() {
    // as scripts/rebuild-from-archive.mjs writes a delivery back (0013's trigger, kept)
    let mut db = Db::open(Edits::default()).unwrap();
    insert_into_table(&mut db, 4);
    let row = db.inspect("SELECT body FROM webhook_delivery WHERE event_id = 'evt_000004'");
    assert_eq!(row.text(0, "body").as_deref(), Some(""));
    assert_eq!(loaded_body(&mut db, 4), Some(body_of(4)));
}

#[test]
fn a_body_from_before_0013_is_read_archived_and_restored_in_its_row() {
    let mut db = Db::open(Edits::default()).unwrap();
    // a row as 0001..0012 wrote it: the body in the row, no delivery_body row (the move
    // trigger did not exist then)
    db.execute_raw("DROP TRIGGER webhook_delivery_body_out")
        .unwrap();
    insert_into_table(&mut db, 3);
    db.execute_raw(&move_trigger()).unwrap();
    assert_eq!(int(&db, "SELECT count(*) AS n FROM delivery_body"), 0);
    assert_eq!(
        loaded_body(&mut db, 3),
        Some(body_of(3)),
        "read from its row"
    );

    archive(&mut db, &[3]);
    let row =
        db.inspect("SELECT body, archive_key FROM webhook_delivery WHERE event_id = 'evt_000003'");
    assert_eq!(row.text(0, "body").as_deref(), Some(""));
    assert_eq!(loaded_body(&mut db, 3), None);

    // a replay brings it back into its row
    let key = row.text(0, "archive_key").unwrap();
    let ex = db.run(
        &st::RESTORE_BODY.bind(vec![
            Arg::text("evt_000003"),
            Arg::text(&key),
            Arg::Text(body_of(3).into()),
        ]),
        Fault::None,
    );
    assert!(ex.committed);
    assert_eq!(loaded_body(&mut db, 3), Some(body_of(3)), "restored");
}

#[test]
fn an_archived_row_holding_a_body_is_refused_by_the_database() {
    let mut db = Db::open(Edits::default()).unwrap();
    assert!(insert(&mut db, 5));
    archive(&mut db, &[5]);
    let refused =
        db.execute_raw("UPDATE webhook_delivery SET body = 'x' WHERE event_id = 'evt_000005'");
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("an archived delivery holds no body")),
        "{refused:?}"
    );
    // a delivery marked archived while its body row is still there
    assert!(insert(&mut db, 6));
    let marked = db.execute_raw(
        "UPDATE webhook_delivery SET archived_at = 'x', archive_key = 'k' WHERE event_id = 'evt_000006'",
    );
    assert!(
        marked
            .as_ref()
            .is_err_and(|e| e.contains("an archived delivery holds no body")),
        "{marked:?}"
    );
    let half = db.execute_raw(
        "UPDATE webhook_delivery SET archive_key = NULL WHERE event_id = 'evt_000005'",
    );
    assert!(half.is_err(), "archived_at without archive_key: {half:?}");
}

/// Every statement that reads or deletes a body row finds it by its primary key.
#[test]
fn body_rows_are_found_by_their_key() {
    let db = Db::open(Edits::default()).unwrap();
    for s in [
        &st::LOAD_DELIVERY,
        &st::LOAD_DELIVERIES,
        &st::ARCHIVE_CANDIDATES,
        &st::ARCHIVE_BODIES,
        &st::DROP_BODY_ROWS,
    ] {
        let plan = db.plan(s);
        let on_bodies: Vec<&String> = plan
            .iter()
            .filter(|p| p.contains("delivery_body") || p.contains(" b ") || p.ends_with(" b"))
            .collect();
        assert!(
            !on_bodies.is_empty(),
            "{}: no step on delivery_body: {plan:?}",
            s.name
        );
        for step in on_bodies {
            assert!(
                step.starts_with("SEARCH") && step.contains("PRIMARY KEY"),
                "{}: {step} (plan {plan:?})",
                s.name
            );
        }
    }
}
