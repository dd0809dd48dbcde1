//! The effects feed (interface §7), `GET /effects`, `POST /effects/{effect_id}/redeliver`,
//! `POST /effects/{effect_id}/ack` (pull mode) and `POST /effects/{effect_id}/dismiss`.

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
        q.dismissed,
        q.after,
        q.limit,
        // pull mode: what the feed serves, an order system may hold (a refund then revokes it)
        crate::effects::pull_feed(env),
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
    let awaiting = match sql::redeliver_effect(&db, id, record).await? {
        sql::Redelivery::Pending { awaiting_order_ref } => awaiting_order_ref,
        sql::Redelivery::Missing => return Err(AppError::NotFound),
        // its refund was recorded: sending it again would ship goods for money returned
        sql::Redelivery::Refused => return Err(AppError::Cancelled),
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

/// Pull mode (interface §5, §7): the order system that pulled a pending effect from the feed
/// marks it `delivered`. Repeating it is 200 (`already: true`); a cancelled one (its refund
/// was recorded) is 409 `cancelled` and never becomes delivered; a fulfilment still awaiting
/// its order_ref is 409 `awaiting_order_ref` (it is useless to ship without one, and is
/// offered again with it); 404 unknown. A dead one the order system got after all is
/// accepted: it leaves the dead counts. Its audit row is in the ack's batch.
pub async fn ack(env: &Env, id: &str, record: &Record) -> AppResult<Response> {
    let db = sql::database(env)?;
    let already = match sql::ack_effect(&db, id, record).await? {
        sql::EffectAck::Delivered => false,
        sql::EffectAck::Already => true,
        sql::EffectAck::Missing => return Err(AppError::NotFound),
        sql::EffectAck::Cancelled => return Err(AppError::Cancelled),
        sql::EffectAck::AwaitingOrderRef => {
            return Err(AppError::Conflict(
                "awaiting_order_ref",
                "the fulfilment awaits its order_ref: it is offered again once that is known"
                    .into(),
            ))
        }
    };
    crate::log::line(
        "effect_ack",
        id,
        if already {
            "already_delivered"
        } else {
            "delivered"
        },
        None,
    );
    Ok(Response::from_json(&json!({
        "id": id,
        "dispatch": "delivered",
        "already": already,
    }))?)
}

/// A dead effect an operator has handled: out of the dead counts and the `effect_dead`
/// alert, still on record and redeliverable (interface §5). 409 `not_dead` for one that is not
/// dead; repeating it is 200 with the first reason (`already: true`). Its audit row is in the
/// dismissal's batch.
pub async fn dismiss(env: &Env, id: &str, reason: &str, record: &Record) -> AppResult<Response> {
    let db = sql::database(env)?;
    dismissed(
        id,
        "id",
        sql::dismiss_effect(&db, id, reason, record).await?,
    )
}

/// The answer to a dismissal, for deliveries and effects alike.
pub fn dismissed(id: &str, key: &str, d: sql::Dismissal) -> AppResult<Response> {
    match d {
        sql::Dismissal::Missing => Err(AppError::NotFound),
        sql::Dismissal::NotDead(state) => Err(AppError::Conflict(
            "not_dead",
            format!("only a dead one can be dismissed; this one is {state}"),
        )),
        sql::Dismissal::Dismissed {
            at,
            reason,
            already,
        } => {
            if !already {
                crate::log::line("dismiss", id, "dismissed", Some(&reason));
            }
            Ok(Response::from_json(&json!({
                key: id,
                "dismissed": true,
                "dismissed_at": at,
                "reason": reason,
                "already": already,
            }))?)
        }
    }
}
