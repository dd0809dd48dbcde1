//! The simulated D1: one in-process SQLite database, the repository's migrations, and the
//! core's statements bound and run exactly as the Worker runs them on D1. A batch is one
//! transaction (`BEGIN … COMMIT`, rolled back on any error or simulated failure inside it),
//! as D1's `batch()` is.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use paymos_core::statements::{Arg, Bound, Statement};
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use crate::clock;

/// The rows a statement returned, with their column names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

impl Rows {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn col(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns))
    }

    pub fn value(&self, row: usize, name: &str) -> &Value {
        &self.rows[row][self.col(name)]
    }

    pub fn text(&self, row: usize, name: &str) -> Option<String> {
        match self.value(row, name) {
            Value::Text(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(format!("{other:?}")),
        }
    }

    /// Every row as the core's row type, read as the Worker reads D1's (through serde).
    pub fn to<T: serde::de::DeserializeOwned>(&self) -> Result<Vec<T>, String> {
        (0..self.rows.len())
            .map(|r| {
                let object: serde_json::Map<String, serde_json::Value> = self
                    .columns
                    .iter()
                    .zip(&self.rows[r])
                    .map(|(c, v)| (c.clone(), json(v)))
                    .collect();
                serde_json::from_value(serde_json::Value::Object(object))
                    .map_err(|e| format!("row {r} of {:?}: {e}", self.columns))
            })
            .collect()
    }

    pub fn int(&self, row: usize, name: &str) -> Option<i64> {
        match self.value(row, name) {
            Value::Integer(i) => Some(*i),
            Value::Null => None,
            other => panic!("{name}: not an integer: {other:?}"),
        }
    }
}

/// Each statement's rows as JSON objects, as D1 hands them to the Worker (what the core's
/// actors read).
pub fn as_json(results: &[Rows]) -> Result<Vec<Vec<serde_json::Value>>, String> {
    results.iter().map(Rows::to).collect()
}

/// A SQLite value as JSON (what D1 hands the Worker).
fn json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Integer(i) => serde_json::Value::from(*i),
        Value::Real(f) => serde_json::Value::from(*f),
        Value::Text(s) => serde_json::Value::from(s.as_str()),
        Value::Blob(b) => serde_json::Value::from(b.clone()),
    }
}

/// What the simulated D1 does to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// The call fails before anything is written (D1 unreachable, overloaded).
    Before,
    /// Inside a batch, statement `i` fails: the transaction rolls back, all or nothing.
    At(usize),
    /// The write commits, but the caller gets an error (the reply was lost on the way back).
    AfterCommit,
}

/// The outcome of one call: whether it committed, and what the caller saw.
#[derive(Debug)]
pub struct Exec {
    pub committed: bool,
    pub result: Result<Vec<Rows>, String>,
}

/// Hooks for the mutation tests: edit the schema, replace a statement's text. Production
/// behaviour is `Edits::default()`.
#[derive(Clone, Copy, Default)]
pub struct Edits {
    pub schema: Option<fn(String) -> String>,
    pub sql: Option<fn(&'static Statement) -> Option<String>>,
}

pub struct Db {
    conn: Connection,
    edits: Edits,
    replaced: HashMap<&'static str, Option<String>>,
}

/// Every `migrations/*.sql` of the repository, in file-name order, read once.
pub fn migrations() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no migrations in {}", dir.display());
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn value(arg: &Arg<'_>) -> Value {
    match arg {
        Arg::Null => Value::Null,
        Arg::Int(i) => Value::Integer(*i),
        Arg::Text(s) => Value::Text(s.to_string()),
    }
}

impl Db {
    /// A fresh database (on the simulated clock) with every migration applied.
    pub fn open(edits: Edits) -> rusqlite::Result<Db> {
        clock::register_vfs();
        let conn = Connection::open_with_flags_and_vfs(
            ":memory:",
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            clock::VFS_NAME,
        )?;
        conn.set_prepared_statement_cache_capacity(64);
        let schema = match edits.schema {
            Some(edit) => edit(migrations().to_string()),
            None => migrations().to_string(),
        };
        conn.execute_batch(&schema)?;
        Ok(Db {
            conn,
            edits,
            replaced: HashMap::new(),
        })
    }

    fn sql_of(&mut self, s: &'static Statement) -> String {
        let Some(edit) = self.edits.sql else {
            return s.sql.to_string();
        };
        self.replaced
            .entry(s.name)
            .or_insert_with(|| edit(s))
            .clone()
            .unwrap_or_else(|| s.sql.to_string())
    }

    /// Prepares a statement (as the Worker's `db.prepare`), checking that SQLite sees as many
    /// parameters as the statement declares.
    pub fn prepare_check(&mut self, s: &'static Statement) -> Result<(), String> {
        let sql = self.sql_of(s);
        let stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| format!("{}: {e}", s.name))?;
        if stmt.parameter_count() != s.params.len() {
            return Err(format!(
                "{}: SQLite sees {} parameters, the statement declares {:?}",
                s.name,
                stmt.parameter_count(),
                s.params
            ));
        }
        Ok(())
    }

