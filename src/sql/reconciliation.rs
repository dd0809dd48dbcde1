//! The D1 calls of reconciliation, over `paymos_core::statements`.

use super::{all, batch, first, DbResult, Results};
use paymos_core::statements::{self as st, Arg};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use worker::D1Database;

pub use paymos_core::actors::reconcile::RunRow;
use paymos_core::actors::reconcile::{Doubled, Missing, Totals};

/// The newest run, whatever its state, for `GET /admin/api/reconcile` and the metrics.
pub struct LatestRun {
    pub run: RunRow,
    pub state: String,
    pub error: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
}

pub async fn latest_reconciliation(db: &D1Database) -> DbResult<Option<LatestRun>> {
    #[derive(Deserialize)]
    struct Row {
        #[serde(flatten)]
        run: RunRow,
        state: String,
        error: Option<String>,
        started_at: String,
        finished_at: Option<String>,
    }
    let row: Option<Row> = first(db, st::LATEST_RECONCILIATION.bind(vec![])).await?;
    Ok(row.map(|r| LatestRun {
        run: r.run,
        state: r.state,
        error: r.error,
        started_at: r.started_at,
        finished_at: r.finished_at,
    }))
}

/// The rows of the `i`-th statement of a batch's results, read into the core's row type.
pub fn rows_of<T: DeserializeOwned>(results: &Results, i: usize) -> DbResult<Vec<T>> {
    results.rows(i)
}

/// A run's counts and its first findings (`limit`, or all), read in one batch.
pub async fn reconciliation_report(
    db: &D1Database,
    run_id: i64,
    limit: Option<u32>,
) -> DbResult<(Totals, Vec<Missing>)> {
    let results = batch(
        db,
        &[
            st::RECONCILIATION_TOTALS.bind(vec![Arg::Int(run_id)]),
            st::RECONCILIATION_FINDINGS.bind(vec![
                Arg::Int(run_id),
                Arg::Int(limit.map_or(-1, i64::from)),
            ]),
        ],
    )
    .await?;
    let totals: Totals = results.expect(0, "the reconciliation run's totals")?;
    Ok((totals, rows_of(&results, 1)?))
}

/// Resources with more than one effect of a kind, as the checks found them: empty by
/// construction. Reads only what was found (`doubled_effect`), never the effect table.
pub async fn doubled_effects(db: &D1Database) -> DbResult<Vec<Doubled>> {
    all(db, st::DOUBLED_EFFECTS.bind(vec![])).await
}

/// The bounded check (the effects written since the last one), then what every check
/// found, in one transaction.
pub async fn check_doubled_effects(db: &D1Database) -> DbResult<Vec<Doubled>> {
    let results = batch(db, &st::check_doubled_batch()).await?;
    // the last statement's rows (none for an empty batch)
    results.rows(results.len().saturating_sub(1))
}
