//! Runs the shared statements (`paymos_core::statements`, where every SQL text is defined
//! once) on D1, and reads their rows into types. No SQL text lives here.

use paymos_core::statements::{Arg, Bound};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{js_sys, wasm_bindgen_futures, D1Database, D1PreparedStatement, D1Result, Env};

/// D1 failed (unreachable, overloaded, a constraint), a row did not read, or one was missing:
/// the sender or the queue retries (503, `src/error.rs`). Names the statement (a batch's
/// statements) and the kind of failure (`paymos_core::statements::DbError`).
pub use paymos_core::statements::{DbError, Site};

pub type DbResult<T> = Result<T, DbError>;

/// What a runtime error says: D1's own message and its cause, a row's serde error (workers-rs's Display
/// of those is only "wasm-bindgen serialization error"), or the error's Display.
fn message(e: &worker::Error) -> String {
    match e {
        // D1's own message (`D1_ERROR: …`) and its cause, not the wrapper's Debug text
        worker::Error::D1(d1) => {
            let message = String::from(AsRef::<js_sys::Error>::as_ref(d1).message());
            let cause = d1.cause();
            if message.contains(&cause) || cause == "unknown error" {
                message
            } else {
                format!("{message} ({cause})")
            }
        }
        worker::Error::SerdeWasmBindgenError(e) => e.to_string(),
        worker::Error::SerdeJsonError(e) => e.to_string(),
        _ => e.to_string(),
    }
}

/// A D1 call at `at` failed; a row that does not read into its type is `DbError::Row`.
fn failed(at: Site, e: worker::Error) -> DbError {
    let message = message(&e);
    match e {
        worker::Error::SerdeWasmBindgenError(_) | worker::Error::SerdeJsonError(_) => {
            DbError::Row { at, message }
        }
        _ => DbError::Call { at, message },
    }
}

/// A rejected promise of a statement at `at` (a call through `inner()`).
fn rejected(at: Site, e: JsValue) -> DbError {
    failed(at, worker::Error::from(e))
}

/// The `DB` binding; a missing binding is the database being unavailable.
pub fn database(env: &Env) -> DbResult<D1Database> {
    env.d1("DB").map_err(|e| DbError::Binding(message(&e)))
}

fn js(arg: &Arg<'_>) -> JsValue {
    match arg {
        Arg::Null => JsValue::NULL,
        Arg::Int(i) => JsValue::from_f64(*i as f64),
        Arg::Text(s) => JsValue::from_str(s),
    }
}

fn prepare(db: &D1Database, b: &Bound<'_>) -> DbResult<D1PreparedStatement> {
    let args: Vec<JsValue> = b.args.iter().map(js).collect();
    db.prepare(b.statement.sql)
        .bind(&args)
        .map_err(|e| failed(Site::of(b), e))
}

async fn first<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Option<T>> {
    let statement = prepare(db, &b)?;
    statement
        .first(None)
        .await
        .map_err(|e| failed(Site::of(&b), e))
}

async fn all<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Vec<T>> {
    let statement = prepare(db, &b)?;
    let result = statement.all().await.map_err(|e| failed(Site::of(&b), e))?;
    result.results().map_err(|e| failed(Site::of(&b), e))
}

/// Every row a statement returns, read into the core's row type `T`.
pub async fn all_rows<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Vec<T>> {
    all(db, b).await
}

/// Every row a statement returns, and the database's size after it as D1 reports it
/// (`meta.size_after`, in bytes). Read from the result object itself: workers-rs's
/// `D1ResultMeta` holds the size in a `usize`, which on wasm32 cannot hold more than 4 GB.
pub async fn all_with_size<T: DeserializeOwned>(
    db: &D1Database,
    b: Bound<'_>,
) -> DbResult<(Vec<T>, Option<f64>)> {
    let statement = prepare(db, &b)?;
    let promise = statement
        .inner()
        .all()
        .map_err(|e| rejected(Site::of(&b), e))?;
    let result = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(|e| rejected(Site::of(&b), e))?;
    let get = |v: &JsValue, k: &str| js_sys::Reflect::get(v, &JsValue::from_str(k)).ok();
    let rows = match get(&result, "results") {
        Some(r) if !r.is_undefined() && !r.is_null() => {
            serde_wasm_bindgen::from_value(r).map_err(|e| DbError::Row {
                at: Site::of(&b),
                message: e.to_string(),
            })?
        }
        _ => Vec::new(),
    };
    let size = get(&result, "meta")
        .and_then(|m| get(&m, "size_after"))
        .and_then(|s| s.as_f64());
    Ok((rows, size))
}

async fn run(db: &D1Database, b: Bound<'_>) -> DbResult<()> {
    prepare(db, &b)?
        .run()
        .await
        .map_err(|e| failed(Site::of(&b), e))?;
    Ok(())
}

/// A batch's results, each with the name of the statement that gave it, so that a row that
/// does not read names its statement.
pub struct Results {
    names: Vec<&'static str>,
    results: Vec<D1Result>,
}

impl Results {
    /// How many statements gave results.
    pub fn len(&self) -> usize {
        self.results.len()
    }

    /// The statement at `i`, as a failure names it.
    fn site(&self, i: usize) -> Site {
        Site::in_batch(&self.names, i)
    }

    /// Every row of the statement at `i` (none past the end).
    fn rows<T: DeserializeOwned>(&self, i: usize) -> DbResult<Vec<T>> {
        match self.results.get(i) {
            Some(r) => r.results::<T>().map_err(|e| failed(self.site(i), e)),
            None => Ok(Vec::new()),
        }
    }

    /// A row the statement at `i` must have returned: `what` says which, when it did not.
    fn expect<T: DeserializeOwned>(&self, i: usize, what: &'static str) -> DbResult<T> {
        first_row(self, i)?.ok_or_else(|| DbError::Missing {
            at: self.site(i),
            what,
        })
    }
}

/// One D1 batch: one transaction, all or nothing.
async fn batch(db: &D1Database, bs: &[Bound<'_>]) -> DbResult<Results> {
    let stmts = bs
        .iter()
        .map(|b| prepare(db, b))
        .collect::<DbResult<Vec<_>>>()?;
    let results = db
        .batch(stmts)
        .await
        .map_err(|e| failed(Site::batch(bs), e))?;
    Ok(Results {
        names: bs.iter().map(|b| b.statement.name).collect(),
        results,
    })
}

/// The first row of the `i`-th statement of a batch's results, if any.
fn first_row<T: DeserializeOwned>(results: &Results, i: usize) -> DbResult<Option<T>> {
    Ok(results.rows::<T>(i)?.into_iter().next())
}

/// A row the statement returns only when it wrote something (`RETURNING`): its presence is
/// the answer, its content is not needed.
#[derive(Deserialize)]
struct Present {}

mod audit;
mod deliveries;
mod dismissals;
mod operations;
mod outbox;
mod reconciliation;
mod resources;
mod transition;

pub use audit::*;
pub use deliveries::*;
pub use dismissals::*;
pub use operations::*;
pub use outbox::*;
pub use reconciliation::*;
pub use resources::*;
pub use transition::*;