    fn execute(&mut self, b: &Bound<'_>) -> rusqlite::Result<Rows> {
        let sql = self.sql_of(b.statement);
        let mut stmt = self.conn.prepare_cached(&sql)?;
        assert_eq!(
            stmt.parameter_count(),
            b.args.len(),
            "{}: parameter count",
            b.statement.name
        );
        for (i, a) in b.args.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, value(a))?;
        }
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        let n = columns.len();
        let mut rows = Vec::new();
        let mut raw = stmt.raw_query();
        while let Some(row) = raw.next()? {
            let mut r = Vec::with_capacity(n);
            for i in 0..n {
                r.push(row.get::<_, Value>(i)?);
            }
            rows.push(r);
        }
        Ok(Rows { columns, rows })
    }

    /// One statement on its own (its own implicit transaction), as `stmt.run()/first()/all()`.
    pub fn run(&mut self, b: &Bound<'_>, fault: Fault) -> Exec {
        match fault {
            Fault::Before | Fault::At(_) => Exec {
                committed: false,
                result: Err("D1_ERROR: simulated outage".into()),
            },
            Fault::None | Fault::AfterCommit => match self.execute(b) {
                Ok(rows) => Exec {
                    committed: true,
                    result: if fault == Fault::AfterCommit {
                        Err("D1_ERROR: network lost after commit".into())
                    } else {
                        Ok(vec![rows])
                    },
                },
                Err(e) => Exec {
                    committed: false,
                    result: Err(format!("{}: {e}", b.statement.name)),
                },
            },
        }
    }

    /// One D1 batch: one transaction, all or nothing.
    pub fn batch(&mut self, bs: &[Bound<'_>], fault: Fault) -> Exec {
        if fault == Fault::Before {
            return Exec {
                committed: false,
                result: Err("D1_ERROR: simulated outage".into()),
            };
        }
        self.conn.execute_batch("BEGIN IMMEDIATE").expect("BEGIN");
        let mut out = Vec::with_capacity(bs.len());
        for (i, b) in bs.iter().enumerate() {
            if fault == Fault::At(i) {
                self.conn.execute_batch("ROLLBACK").expect("ROLLBACK");
                return Exec {
                    committed: false,
                    result: Err(format!(
                        "D1_ERROR: simulated failure at {}",
                        b.statement.name
                    )),
                };
            }
            match self.execute(b) {
                Ok(rows) => out.push(rows),
                Err(e) => {
                    self.conn.execute_batch("ROLLBACK").expect("ROLLBACK");
                    return Exec {
                        committed: false,
                        result: Err(format!("{}: {e}", b.statement.name)),
                    };
                }
            }
        }
        self.conn.execute_batch("COMMIT").expect("COMMIT");
        Exec {
            committed: true,
            result: if fault == Fault::AfterCommit {
                Err("D1_ERROR: network lost after commit".into())
            } else {
                Ok(out)
            },
        }
    }

    /// A transaction run statement by statement, for a batch whose statements the checker
    /// inspects as they go (a consumer batch of several transitions): `begin`, `step`…,
    /// then `commit` or `rollback`. Each `step` is one statement of the one D1 batch.
    pub fn begin(&mut self) {
        self.conn.execute_batch("BEGIN IMMEDIATE").expect("BEGIN");
    }

    pub fn step(&mut self, b: &Bound<'_>) -> Result<Rows, String> {
        self.execute(b)
            .map_err(|e| format!("{}: {e}", b.statement.name))
    }

    pub fn commit(&mut self) {
        self.conn.execute_batch("COMMIT").expect("COMMIT");
    }

    pub fn rollback(&mut self) {
        self.conn.execute_batch("ROLLBACK").expect("ROLLBACK");
    }

    /// The checker's own reads: never faulted, never part of the protocol.
    pub fn read(&mut self, b: &Bound<'_>) -> Rows {
        self.execute(b)
            .unwrap_or_else(|e| panic!("checker read {}: {e}", b.statement.name))
    }

    /// Raw SQL outside the protocol (schema tests): `Err` with SQLite's message.
    pub fn execute_raw(&self, sql: &str) -> Result<(), String> {
        self.conn.execute_batch(sql).map_err(|e| e.to_string())
    }

    /// SQLite's query plan of a statement (`EXPLAIN QUERY PLAN`, every parameter NULL), one
    /// line per step.
    pub fn plan(&self, s: &Statement) -> Vec<String> {
        let mut stmt = self
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", s.sql))
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
        for i in 1..=s.params.len() {
            stmt.raw_bind_parameter(i, Value::Null).expect("bind");
        }
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        while let Some(row) = rows.next().expect("plan row") {
            out.push(row.get::<_, String>(3).expect("plan detail"));
        }
        out
    }

    /// Inspection SQL of the checker (whole-table views no statement of the Worker needs).
    pub fn inspect(&self, sql: &str) -> Rows {
        let mut stmt = self.conn.prepare_cached(sql).expect("inspection SQL");
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        let n = columns.len();
        let rows = stmt
            .query_map([], |row| (0..n).map(|i| row.get::<_, Value>(i)).collect())
            .expect("inspection query")
            .collect::<rusqlite::Result<Vec<Vec<Value>>>>()
            .expect("inspection rows");
        Rows { columns, rows }
    }
}
