//! Effects to the order system (CONTRACT §7): the dispatcher that delivers the outbox at
//! least once, Standard-Webhooks signed, with a stable id, and the sweeper that recovers
//! effects whose enqueue was lost or whose dispatcher died.
//!
//! Nothing here runs inside a transition's transaction: effects are written by the
//! transition's batch and handed to the `EFFECTS` queue only after it committed.

use crate::config::{self, ConfigError, SignedEndpoint};
use crate::error::AppResult;
use crate::log;
use crate::queue::{self, Incoming};
use crate::sql::{self, DispatchOutcome, DispatchRow, EffectRow};
use futures_util::future::{select, Either};
use paymos_core::ladder::{effect_retry_delay, wait_for_earlier_delay};
use paymos_core::standard_webhooks;
use paymos_core::time::unix_of_iso;
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
    if released.is_empty() || !can_push(env, "effects", Some(released.len())) {
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

/// Whether effects can be pushed to an order system now. No URL is pull mode, and silent; a URL
/// set but unusable is said, never silent (CONTRACT §4): a `not_configured` line for `stage`,
/// with how many effects that leaves `pending` when there are some to say.
fn can_push(env: &Env, stage: &str, pending: Option<usize>) -> bool {
    match config::order_system(env) {
        Ok(Some(_)) => true,
        Ok(None) => false,
        Err(why) => {
            let detail = match pending {
                Some(n) => format!("{n} effects kept pending: {why}"),
                None => why.to_string(),
            };
            log::line(stage, "-", "not_configured", Some(&detail));
            false
        }
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

/// Cloudflare's limit of simultaneous open connections per invocation.
const SIMULTANEOUS_POSTS: usize = 6;

/// A batch from the effects queue or its dead-letter queue.
///
/// Per batch, not per message (issue #14, cost per delivery): one query loads every effect of
/// the batch, the POSTs to the order system run concurrently, and one D1 batch records every
/// outcome; a batch costs 2 D1 calls whatever its size, where it cost 2 per effect. An effect
/// whose id arrives twice in one batch (a sweeper's re-enqueue next to the original) is posted
/// once. If a D1 call fails, every message of the batch is retried on the ladder: an effect
/// posted but not recorded is posted again under the same id (at least once; the order
/// system dedupes on `Idempotency-Key`).
pub async fn consume(queue_name: &str, messages: Vec<Incoming>, env: &Env) -> worker::Result<()> {
    let scale = config::effect_retry_scale(env);
    let retry_all = |messages: &[(Incoming, String)], why: &str| {
        for (m, id) in messages {
            // D1 failed: the queue's own count paces it, its DLQ ends it
            let delay = effect_retry_delay(m.attempts(), scale).unwrap_or(60);
            log::line(
                "dispatch",
                id,
                "error",
                Some(&format!("{why}; retry in {delay}s")),
            );
            m.retry_in(delay);
        }
    };
    let mut readable = Vec::with_capacity(messages.len());
    for message in messages {
        match message.effect() {
            Some(m) => readable.push((message, m.effect_id)),
            None => {
                log::line("dispatch", "-", "unreadable_message", None);
                message.ack();
            }
        }
    }
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            retry_all(&readable, &e.0);
            return Ok(());
        }
    };
    if queue_name == config::effects_dead_letter_queue(env) {
        dead_letter(&db, readable).await;
        return Ok(());
    }
    let mut ids: Vec<&str> = Vec::with_capacity(readable.len());
    for (_, id) in &readable {
        if !ids.contains(&id.as_str()) {
            ids.push(id);
        }
    }
    let rows = match sql::load_effects_for_dispatch(&db, &ids).await {
        Ok(rows) => rows,
        Err(e) => {
            retry_all(&readable, &e.0);
            return Ok(());
        }
    };
    let order_system = config::order_system(env);
    let timeout_ms = config::order_system_timeout_ms(env);
    let now = (Date::now().as_millis() / 1000) as i64;

    // each effect's plan before any POST; those to post, posted concurrently
    let plans: Vec<(&str, Plan)> = ids
        .iter()
        .map(|id| {
            let row = rows.iter().find(|r| r.effect.id == *id);
            (*id, before_post(row, &order_system, scale, now))
        })
        .collect();
    let to_post: Vec<(&EffectRow, &SignedEndpoint)> = plans
        .iter()
        .filter_map(|(_, plan)| plan.as_ref().ok().copied())
        .collect();
    // in waves of at most SIMULTANEOUS_POSTS: a Worker invocation keeps 6 connections open at
    // once and queues the rest, and a queued request's timeout would run while it waits
    let mut posted = Vec::with_capacity(to_post.len());
    for wave in to_post.chunks(SIMULTANEOUS_POSTS) {
        posted.extend(
            futures_util::future::join_all(
                wave.iter()
                    .map(|(effect, endpoint)| post(endpoint, effect, timeout_ms)),
            )
            .await,
        );
    }
    // one record per effect: its step, and the outcome statement it adds to the batch (the
    // waits are deferred in the same batch)
    let mut posted = posted.iter();
    let mut outcomes = Vec::with_capacity(plans.len());
    let mut dispatches: Vec<Dispatch> = Vec::with_capacity(plans.len());
    for (id, plan) in plans {
        let (step, outcome) = match plan {
            Ok((effect, _)) => match posted.next() {
                Some(result) => after_post(effect, result, scale),
                None => (Step::Retry(60, "error", Some("no result".into())), None), // one per post
            },
            Err(Step::Wait(delay)) => (
                Step::Wait(delay),
                Some(DispatchOutcome::Deferred {
                    look_in_seconds: delay,
                }),
            ),
            Err(step) => (step, None),
        };
        let statement = outcome.map(|o| {
            outcomes.push(sql::dispatch_outcome_statement(id, &o));
            outcomes.len() - 1
        });
        dispatches.push(Dispatch {
            id,
            step,
            statement,
            answered: false,
        });
    }
    let wrote = match sql::record_dispatch_outcomes(&db, &outcomes).await {
        Ok(wrote) => wrote,
        Err(e) => {
            retry_all(&readable, &e.0);
            return Ok(());
        }
    };

    for (message, id) in &readable {
        let Some(d) = dispatches.iter_mut().find(|d| d.id == id.as_str()) else {
            message.ack(); // every id has a record; kept total for the compiler
            continue;
        };
        if d.answered {
            // the same effect twice in one batch: it was handled once, above
            log::line("dispatch", id, "duplicate_message", None);
            message.ack();
            continue;
        }
        d.answered = true;
        match &d.step {
            Step::Ack(outcome, detail) => {
                log::line("dispatch", id, outcome, detail.as_deref());
                message.ack();
            }
            Step::Retry(delay, outcome, detail) => {
                let detail = format!("{}; retry in {delay}s", detail.as_deref().unwrap_or(""));
                log::line("dispatch", id, outcome, Some(&detail));
                message.retry_in(*delay);
            }
            Step::Wait(delay) => {
                // this batch holds the wait when its DEFER_EFFECT returned the row
                let holds = d
                    .statement
                    .and_then(|i| wrote.get(i))
                    .copied()
                    .unwrap_or(false);
                let detail = if !holds {
                    // a copy of the message that holds the wait: nothing more to send
                    "another message holds the wait".to_string()
                } else {
                    match queue::enqueue_effect_after(env, id, *delay).await {
                        Ok(()) => format!("looked at again in {delay}s"),
                        // the sweeper sends it once the deferral is 5 minutes past
                        Err(e) => format!("not re-sent ({e}): left to the sweeper"),
                    }
                };
                log::line("dispatch", id, "waiting_for_earlier", Some(&detail));
                message.ack();
            }
        }
    }
    Ok(())
}

/// One effect of a dispatcher batch: what its messages are answered, and the index of the
/// outcome statement it added to the batch, if any.
struct Dispatch<'a> {
    id: &'a str,
    step: Step,
    statement: Option<usize>,
    /// a second message for the same effect is answered as a duplicate
    answered: bool,
}

