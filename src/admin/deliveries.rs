//! `GET /deliveries`, `GET /deliveries/{event_id}` and `POST /deliveries/{event_id}/dismiss`.

use crate::error::{AppError, AppResult};
use crate::sql::{self, DeliveryFilter, DeliveryRow};
use paymos_core::admin::audit::Record;
use paymos_core::admin::{DeliveryCursor, DeliveryQuery, Page};
use serde_json::{json, Value};
use worker::{Env, Response};

/// Newest first, cursor-paged.
pub async fn list(env: &Env, q: &DeliveryQuery) -> AppResult<Response> {
    let db = sql::database(env)?;
    let rows = sql::list_deliveries(
        &db,
        &DeliveryFilter {
            event_type: q.event_type.as_deref(),
            resource_id: q.resource_id.as_deref(),
            status: q.status.map(|s| s.as_str()),
            after: q
                .after
                .as_ref()
                .map(|c| (c.received_at.as_str(), c.event_id.as_str())),
            limit: q.limit,
        },
    )
    .await?;
    let page = Page::of(rows, q.limit, |d| {
        DeliveryCursor::text(&d.received_at, &d.event_id)
    });
    Ok(Response::from_json(&page.map(delivery_json))?)
}

pub async fn get(env: &Env, event_id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let mut row = sql::load_delivery(&db, event_id)
        .await?
        .ok_or(AppError::NotFound)?;
    // archived: its body read back from R2, as a replay would; an object that cannot be read
    // leaves it null (and says why in the log) rather than hiding the row
    if let (Some(_), Some(key)) = (&row.archived_at, &row.archive_key) {
        match crate::archive::body_of(env, event_id, key).await {
            Ok(body) => row.body = body,
            Err(e) => {
                let why = e.message().unwrap_or_else(|| e.code().to_string());
                crate::log::line("admin", event_id, "archive_read_failed", Some(&why));
            }
        }
    }
    Ok(Response::from_json(&delivery_json(row))?)
}

/// A dead delivery an operator has handled (a test event, a case settled by hand): out of
/// the dead counts and the `delivery_dead` alert, still on record and replayable (interface
/// §5); a replay ends the dismissal. 409 `not_dead` for one that is not dead; repeating it is
/// 200 with the first reason (`already: true`). Its audit row is in the dismissal's batch.
pub async fn dismiss(
    env: &Env,
    event_id: &str,
    reason: &str,
    record: &Record,
) -> AppResult<Response> {
    let db = sql::database(env)?;
    let d = sql::dismiss_delivery(&db, event_id, reason, record).await?;
    super::effects::dismissed(event_id, "event_id", d)
}

/// `received` until processed, then the outcome, with `applied`/`ignored` read as `processed`.
fn delivery_status(d: &DeliveryRow) -> &'static str {
    match (d.processed_at.as_deref(), d.outcome.as_deref()) {
        (None, _) => "received",
        (Some(_), Some("stale")) => "stale",
        (Some(_), Some("dead")) => "dead",
        _ => "processed",
    }
}

/// A delivery as the API shows it. An archived one (interface §10) answers as before, with
/// `archived: true`, `archived_at`, `archive_key` and, as its row has it, `body: null`: a
/// list reads no object, and `get` puts the body read back from that object in its place
/// (null if it cannot be read).
fn delivery_json(d: DeliveryRow) -> Value {
    let status = delivery_status(&d);
    let archived = d.archived_at.is_some();
    let body = d
        .body
        .as_deref()
        .map(|b| serde_json::from_str::<Value>(b).unwrap_or(Value::Null));
    let mut v = serde_json::to_value(DeliveryRow { body: None, ..d }).unwrap_or(Value::Null);
    v["status"] = json!(status);
    v["archived"] = json!(archived);
    if let Some(b) = body {
        v["body"] = b;
    } else if archived {
        v["body"] = Value::Null;
    }
    v
}
