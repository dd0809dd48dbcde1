//! Effects to the order system (interface §7): the dispatcher that delivers the outbox at
//! least once, Standard-Webhooks signed, with a stable id, and the sweeper that recovers
//! effects whose enqueue was lost or whose dispatcher died.
//!
//! Nothing here runs inside a transition's transaction: effects are written by the
//! transition's batch and handed to the `EFFECTS` queue only after it committed.

use crate::config::{self, ConfigError, SignedEndpoint};
use crate::error::AppResult;
use crate::log;
use crate::queue::{self, Incoming};
use crate::sql;
use futures_util::future::{select, Either};
use paymos_core::actors::dispatch::{self, PostError, Push};
use paymos_core::actors::sweep::{Chunks, Kind};
use paymos_core::actors::Answer;
use paymos_core::rows::{DispatchRow, StartedAttempt};
use paymos_core::standard_webhooks;
use paymos_core::statements::InFlight;
use paymos_core::statements::{self as st, Arg, Bound};
use std::time::Duration;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{
    AbortController, D1Database, Delay, Env, Fetch, Headers, Method, Request, RequestInit,
    RequestRedirect, ResponseBody,
};

/// Sends what a committed transaction released to the effects queue; a failed send is logged
/// and left to the sweeper (the effects are durable and pending). Never dispatched in the
/// deliveries' consumer itself: a queue's next batch waits for the invocation (its `waitUntil`
/// too, checked in Miniflare), so an order system hanging for its timeout would hold up every
/// delivery behind it (interface §7: slow third-party calls belong behind a queue;
/// docs/decisions.md).
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
/// set but unusable is said, never silent (interface §4): a `not_configured` line for `stage`,
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

/// One signed POST (Standard Webhooks headers and `Idempotency-Key`, all carrying `id`).
/// `Ok(())` for a 2xx within the timeout; otherwise which failure it was (`PostError`).
/// Shared by effects and alerts.
pub async fn post_signed(
    endpoint: &SignedEndpoint,
    id: &str,
    body: String,
    timeout_ms: u64,
) -> Result<(), PostError> {
    let now = crate::clock::now_seconds();
    let headers = Headers::new();
    let set = |h: &Headers, k: &str, v: &str| {
        h.set(k, v)
            .map_err(|e| PostError::Request(format!("header {k}: {e}")))
    };
    set(&headers, "Content-Type", "application/json")?;
    set(&headers, "Idempotency-Key", id)?;
    for (name, value) in standard_webhooks::headers(&[&endpoint.secret], id, now, body.as_bytes()) {
        set(&headers, name, &value)?;
    }
    let mut init = RequestInit::new();
    // a redirect is an answer, not a 2xx: followed, a 302 turned the signed POST into a GET
    // whose 200 marked the effect delivered, and a 307 re-sent it, signed, wherever the
    // Location said (another host, or plain http)
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()))
        .with_redirect(RequestRedirect::Manual);
    let request = Request::new_with_init(&endpoint.url, &init)
        .map_err(|e| PostError::Request(e.to_string()))?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let send = fetch.send_with_signal(&signal);
    let timeout = Delay::from(Duration::from_millis(timeout_ms));
    futures_util::pin_mut!(send);
    match select(send, timeout).await {
        Either::Left((Ok(resp), _)) => {
            let status = resp.status_code();
            release(&resp).await;
            if (200..300).contains(&status) {
                Ok(())
            } else {
                Err(PostError::Status(status))
            }
        }
        Either::Left((Err(e), _)) => Err(PostError::Unreachable(e.to_string())),
        Either::Right(((), _)) => {
            controller.abort();
            Err(PostError::Timeout { ms: timeout_ms })
        }
    }
}

