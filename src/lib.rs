//! The Paymos webhook receiver as a Cloudflare Worker: thin glue between the request, the
//! pure core (`paymos-core`), D1 and the queue.

mod access;
mod admin;
mod alerts;
mod archive;
mod binding;
mod body;
mod clock;
mod config;
mod consume;
mod counters;
mod effects;
mod error;
mod log;
mod metrics;
mod queue;
mod receive;
mod reconcile;
mod settle;
mod sql;
mod sweep;
mod transition;
mod webcrypto;

use error::AppError;
use serde_json::json;
use worker::{event, Env, Request, Response, Result, ScheduleContext, ScheduledEvent};

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The daily cron in wrangler.toml (reconciliation, the day's archiving run); every other cron
/// runs the sweepers and continues what the daily one left unfinished.
const RECONCILE_CRON: &str = "17 3 * * *";

/// The fetch handler, exported by hand rather than with `#[event(fetch)]` (as the queue handler
/// below): the macro converts every request into workers-rs's `Request`, reading its `cf`
/// object, method and URL, before any route runs. Most deliveries never reach it: the entry
/// (`src/worker.js`) hands them to the receive path's JavaScript driver first. The export is
/// synchronous: a delivery takes the receive fast path (`receive::receive_fast`, a chain of
/// promise callbacks); everything else runs as an `async` route behind `future_to_promise`,
/// as the macro's export would.
/// Errors are answered as the macro does.
mod fetch_export {
    use wasm_bindgen::prelude::wasm_bindgen;
    use wasm_bindgen::JsValue;
    use worker::worker_sys::web_sys;

    #[wasm_bindgen(
        wasm_bindgen = ::worker::wasm_bindgen,
        wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
        js_sys = ::worker::js_sys
    )]
    pub fn fetch(
        req: web_sys::Request,
        env: ::worker::Env,
        ctx: ::worker::worker_sys::Context,
    ) -> JsValue {
        // the webhook or another route, decided once
        let url = req.url();
        let delivery = crate::path_of(&url) == crate::WEBHOOK_PATH;
        if delivery && req.method() == "POST" {
            use wasm_bindgen::JsCast;
            // the same runtime objects (references; `Context` has no `Clone` of its own)
            let ctx_after: ::worker::worker_sys::Context =
                AsRef::<JsValue>::as_ref(&ctx).clone().unchecked_into();
            let env_after = env.clone();
            let after = move || crate::after_reply(env_after, ctx_after);
            if let Some(reply) = crate::receive::receive_fast(&req, &env, after) {
                return reply;
            }
        }
        ::worker::wasm_bindgen_futures::future_to_promise(async move {
            let resp = crate::route(req, delivery, &env).await;
            crate::after_reply(env, ctx);
            Ok(crate::into_js_reply(resp))
        })
        .into()
    }
}

const WEBHOOK_PATH: &str = "/webhooks/paymos";

/// After a reply: the isolate's counters, written `COUNTERS_FLUSH_SECONDS` after the first
/// count since the last write, in a `waitUntil` registered only by the reply that schedules
/// that write, not a promise per request (counters.rs).
///
/// The wait is a plain JS timer and the write's future is made only when it fires: a future
/// that awaits the delay itself (`worker::Delay`, then the write) is polled at once, so a fresh
/// isolate's first delivery compiled the whole write's state machine and the futures
/// executor (about 30 KB of Liftoff code, 8 % of what that request compiles) for a write
/// 20 s away (bench/README.md, "Cold start").
fn after_reply(env: Env, ctx: worker::worker_sys::Context) {
    if counters::schedule_flush() {
        let after = config::counters_flush_seconds(&env);
        let write = settle::settle(&timer(after), move |_| {
            worker::wasm_bindgen_futures::future_to_promise(async move {
                counters::flush(&env).await;
                Ok(wasm_bindgen::JsValue::UNDEFINED)
            })
            .into()
        });
        use wasm_bindgen::JsCast;
        let _ = ctx.wait_until(write.unchecked_ref());
    }
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &worker::js_sys::Function, ms: f64) -> wasm_bindgen::JsValue;
}

