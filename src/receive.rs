//! POST /webhooks/paymos: verify, dedupe, enqueue, reply. Nothing slow runs before the reply.

use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::{config, sql};
use paymos_core::{is_valid_event_id, parse_envelope, signature};
use wasm_bindgen::prelude::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::web_sys;
use worker::{js_sys, wasm_bindgen_futures::JsFuture, Date, Env, Response};

/// What the receive path reads from the request's headers, each once, from one `Headers`.
struct Head {
    started: u64,
    header_id: Option<String>,
    /// informational and unsigned: logged only as a number
    attempt: Option<u32>,
    signature: Option<String>,
    content_length: Option<u64>,
}

impl Head {
    fn of(req: &web_sys::Request) -> Head {
        let headers = req.headers();
        Head {
            started: Date::now().as_millis(),
            header_id: header(&headers, "X-Webhook-Id"),
            attempt: header(&headers, "X-Webhook-Attempt").and_then(|a| a.trim().parse().ok()),
            signature: header(&headers, "X-Webhook-Signature"),
            content_length: header(&headers, "Content-Length").and_then(|v| v.trim().parse().ok()),
        }
    }
}

/// The general path, for every delivery the fast path below does not take (a chunked body,
/// one over the limit, a configuration fault). Takes the runtime's own request, not
/// workers-rs's `Request`: converting one reads the `cf` object and the method and copies
/// the path on every request, which a CPU profile of this path showed among its costs.
pub async fn receive(req: web_sys::Request, env: &Env) -> worker::Result<Response> {
    let head = Head::of(&req);
    let result = handle(req, &head, env).await;
    answer(result, &head)
}

/// The fast path (issue #14): a delivery with a Content-Length within the limit, driven as
/// a chain of promise callbacks from the synchronous fetch export, where the general path is
/// an `async fn` behind `future_to_promise`, each await a `JsFuture` woken through the
/// executor's microtask queue. Measured on the glue floor (one await): 1.044× the requests/s
/// at 0.954× the CPU per request (`node bench/ab.mjs`, 6 paired rounds). The same steps as
/// `handle`, built from the same pieces (`accept`, `answer`); `None` leaves the request to
/// the general path. Each callback gets the settled promise's value and returns either the
/// reply or the next promise, which the runtime's promise chain waits for.
pub fn receive_fast(
    req: &web_sys::Request,
    env: &Env,
    done: impl FnOnce() + 'static,
) -> Option<JsValue> {
    let config = config::receive_config(env).ok()?;
    let head = Head::of(req);
    if head.content_length? > config.max_body_bytes as u64 {
        return None;
    }
    let body = req.array_buffer().ok()?;
    let env = env.clone();
    let finish = move |result: AppResult<Received>, head: &Head| -> JsValue {
        let reply = answer_js(result, head);
        done();
        reply
    };
    Some(settle(&body, move |read| {
        let body = match read {
            Ok(buffer) => js_sys::Uint8Array::new(&buffer).to_vec(),
            Err(_) => return finish(Err(unreadable()), &head),
        };
        if body.len() > config.max_body_bytes {
            return finish(Err(AppError::PayloadTooLarge), &head);
        }
        let (envelope, text) = match accept(&config, &head, &body) {
            Ok(accepted) => accepted,
            Err(e) => return finish(Err(e), &head),
        };
        let insert = match sql::database(&env)
            .and_then(|db| sql::insert_delivery_start(&db, &envelope, text))
        {
            Ok(promise) => promise,
            Err(e) => return finish(Err(e.into()), &head),
        };
        settle(&insert, move |row| {
            let inserted = match row {
                Ok(column) => !column.is_null() && !column.is_undefined(),
                Err(e) => {
                    return finish(
                        Err(AppError::Database(worker::Error::from(e).to_string())),
                        &head,
                    )
                }
            };
            let mut received = Received {
                duplicate: !inserted,
                resource_id: envelope.resource_id,
                event_type: envelope.event_type,
                enqueue_error: None,
            };
            if !inserted {
                return finish(Ok(received), &head);
            }
            // the row is durable: if this send fails the sweeper enqueues it later, so still 2xx
            match queue::enqueue_start(&env, DeliveryMessage::new(envelope.event_id, 0)) {
                Ok(send) => settle(&send, move |sent| {
                    received.enqueue_error = sent.err().map(|e| worker::Error::from(e).to_string());
                    finish(Ok(received), &head)
                }),
                Err(e) => {
                    received.enqueue_error = Some(e.to_string());
                    finish(Ok(received), &head)
                }
            }
        })
    }))
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// A promise, seen only through its `then`.
    type Settling;
    #[wasm_bindgen(method, js_name = then)]
    fn then2(this: &Settling, on_ok: &JsValue, on_err: &JsValue) -> JsValue;
    /// A function, seen only through its `bind`.
    type Callback;
    #[wasm_bindgen(method, js_name = bind)]
    fn bind1(this: &Callback, this_arg: &JsValue, arg: &JsValue) -> JsValue;
}