/// Lets go of an answer's body, which nothing reads. An unread body keeps its connection, and
/// an invocation has six (`SIMULTANEOUS_POSTS`): a dispatcher batch's second wave could wait
/// for one until its timeout. Measured (bench/README.md, "Every dispatch through the effects
/// queue"): against `paymos orders`, the end-to-end run's p99 was 10.1-10.3 s in 5 of 8 runs
/// without this (effects waiting out the 10 s timeout), 151-219 ms in 5 of 5 with it. Awaited,
/// so that a stream that had already failed rejects here, not as an unhandled rejection.
async fn release(resp: &worker::Response) {
    if let ResponseBody::Stream(body) = resp.body() {
        let _ = JsFuture::from(body.cancel()).await;
    }
}

/// Where effects go, from the configuration: posted, pulled, or waiting on a fix.
fn push(order_system: &Result<Option<SignedEndpoint>, ConfigError>) -> Push {
    match order_system {
        Ok(Some(_)) => Push::To,
        Ok(None) => Push::Pull,
        Err(why) => Push::Unusable(why.to_string()),
    }
}

/// Pull mode's feed (no `ORDER_SYSTEM_URL`): what it serves is held back behind an attempt a
/// push before the switch may still have in flight (`paymos_core::statements::feed_page`).
pub fn pull_feed(env: &Env) -> Option<InFlight> {
    config::pull_mode(env).then(|| InFlight {
        seconds: settings(env).in_flight_seconds(),
    })
}

fn settings(env: &Env) -> dispatch::Settings {
    dispatch::Settings {
        scale: config::effect_retry_scale(env),
        timeout_ms: config::order_system_timeout_ms(env),
        mutation: dispatch::Mutation::default(),
    }
}

/// A batch from the effects queue or its dead-letter queue: the core's dispatcher
/// (`paymos_core::actors::dispatch::Batch`) driven over D1, `fetch` and the queue. Per batch:
/// one load, one start (committed before any request), the POSTs concurrently, one record,
/// whatever the batch's size; a D1 call that fails sends every message back on the ladder.
pub async fn consume(queue_name: &str, messages: Vec<Incoming>, env: &Env) -> worker::Result<()> {
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
    let batch_messages = readable
        .iter()
        .map(|(m, id)| dispatch::Message {
            effect_id: id.clone(),
            attempts: m.attempts(),
        })
        .collect();
    let order_system = config::order_system(env);
    let mut batch = dispatch::Batch::new(batch_messages, push(&order_system), settings(env));
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => return answer(env, &readable, batch.db_failed(&e.to_string())).await,
    };
    if queue_name == config::effects_dead_letter_queue(env) {
        dead_letter(env, &db, readable).await;
        return Ok(());
    }
    let replies = match drive(&db, &mut batch, &order_system).await {
        Ok(replies) => replies,
        Err(e) => batch.db_failed(&e.to_string()),
    };
    answer(env, &readable, replies).await
}

/// The dispatcher's I/O in a Worker: D1, and the order system over `fetch`.
struct Worker<'a> {
    db: &'a D1Database,
    endpoint: Option<&'a SignedEndpoint>,
    timeout_ms: u64,
}

impl dispatch::Io for Worker<'_> {
    type Error = sql::DbError;

    fn now(&self) -> i64 {
        crate::clock::now_seconds()
    }

    async fn load(&mut self, b: Bound<'static>) -> sql::DbResult<Vec<DispatchRow>> {
        sql::all_rows(self.db, b).await
    }

    async fn start(&mut self, b: Bound<'static>) -> sql::DbResult<Vec<StartedAttempt>> {
        sql::all_rows(self.db, b).await
    }

    async fn post(&mut self, wave: &[(String, String)]) -> Vec<Result<(), PostError>> {
        let (endpoint, timeout_ms) = (self.endpoint, self.timeout_ms);
        futures_util::future::join_all(wave.iter().map(|(id, body)| async move {
            match endpoint {
                Some(endpoint) => post_signed(endpoint, id, body.clone(), timeout_ms).await,
                None => Err(PostError::NotConfigured),
            }
        }))
        .await
    }

    async fn record(&mut self, statements: Vec<Bound<'static>>) -> sql::DbResult<Vec<bool>> {
        sql::record_dispatch_outcomes(self.db, &statements).await
    }
}