/// A promise that resolves `seconds` from now (`setTimeout`).
fn timer(seconds: u32) -> wasm_bindgen::JsValue {
    worker::js_sys::Promise::new(&mut |resolve, _| {
        set_timeout(&resolve, f64::from(seconds) * 1000.0);
    })
    .into()
}

/// A reply as the runtime takes it; a reply that cannot be built is a logged 500, as the
/// `#[event(fetch)]` macro answers it.
fn into_js_reply(resp: Result<Response>) -> wasm_bindgen::JsValue {
    use wasm_bindgen::JsValue;
    use worker::IntoResponse;
    let failed = |e: String| -> JsValue {
        worker::console_error!("{}", e);
        Response::error("INTERNAL SERVER ERROR", 500)
            .ok()
            .and_then(|r| r.into_raw().ok())
            .map_or_else(|| JsValue::from_str(&e), JsValue::from)
    };
    match resp {
        Ok(r) => match r.into_raw() {
            Ok(raw) => raw.into(),
            Err(e) => failed(format!("Error converting response: {}", e.into())),
        },
        Err(e) => failed(e.to_string()),
    }
}

/// The path of a serialized WHATWG URL (`Request.url`) without parsing it again: the first `/`
/// after the host begins the path, in which `?` and `#` are always percent-encoded.
fn path_of(url: &str) -> &str {
    // bytes, not `str::find("://")`, whose substring searcher is code compiled on a fresh
    // isolate's first request for this alone
    let Some(host_start) = url
        .as_bytes()
        .windows(3)
        .position(|w| w == b"://")
        .map(|i| i + 3)
    else {
        return url;
    };
    match url[host_start..].find('/') {
        Some(i) => {
            let path = &url[host_start + i..];
            &path[..path.find(['?', '#']).unwrap_or(path.len())]
        }
        None => "/",
    }
}

/// Every request the receive fast path does not take; `delivery`: its path is the webhook's.
async fn route(
    req: worker::worker_sys::web_sys::Request,
    delivery: bool,
    env: &Env,
) -> Result<Response> {
    // the same request object (a reference, not `Request.clone()`, which would tee the body)
    let same = Clone::clone(&req);
    let resp = handle(req, delivery, env).await;
    // a refusal that did not read the body (no token, a bad id, too large) still drains it,
    // or workerd drops the client's keep-alive connection under its next request (body.rs)
    body::drain_unread(&same).await;
    resp
}

async fn handle(
    req: worker::worker_sys::web_sys::Request,
    delivery: bool,
    env: &Env,
) -> Result<Response> {
    if delivery {
        return if req.method() == "POST" {
            receive::receive(req, env).await
        } else {
            AppError::MethodNotAllowed("POST").into_response()
        };
    }
    let req = Request::from(req);
    let path = req.path();
    match path.as_str() {
        "/healthz" => Response::from_json(&json!({
            "status": "ok",
            "version": VERSION,
            "mode": config::mode(env).map(config::Mode::as_str).unwrap_or("invalid"),
            "commit": option_env!("PAYMOS_BUILD_COMMIT").unwrap_or("unknown"),
        })),
        p if p.starts_with("/admin/api/") => {
            let sub = &p["/admin/api/".len()..];
            admin_reply(admin::api(req, env, sub).await)
        }
        p if p == "/admin" || p.starts_with("/admin/") => admin::page(req, env).await,
        _ => AppError::NotFound.into_response(),
    }
}

/// Admin answers, errors included, carry operator data: never cached. A database failure (a
/// 503 that names its statement), an internal one or a refused Access token is logged here,
/// its detail never sent.
fn admin_reply(result: error::AppResult<Response>) -> Result<Response> {
    if let Err(e @ (AppError::Database(_) | AppError::Internal(_) | AppError::Access(_))) = &result
    {
        log::line("admin", "-", e.code(), e.detail().as_deref());
    }
    let mut resp = result.or_else(AppError::into_response)?;
    resp.headers_mut().set("Cache-Control", "no-store")?;
    Ok(resp)
}