/// A POST's result as the effect's step and the outcome to record.
fn after_post<'a>(
    effect: &EffectRow,
    result: &'a Result<(), String>,
    scale: f64,
) -> (Step, Option<DispatchOutcome<'a>>) {
    let error = match result {
        Ok(()) => {
            return (
                Step::Ack("delivered", None),
                Some(DispatchOutcome::Delivered),
            )
        }
        Err(error) => error,
    };
    let failed = u32::try_from(effect.attempts + 1).unwrap_or(u32::MAX);
    match effect_retry_delay(failed, scale) {
        Some(delay) => (
            Step::Retry(delay, "retry", Some(error.clone())),
            Some(DispatchOutcome::Failed {
                error,
                retry_in_seconds: delay,
            }),
        ),
        None => (
            Step::Ack("dead", Some(error.clone())),
            Some(DispatchOutcome::Dead { error }),
        ),
    }
}

/// The effects dead-letter queue: the dispatcher itself kept failing (not the order system:
/// that is the ladder). Rare, so message by message.
async fn dead_letter(db: &D1Database, messages: Vec<(Incoming, String)>) {
    for (message, effect_id) in messages {
        match sql::mark_effect_dead(db, &effect_id, Some("dispatch retries exhausted"), false).await
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
    }
}

enum Step {
    Ack(&'static str, Option<String>),
    Retry(u32, &'static str, Option<String>),
    /// waiting for an earlier effect of the resource: acknowledged, and sent again as a fresh
    /// message after this many seconds
    Wait(u32),
}

/// What happens to one loaded effect before any request: `Ok` to post it now, else its step.
type Plan<'a> = Result<(&'a EffectRow, &'a SignedEndpoint), Step>;

/// The plan for one loaded effect (`None`: its row is gone).
fn before_post<'a>(
    row: Option<&'a DispatchRow>,
    order_system: &'a Result<Option<SignedEndpoint>, ConfigError>,
    scale: f64,
    now: i64,
) -> Plan<'a> {
    let Some(row) = row else {
        return Err(Step::Ack("missing", None));
    };
    let effect = &row.effect;
    if effect.dispatch != "pending" {
        return Err(Step::Ack(
            "already_dispatched",
            Some(effect.dispatch.clone()),
        ));
    }
    if effect.awaiting_order_ref {
        // sent, under the same id, once the order_ref is learned
        return Err(Step::Ack("awaiting_order_ref", None));
    }
    let order_system = match order_system {
        // no URL: the effect stays pending in the feed, for the order system to pull
        Ok(None) => return Err(Step::Ack("pending_pull", None)),
        Err(why) => return Err(Step::Ack("not_configured", Some(why.to_string()))),
        Ok(Some(o)) => o,
    };
    if row.earlier_undelivered > 0 {
        // a revocation waits until the fulfilment it revokes has been delivered; not a failure
        // of this effect, so not a retry either: looked at again from a fresh message
        let waited = unix_of_iso(&effect.created_at).map_or(0, |created| now - created);
        return Err(Step::Wait(wait_for_earlier_delay(waited, scale).max(1)));
    }
    Ok((effect, order_system))
}

/// Re-enqueues pending effects whose message was lost or whose dispatcher died. Skipped
/// while no order system is configured (the effects wait in the feed). Returns how many.
pub async fn sweep(env: &Env, budget: u32) -> AppResult<usize> {
    // an unusable URL is said at every run while it lasts, as the metrics' warnings do
    if !can_push(env, "sweep_effects", None) {
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
