//! POST /webhooks/paymos: verify, dedupe, enqueue, reply. Nothing slow runs before the reply.

use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::{config, sql};
use paymos_core::{is_valid_event_id, parse_envelope, signature};
use worker::worker_sys::web_sys;
use worker::{js_sys, wasm_bindgen_futures::JsFuture, Date, Env, Response};

/// Takes the runtime's own request, not workers-rs's `Request`: converting one reads the
/// `cf` object and the method and copies the path on every request, which a CPU profile of
/// this path under load showed among its costs (issue #14). Headers are read from one
/// `Headers` object, each once.
pub async fn receive(req: web_sys::Request, env: &Env) -> worker::Result<Response> {
    let started = Date::now().as_millis();
    let headers = req.headers();
    let header_id = header(&headers, "X-Webhook-Id");
    // informational and unsigned: logged only as a number
    let attempt = header(&headers, "X-Webhook-Attempt").and_then(|a| a.trim().parse::<u32>().ok());
    let result = handle(req, &headers, env, header_id.as_deref()).await;
    // refusals are counted in the isolate, never with a D1 write each (CONTRACT §9)
    if let Err(e) = &result {
        if matches!(e.status(), 400 | 401 | 413) {
            crate::counters::refused(e.status(), e.code());
        }
    }
    let duration_ms = Date::now().as_millis().saturating_sub(started);
    let line = log_line(&result, header_id.as_deref(), attempt, duration_ms);
    web_sys::console::log_1(&line.into());
    match result {
        Ok(r) => receipt(r.duplicate),
        Err(e) => e.into_response(),
    }
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
fn receipt(duplicate: bool) -> worker::Result<Response> {
    let body: &'static str = if duplicate {
        r#"{"received":true,"duplicate":true}"#
    } else {
        r#"{"received":true,"duplicate":false}"#
    };
    let mut resp = Response::ok(body)?;
    resp.headers_mut().set("Content-Type", "application/json")?;
    Ok(resp)
}

struct Received {
    duplicate: bool,
    resource_id: String,
    event_type: String,
    enqueue_error: Option<String>,
}

async fn handle(
    req: web_sys::Request,
    headers: &web_sys::Headers,
    env: &Env,
    header_id: Option<&str>,
) -> AppResult<Received> {
    let config = config::receive_config(env)?;
    let max = config.max_body_bytes;
    let declared = header(headers, "Content-Length").and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(AppError::PayloadTooLarge);
    }
    let body = read_body(&req, declared, max).await?;

    let now = (Date::now().as_millis() / 1000) as i64;
    let sig = header(headers, "X-Webhook-Signature");
    let verified = signature::verify(
        sig.as_deref(),
        &body,
        &config.secrets,
        now,
        config.tolerance_seconds,
    )?;
    // which secret is still in use, for an operator rotating (CONTRACT §9)
    if let Some(id) = config.secret_ids.get(verified.secret_index) {
        crate::counters::signature_verified(id);
    }

    let envelope = parse_envelope(&body, header_id)?;
    // parse_envelope accepted it as JSON, so it is UTF-8
    let text = std::str::from_utf8(&body)
        .map_err(|_| AppError::Envelope(paymos_core::EnvelopeError::NotJson))?;

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
    let unreadable = || {
        AppError::BadRequest(
            "unreadable_body",
            "the request body could not be read".into(),
        )
    };
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
