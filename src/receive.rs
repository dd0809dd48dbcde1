//! POST /webhooks/paymos: verify, dedupe, enqueue, reply. Nothing slow runs before the reply.
//! A body with a Content-Length under `WEBCRYPTO_MIN_BYTES` is driven from JavaScript
//! (`src/receive.js`), which asks `driver`'s exports for every decision made here; the wasm
//! drives the rest itself, by `receive_fast` or `receive`.

use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::settle::settle;
use crate::{config, sql};
use paymos_core::receive_log::ReceiveLog;
use paymos_core::{is_valid_event_id, parse_envelope, signature};
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::web_sys;
use worker::{js_sys, wasm_bindgen_futures::JsFuture, Env, Response};

mod driver;

/// What the receive path reads from the request's headers, each once, from one `Headers`.
struct Head {
    started: u64,
    header_id: Option<String>,
    /// informational and unsigned: logged only as a number
    attempt: Option<u32>,
    signature: Option<String>,
    content_length: Option<u64>,
    /// which outcomes write the log line: `all` until the configuration is read (a
    /// configuration fault is logged whatever `RECEIVE_LOG` says)
    log: ReceiveLog,
}

impl Head {
    fn of(req: &web_sys::Request) -> Head {
        let headers = req.headers();
        let mut head = Head::from_headers(
            crate::clock::now_millis(),
            header(&headers, "X-Webhook-Id"),
            header(&headers, "X-Webhook-Attempt"),
            header(&headers, "X-Webhook-Signature"),
        );
        head.content_length =
            header(&headers, "Content-Length").and_then(|v| v.trim().parse().ok());
        head
    }

    /// From the headers' values as read (by `of`, or by the JavaScript driver, `driver`).
    fn from_headers(
        started: u64,
        header_id: Option<String>,
        attempt: Option<String>,
        signature: Option<String>,
    ) -> Head {
        Head {
            started,
            // as the envelope reads it, so that the log line names the id it accepted
            header_id: header_id.map(|id| paymos_core::header_value(&id).to_string()),
            attempt: attempt.and_then(|a| a.trim().parse().ok()),
            signature,
            content_length: None,
            log: ReceiveLog::All,
        }
    }
}

/// The general path, for the deliveries the fast path below does not take: a configuration
/// fault, a body declared over the limit, a chunked body (read as it streams and refused as
/// soon as it passes the limit, `body::read_capped`). From the body on it runs the fast
/// path's own steps (`after_body`). Takes the runtime's own request, not workers-rs's
/// `Request`: converting one reads the `cf` object and the method and copies the path on
/// every request, which a CPU profile of this path showed among its costs.
pub async fn receive(req: web_sys::Request, env: &Env) -> worker::Result<Response> {
    let mut head = Head::of(&req);
    let config = match config::receive_config(env) {
        Ok(config) => config,
        Err(e) => return refuse(e.into(), &head),
    };
    head.log = config.receive_log;
    let max = config.max_body_bytes;
    if head.content_length.is_some_and(|n| n > max as u64) {
        return refuse(AppError::PayloadTooLarge, &head);
    }
    let body = match crate::body::read_capped(&req, max).await {
        Ok(body) => body,
        Err(crate::body::ReadError::TooLarge) => return refuse(AppError::PayloadTooLarge, &head),
        Err(crate::body::ReadError::Unreadable) => return refuse(unreadable(), &head),
    };
    let reply = after_body(body, config, head, env.clone(), Box::new(answer_js));
    let reply = JsFuture::from(js_sys::Promise::resolve(&reply)).await?;
    Ok(Response::from(reply.unchecked_into::<web_sys::Response>()))
}

