//! The receive path's exports to its JavaScript driver (`src/receive.js`), which takes a
//! delivery whose body is declared under `WEBCRYPTO_MIN_BYTES` and within the limit: the
//! driver reads the headers and the body, binds the insert, sends to the queue and builds the
//! reply with the runtime's own objects; every decision is made here, by the code the other
//! paths run (the signature, the envelope, what is counted, the log line, a refusal's reply).
//! Two calls into the wasm per delivery (the check, then its end), each with plain values,
//! where the promise chain driven from the wasm made 38 calls into JS per duplicate
//! (bench/README.md, "The receive path driven from JavaScript").

use super::{accept, record, Head, Received, WEBCRYPTO_MIN_BYTES};
use crate::error::AppError;
use crate::queue::DeliveryMessage;
use crate::{config, queue, sql};
use paymos_core::statements as st;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::worker_sys::Context;
use worker::Env;

/// What the driver needs, read once per isolate, one value per line: the body limit, the
/// size from which the general path's WebCrypto takes a body, the database's and the queue's
/// binding names, then the insert's SQL text to the end. Written by hand: serde_json's
/// serializer of a `Value` would be code compiled on a fresh isolate's first delivery for
/// this alone. `None` when the configuration is faulty: the general path answers every
/// delivery then.
#[wasm_bindgen]
pub fn receive_setup(env: Env) -> Option<String> {
    let config = config::receive_config(&env).ok()?;
    let mut setup = String::with_capacity(256);
    for line in [
        itoa::Buffer::new().format(config.max_body_bytes),
        itoa::Buffer::new().format(WEBCRYPTO_MIN_BYTES),
        sql::DATABASE,
        queue::DELIVERIES,
    ] {
        setup.push_str(line);
        setup.push('\n');
    }
    setup.push_str(st::INSERT_DELIVERY.sql);
    Some(setup)
}

/// A delivery's body and headers, checked at `now` (milliseconds since the epoch; `started`
/// when its request arrived): `A<event id>\n<resource id>\n<event type>\n<queue message as
/// JSON>` for a delivery to insert, or `R<status><reply body>` for a refusal, already counted
/// and logged. The counts taken here are the delivery's only ones: their write is scheduled
/// here too.
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)] // each a header's value, as the driver read it
pub fn receive_check(
    env: Env,
    ctx: Context,
    body: &[u8],
    header_id: Option<String>,
    attempt: Option<String>,
    signature: Option<String>,
    started: f64,
    now: f64,
) -> String {
    let mut head = Head::from_headers(started as u64, header_id, attempt, signature);
    let checked = config::receive_config(&env)
        .map_err(AppError::from)
        .and_then(|config| {
            head.log = config.receive_log;
            if body.len() > config.max_body_bytes {
                return Err(AppError::PayloadTooLarge);
            }
            accept(&config, &head, body, (now as u64 / 1000) as i64)
        });
    let verdict = match checked {
        Ok((envelope, _)) => {
            let mut verdict = String::with_capacity(96);
            for (mark, part) in [
                ('A', &envelope.event_id),
                ('\n', &envelope.resource_id),
                ('\n', &envelope.event_type),
            ] {
                verdict.push(mark);
                verdict.push_str(part);
            }
            // the queue message as JSON text (one line: JSON escapes every newline)
            verdict.push('\n');
            verdict.push_str(&DeliveryMessage::received(&envelope).json());
            verdict
        }
        Err(e) => refusal(e, &head, now),
    };
    crate::after_reply(env, ctx);
    verdict
}

/// The body could not be read: `R<status><reply body>`, counted (its write scheduled) and
/// logged.
#[wasm_bindgen]
pub fn receive_unreadable(
    env: Env,
    ctx: Context,
    header_id: Option<String>,
    attempt: Option<String>,
    started: f64,
    now: f64,
) -> String {
    let head = head(&env, header_id, attempt, started);
    let verdict = refusal(super::unreadable(), &head, now);
    crate::after_reply(env, ctx);
    verdict
}

/// The insert failed (`error`, its rejection; `undefined`: the environment has no database
/// binding): `R<status><reply body>`, counted and logged.
#[wasm_bindgen]
pub fn receive_failed(
    env: Env,
    header_id: Option<String>,
    attempt: Option<String>,
    started: f64,
    now: f64,
    error: JsValue,
) -> String {
    let head = head(&env, header_id, attempt, started);
    let failure = match sql::database(&env) {
        Err(missing) => missing,
        Ok(_) => sql::insert_delivery_failed(error),
    };
    refusal(AppError::Database(failure), &head, now)
}

/// A delivery on record: its log line. `sent`: 0 when it was a duplicate or its message was
/// sent, 1 when the send failed with `error`, 2 when the environment has no queue binding.
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)] // the delivery's log line, field by field
pub fn receive_done(
    env: Env,
    header_id: Option<String>,
    attempt: Option<String>,
    started: f64,
    now: f64,
    duplicate: bool,
    resource_id: String,
    event_type: String,
    sent: u32,
    error: JsValue,
) {
    let head = head(&env, header_id, attempt, started);
    let enqueue_error = match sent {
        0 => None,
        1 => Some(worker::Error::from(error).to_string()),
        _ => Some(format!("Binding `{}` is undefined.", queue::DELIVERIES)),
    };
    let received = Received {
        duplicate,
        resource_id,
        event_type,
        enqueue_error,
    };
    record(Ok(&received), &head, now as u64);
}

/// A delivery's head as its log line needs it (the configuration was read by its check).
fn head(env: &Env, header_id: Option<String>, attempt: Option<String>, started: f64) -> Head {
    let mut head = Head::from_headers(started as u64, header_id, attempt, None);
    if let Ok(config) = config::receive_config(env) {
        head.log = config.receive_log;
    }
    head
}

/// A refusal, counted and logged: `R<status><reply body>`, the reply exactly as
/// `AppError::into_delivery_response` makes it.
fn refusal(e: AppError, head: &Head, now: f64) -> String {
    record(Err(&e), head, now as u64);
    // a code is letters and `_`: nothing to escape
    let mut verdict = String::with_capacity(32);
    verdict.push('R');
    verdict.push_str(itoa::Buffer::new().format(e.status()));
    verdict.push_str(r#"{"error":""#);
    verdict.push_str(e.code());
    verdict.push_str(r#""}"#);
    verdict
}
