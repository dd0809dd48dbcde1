//! `GET /resources/{resource_id}` and the manual transition,
//! `POST /resources/{resource_id}/transition` (interface §5).

use crate::error::{AppError, AppResult};
use crate::sql;
use crate::transition::{self, Change};
use paymos_core::admin::audit::Outcome;
use paymos_core::admin::audit::Record;
use paymos_core::admin::Transition;
use paymos_core::statements::{held_for_refund, Arg, REFUND_WAITING};
use paymos_core::CauseKind;
use serde_json::json;
use worker::{Env, Response};

/// The resource with its effects and its history.
pub async fn get(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let resource = sql::load_resource(&db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let effects = sql::load_effects(&db, id).await?;
    let history = sql::load_history(&db, id).await?;
    let mut v = serde_json::to_value(resource).map_err(|e| AppError::Internal(e.to_string()))?;
    v["effects"] = json!(effects);
    v["history"] = json!(history);
    Ok(Response::from_json(&v)?)
}

/// Through the guarded transition, as a delivery's change goes (interface §3: anything the
/// guard refuses is a recorded no-op); what it releases is sent. The operator is named in the
/// history row, and the audit row is in the transition's batch.
pub async fn transition(env: &Env, t: &Transition, record: &Record) -> AppResult<Response> {
    let db = sql::database(env)?;
    if held_for_refund(CauseKind::Manual, t.to) && refund_waiting(&db, &t.resource_id).await? {
        super::audit::record_after(env, record, Outcome::Conflict).await;
        return Err(AppError::Conflict(
            "refund_pending",
            format!(
                "an invoice.refunded for {} is on record, not yet processed: the money went \
                 back, so nothing marks it paid until the refund is processed",
                t.resource_id
            ),
        ));
    }
    let result = transition::apply_manual(
        &db,
        Change {
            resource_id: t.resource_id.clone(),
            kind: t.kind,
            to: t.to,
            order_ref: t.order_ref.clone(),
            amount: t.amount.clone(),
            currency: t.currency.clone(),
            cause_kind: CauseKind::Manual,
            cause: t.reason.clone(),
            delivery: None,
            pull: crate::config::pull_mode(env),
        },
        record,
    )
    .await?;
    // recorded either way, with the delivery outcomes' words: applied, or stale
    let detail = format!(
        "{} to {}: now {}; reason: {}",
        t.resource_id,
        t.to.as_str(),
        result.status.map_or("absent", paymos_core::State::as_str),
        t.reason
    );
    let outcome = if result.applied { "applied" } else { "stale" };
    crate::log::line("manual_transition", "-", outcome, Some(&detail));
    crate::effects::send_released(env, &result.released).await;
    Ok(Response::from_json(
        &json!({ "applied": result.applied, "status": result.status }),
    )?)
}

/// Whether the invoice has an `invoice.refunded` on record, not yet processed (interface §3:
/// a refund can only follow a payment; the consumer holds a payment back the same way). For
/// the 409: the guarded write asks again in its transaction (GUARDED_UPSERT's refund hold).
async fn refund_waiting(db: &worker::D1Database, resource_id: &str) -> AppResult<bool> {
    #[derive(serde::Deserialize)]
    struct Row {
        #[serde(deserialize_with = "paymos_core::rows::flag")]
        waiting: bool,
    }
    let rows: Vec<Row> =
        sql::all_rows(db, REFUND_WAITING.bind(vec![Arg::text(resource_id)])).await?;
    Ok(rows.first().is_some_and(|r| r.waiting))
}