/// The fast path (issue #14): a delivery with a Content-Length within the limit, driven as
/// a chain of promise callbacks from the synchronous fetch export, where an `async fn` behind
/// `future_to_promise` pays a `JsFuture` per await, woken through the executor's microtask
/// queue. Measured on the glue floor (one await): 1.044× the requests/s at 0.954× the CPU per
/// request (`node bench/ab.mjs`, 6 paired rounds). `None` leaves the request to the general
/// path.
pub fn receive_fast(
    req: &web_sys::Request,
    env: &Env,
    done: impl FnOnce() + 'static,
) -> Option<JsValue> {
    let config = config::receive_config(env).ok()?;
    let mut head = Head::of(req);
    head.log = config.receive_log;
    if head.content_length? > config.max_body_bytes as u64 {
        return None;
    }
    let finish = move |result: AppResult<Received>, head: &Head| -> JsValue {
        let reply = answer_js(result, head);
        done();
        reply
    };
    let body = match req.array_buffer() {
        Ok(body) => body,
        Err(_) => return Some(finish(Err(unreadable()), &head)),
    };
    let env = env.clone();
    Some(settle(&body, move |read| match read {
        Ok(buffer) => after_body(
            js_sys::Uint8Array::new(&buffer).to_vec(),
            config,
            head,
            env,
            Box::new(finish),
        ),
        Err(_) => finish(Err(unreadable()), &head),
    }))
}

/// What ends a delivery's chain with its result: the reply (and, on the fast path, the
/// request's own bookkeeping). One boxed type for both paths, so that the chain below is
/// compiled once, not once per path.
type Finish = Box<dyn FnOnce(AppResult<Received>, &Head) -> JsValue>;

/// Both paths from the body on: verify, parse, insert, send, then `finish` with the result.
/// Each callback gets the settled promise's value and returns either the reply or the next
/// promise, which the runtime's promise chain waits for.
fn after_body(
    body: Vec<u8>,
    config: std::rc::Rc<config::ReceiveConfig>,
    head: Head,
    env: Env,
    finish: Finish,
) -> JsValue {
    // the runtime enforces Content-Length, but the limit is ours to keep
    if body.len() > config.max_body_bytes {
        return finish(Err(AppError::PayloadTooLarge), &head);
    }
    if body.len() >= WEBCRYPTO_MIN_BYTES {
        // the header's own checks first: a refused header costs no MAC
        let parsed = match signature::check(
            head.signature.as_deref(),
            &config.secrets,
            crate::clock::now_seconds(),
            config.tolerance_seconds,
        ) {
            Ok(parsed) => parsed,
            Err(e) => return finish(Err(e.into()), &head),
        };
        let keys = config
            .webcrypto_keys
            .get_or_init(|| crate::webcrypto::import_keys(config.secrets.secrets()));
        match keys {
            // no WebCrypto here (said in its own log line): the wasm computes the MACs below
            None => crate::log::line("receive", "-", "webcrypto_error", Some("no WebCrypto keys")),
            Some(keys) => {
                let macs = keys.sign_all(parsed.signed_prefix().as_bytes(), &body);
                return settle(&macs, move |macs| {
                    let macs = macs
                        .map_err(|e| worker::Error::from(e).to_string())
                        .and_then(|m| {
                            crate::webcrypto::macs(&m, config.secrets.len())
                                .ok_or_else(|| "not one 32-byte MAC per secret".to_string())
                        });
                    let verified = match macs {
                        Ok(macs) => signature::match_macs(&parsed, macs),
                        // WebCrypto failed (said in its own log line): the wasm computes them
                        Err(why) => {
                            crate::log::line("receive", "-", "webcrypto_error", Some(&why));
                            let macs = signature::macs(&parsed, &config.secrets, &body);
                            signature::match_macs(&parsed, macs)
                        }
                    };
                    let accepted = verified
                        .map_err(AppError::from)
                        .and_then(|v| accepted(&config, &head, &body, v));
                    store(accepted, head, env, finish)
                });
            }
        }
    }
    let accepted = accept(&config, &head, &body, crate::clock::now_seconds());
    store(accepted, head, env, finish)
}

