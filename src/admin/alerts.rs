//! `GET /alerts` and `POST /alerts/{alert_id}/ack` (CONTRACT §9).

use crate::error::{AppError, AppResult};
use crate::sql;
use serde_json::json;
use worker::{Env, Response};

/// Open alerts first, then acknowledged, then those resolved in the last week.
pub async fn list(env: &Env) -> AppResult<Response> {
    let db = sql::database(env)?;
    let alerts = sql::list_alerts(&db, 200).await?;
    Ok(Response::from_json(&json!({ "data": alerts }))?)
}

pub async fn ack(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    if !sql::ack_alert(&db, id).await? {
        return match sql::load_alert(&db, id).await? {
            None => Err(AppError::NotFound),
            Some(_) => Err(AppError::Conflict(
                "alert_resolved",
                "the alert is resolved already".into(),
            )),
        };
    }
    Ok(Response::from_json(
        &json!({ "id": id, "state": "acknowledged" }),
    )?)
}