/// `promise.then(f(Ok), f(Err))` with one Rust closure: exactly one of the two bound
/// functions runs, and the closure frees itself when it has run. Returns the chained promise.
fn settle(
    promise: &JsValue,
    f: impl FnOnce(Result<JsValue, JsValue>) -> JsValue + 'static,
) -> JsValue {
    let f = Closure::once_into_js(move |ok: bool, value: JsValue| {
        f(if ok { Ok(value) } else { Err(value) })
    });
    let f: &Callback = f.unchecked_ref();
    let on_ok = f.bind1(&JsValue::NULL, &JsValue::TRUE);
    let on_err = f.bind1(&JsValue::NULL, &JsValue::FALSE);
    promise.unchecked_ref::<Settling>().then2(&on_ok, &on_err)
}

/// The reply to a delivery, its log line and its refusal count: the end of the general path.
fn answer(result: AppResult<Received>, head: &Head) -> worker::Result<Response> {
    record(&result, head);
    match result {
        Ok(r) => receipt(r.duplicate),
        Err(e) => e.into_response(),
    }
}

/// The same for the fast path, as the runtime's response: a receipt is built in one call
/// from a `ResponseInit` made once per isolate, instead of workers-rs's `Response` and its
/// conversion (a `Headers`, a `ResponseInit`, the body copied into a `Uint8Array`).
fn answer_js(result: AppResult<Received>, head: &Head) -> JsValue {
    record(&result, head);
    match result {
        Ok(r) => RECEIPT_INIT
            .with(|init| {
                web_sys::Response::new_with_opt_str_and_init(Some(receipt_body(r.duplicate)), init)
            })
            .map_or_else(
                |_| crate::into_js_reply(receipt(r.duplicate)),
                JsValue::from,
            ),
        Err(e) => crate::into_js_reply(e.into_response()),
    }
}

thread_local! {
    /// 200 with `Content-Type: application/json`: the constructor copies it into each response.
    static RECEIPT_INIT: web_sys::ResponseInit = {
        let init = web_sys::ResponseInit::new();
        init.set_status(200);
        if let Ok(headers) = web_sys::Headers::new() {
            let _ = headers.set("Content-Type", "application/json");
            init.set_headers(&headers);
        }
        init
    };
}

/// Counts a refusal and writes the delivery's log line.
fn record(result: &AppResult<Received>, head: &Head) {
    // refusals are counted in the isolate, never with a D1 write each (CONTRACT §9)
    if let Err(e) = result {
        if matches!(e.status(), 400 | 401 | 413) {
            crate::counters::refused(e.status(), e.code());
        }
    }
    let duration_ms = Date::now().as_millis().saturating_sub(head.started);
    let line = log_line(result, head.header_id.as_deref(), head.attempt, duration_ms);
    web_sys::console::log_1(&line.into());
}

/// Verifies the signature over the raw body and parses the envelope: the delivery and its
/// body as text, or why it is refused.
fn accept<'b>(
    config: &config::ReceiveConfig,
    head: &Head,
    body: &'b [u8],
) -> AppResult<(paymos_core::Envelope, &'b str)> {
    let now = (Date::now().as_millis() / 1000) as i64;
    let verified = signature::verify(
        head.signature.as_deref(),
        body,
        &config.secrets,
        now,
        config.tolerance_seconds,
    )?;
    // which secret is still in use, for an operator rotating (CONTRACT §9)
    if let Some(id) = config.secret_ids.get(verified.secret_index) {
        crate::counters::signature_verified(id);
    }
    let envelope = parse_envelope(body, head.header_id.as_deref())?;
    // parse_envelope accepted it as JSON, so it is UTF-8
    let text = std::str::from_utf8(body)
        .map_err(|_| AppError::Envelope(paymos_core::EnvelopeError::NotJson))?;
    Ok((envelope, text))
}

fn unreadable() -> AppError {
    AppError::BadRequest(
        "unreadable_body",
        "the request body could not be read".into(),
    )
}

/// A header's value; a header the runtime cannot read counts as absent (`Headers.get` only
/// throws for a name that is not a valid header name, and these are constants).
fn header(headers: &web_sys::Headers, name: &str) -> Option<String> {
    headers.get(name).ok().flatten()
}

