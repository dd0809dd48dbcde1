//! The Paymos webhook receiver as a Cloudflare Worker: thin glue between the request, the
//! pure core (`paymos-core`), D1 and the queue.

mod admin;
mod admin_page;
mod config;
mod consume;
mod error;
mod log;
mod receive;
mod reconcile;
mod sql;
mod transition;

use consume::DeliveryMessage;
use error::AppError;
use serde_json::json;
use worker::{
    event, Context, Env, MessageBatch, Method, Request, Response, Result, ScheduleContext,
    ScheduledEvent,
};

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The daily cron in wrangler.toml; every other cron runs the sweeper.
const RECONCILE_CRON: &str = "17 3 * * *";

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    console_error_panic_hook::set_once();
    let path = req.path();
    let method = req.method();
    match path.as_str() {
        "/webhooks/paymos" => match method {
            Method::Post => receive::receive(req, &env).await,
            _ => AppError::MethodNotAllowed("POST").into_response(),
        },
        "/healthz" => Response::from_json(&json!({
            "status": "ok",
            "version": VERSION,
            "commit": option_env!("PAYMOS_BUILD_COMMIT").unwrap_or("unknown"),
        })),
        p if p.starts_with("/admin/api/") => {
            let sub = &p["/admin/api/".len()..];
            admin_reply(admin::api(req, &env, sub).await)
        }
        p if p == "/admin" || p.starts_with("/admin/") => {
            admin_reply(admin_page::serve(req, &env, p).await)
        }
        _ => AppError::NotFound.into_response(),
    }
}

/// Admin answers, errors included, carry operator data: never cached.
fn admin_reply(result: error::AppResult<Response>) -> Result<Response> {
    let mut resp = result.or_else(AppError::into_response)?;
    resp.headers_mut().set("Cache-Control", "no-store")?;
    Ok(resp)
}

#[event(queue)]
async fn queue(batch: MessageBatch<DeliveryMessage>, env: Env, _ctx: Context) -> Result<()> {
    console_error_panic_hook::set_once();
    consume::consume(batch, &env).await
}

#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    console_error_panic_hook::set_once();
    if event.cron() == RECONCILE_CRON {
        if let Err(e) = reconcile::run(&env).await {
            log::line("reconcile", "-", "error", Some(e.code()));
        }
    }
    if let Err(e) = consume::sweep(&env).await {
        log::line("sweep", "-", "error", Some(e.code()));
    }
}
