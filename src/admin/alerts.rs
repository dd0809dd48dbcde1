//! `GET /alerts` and `POST /alerts/{alert_id}/ack` (interface §9).

use crate::error::{AppError, AppResult};
use crate::sql;
use paymos_core::admin::audit::{Outcome, Record};
use serde_json::json;
use worker::{Env, Response};

/// Open alerts first, then acknowledged, then those resolved in the last week.
pub async fn list(env: &Env) -> AppResult<Response> {
    let db = sql::database(env)?;
    let alerts = sql::list_alerts(&db, 200).await?;
    Ok(Response::from_json(&json!({ "data": alerts }))?)
}

/// The acknowledgement and its audit row in one batch; the row's outcome is the answer.
pub async fn ack(env: &Env, id: &str, record: &Record) -> AppResult<Response> {
    let db = sql::database(env)?;
    match sql::ack_alert(&db, id, record).await? {
        Outcome::Acknowledged => Ok(Response::from_json(
            &json!({ "id": id, "state": "acknowledged" }),
        )?),
        Outcome::NotFound => Err(AppError::NotFound),
        _ => Err(AppError::Conflict(
            "alert_resolved",
            "the alert is resolved already".into(),
        )),
    }
}