/// From this many body bytes on, the MACs are computed by the runtime's WebCrypto
/// (`webcrypto`). Measured (bench/README.md, "Large deliveries"), one delivery at a time: a 250 KB one took
/// 3.30 ms with the wasm's HMAC and 2.22 with WebCrypto (the JS receiver 2.14), a 64 KB one
/// 1.83 and 1.65; at 8 KiB the two are level, and below it the wasm's synchronous HMAC is as
/// fast or faster than a promise and a copy.
const WEBCRYPTO_MIN_BYTES: usize = 8 * 1024;

/// An accepted delivery (or why not) into D1, then onto the queue for a new one.
fn store(
    accepted: AppResult<(paymos_core::Envelope, &str)>,
    head: Head,
    env: Env,
    finish: Finish,
) -> JsValue {
    let (envelope, text) = match accepted {
        Ok(accepted) => accepted,
        Err(e) => return finish(Err(e), &head),
    };
    let insert =
        match sql::database(&env).and_then(|db| sql::insert_delivery_start(&db, &envelope, text)) {
            Ok(promise) => promise,
            Err(e) => return finish(Err(e.into()), &head),
        };
    settle(&insert, move |row| {
        let inserted = match row {
            Ok(column) => !column.is_null() && !column.is_undefined(),
            Err(e) => {
                return finish(
                    Err(AppError::Database(sql::insert_delivery_failed(e))),
                    &head,
                )
            }
        };
        let mut received = Received {
            duplicate: !inserted,
            resource_id: envelope.resource_id.clone(),
            event_type: envelope.event_type.clone(),
            enqueue_error: None,
        };
        if !inserted {
            return finish(Ok(received), &head);
        }
        // the row is durable: if this send fails the sweeper enqueues it later, so still 2xx
        match queue::enqueue_start(&env, DeliveryMessage::received(&envelope)) {
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
}

/// A delivery refused before its body was read: its log line, its count, its reply.
fn refuse(e: AppError, head: &Head) -> worker::Result<Response> {
    record(Err(&e), head, crate::clock::now_millis());
    e.into_delivery_response()
}

/// The reply to a delivery, as the runtime's response, with its log line and its refusal
/// count. A receipt is built in one call from a `ResponseInit` made once per isolate,
/// instead of workers-rs's `Response` and its conversion (a `Headers`, a `ResponseInit`, the
/// body copied into a `Uint8Array`).
fn answer_js(result: AppResult<Received>, head: &Head) -> JsValue {
    record(result.as_ref(), head, crate::clock::now_millis());
    match result {
        Ok(r) => RECEIPT_INIT
            .with(|init| {
                web_sys::Response::new_with_opt_str_and_init(Some(receipt_body(r.duplicate)), init)
            })
            .map_or_else(
                |_| crate::into_js_reply(receipt(r.duplicate)),
                JsValue::from,
            ),
        Err(e) => crate::into_js_reply(e.into_delivery_response()),
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

/// Counts a refusal and writes the delivery's log line, unless `RECEIVE_LOG` leaves this
/// outcome out (a duplicate under `except_duplicates`: its count under its secret was taken
/// when its signature verified, `accepted`, whatever this setting says). `now`: milliseconds
/// since the epoch, the end of the delivery's duration.
fn record(result: Result<&Received, &AppError>, head: &Head, now: u64) {
    // refusals are counted in the isolate, never with a D1 write each (interface §9)
    if let Err(e) = result {
        if matches!(e.status(), 400 | 401 | 413) {
            crate::counters::refused(e.status(), e.code());
        }
    }
    if !head.log.writes(matches!(result, Ok(r) if r.duplicate)) {
        return;
    }
    let duration_ms = now.saturating_sub(head.started);
    let line = log_line(result, head.header_id.as_deref(), head.attempt, duration_ms);
    web_sys::console::log_1(&line.into());
}

/// Verifies the signature over the raw body (the wasm's HMAC) at `now` (seconds since the
/// epoch) and parses the envelope: the delivery and its body as text, or why it is refused.
fn accept<'b>(
    config: &config::ReceiveConfig,
    head: &Head,
    body: &'b [u8],
    now: i64,
) -> AppResult<(paymos_core::Envelope, &'b str)> {
    let verified = signature::verify(
        head.signature.as_deref(),
        body,
        &config.secrets,
        now,
        config.tolerance_seconds,
    )?;
    accepted(config, head, body, verified)
}

/// A verified delivery: counted under its secret, its envelope parsed.
fn accepted<'b>(
    config: &config::ReceiveConfig,
    head: &Head,
    body: &'b [u8],
    verified: signature::VerifiedSignature,
) -> AppResult<(paymos_core::Envelope, &'b str)> {
    // which secret is still in use, for an operator rotating (interface §9)
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
/// as a `serde_json::Value` built per request, without the map and its allocations, and
/// without `core::fmt` (`write!` was 1 % of a duplicate's CPU in a profile, and its code
/// compiled on a fresh isolate's first delivery). Ids, event types and resource ids are only
/// logged once validated (letters, digits, `_`, `.`), so they need no escaping; free text (a
/// detail, a queue error) is escaped by serde_json.
fn log_line(
    result: Result<&Received, &AppError>,
    header_id: Option<&str>,
    attempt: Option<u32>,
    duration_ms: u64,
) -> String {
    let (status, outcome, resource, event_type) = match result {
        Ok(r) => (
            200,
            if r.duplicate { "duplicate" } else { "accepted" },
            Some(r.resource_id.as_str()),
            Some(r.event_type.as_str()),
        ),
        Err(e) => (e.status(), e.code(), None, None),
    };
    let mut line = String::with_capacity(256);
    // the header id is unsigned: logged only when it has the shape of an id
    let header_id = header_id.filter(|id| is_valid_event_id(id));
    push_text(&mut line, r#"{"stage":"receive","event_id":"#, header_id);
    push_text(&mut line, r#","event_type":"#, event_type);
    push_text(&mut line, r#","resource_id":"#, resource);
    push_text(&mut line, r#","outcome":"#, Some(outcome));
    push_number(&mut line, r#","status":"#, Some(status.into()));
    push_number(&mut line, r#","attempt":"#, attempt.map(u64::from));
    push_number(&mut line, r#","duration_ms":"#, Some(duration_ms));
    if let Err(e) = result {
        if let Some(detail) = e.detail() {
            push_escaped(&mut line, r#","detail":"#, &detail);
        } else if let Some(message) = e.message() {
            // a refusal's reply carries only its code: which field is said here
            push_escaped(&mut line, r#","detail":"#, &message);
        }
    }
    if let Ok(Received {
        enqueue_error: Some(err),
        ..
    }) = result
    {
        push_escaped(&mut line, r#","enqueue_error":"#, err);
    }
    line.push('}');
    line
}

/// `name` then `"value"` (a value that needs no escaping) or `null`.
fn push_text(line: &mut String, name: &str, value: Option<&str>) {
    line.push_str(name);
    match value {
        Some(v) => {
            line.push('"');
            line.push_str(v);
            line.push('"');
        }
        None => line.push_str("null"),
    }
}

/// `name` then free text as a JSON string, escaped by serde_json.
fn push_escaped(line: &mut String, name: &str, text: &str) {
    line.push_str(name);
    line.push_str(&serde_json::to_string(text).unwrap_or_else(|_| "null".into()));
}

/// `name` then the number or `null`.
fn push_number(line: &mut String, name: &str, value: Option<u64>) {
    line.push_str(name);
    match value {
        Some(n) => line.push_str(itoa::Buffer::new().format(n)),
        None => line.push_str("null"),
    }
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

/// A configured secret's public name: the first 8 hex of its SHA-256.
pub fn secret_id(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    crate::transition::hex(&Sha256::digest(secret.as_bytes())[..4])
}
