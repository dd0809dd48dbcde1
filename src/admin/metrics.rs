//! `GET /metrics`: operational figures (interface §9), JSON or `?format=prometheus`; and
//! `GET /metrics/history?hours=`: the health charts' hourly series (paymos_core::history).

use crate::error::AppResult;
use crate::sql;
use paymos_core::admin::MetricsFormat;
use worker::{Env, Response};

pub async fn get(env: &Env, format: MetricsFormat) -> AppResult<Response> {
    let db = sql::database(env)?;
    let snap = crate::metrics::snapshot(env, &db).await?;
    match format {
        MetricsFormat::Prometheus => {
            let mut resp = Response::ok(snap.prometheus())?;
            resp.headers_mut()
                .set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")?;
            Ok(resp)
        }
        MetricsFormat::Json => Ok(Response::from_json(&snap.json())?),
    }
}

/// The last `hours` hours, one bucket each: three bounded range reads and the facts now, in
/// one batch, shaped by the core.
pub async fn history(env: &Env, hours: u32) -> AppResult<Response> {
    let db = sql::database(env)?;
    let now = crate::clock::now_seconds();
    let (since_hour, since_minute) = paymos_core::history::window(now, hours);
    let (rows, f) = sql::history(&db, &since_hour, &since_minute).await?;
    let current = paymos_core::history::Sample {
        at: paymos_core::time::iso_minute(now),
        unprocessed: f.unprocessed,
        oldest_unprocessed_seconds: f.oldest_unprocessed_seconds,
        deliveries_dead: f.dead,
        effects_pending: f.effects_pending,
        effects_delivered: f.effects_delivered,
        effects_dead: f.effects_dead,
        oldest_pending_effect_seconds: f.oldest_pending_effect_seconds,
    };
    let unflushed = crate::counters::unflushed_refusals_by_minute();
    let h = paymos_core::history::hourly(now, hours, &rows, &unflushed, Some(current));
    Ok(Response::from_json(&h)?)
}
