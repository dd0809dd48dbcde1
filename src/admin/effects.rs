//! The effects feed (CONTRACT §7), `GET /effects`, and `POST /effects/{effect_id}/redeliver`.

use crate::error::{AppError, AppResult};
use crate::sql;
use paymos_core::admin::audit::Record;
use paymos_core::admin::{EffectQuery, Page};
use paymos_core::EffectKind;
use serde_json::json;
use worker::{Env, Response};

/// Oldest first, cursor-paged, filtered by kind and dispatch state, so that an order system
/// can pull instead of being pushed to.
pub async fn list(env: &Env, q: &EffectQuery) -> AppResult<Response> {
    let db = sql::database(env)?;
    let rows = sql::list_effects(
        &db,
        q.kind.map(EffectKind::as_str),
        q.dispatch.map(|d| d.as_str()),
        q.after,
        q.limit,
    )
    .await?;
    let page = Page::of(rows, q.limit, |e| e.seq.to_string());
    // through a JSON value, as before: each effect's keys in alphabetical order
    Ok(Response::from_json(&json!(page))?)
}

/// Sends the effect to the order system again, under the same id (the audit row is in the
/// redelivery's batch, refused or not).
pub async fn redeliver(env: &Env, id: &str, record: &Record) -> AppResult<Response> {
    let db = sql::database(env)?;
    let awaiting =
        match sql::redeliver_effect(&db, id, record).await? {
            sql::Redelivery::Pending { awaiting_order_ref } => awaiting_order_ref,
            sql::Redelivery::Missing => return Err(AppError::NotFound),
            // its refund was recorded: sending it again would ship goods for money returned
            sql::Redelivery::Refused => return Err(AppError::Conflict(
                "cancelled",
                "the effect is cancelled, or a fulfilment whose invoice has a revocation: it is \
                 never sent again"
                    .into(),
            )),
        };
    let enqueued = if awaiting {
        // nothing to send until its order_ref is known; it goes out when that is learned
        false
    } else {
        crate::queue::enqueue_effects(env, &[id.to_string()])
            .await
            .1
            .is_none()
    };
    Ok(Response::from_json(&json!({
        "redelivered": true,
        "id": id,
        "enqueued": enqueued,
        "awaiting_order_ref": awaiting,
    }))?
    .with_status(202))
}