/// The core's driver (`dispatch::drive`) over D1 and `fetch`.
async fn drive(
    db: &D1Database,
    batch: &mut dispatch::Batch,
    order_system: &Result<Option<SignedEndpoint>, ConfigError>,
) -> sql::DbResult<Vec<dispatch::Reply>> {
    let mut io = Worker {
        db,
        endpoint: order_system.as_ref().ok().and_then(Option::as_ref),
        timeout_ms: batch.settings().timeout_ms,
    };
    dispatch::drive(batch, &mut io).await
}

/// Answers each message as the core said, with its log line.
async fn answer(
    env: &Env,
    messages: &[(Incoming, String)],
    replies: Vec<dispatch::Reply>,
) -> worker::Result<()> {
    for r in replies {
        let Some((message, _)) = messages.get(r.message) else {
            continue;
        };
        let mut detail = r.detail;
        match r.answer {
            Answer::Ack => message.ack(),
            Answer::Retry(delay) => message.retry_in(delay),
            Answer::AckAndSendAfter(delay) => {
                if let Err(e) = queue::enqueue_effect_after(env, &r.effect_id, delay).await {
                    // the sweeper sends it once the deferral is past
                    detail = Some(format!("not re-sent ({e}): left to the sweeper"));
                }
                message.ack();
            }
        }
        log::line("dispatch", &r.effect_id, r.outcome, detail.as_deref());
    }
    Ok(())
}

/// The effects dead-letter queue: the dispatcher itself kept failing (D1, crashes), not the
/// order system (that is the ladder). A pending effect is handed back to the dispatcher from
/// a fresh message (`dispatch::dead_letter`): a D1 outage makes no effect dead. Rare, so
/// message by message.
async fn dead_letter(env: &Env, db: &D1Database, messages: Vec<(Incoming, String)>) {
    for (message, effect_id) in messages {
        let load = st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&[effect_id.as_str()])]);
        let row = match sql::all_rows::<DispatchRow>(db, load).await {
            Ok(rows) => rows.into_iter().next(),
            Err(e) => {
                log::line(
                    "dead_letter_effects",
                    &effect_id,
                    "error",
                    Some(&e.to_string()),
                );
                message.retry_in(dispatch::DEAD_LETTER_RETRY_SECONDS);
                continue;
            }
        };
        match dispatch::dead_letter(row.as_ref(), crate::clock::now_seconds()) {
            dispatch::DeadLetter::Done(outcome) => {
                log::line("dead_letter_effects", &effect_id, outcome, None);
                message.ack();
            }
            dispatch::DeadLetter::Requeue(delay) => {
                match queue::enqueue_effect_after(env, &effect_id, delay).await {
                    Ok(()) => {
                        let detail = format!("handed back to the dispatcher in {delay}s");
                        log::line("dead_letter_effects", &effect_id, "requeued", Some(&detail));
                        message.ack();
                    }
                    Err(e) => {
                        log::line(
                            "dead_letter_effects",
                            &effect_id,
                            "error",
                            Some(&e.to_string()),
                        );
                        message.retry_in(dispatch::DEAD_LETTER_RETRY_SECONDS);
                    }
                }
            }
        }
    }
}

/// Re-enqueues pending effects whose message was lost or whose dispatcher died (the core's
/// sweeper, `actors::sweep`). Skipped while no order system is configured (the effects wait in
/// the feed). Returns how many.
pub async fn sweep(env: &Env, budget: u32) -> AppResult<usize> {
    // an unusable URL is said at every run while it lasts, as the metrics' warnings do
    if !can_push(env, "sweep_effects", None) {
        return Ok(0);
    }
    let db = sql::database(env)?;
    let kind = Kind::Effects {
        older_than: config::sweep_after_seconds(env),
    };
    let chunks = Chunks::within(kind, budget);
    let done = crate::sweep::drive(env, &db, chunks, crate::sweep::Queue::Effects, None).await?;
    if let Some(e) = &done.failure {
        log::line("sweep_effects", "-", "enqueue_error", Some(e));
    }
    log::line(
        "sweep_effects",
        "-",
        &format!("requeued {}", done.sent),
        None,
    );
    Ok(done.sent)
}
