//! POST /webhooks/paymos: verify, dedupe, enqueue, reply. Nothing slow runs before the reply.

use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::{config, sql};
use futures_util::StreamExt;
use paymos_core::{is_valid_event_id, parse_envelope, signature};
use serde_json::json;
use worker::{console_log, Date, Env, Request, Response};

pub async fn receive(req: Request, env: &Env) -> worker::Result<Response> {
    let started = Date::now().as_millis();
    let header_id = req.headers().get("X-Webhook-Id")?;
    // informational and unsigned: logged only as a number
    let attempt = req
        .headers()
        .get("X-Webhook-Attempt")?
        .and_then(|a| a.trim().parse::<u32>().ok());
    let result = handle(req, env, header_id.as_deref()).await;
    // refusals are counted in the isolate, never with a D1 write each (CONTRACT §9)
    if let Err(e) = &result {
        if matches!(e.status(), 400 | 401 | 413) {
            crate::counters::refused(e.status(), e.code());
        }
    }
    let (status, outcome, resource, event_type) = match &result {
        Ok(r) => (
            200,
            if r.duplicate { "duplicate" } else { "accepted" },
            Some(r.resource_id.clone()),
            Some(r.event_type.clone()),
        ),
        Err(e) => (e.status(), e.code(), None, None),
    };
    let mut line = json!({
        "stage": "receive",
        // the header id is unsigned: logged only when it has the shape of an id
        "event_id": header_id.filter(|id| is_valid_event_id(id)),
        "event_type": event_type,
        "resource_id": resource,
        "outcome": outcome,
        "status": status,
        "attempt": attempt,
        "duration_ms": Date::now().as_millis().saturating_sub(started),
    });
    if let Some(detail) = result.as_ref().err().and_then(|e| e.detail()) {
        line["detail"] = json!(detail);
    }
    if let Ok(r) = &result {
        if let Some(err) = &r.enqueue_error {
            line["enqueue_error"] = json!(err);
        }
    }
    console_log!("{}", line);
    match result {
        Ok(r) => receipt(r.duplicate),
        Err(e) => e.into_response(),
    }
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

async fn handle(mut req: Request, env: &Env, header_id: Option<&str>) -> AppResult<Received> {
    let max = config::max_body_bytes(env);
    let declared = req
        .headers()
        .get("Content-Length")?
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(AppError::PayloadTooLarge);
    }
    let body = read_body(&mut req, declared, max).await?;

    let secrets = config::secrets(env)?;
    let now = (Date::now().as_millis() / 1000) as i64;
    let sig = req.headers().get("X-Webhook-Signature")?;
    let verified = signature::verify(
        sig.as_deref(),
        &body,
        &secrets,
        now,
        config::tolerance_seconds(env),
    )?;
    // which secret is still in use, for an operator rotating (CONTRACT §9)
    if let Some(secret) = secrets.secrets().get(verified.secret_index) {
        crate::counters::signature_verified(&secret_id(secret.expose()));
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
/// it is read as it streams and refused as soon as it passes the limit.
async fn read_body(req: &mut Request, declared: Option<u64>, max: usize) -> AppResult<Vec<u8>> {
    let unreadable = || {
        AppError::BadRequest(
            "unreadable_body",
            "the request body could not be read".into(),
        )
    };
    if declared.is_some() {
        let body = req.bytes().await.map_err(|_| unreadable())?;
        // the runtime enforces Content-Length, but the limit is ours to keep
        return if body.len() > max {
            Err(AppError::PayloadTooLarge)
        } else {
            Ok(body)
        };
    }
    read_capped(req, max, unreadable).await
}

async fn read_capped(
    req: &mut Request,
    max: usize,
    unreadable: impl Fn() -> AppError,
) -> AppResult<Vec<u8>> {
    // no body at all (e.g. Content-Length: 0): an empty one
    let Ok(mut stream) = req.stream() else {
        return Ok(Vec::new());
    };
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| unreadable())?;
        if body.len() + chunk.len() > max {
            return Err(AppError::PayloadTooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