/// The queue handler, exported by hand rather than with `#[event(queue)]`: that macro hands
/// over workers-rs's `MessageBatch`, whose messages do not expose `attempts`, which the
/// retry backoff reads (see `queue.rs`). Same signature and error handling as the macro's.
mod queue_export {
    use wasm_bindgen::prelude::wasm_bindgen;
    use wasm_bindgen::JsValue;

    #[wasm_bindgen(
        wasm_bindgen = ::worker::wasm_bindgen,
        wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
        js_sys = ::worker::js_sys
    )]
    pub async fn queue(
        batch: ::worker::worker_sys::MessageBatch,
        env: ::worker::Env,
        _ctx: ::worker::worker_sys::Context,
    ) -> Result<JsValue, JsValue> {
        let (name, messages) = crate::queue::read_batch(&batch);
        let config = crate::config::consume_config(&env);
        let is_effects = name == config.effects_queue || name == config.effects_dead_letter_queue;
        let consumed = if is_effects {
            crate::effects::consume(&name, messages, &env).await
        } else {
            crate::consume::consume(&name, messages, &env).await
        };
        match consumed {
            Ok(()) => Ok(JsValue::UNDEFINED),
            Err(e) => {
                ::worker::console_log!("{}", &e);
                Err(JsValue::from_str(&e.to_string()))
            }
        }
    }
}

#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    // one invocation's budget, shared among the steps so that their sum stays within it
    // (paymos_core::actors::cron)
    let shares = paymos_core::actors::cron::shares(config::invocation_budget(&env));
    // a numeric setting not used as given is said at every run while it lasts (interface §4)
    for warning in config::setting_warnings(&env) {
        log::line("config", "-", "invalid_setting", Some(&warning));
    }
    // asked first, with a time limit: a D1 whose calls hang would hold every step below at its
    // first statement, the alert that says so included (interface §9)
    if let Ok(db) = sql::database(&env) {
        if sql::hangs(&db).await {
            let _ =
                alerts::unavailable(&env, "D1 did not answer the cron's probe within 10 s").await;
            return;
        }
    }
    let start = if event.cron() == RECONCILE_CRON {
        reconcile::Start::Daily
    } else {
        reconcile::Start::ContinueOnly
    };
    if let Err(e) = reconcile::run(&env, start, shares.reconcile).await {
        log::line("reconcile", "-", "error", Some(e.code()));
    }
    if let Err(e) = consume::sweep(&env, shares.delivery_sweep).await {
        log::line("sweep", "-", "error", Some(e.code()));
    }
    if let Err(e) = effects::sweep(&env, shares.effect_sweep).await {
        log::line("sweep_effects", "-", "error", Some(e.code()));
    }
    // the archive (the daily run, or continuing it) after the sweepers, so that it never
    // holds them back
    archive::scheduled(&env, event.cron() == RECONCILE_CRON, shares.archive).await;
    // this isolate's counters first, so the alerts see them; then the alerts, last: a failing
    // alert webhook never holds back the sweepers
    counters::flush(&env).await;
    if let Err(e) = alerts::evaluate(&env, shares.alerts).await {
        log::line("alerts", "-", "error", Some(e.code()));
    }
    if event.cron() == RECONCILE_CRON {
        // counters older than the health charts' window (8 days) are summed into their
        // totals already
        let now = crate::clock::now_seconds();
        let kept = i64::from(paymos_core::admin::MAX_HISTORY_HOURS) * 3_600;
        let before = paymos_core::time::iso_minute(now - kept);
        if let Ok(db) = sql::database(&env) {
            let _ = sql::prune_counts(&db, &before).await;
            // the health charts' samples: as long as the counter buckets
            let _ = sql::prune_samples(&db, &before).await;
        }
    }
}