/// The receive log line, one JSON object, written straight into a string: the same fields
/// as a `serde_json::Value` built per request, without the map and its allocations. Ids,
/// event types and resource ids are only logged once validated (letters, digits, `_`, `.`),
/// so they need no escaping; free text (a detail, a queue error) is escaped by serde_json.
fn log_line(
    result: &AppResult<Received>,
    header_id: Option<&str>,
    attempt: Option<u32>,
    duration_ms: u64,
) -> String {
    use std::fmt::Write;
    let (status, outcome, resource, event_type) = match result {
        Ok(r) => (
            200,
            if r.duplicate { "duplicate" } else { "accepted" },
            Some(r.resource_id.as_str()),
            Some(r.event_type.as_str()),
        ),
        Err(e) => (e.status(), e.code(), None, None),
    };
    let quoted = |v: Option<&str>| match v {
        Some(v) => format!("\"{v}\""),
        None => "null".to_string(),
    };
    let mut line = String::with_capacity(256);
    let _ = write!(
        line,
        r#"{{"stage":"receive","event_id":{},"event_type":{},"resource_id":{},"outcome":"{}","status":{},"attempt":{},"duration_ms":{}"#,
        // the header id is unsigned: logged only when it has the shape of an id
        quoted(header_id.filter(|id| is_valid_event_id(id))),
        quoted(event_type),
        quoted(resource),
        outcome,
        status,
        attempt.map_or("null".to_string(), |a| a.to_string()),
        duration_ms,
    );
    let escaped = |t: &str| serde_json::to_string(t).unwrap_or_else(|_| "null".into());
    if let Some(detail) = result.as_ref().err().and_then(|e| e.detail()) {
        let _ = write!(line, r#","detail":{}"#, escaped(detail));
    }
    if let Ok(Received {
        enqueue_error: Some(err),
        ..
    }) = result
    {
        let _ = write!(line, r#","enqueue_error":{}"#, escaped(err));
    }
    line.push('}');
    line
}

/// The receipt: fixed bytes, no JSON built per request.
fn receipt_body(duplicate: bool) -> &'static str {
    if duplicate {
        r#"{"received":true,"duplicate":true}"#
    } else {
        r#"{"received":true,"duplicate":false}"#
    }
}

fn receipt(duplicate: bool) -> worker::Result<Response> {
    let mut resp = Response::ok(receipt_body(duplicate))?;
    resp.headers_mut().set("Content-Type", "application/json")?;
    Ok(resp)
}

struct Received {
    duplicate: bool,
    resource_id: String,
    event_type: String,
    enqueue_error: Option<String>,
}

async fn handle(req: web_sys::Request, head: &Head, env: &Env) -> AppResult<Received> {
    let config = config::receive_config(env)?;
    let max = config.max_body_bytes;
    if head.content_length.is_some_and(|n| n > max as u64) {
        return Err(AppError::PayloadTooLarge);
    }
    let body = read_body(&req, head.content_length, max).await?;
    let (envelope, text) = accept(&config, head, &body)?;
    let db = sql::database(env)?;
    let inserted = sql::insert_delivery(&db, &envelope, text).await?;
    let mut enqueue_error = None;
    if inserted {
        // the row is durable: if this send fails the sweeper enqueues it later, so still 2xx
        let sent = queue::enqueue(env, DeliveryMessage::new(envelope.event_id.clone(), 0)).await;
        enqueue_error = sent.err().map(|e| e.to_string());
    }
    Ok(Received {
        duplicate: !inserted,
        resource_id: envelope.resource_id,
        event_type: envelope.event_type,
        enqueue_error,
    })
}

/// A configured secret's public name: the first 8 hex of its SHA-256.
pub fn secret_id(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    crate::transition::hex(&Sha256::digest(secret.as_bytes())[..4])
}

/// Reads the body, never buffering more than `max` bytes. With a Content-Length (already
/// checked against `max`) the body is taken in one piece, the fast path; without one (chunked)
/// it is read as it streams and refused as soon as it passes the limit (`body::read_capped`).
async fn read_body(
    req: &web_sys::Request,
    declared: Option<u64>,
    max: usize,
) -> AppResult<Vec<u8>> {
    if declared.is_some() {
        let buffer = req.array_buffer().map_err(|_| unreadable())?;
        let buffer = JsFuture::from(buffer).await.map_err(|_| unreadable())?;
        let body = js_sys::Uint8Array::new(&buffer).to_vec();
        // the runtime enforces Content-Length, but the limit is ours to keep
        return if body.len() > max {
            Err(AppError::PayloadTooLarge)
        } else {
            Ok(body)
        };
    }
    crate::body::read_capped(req, max)
        .await
        .map_err(|e| match e {
            crate::body::ReadError::TooLarge => AppError::PayloadTooLarge,
            crate::body::ReadError::Unreadable => unreadable(),
        })
}
