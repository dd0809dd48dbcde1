//! `POST /reconcile` (run it now) and `GET /reconcile` (the latest report).

use crate::error::{AppError, AppResult};
use crate::{config, reconcile};
use paymos_core::admin::audit::{reconcile_outcome, Outcome, Record};
use worker::{Env, Response};

/// Runs reconciliation now: the last 7 days, or everything with `full`. A walk that does not
/// fit in this invocation reports `truncated`/`continues` and goes on by cron.
///
/// Its audit row is written after the run, with the report's outcome (or `failed`): a run's
/// changes span many batches (the run's row, each page, each invoice brought to paid), each
/// of the reconciliation's own, and the row records how the operator's run ended. A row that
/// cannot be written (D1 gone meanwhile) is logged; the report is still the answer.
pub async fn now(env: &Env, full: bool, record: &Record) -> AppResult<Response> {
    let result = reconcile::run(
        env,
        reconcile::Start::Manual { full },
        config::admin_budget(env),
    )
    .await;
    let outcome = match &result {
        Ok(Some(report)) => reconcile_outcome(&report.state, report.ok),
        Ok(None) => Outcome::Ok,
        // another invocation walks a run (409)
        Err(AppError::Conflict(..)) => Outcome::Conflict,
        Err(_) => Outcome::Failed,
    };
    super::audit::record_after(env, record, outcome).await;
    Ok(Response::from_json(&result?)?)
}

pub async fn latest(env: &Env) -> AppResult<Response> {
    match reconcile::latest(env, None).await? {
        Some(report) => Ok(Response::from_json(&report)?),
        None => Err(AppError::NotFound),
    }
}
