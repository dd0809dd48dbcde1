//! Effects to the order system (CONTRACT §7): the dispatcher that delivers the outbox at
//! least once, Standard-Webhooks signed, with a stable id, and the sweeper that recovers
//! effects whose enqueue was lost or whose dispatcher died.
//!
//! Nothing here runs inside a transition's transaction: effects are written by the
//! transition's batch and handed to the `EFFECTS` queue only after it committed.

use crate::config::{self, SignedEndpoint};
use crate::error::AppResult;
use crate::log;
use crate::queue::{self, Incoming};
use crate::sql::{self, EffectRow};
use futures_util::future::{select, Either};
use paymos_core::ladder::effect_retry_delay;
use paymos_core::standard_webhooks;
use serde_json::json;
use std::time::Duration;
use worker::{
    AbortController, D1Database, Date, Delay, Env, Fetch, Headers, Method, Request, RequestInit,
};

/// Sends what a committed transaction released; a failed send is logged and left to the
/// sweeper (the effects are durable and pending).
pub async fn send_released(env: &Env, released: &[String]) {
    // With no order system to push to (pull mode, or a URL that cannot be used) there is
    // nothing to send: the effects wait, pending, in the feed; once an order system is
    // configured the sweeper hands them over. This saves a queue message and a D1 read per
    // effect.
    if released.is_empty() || !matches!(config::order_system(env), Ok(Some(_))) {
        return;
    }
    let (sent, err) = queue::enqueue_effects(env, released).await;
    if let Some(e) = err {
        log::line(
            "effects",
            "-",
            "enqueue_error",
            Some(&format!("{} of {} sent: {e}", sent, released.len())),
        );
    }
}

/// The request body (CONTRACT §7); fields that do not apply are null.
fn body(e: &EffectRow) -> String {
    json!({
        "id": e.id,
        "kind": e.kind,
        "resource_id": e.resource_id,
        "order_ref": e.order_ref,
        "license_code": e.license_code,
        "amount": e.amount,
        "currency": e.currency,
        "cause": e.cause,
        "created_at": e.created_at,
    })
    .to_string()
}

/// One signed POST (Standard Webhooks headers and `Idempotency-Key`, all carrying `id`).
/// `Ok(())` for a 2xx within the timeout. Shared by effects and alerts.
pub async fn post_signed(
    endpoint: &SignedEndpoint,
    id: &str,
    body: String,
    timeout_ms: u64,
) -> Result<(), String> {
    let now = (Date::now().as_millis() / 1000) as i64;
    let headers = Headers::new();
    let set = |h: &Headers, k: &str, v: &str| h.set(k, v).map_err(|e| e.to_string());
    set(&headers, "Content-Type", "application/json")?;
    set(&headers, "Idempotency-Key", id)?;
    for (name, value) in standard_webhooks::headers(&[&endpoint.secret], id, now, body.as_bytes()) {
        set(&headers, name, &value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let request = Request::new_with_init(&endpoint.url, &init).map_err(|e| e.to_string())?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let send = fetch.send_with_signal(&signal);
    let timeout = Delay::from(Duration::from_millis(timeout_ms));
    futures_util::pin_mut!(send);
    match select(send, timeout).await {
        Either::Left((Ok(resp), _)) => {
            let status = resp.status_code();
            if (200..300).contains(&status) {
                Ok(())
            } else {
                Err(format!("answered {status}"))
            }
        }
        Either::Left((Err(e), _)) => Err(format!("could not be reached: {e}")),
        Either::Right(((), _)) => {
            controller.abort();
            Err(format!("did not answer within {timeout_ms} ms"))
        }
    }
}

/// One POST of an effect to the order system.
async fn post(
    order_system: &SignedEndpoint,
    effect: &EffectRow,
    timeout_ms: u64,
) -> Result<(), String> {
    post_signed(order_system, &effect.id, body(effect), timeout_ms)
        .await
        .map_err(|e| format!("the order system {e}"))
}

/// A batch from the effects queue or its dead-letter queue, message by message.
pub async fn consume(queue_name: &str, messages: Vec<Incoming>, env: &Env) -> worker::Result<()> {
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            log::line("dispatch", "-", "error", Some(&e.0));
            for m in &messages {
                m.retry_in(10);
            }
            return Ok(());
        }
    };
    let dead_letter = queue_name == config::effects_dead_letter_queue(env);
    let order_system = config::order_system(env);
    let timeout_ms = config::order_system_timeout_ms(env);
    let scale = config::effect_retry_scale(env);
    for message in messages {
        let Some(effect_id) = message.effect().map(|m| m.effect_id) else {
            log::line("dispatch", "-", "unreadable_message", None);
            message.ack();
            continue;
        };
        if dead_letter {
            // the dispatcher itself kept failing (not the order system: that is the ladder)
            match sql::mark_effect_dead(&db, &effect_id, Some("dispatch retries exhausted"), false)
                .await
            {
                Ok(_) => {
                    log::line("dispatch", &effect_id, "dead", Some("dead-letter queue"));
                    message.ack();
                }
                Err(e) => {
                    log::line("dispatch", &effect_id, "error", Some(&e.0));
                    message.retry_in(60);
                }
            }
            continue;
        }
        let result = dispatch_one(&db, &effect_id, &order_system, timeout_ms, scale).await;
        match result {
            Ok(Step::Ack(outcome, detail)) => {
                log::line("dispatch", &effect_id, outcome, detail.as_deref());
                message.ack();
            }
            Ok(Step::Retry(delay, outcome, detail)) => {
                log::line(
                    "dispatch",
                    &effect_id,
                    outcome,
                    Some(&format!(
                        "{}; retry in {delay}s",
                        detail.unwrap_or_default()
                    )),
                );
                message.retry_in(delay);
            }
            Err(e) => {
                // D1 failed: the queue's own count paces it, its DLQ ends it
                let delay = effect_retry_delay(message.attempts(), scale).unwrap_or(60);
                log::line(
                    "dispatch",
                    &effect_id,
                    "error",
                    Some(&format!("{}; retry in {delay}s", e.code())),
                );
                message.retry_in(delay);
            }
        }
    }
    Ok(())
}

