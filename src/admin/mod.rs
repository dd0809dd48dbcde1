//! The operators' JSON API under /admin/api (bearer token or Cloudflare Access:
//! src/access.rs): each request authorized (`auth`, which also says who the actor is), parsed into a typed command by the core
//! (`paymos_core::admin::Command`, which also decides 400, 404 and 405), and applied by the
//! handler of its resource, on D1 and the queues.

mod alerts;
pub(crate) mod audit;
mod auth;
mod deliveries;
mod effects;
mod metrics;
mod reconcile;
mod replay;
mod resources;

pub use auth::page;

use crate::access::Actor;
use crate::config;
use crate::error::{AppError, AppResult};
use auth::authorize;
use paymos_core::admin::audit::Record;
use paymos_core::admin::{routes, Command, RequestBody};
use worker::{Env, Request, Response};

pub async fn api(mut req: Request, env: &Env, path: &str) -> AppResult<Response> {
    // who is asking: handlers that record their actor (the audit log) take it from here
    let actor = authorize(&req, env).await?;
    // the method token as sent: workers-rs's `Method` reads every method it does not know
    // (QUERY, PURGE, …) as GET, which answered them as GETs instead of 405 (found by
    // Schemathesis' unsupported_method check)
    let resolved = routes::resolve(&req.inner().method(), path)?;
    // only a route that reads a body reads it (a refusal's body is drained, lib.rs `route`)
    let body = match resolved.route.body {
        RequestBody::None => Vec::new(),
        RequestBody::Optional | RequestBody::Required => req.bytes().await.unwrap_or_default(),
    };
    let mut command = Command::from_resolved(&resolved, &query(&req), &body)?;
    if Record::audits(resolved.route.operation) {
        // a credential pasted into a write's text is not kept (paymos_core::admin::redact)
        command.redact(
            &credentials(env, &req)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
    }
    // a write's audit row (interface §11): who, what, on what, with the request's fields
    let record = Record::of(&command, &actor.name);
    apply(command, env, &actor, record).await
}

/// Every credential the receiver holds (its secrets and tokens), and the Access token the
/// request came with: what a write must not record.
fn credentials(env: &Env, req: &Request) -> Vec<String> {
    let mut held: Vec<String> = [
        "ADMIN_TOKEN",
        "PAYMOS_API_KEY",
        "ORDER_SYSTEM_SECRET",
        "ALERT_WEBHOOK_SECRET",
    ]
    .into_iter()
    .filter_map(|name| config::string(env, name))
    .collect();
    if let Ok(secrets) = config::secrets(env) {
        held.extend(secrets.secrets().iter().map(|s| s.expose().to_string()));
    }
    held.extend(crate::access::presented(req));
    held
}

/// A write's audit row. Every write command has one (paymos_core::admin::audit's tests), so
/// this is never the error.
fn written(record: Option<Record>) -> AppResult<Record> {
    record.ok_or_else(|| AppError::Internal("an admin write without its audit record".into()))
}

/// Each command to the handler of its resource; each write with its audit row, which the
/// handler writes in the same D1 batch as its change.
async fn apply(
    command: Command,
    env: &Env,
    actor: &Actor,
    record: Option<Record>,
) -> AppResult<Response> {
    match command {
        Command::ListDeliveries(q) => deliveries::list(env, &q).await,
        Command::GetDelivery { event_id } => deliveries::get(env, &event_id).await,
        Command::ReplayDelivery { event_id } => {
            replay::one(env, &event_id, &written(record)?).await
        }
        Command::DismissDelivery { event_id, reason } => {
            deliveries::dismiss(env, &event_id, &reason, &written(record)?).await
        }
        Command::BulkReplay(b) => replay::bulk(env, &b, &written(record)?).await,
        Command::GetResource { resource_id } => resources::get(env, &resource_id).await,
        Command::Transition(t) => resources::transition(env, &t, &written(record)?).await,
        Command::ReconcileNow { full } => reconcile::now(env, full, &written(record)?).await,
        Command::LatestReconcile => reconcile::latest(env).await,
        Command::ListEffects(q) => effects::list(env, &q).await,
        Command::RedeliverEffect { effect_id } => {
            effects::redeliver(env, &effect_id, &written(record)?).await
        }
        Command::AckEffect { effect_id } => effects::ack(env, &effect_id, &written(record)?).await,
        Command::DismissEffect { effect_id, reason } => {
            effects::dismiss(env, &effect_id, &reason, &written(record)?).await
        }
        Command::Metrics { format } => metrics::get(env, format).await,
        Command::MetricsHistory { hours } => metrics::history(env, hours).await,
        Command::ListAlerts => alerts::list(env).await,
        Command::AckAlert { alert_id } => alerts::ack(env, &alert_id, &written(record)?).await,
        Command::WhoAmI => crate::access::whoami(actor),
        Command::ListAudit(q) => audit::list(env, &q).await,
        Command::OpenApi => audit::openapi(),
        Command::Archive(a) => crate::archive::admin(env, &a, &written(record)?).await,
    }
}

/// The request's query string (what `url`'s `query_pairs` decodes), cut from the URL the
/// runtime hands over instead of parsing it with `req.url()`: that keeps the `url` crate and
/// its host parser out of the wasm (about 21 KB gzipped).
fn query(req: &Request) -> String {
    let url = req.inner().url();
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query.split_once('#').map_or(query, |(q, _)| q).to_string()
}
