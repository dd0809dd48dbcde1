//! `GET /metrics`: operational figures (CONTRACT §9), JSON or `?format=prometheus`.

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
