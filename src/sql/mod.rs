//! Runs the shared statements (`paymos_core::statements`, where every SQL text is defined
//! once) on D1, and reads their rows into types. No SQL text lives here.

use paymos_core::statements::Bound;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::worker_sys::D1PreparedStatement as StatementSys;
use worker::{D1Database, Env};

/// D1 failed (unreachable, overloaded, a constraint), a row did not read, or one was missing:
/// the sender or the queue retries (503, `src/error.rs`). Names the statement (a batch's
/// statements) and the kind of failure (`paymos_core::statements::DbError`).
pub use paymos_core::statements::{DbError, Site};

pub type DbResult<T> = Result<T, DbError>;

/// A rejected call of a statement at `at` (`d1`): D1's own message and its cause, or the
/// error as workers-rs converts it.
fn rejected(at: Site, e: JsValue) -> DbError {
    DbError::Call {
        at,
        message: d1::rejection(e),
    }
}

/// A row that did not read into its type.
fn unreadable(at: Site, message: String) -> DbError {
    DbError::Row { at, message }
}

/// The database's binding name (wrangler.toml `[[d1_databases]]`).
pub const DATABASE: &str = "DB";

/// The `DB` binding; a missing binding is the database being unavailable.
pub fn database(env: &Env) -> DbResult<D1Database> {
    crate::binding::required(env, DATABASE).map_err(|e| DbError::Binding(e.to_string()))
}

/// D1 did not answer the cron's probe (`PROBE`) within d1.js's limit: its calls hang. A
/// refusal is not a hang (every step then fails at once, and the alerts say so).
pub async fn hangs(db: &D1Database) -> bool {
    let probe = paymos_core::statements::PROBE.bind(Vec::new());
    matches!(d1::probe(db, &probe).await.as_deref(), Ok("timeout"))
}

fn prepare(db: &D1Database, b: &Bound<'_>) -> DbResult<StatementSys> {
    d1::prepare(db, b).map_err(|e| rejected(Site::of(b), e))
}

async fn first<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Option<T>> {
    let row = d1::first(db, &b)
        .await
        .map_err(|e| rejected(Site::of(&b), e))?;
    d1::read(&row).map_err(|m| unreadable(Site::of(&b), m))
}

async fn all<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Vec<T>> {
    Ok(all_with_size(db, b).await?.0)
}

/// Every row a statement returns, read into the core's row type `T`.
pub async fn all_rows<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Vec<T>> {
    all(db, b).await
}

/// Every row a statement returns, and the database's size after it as D1 reports it
/// (`meta.size_after`, in bytes).
pub async fn all_with_size<T: DeserializeOwned>(
    db: &D1Database,
    b: Bound<'_>,
) -> DbResult<(Vec<T>, Option<f64>)> {
    let answer = d1::all(db, &b)
        .await
        .map_err(|e| rejected(Site::of(&b), e))?;
    let answer: d1::Answer<T> = d1::read(&answer).map_err(|m| unreadable(Site::of(&b), m))?;
    let size = answer.meta.and_then(|m| m.size_after);
    Ok((answer.results.unwrap_or_default(), size))
}

async fn run(db: &D1Database, b: Bound<'_>) -> DbResult<()> {
    d1::run(db, &b).await.map_err(|e| rejected(Site::of(&b), e))
}

/// A batch's results, each with the name of the statement that gave it, so that a row that
/// does not read names its statement.
pub struct Results {
    names: Vec<&'static str>,
    /// each statement's rows, as D1 answered them
    pub(super) rows: Vec<Vec<serde_json::Value>>,
}

impl Results {
    /// How many statements gave results.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The statement at `i`, as a failure names it.
    fn site(&self, i: usize) -> Site {
        Site::in_batch(&self.names, i)
    }

    /// Every row of the statement at `i` (none past the end).
    fn rows<T: DeserializeOwned>(&self, i: usize) -> DbResult<Vec<T>> {
        let rows = self.rows.get(i).map_or(&[][..], Vec::as_slice);
        rows.iter()
            .map(|row| T::deserialize(row).map_err(|e| unreadable(self.site(i), e.to_string())))
            .collect()
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
    let answers = d1::batch(db, bs)
        .await
        .map_err(|e| rejected(Site::batch(bs), e))?;
    let rows = d1::read(&answers).map_err(|m| unreadable(Site::batch(bs), m))?;
    Ok(Results {
        names: bs.iter().map(|b| b.statement.name).collect(),
        rows,
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
mod d1;
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