enum Step {
    Ack(&'static str, Option<String>),
    Retry(u32, &'static str, Option<String>),
}

async fn dispatch_one(
    db: &D1Database,
    effect_id: &str,
    order_system: &Result<Option<SignedEndpoint>, String>,
    timeout_ms: u64,
    scale: f64,
) -> AppResult<Step> {
    let Some(row) = sql::load_effect_for_dispatch(db, effect_id).await? else {
        return Ok(Step::Ack("missing", None));
    };
    let effect = &row.effect;
    if effect.dispatch != "pending" {
        return Ok(Step::Ack(
            "already_dispatched",
            Some(effect.dispatch.clone()),
        ));
    }
    if effect.awaiting_order_ref {
        // sent, under the same id, once the order_ref is learned
        return Ok(Step::Ack("awaiting_order_ref", None));
    }
    let order_system = match order_system {
        // no URL: the effect stays pending in the feed, for the order system to pull
        Ok(None) => return Ok(Step::Ack("pending_pull", None)),
        Err(why) => return Ok(Step::Ack("not_configured", Some(why.clone()))),
        Ok(Some(o)) => o,
    };
    if row.earlier_pending > 0 {
        // a revocation waits for the fulfilment it revokes; not a failure of this effect
        let wait = effect_retry_delay(1, scale).unwrap_or(10).max(1);
        return Ok(Step::Retry(wait, "waiting_for_earlier", None));
    }
    match post(order_system, effect, timeout_ms).await {
        Ok(()) => {
            sql::mark_effect_delivered(db, effect_id).await?;
            Ok(Step::Ack("delivered", None))
        }
        Err(error) => {
            let failed = u32::try_from(effect.attempts + 1).unwrap_or(u32::MAX);
            match effect_retry_delay(failed, scale) {
                Some(delay) => {
                    sql::record_effect_failure(db, effect_id, &error, delay).await?;
                    Ok(Step::Retry(delay, "retry", Some(error)))
                }
                None => {
                    // the ladder is spent (at least 16 hours): dead, visible, redeliverable
                    sql::mark_effect_dead(db, effect_id, Some(&error), true).await?;
                    Ok(Step::Ack("dead", Some(error)))
                }
            }
        }
    }
}

/// Re-enqueues pending effects whose message was lost or whose dispatcher died. Skipped
/// while no order system is configured (the effects wait in the feed). Returns how many.
pub async fn sweep(env: &Env, budget: u32) -> AppResult<usize> {
    if !matches!(config::order_system(env), Ok(Some(_))) {
        return Ok(0);
    }
    let db = sql::database(env)?;
    let older_than = config::sweep_after_seconds(env);
    let mut total = 0;
    for _ in 0..(budget / 2).max(1) {
        let ids = sql::claim_effects(&db, older_than, 100).await?;
        let n = ids.len();
        if n == 0 {
            break;
        }
        let (sent, err) = queue::enqueue_effects(env, &ids).await;
        total += sent;
        if let Some(e) = err {
            log::line("sweep_effects", "-", "enqueue_error", Some(&e.to_string()));
            break;
        }
        if n < 100 {
            break;
        }
    }
    log::line("sweep_effects", "-", &format!("requeued {total}"), None);
    Ok(total)
}
