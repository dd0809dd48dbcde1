//! `POST /reconcile` (run it now) and `GET /reconcile` (the latest report).

use crate::error::{AppError, AppResult};
use crate::{config, reconcile};
use worker::{Env, Response};

/// Runs reconciliation now: the last 7 days, or everything with `full`. A walk that does not
/// fit in this invocation reports `truncated`/`continues` and goes on by cron.
pub async fn now(env: &Env, full: bool) -> AppResult<Response> {
    let report = reconcile::run(
        env,
        reconcile::Start::Manual { full },
        config::invocation_budget(env),
    )
    .await?;
    Ok(Response::from_json(&report)?)
}

pub async fn latest(env: &Env) -> AppResult<Response> {
    match reconcile::latest(env).await? {
        Some(report) => Ok(Response::from_json(&report)?),
        None => Err(AppError::NotFound),
    }
}
