//! The migrations that rebuild a table for its row ids, each applied over a database filled
//! under the migrations before it, with foreign keys enforced, as D1 always does:
//! - 0014 (resource_transition and effect without AUTOINCREMENT): the same columns,
//!   constraints, foreign keys and indexes (compared with what 0013 left, not with a copy of
//!   the text), every row kept with its id, no `sqlite_sequence` row written by an insert any
//!   more, and ids that keep increasing from the largest one;
//! - 0015 (resource WITHOUT ROWID): the same columns and constraints, every row, the
//!   references to it still checked, and one B-tree where there were two;
//! - 0019 (a resource's history keyed by the resource): every row with its id, one B-tree
//!   where there were two, what it refused still refused, each resource's count starting
//!   at its largest id and the next transition numbered after it.

use rusqlite::types::Value;
use rusqlite::Connection;
use std::path::PathBuf;

const REBUILT: [&str; 2] = ["resource_transition", "effect"];
const MIGRATION: &str = "0014_no_autoincrement.sql";

fn migration_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    files
}

/// A database with every migration before `migration` applied, foreign keys on.
fn before(migration: &str) -> Connection {
    let c = Connection::open_in_memory().unwrap();
    c.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    let files = migration_files();
    assert!(
        files.iter().any(|f| f.ends_with(migration)),
        "{migration} is missing"
    );
    for f in files.iter().take_while(|f| !f.ends_with(migration)) {
        c.execute_batch(&std::fs::read_to_string(f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    c
}

/// `migration`'s text in one transaction, as D1 applies a migration.
fn apply(c: &Connection, migration: &str, text: &str) -> rusqlite::Result<()> {
    let done = c.execute_batch(&format!("BEGIN;\n{text}\nCOMMIT;"));
    if done.is_err() && !c.is_autocommit() {
        c.execute_batch("ROLLBACK").unwrap();
    }
    done.inspect_err(|e| eprintln!("{migration}: {e}"))
}

fn migration_text(migration: &str) -> String {
    let files = migration_files();
    let f = files.iter().find(|f| f.ends_with(migration)).unwrap();
    std::fs::read_to_string(f).unwrap()
}

fn apply_0014(c: &Connection) {
    apply(c, MIGRATION, &migration_text(MIGRATION)).expect("0014 applies");
}

fn rows(c: &Connection, sql: &str) -> Vec<Vec<Value>> {
    let mut stmt = c.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The B-trees that hold `table` and its indexes, by name.
fn b_trees(c: &Connection, table: &str) -> Vec<Vec<Value>> {
    rows(
        c,
        &format!(
            "SELECT name FROM sqlite_master WHERE tbl_name = '{table}' AND rootpage > 0 \
             ORDER BY name"
        ),
    )
}

/// A table's CREATE text without comments, quotes, AUTOINCREMENT or layout: what SQLite
/// enforces (columns in order, types, NOT NULL, defaults, CHECKs, UNIQUE, REFERENCES).
fn definition(c: &Connection, table: &str) -> String {
    let sql: String = c
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )
        .unwrap();
    let no_comments: String = sql
        .lines()
        .map(|l| l.split("--").next().unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    let words = no_comments
        .replace('"', "")
        .replace(" AUTOINCREMENT", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    words
        .replace(" ,", ",")
        .replace("( ", "(")
        .replace(" )", ")")
}

/// Everything else SQLite knows of a table: its columns as it reads them, its foreign keys,
/// and each index (name, unique, origin, partial, columns and the partial index's text).
fn shape(c: &Connection, table: &str) -> Vec<Vec<Value>> {
    let mut out = rows(c, &format!("SELECT * FROM pragma_table_xinfo('{table}')"));
    out.extend(rows(
        c,
        &format!("SELECT * FROM pragma_foreign_key_list('{table}')"),
    ));
    for index in rows(
        c,
        &format!("SELECT name, \"unique\", origin, partial FROM pragma_index_list('{table}') ORDER BY name"),
    ) {
        let Value::Text(name) = &index[0] else {
            panic!("an index name")
        };
        out.push(index.clone());
        out.extend(rows(
            c,
            &format!("SELECT * FROM pragma_index_xinfo('{name}')"),
        ));
        out.extend(rows(
            c,
            &format!("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = '{name}'"),
        ));
    }
    out
}

/// Rows as the receiver writes them: transitions, effects of several kinds and states, and
/// last an insert that lost to the UNIQUE (under AUTOINCREMENT it consumed a number, 5, that
/// no row holds: the sequence stands above the largest id, 4).
fn fill(c: &Connection) {
    c.execute_batch(
        "INSERT INTO resource (id, kind, status) VALUES ('inv_1', 'invoice', 'paid'),
             ('inv_2', 'invoice', 'refunded'), ('wdr_1', 'withdrawal', 'completed');
         INSERT INTO resource_transition (resource_id, from_status, to_status, cause_kind, cause)
             VALUES ('inv_1', NULL, 'paid', 'event', 'evt_1'),
                    ('inv_2', NULL, 'paid', 'event', 'evt_2'),
                    ('inv_2', 'paid', 'refunded', 'manual', 'a reason');
         UPDATE resource_transition SET actor = 'ops@example.com' WHERE cause_kind = 'manual';
         INSERT INTO effect (resource_id, kind, license_code, cause, effect_id)
             VALUES ('inv_1', 'fulfilment', 'LIC-1', 'evt_1', 'eff_1'),
                    ('inv_2', 'fulfilment', 'LIC-2', 'evt_2', 'eff_2');
         INSERT INTO effect (resource_id, kind, cause, effect_id, dispatch, dead_at)
             VALUES ('inv_2', 'revocation', 'evt_3', 'eff_3', 'dead', '2026-12-01T00:00:00.000Z');
         UPDATE effect SET dispatch = 'cancelled', cancelled_at = '2026-12-01T00:00:00.000Z'
             WHERE effect_id = 'eff_2';
         INSERT INTO effect (resource_id, kind, cause, effect_id, amount, currency)
             VALUES ('wdr_1', 'settlement', 'evt_4', 'eff_4', '10.00', 'EUR');
         INSERT INTO effect (resource_id, kind, license_code, cause, effect_id)
             VALUES ('inv_2', 'fulfilment', 'LIC-X', 'evt_2', 'eff_x')
             ON CONFLICT (resource_id, kind) DO NOTHING",
    )
    .unwrap();
}

/// The references to `resource` are still checked: a transition and an effect of a resource
/// that does not exist are refused.
fn assert_references_checked(c: &Connection) {
    assert_refused(
        c,
        &[
            (
                "a transition's resource",
                "INSERT INTO resource_transition (resource_id, to_status, cause_kind, cause) \
                 VALUES ('inv_nope', 'paid', 'event', 'evt_9')",
            ),
            (
                "an effect's resource",
                "INSERT INTO effect (resource_id, kind, cause, effect_id) \
                 VALUES ('inv_nope', 'revocation', 'evt_9', 'eff_9')",
            ),
        ],
    );
}

/// Each write (what it breaks, its SQL) refused by the database.
fn assert_refused(c: &Connection, writes: &[(&str, &str)]) {
    for (what, sql) in writes {
        assert!(
            c.execute_batch(sql).is_err(),
            "{what} no longer refused: {sql}"
        );
    }
}

const ALL_TRANSITIONS: &str = "SELECT * FROM resource_transition ORDER BY id";
const ALL_EFFECTS: &str = "SELECT * FROM effect ORDER BY id";

#[test]
fn the_tables_rebuilt_by_0014_are_the_same_tables_without_their_sequence() {
    let c = before(MIGRATION);
    fill(&c);
    let sequences = rows(&c, "SELECT name, seq FROM sqlite_sequence ORDER BY name");
    assert!(
        sequences.contains(&vec![Value::Text("effect".into()), Value::Integer(5)]),
        "the conflicting insert consumed a number: {sequences:?}"
    );
    let largest: i64 = c
        .query_row("SELECT max(id) FROM effect", [], |r| r.get(0))
        .unwrap();
    assert_eq!(largest, 4);
    let definitions: Vec<String> = REBUILT.iter().map(|t| definition(&c, t)).collect();
    let shapes: Vec<_> = REBUILT.iter().map(|t| shape(&c, t)).collect();
    let transitions = rows(&c, ALL_TRANSITIONS);
    let effects = rows(&c, ALL_EFFECTS);
    let other_tables = rows(
        &c,
        "SELECT type, name, tbl_name, sql FROM sqlite_master \
         WHERE tbl_name NOT IN ('resource_transition', 'effect') ORDER BY type, name",
    );

    apply_0014(&c);

    for (i, t) in REBUILT.iter().enumerate() {
        assert_eq!(definition(&c, t), definitions[i], "{t}: definition");
        assert!(
            !definition(&c, t).contains("AUTOINCREMENT"),
            "{t} still AUTOINCREMENT"
        );
        assert_eq!(shape(&c, t), shapes[i], "{t}: columns, keys, indexes");
    }
    assert_eq!(
        rows(&c, ALL_TRANSITIONS),
        transitions,
        "every transition, same id"
    );
    assert_eq!(rows(&c, ALL_EFFECTS), effects, "every effect, same id");
    assert_eq!(
        rows(
            &c,
            "SELECT type, name, tbl_name, sql FROM sqlite_master \
             WHERE tbl_name NOT IN ('resource_transition', 'effect') ORDER BY type, name",
        ),
        other_tables,
        "nothing else changed"
    );
    assert!(rows(&c, "PRAGMA foreign_key_check").is_empty());
    assert_eq!(
        rows(&c, "PRAGMA integrity_check"),
        vec![vec![Value::Text("ok".into())]]
    );

    // the sequence rows are gone, and the inserts of a new delivery write none
    let remaining = rows(&c, "SELECT name FROM sqlite_sequence ORDER BY name");
    for t in REBUILT {
        assert!(
            !remaining.contains(&vec![Value::Text(t.into())]),
            "{t}: {remaining:?}"
        );
    }
    c.execute_batch(
        "INSERT INTO resource (id, kind, status) VALUES ('inv_3', 'invoice', 'paid');
         INSERT INTO resource_transition (resource_id, to_status, cause_kind, cause)
             VALUES ('inv_3', 'paid', 'event', 'evt_5');
         INSERT INTO effect (resource_id, kind, license_code, cause, effect_id)
             VALUES ('inv_3', 'fulfilment', 'LIC-3', 'evt_5', 'eff_5');",
    )
    .unwrap();
    assert_eq!(
        rows(&c, "SELECT name FROM sqlite_sequence ORDER BY name"),
        remaining
    );
    // ids go on from the largest row's (4 + 1, where AUTOINCREMENT would have given 6): above
    // every cursor and watermark handed out before, since each named a row
    let id = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        id("SELECT id FROM resource_transition WHERE cause = 'evt_5'"),
        4
    );
    assert_eq!(id("SELECT id FROM effect WHERE effect_id = 'eff_5'"), 5);
}

#[test]
fn the_rebuilt_tables_refuse_what_they_refused() {
    let c = before(MIGRATION);
    fill(&c);
    apply_0014(&c);
    assert_refused(
        &c,
        &[
            (
                "the cause kind",
                "INSERT INTO resource_transition (resource_id, to_status, cause_kind, cause) \
             VALUES ('inv_1', 'paid', 'rumour', 'evt_9')",
            ),
            (
                "once per kind",
                "INSERT INTO effect (resource_id, kind, license_code, cause, effect_id) \
             VALUES ('inv_1', 'fulfilment', 'LIC-9', 'evt_9', 'eff_9')",
            ),
            (
                "a fulfilment's licence",
                "INSERT INTO effect (resource_id, kind, cause, effect_id) \
             VALUES ('wdr_1', 'fulfilment', 'evt_9', 'eff_9')",
            ),
            (
                "the kind",
                "INSERT INTO effect (resource_id, kind, cause, effect_id) \
             VALUES ('wdr_1', 'gift', 'evt_9', 'eff_9')",
            ),
            (
                "the dispatch state",
                "UPDATE effect SET dispatch = 'lost' WHERE effect_id = 'eff_1'",
            ),
            (
                "the effect id",
                "UPDATE effect SET effect_id = 'eff_1' WHERE effect_id = 'eff_4'",
            ),
        ],
    );
    assert_references_checked(&c);
}

// ---------------------------------------------------------------- 0015

const RESOURCE_0015: &str = "0015_resource_without_rowid.sql";
const ALL_RESOURCES: &str = "SELECT * FROM resource ORDER BY id";

#[test]
fn resource_after_0015_is_one_b_tree_with_every_row_and_reference() {
    let c = before(RESOURCE_0015);
    fill(&c);
    let definition_before = definition(&c, "resource");
    // the one change SQLite makes to a column: a WITHOUT ROWID key is NOT NULL, where a
    // rowid table's TEXT PRIMARY KEY let NULL in (every id the receiver writes is a
    // delivery's NOT NULL resource_id)
    let mut columns_before = rows(&c, "SELECT * FROM pragma_table_xinfo('resource')");
    assert_eq!(columns_before[0][1], Value::Text("id".into()));
    assert_eq!(
        columns_before[0][3],
        Value::Integer(0),
        "id NULL-able before"
    );
    columns_before[0][3] = Value::Integer(1);
    let resources = rows(&c, ALL_RESOURCES);
    let (transitions, effects) = (rows(&c, ALL_TRANSITIONS), rows(&c, ALL_EFFECTS));
    let others = "SELECT type, name, tbl_name, sql FROM sqlite_master \
                  WHERE tbl_name <> 'resource' ORDER BY type, name";
    let other_tables = rows(&c, others);
    assert_eq!(
        b_trees(&c, "resource").len(),
        2,
        "a row table and its key's index"
    );

    apply(&c, RESOURCE_0015, &migration_text(RESOURCE_0015)).expect("0015 applies");

    assert_eq!(
        definition(&c, "resource"),
        format!("{definition_before} WITHOUT ROWID")
    );
    assert_eq!(
        rows(&c, "SELECT * FROM pragma_table_xinfo('resource')"),
        columns_before
    );
    assert_eq!(
        b_trees(&c, "resource"),
        vec![vec![Value::Text("resource".into())]]
    );
    assert_eq!(rows(&c, ALL_RESOURCES), resources, "every resource");
    assert_eq!(rows(&c, ALL_TRANSITIONS), transitions);
    assert_eq!(rows(&c, ALL_EFFECTS), effects);
    assert_eq!(rows(&c, others), other_tables, "nothing else changed");
    assert!(rows(&c, "PRAGMA foreign_key_check").is_empty());
    assert_eq!(
        rows(&c, "PRAGMA integrity_check"),
        vec![vec![Value::Text("ok".into())]]
    );
    assert_refused(
        &c,
        &[
            (
                "a referenced resource deleted",
                "DELETE FROM resource WHERE id = 'inv_1'",
            ),
            (
                "the id, once",
                "INSERT INTO resource (id, kind, status) VALUES ('inv_1', 'invoice', 'open')",
            ),
            (
                "the kind",
                "INSERT INTO resource (id, kind, status) VALUES ('inv_9', 'gift', 'open')",
            ),
            (
                "a NULL id",
                "INSERT INTO resource (id, kind, status) VALUES (NULL, 'invoice', 'open')",
            ),
            (
                "a status",
                "INSERT INTO resource (id, kind) VALUES ('inv_9', 'invoice')",
            ),
        ],
    );
    assert_references_checked(&c);
}

#[test]
fn a_0015_that_loses_a_referenced_resource_is_refused_at_its_commit() {
    let c = before(RESOURCE_0015);
    fill(&c);
    let resources = rows(&c, ALL_RESOURCES);
    let losing = migration_text(RESOURCE_0015).replace(
        "FROM resource_before_0015;",
        "FROM resource_before_0015 WHERE id <> 'inv_2';",
    );
    assert_ne!(losing, migration_text(RESOURCE_0015), "the edit applies");
    assert!(apply(&c, RESOURCE_0015, &losing).is_err());
    // rolled back whole: the rowid table and every row, as before
    assert_eq!(rows(&c, ALL_RESOURCES), resources);
    assert!(!definition(&c, "resource").contains("WITHOUT ROWID"));
}

// ---------------------------------------------------------------- 0019

const HISTORY_0019: &str = "0019_history_per_resource.sql";
const HISTORY_IN_ORDER: &str = "SELECT * FROM resource_transition ORDER BY resource_id, id";

#[test]
fn the_history_after_0019_is_one_b_tree_keyed_by_resource_with_every_row() {
    let c = before(HISTORY_0019);
    fill(&c);
    let history = rows(&c, HISTORY_IN_ORDER);
    let columns = "SELECT name, type FROM pragma_table_xinfo('resource_transition')";
    let columns_before = rows(&c, columns);
    assert_eq!(
        b_trees(&c, "resource_transition").len(),
        2,
        "a row table and its (resource_id, id) index"
    );

    apply(&c, HISTORY_0019, &migration_text(HISTORY_0019)).expect("0019 applies");

    assert_eq!(
        rows(&c, HISTORY_IN_ORDER),
        history,
        "every row, with its id"
    );
    assert_eq!(
        rows(&c, columns),
        columns_before,
        "the same columns in the same order"
    );
    assert_eq!(
        b_trees(&c, "resource_transition"),
        vec![vec![Value::Text("resource_transition".into())]]
    );
    assert!(definition(&c, "resource_transition").ends_with("WITHOUT ROWID"));
    // each resource's count is its largest id (none: 0)
    assert_eq!(
        rows(&c, "SELECT id, transitions FROM resource ORDER BY id"),
        [("inv_1", 1), ("inv_2", 3), ("wdr_1", 0)]
            .map(|(id, n)| vec![Value::Text(id.into()), Value::Integer(n)])
    );
    assert!(rows(&c, "PRAGMA foreign_key_check").is_empty());
    let insert = |id: i64, resource: &str, cause_kind: &str| {
        format!(
            "INSERT INTO resource_transition (id, resource_id, to_status, cause_kind, cause) \
             VALUES ({id}, '{resource}', 'paid', '{cause_kind}', 'evt_9')"
        )
    };
    assert_refused(
        &c,
        &[
            ("a transition's resource", &insert(9, "inv_nope", "event")),
            ("the cause's kind", &insert(9, "inv_1", "rumour")),
            ("an id twice in a resource", &insert(1, "inv_1", "event")),
            (
                "no id",
                "INSERT INTO resource_transition (resource_id, to_status, cause_kind, cause) \
                 VALUES ('inv_1', 'paid', 'event', 'evt_9')",
            ),
        ],
    );
    // the same id in another resource is another key
    c.execute_batch(&insert(1, "wdr_1", "reconciliation"))
        .unwrap();

    // the core's guarded write and history insert number the next transition after the
    // largest id, in its resource
    let refunded: Vec<Value> = ["inv_2", "invoice", "paid"]
        .iter()
        .map(|v| Value::Text((*v).into()))
        .chain([Value::Null, Value::Null, Value::Null])
        .chain([
            Value::Text("tok".into()),
            Value::Text("[\"refunded\"]".into()),
            Value::Null, // no delivery
            Value::Null, // no refund hold
        ])
        .collect();
    let guarded = &paymos_core::statements::GUARDED_UPSERT;
    assert_eq!(
        c.execute(guarded.sql, rusqlite::params_from_iter(refunded))
            .unwrap(),
        1
    );
    let history = &paymos_core::statements::INSERT_HISTORY;
    let args = ["inv_2", "tok", "manual", "a reason"].map(|v| Value::Text(v.into()));
    let args = args.into_iter().chain([Value::Null]);
    assert_eq!(
        c.execute(history.sql, rusqlite::params_from_iter(args))
            .unwrap(),
        1
    );
    let text = |v: &str| Value::Text(v.into());
    assert_eq!(
        rows(
            &c,
            "SELECT id, from_status, to_status FROM resource_transition \
                  WHERE resource_id = 'inv_2' ORDER BY id"
        ),
        vec![
            vec![Value::Integer(2), Value::Null, text("paid")],
            vec![Value::Integer(3), text("paid"), text("refunded")],
            vec![Value::Integer(4), text("refunded"), text("paid")],
        ]
    );
}
