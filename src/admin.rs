//! The operators' JSON API under /admin/api (bearer token, constant-time compare).

use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::sql::{self, DeliveryFilter, DeliveryRow};
use crate::transition::{self, Change};
use crate::{config, reconcile};
use paymos_core::{is_valid_event_id, resource_kind_of, state_of, CauseKind, EffectKind};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use worker::{Env, Method, Request, Response};

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 1000;

/// Compares digests so that neither the content nor the length of the token leaks through timing.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    a.ct_eq(&b).into()
}

/// `Ok(())` when the request carries the admin token. Admin is off (404) when no token is set.
pub fn authorize(req: &Request, env: &Env) -> AppResult<()> {
    let Some(expected) = config::admin_token(env) else {
        return Err(AppError::NotFound);
    };
    let header = req.headers().get("Authorization")?.unwrap_or_default();
    // the scheme's name is case-insensitive (RFC 9110 §11.1); the token is compared as sent
    let presented = match header.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("Bearer ") => &header[7..],
        _ => "",
    };
    if presented.is_empty() || !token_matches(presented, &expected) {
        return Err(AppError::Unauthorized);
    }
    // the token travels in a header a cross-site page cannot set; refuse cross-site writes anyway
    if req.method() != Method::Get
        && req.headers().get("Sec-Fetch-Site")?.as_deref() == Some("cross-site")
    {
        return Err(AppError::Forbidden("cross_site_request"));
    }
    Ok(())
}

/// The operators' page and its files (public/admin, Workers Static Assets, with the headers of
/// public/_headers), through the ASSETS binding while the admin surface is on; with
/// `ADMIN_TOKEN` unset every `/admin` path is 404, the page's too (CONTRACT §4). The page holds
/// no data, so it is served without the token: signing in is the page's own first step.
pub async fn page(req: Request, env: &Env) -> worker::Result<Response> {
    if config::admin_token(env).is_none() {
        // answered as the admin API's 404 is (never cached)
        return crate::admin_reply(Err(AppError::NotFound));
    }
    env.assets("ASSETS")?.fetch_request(req).await
}

pub async fn api(req: Request, env: &Env, path: &str) -> AppResult<Response> {
    authorize(&req, env)?;
    let segments: Vec<&str> = path
        .trim_end_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let method = req.method();
    match (method, segments.as_slice()) {
        (Method::Get, ["deliveries"]) => list_deliveries(&req, env).await,
        (Method::Get, ["deliveries", id]) => get_delivery(env, id).await,
        (Method::Post, ["deliveries", id, "replay"]) => replay(env, id).await,
        (Method::Get, ["resources", id]) => get_resource(env, id).await,
        (Method::Post, ["resources", id, "transition"]) => manual_transition(req, env, id).await,
        (Method::Post, ["reconcile"]) => reconcile_now(req, env).await,
        (Method::Get, ["effects"]) => list_effects(&req, env).await,
        (Method::Get, ["metrics"]) => metrics(&req, env).await,
        (Method::Get, ["alerts"]) => list_alerts(env).await,
        (Method::Post, ["alerts", id, "ack"]) => ack_alert(env, id).await,
        (Method::Post, ["deliveries", "replay"]) => bulk_replay(req, env).await,
        (Method::Post, ["effects", id, "redeliver"]) => redeliver_effect(env, id).await,
        (Method::Get, ["reconcile"]) => match reconcile::latest(env).await? {
            Some(report) => Ok(Response::from_json(&report)?),
            None => Err(AppError::NotFound),
        },
        (_, ["deliveries"] | ["deliveries", _] | ["resources", _]) => {
            Err(AppError::MethodNotAllowed("GET"))
        }
        (_, ["reconcile"]) => Err(AppError::MethodNotAllowed("GET, POST")),
        (_, ["effects"] | ["metrics"] | ["alerts"]) => Err(AppError::MethodNotAllowed("GET")),
        (_, ["alerts", _, "ack"]) => Err(AppError::MethodNotAllowed("POST")),
        (_, ["effects", _, "redeliver"]) => Err(AppError::MethodNotAllowed("POST")),
        (_, ["deliveries", _, "replay"] | ["resources", _, "transition"]) => {
            Err(AppError::MethodNotAllowed("POST"))
        }
        _ => Err(AppError::NotFound),
    }
}

/// The request's query string (what `url`'s `query_pairs` decodes), cut from the URL the
/// runtime hands over instead of parsing it with `req.url()`: that keeps the `url` crate and
/// its host parser out of the wasm (about 21 KB gzipped).
fn query(req: &Request) -> String {
    let url = req.inner().url();
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query.split_once('#').map_or(query, |(q, _)| q).to_string()
}

/// The query's filters: each parameter decoded, its value trimmed, the empty ones left out
/// (an empty filter filters nothing).
fn filters(req: &Request) -> Vec<(String, String)> {
    form_urlencoded::parse(query(req).as_bytes())
        .map(|(k, v)| (k.into_owned(), v.trim().to_string()))
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// The effects feed (CONTRACT §7): oldest first, cursor-paged, filtered by kind and
/// dispatch state, so that an order system can pull instead of being pushed to.
async fn list_effects(req: &Request, env: &Env) -> AppResult<Response> {
    let mut kind = None;
    let mut dispatch = None;
    let mut after = None;
    let mut limit = DEFAULT_PAGE;
    for (k, v) in filters(req) {
        match k.as_str() {
            "kind" => {
                kind = Some(EffectKind::from_str_name(&v).ok_or_else(|| {
                    AppError::BadRequest(
                        "invalid_kind",
                        "kind is one of fulfilment, revocation, settlement, credit".into(),
                    )
                })?)
            }
            "dispatch" => {
                dispatch = Some(match v.as_str() {
                    "pending" => "pending",
                    "delivered" => "delivered",
                    "dead" => "dead",
                    _ => {
                        return Err(AppError::BadRequest(
                            "invalid_dispatch",
                            "dispatch is one of pending, delivered, dead".into(),
                        ))
                    }
                })
            }
            "cursor" => {
                after = Some(v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                    AppError::BadRequest(
                        "invalid_cursor",
                        "the cursor is not one this API gave out".into(),
                    )
                })?)
            }
            "limit" => limit = parse_limit(&v)?,
            _ => {}
        }
    }
    let db = sql::database(env)?;
    let mut rows =
        sql::list_effects(&db, kind.map(EffectKind::as_str), dispatch, after, limit).await?;
    let has_more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor = if has_more {
        rows.last().map(|e| e.seq.to_string())
    } else {
        None
    };
    Ok(Response::from_json(
        &json!({ "data": rows, "has_more": has_more, "next_cursor": next_cursor }),
    )?)
}

/// Sends the effect to the order system again, under the same id.
async fn redeliver_effect(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let awaiting = sql::redeliver_effect(&db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let enqueued = if awaiting {
        // nothing to send until its order_ref is known; it goes out when that is learned
        false
    } else {
        crate::queue::enqueue_effects(env, &[id.to_string()])
            .await
            .1
            .is_none()
    };
    Ok(Response::from_json(&json!({
        "redelivered": true,
        "id": id,
        "enqueued": enqueued,
        "awaiting_order_ref": awaiting,
    }))?
    .with_status(202))
}

/// Operational figures (CONTRACT §9): JSON, or `?format=prometheus`.
async fn metrics(req: &Request, env: &Env) -> AppResult<Response> {
    let prometheus = form_urlencoded::parse(query(req).as_bytes())
        .any(|(k, v)| k == "format" && v == "prometheus");
    let db = sql::database(env)?;
    let snap = crate::metrics::snapshot(env, &db).await?;
    if prometheus {
        let mut resp = Response::ok(snap.prometheus())?;
        resp.headers_mut()
            .set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")?;
        Ok(resp)
    } else {
        Ok(Response::from_json(&snap.json())?)
    }
}

/// Open alerts first, then acknowledged, then those resolved in the last week.
async fn list_alerts(env: &Env) -> AppResult<Response> {
    let db = sql::database(env)?;
    let alerts = sql::list_alerts(&db, 200).await?;
    Ok(Response::from_json(&json!({ "data": alerts }))?)
}

async fn ack_alert(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    if !sql::ack_alert(&db, id).await? {
        return match sql::load_alert(&db, id).await? {
            None => Err(AppError::NotFound),
            Some(_) => Err(AppError::Conflict(
                "alert_resolved",
                "the alert is resolved already".into(),
            )),
        };
    }
    Ok(Response::from_json(
        &json!({ "id": id, "state": "acknowledged" }),
    )?)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BulkReplayRequest {
    status: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    resource_id: Option<String>,
    received_after: Option<String>,
    received_before: Option<String>,
    #[serde(default)]
    dry_run: bool,
    /// Where a previous call stopped (`next_cursor`), to continue the same replay.
    cursor: Option<String>,
}

/// A chunk: one claim statement and one `sendBatch`.
const REPLAY_CHUNK: u32 = 100;

/// Bulk replay (CONTRACT §5): every matching delivery reset (a new generation) and
/// re-enqueued, in chunks of 100, within this invocation's budget; the guard decides again,
/// so repeating it doubles nothing. `dry_run` only counts. A replay larger than one
/// invocation answers `next_cursor`, to be posted back with the same filters.
async fn bulk_replay(mut req: Request, env: &Env) -> AppResult<Response> {
    let text = req.text().await.unwrap_or_default();
    let body: BulkReplayRequest = serde_json::from_str(if text.trim().is_empty() { "{}" } else { &text })
        .map_err(|e| {
            AppError::BadRequest(
                "invalid_json",
                format!("the body is {{status?, type?, resource_id?, received_after?, received_before?, dry_run?, cursor?}}: {e}"),
            )
        })?;
    fn clean(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|v| !v.is_empty())
    }
    let status = clean(&body.status).map(status_filter).transpose()?;
    let time = |v: Option<&str>, name: &'static str| -> AppResult<Option<String>> {
        v.map(|t| {
            paymos_core::time::normalize_iso8601(t).ok_or_else(|| {
                AppError::BadRequest("invalid_time", format!("{name} is not an ISO-8601 time"))
            })
        })
        .transpose()
    };
    let received_after = time(clean(&body.received_after), "received_after")?;
    let received_before = time(clean(&body.received_before), "received_before")?;
    let filter = sql::ReplayFilter {
        event_type: clean(&body.event_type),
        resource_id: clean(&body.resource_id),
        status,
        received_after: received_after.as_deref(),
        received_before: received_before.as_deref(),
    };
    if filter.event_type.is_none()
        && filter.resource_id.is_none()
        && filter.status.is_none()
        && filter.received_after.is_none()
        && filter.received_before.is_none()
    {
        return Err(AppError::BadRequest(
            "filter_required",
            "a bulk replay needs at least one of status, type, resource_id, received_after, received_before".into(),
        ));
    }
    let mut after = clean(&body.cursor)
        .map(parse_cursor)
        .transpose()?
        .map(|(at, id)| (at.to_string(), id.to_string()));
    let db = sql::database(env)?;
    let matched = sql::count_replay(&db, &filter).await?;
    if body.dry_run {
        return Ok(Response::from_json(
            &json!({ "matched": matched, "enqueued": 0, "dry_run": true, "next_cursor": null }),
        )?);
    }
    // each chunk costs a statement and a sendBatch; keep a margin for the count above
    let max_chunks = (config::invocation_budget(env) / 2)
        .saturating_sub(2)
        .max(1);
    let mut enqueued = 0usize;
    let mut reset = 0usize;
    let mut next_cursor = None;
    for i in 0..max_chunks {
        let cursor = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        let rows = sql::replay_chunk(&db, &filter, cursor, REPLAY_CHUNK).await?;
        let n = rows.len();
        if n == 0 {
            break;
        }
        reset += n;
        after = rows
            .iter()
            .map(|(id, _, at)| (at.clone(), id.clone()))
            .max();
        let messages = rows
            .into_iter()
            .map(|(id, generation, _)| DeliveryMessage::new(id, generation))
            .collect();
        // reset rows are durable and unprocessed: a failed send is the sweeper's
        let (sent, err) = queue::enqueue_all(env, messages).await;
        enqueued += sent;
        if let Some(e) = err {
            crate::log::line("bulk_replay", "-", "enqueue_error", Some(&e.to_string()));
        }
        if n < REPLAY_CHUNK as usize {
            break;
        }
        if i + 1 == max_chunks {
            next_cursor = after
                .as_ref()
                .map(|(at, id)| format!("{at}{CURSOR_SEPARATOR}{id}"));
        }
    }
    crate::log::line(
        "bulk_replay",
        "-",
        &format!("matched {matched}, reset {reset}, enqueued {enqueued}"),
        None,
    );
    Ok(Response::from_json(&json!({
        "matched": matched,
        "enqueued": enqueued,
        "reset": reset,
        "dry_run": false,
        "next_cursor": next_cursor,
    }))?)
}

/// A delivery cursor as this API gives it out: `received_at~event_id` (a time as stored, an
/// event id); anything else is refused rather than read as the top of the list.
fn parse_cursor(c: &str) -> AppResult<(&str, &str)> {
    c.split_once(CURSOR_SEPARATOR)
        .filter(|(at, id)| {
            paymos_core::time::normalize_iso8601(at).is_some() && is_valid_event_id(id)
        })
        .ok_or_else(|| {
            AppError::BadRequest(
                "invalid_cursor",
                "the cursor is not one this API gave out".into(),
            )
        })
}

fn parse_limit(v: &str) -> AppResult<u32> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_PAGE).contains(n))
        .ok_or_else(|| AppError::BadRequest("invalid_limit", format!("limit is 1 to {MAX_PAGE}")))
}

#[derive(Deserialize, Default)]
struct ReconcileRequest {
    #[serde(default)]
    full: bool,
}

/// Runs reconciliation now: the last 7 days, or everything with `{"full":true}`. A walk that
/// does not fit in this invocation reports `truncated`/`continues` and goes on by cron.
async fn reconcile_now(mut req: Request, env: &Env) -> AppResult<Response> {
    let text = req.text().await.unwrap_or_default();
    let body: ReconcileRequest = if text.trim().is_empty() {
        ReconcileRequest::default()
    } else {
        serde_json::from_str(&text).map_err(|_| {
            AppError::BadRequest(
                "invalid_json",
                r#"the body is empty or {"full":true|false}"#.into(),
            )
        })?
    };
    let report = reconcile::run(
        env,
        reconcile::Start::Manual { full: body.full },
        config::invocation_budget(env),
    )
    .await?;
    Ok(Response::from_json(&report)?)
}

/// `received` until processed, then the outcome, with `applied`/`ignored` read as `processed`.
fn delivery_status(d: &DeliveryRow) -> &'static str {
    match (d.processed_at.as_deref(), d.outcome.as_deref()) {
        (None, _) => "received",
        (Some(_), Some("stale")) => "stale",
        (Some(_), Some("dead")) => "dead",
        _ => "processed",
    }
}

fn delivery_json(d: DeliveryRow) -> Value {
    let status = delivery_status(&d);
    let body = d
        .body
        .as_deref()
        .map(|b| serde_json::from_str::<Value>(b).unwrap_or(Value::Null));
    let mut v = serde_json::to_value(DeliveryRow { body: None, ..d }).unwrap_or(Value::Null);
    v["status"] = json!(status);
    if let Some(b) = body {
        v["body"] = b;
    }
    v
}

/// A status filter: `received`, `processed`, or an outcome (the statement reads it).
fn status_filter(status: &str) -> AppResult<&'static str> {
    Ok(match status {
        // not processed yet; `unprocessed` and `pending` say the same in other words
        "received" | "unprocessed" | "pending" => "received",
        "processed" => "processed",
        "applied" => "applied",
        "ignored" => "ignored",
        "stale" => "stale",
        "dead" => "dead",
        _ => {
            return Err(AppError::BadRequest(
                "invalid_status",
                "status is one of received (or unprocessed, pending), processed, applied, ignored, stale, dead".into(),
            ))
        }
    })
}

const CURSOR_SEPARATOR: char = '~';

async fn list_deliveries(req: &Request, env: &Env) -> AppResult<Response> {
    let mut event_type = None;
    let mut resource_id = None;
    let mut status = None;
    let mut cursor = None;
    let mut limit = DEFAULT_PAGE;
    for (k, v) in filters(req) {
        match k.as_str() {
            "type" => event_type = Some(v),
            "resource_id" => resource_id = Some(v),
            "status" => status = Some(status_filter(&v)?),
            "cursor" => cursor = Some(v),
            "limit" => limit = parse_limit(&v)?,
            _ => {}
        }
    }
    let after = cursor.as_deref().map(parse_cursor).transpose()?;
    let db = sql::database(env)?;
    let mut rows = sql::list_deliveries(
        &db,
        &DeliveryFilter {
            event_type: event_type.as_deref(),
            resource_id: resource_id.as_deref(),
            status,
            after,
            limit,
        },
    )
    .await?;
    let has_more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor = if has_more {
        rows.last()
            .map(|d| format!("{}{CURSOR_SEPARATOR}{}", d.received_at, d.event_id))
    } else {
        None
    };
    let data: Vec<Value> = rows.into_iter().map(delivery_json).collect();
    Ok(Response::from_json(
        &json!({ "data": data, "has_more": has_more, "next_cursor": next_cursor }),
    )?)
}

async fn get_delivery(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let row = sql::load_delivery(&db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok(Response::from_json(&delivery_json(row))?)
}

async fn replay(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let generation = sql::reset_for_replay(&db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    // the reset row is durable and unprocessed: a failed send is picked up by the sweeper
    let enqueued = queue::enqueue(env, DeliveryMessage::new(id, generation))
        .await
        .is_ok();
    Ok(Response::from_json(&json!({
        "replayed": true,
        "event_id": id,
        "generation": generation,
        "enqueued": enqueued,
    }))?
    .with_status(202))
}

async fn get_resource(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let resource = sql::load_resource(&db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let effects = sql::load_effects(&db, id).await?;
    let history = sql::load_history(&db, id).await?;
    let mut v = serde_json::to_value(resource).map_err(|e| AppError::Internal(e.to_string()))?;
    v["effects"] = json!(effects);
    v["history"] = json!(history);
    Ok(Response::from_json(&v)?)
}

#[derive(Deserialize)]
struct TransitionRequest {
    to: String,
    reason: String,
    #[serde(default)]
    order_ref: Option<String>,
    #[serde(default)]
    amount: Option<String>,
    #[serde(default)]
    currency: Option<String>,
}

/// Longest manual reason, in Unicode characters (CONTRACT §5).
const MAX_REASON_CHARS: usize = 500;
/// Longest order_ref / amount / currency an operator may type.
const MAX_FIELD_CHARS: usize = 200;

/// An optional text field of the transition body: trimmed, empty as absent, bounded.
fn optional_field<'a>(value: Option<&'a str>, name: &'static str) -> AppResult<Option<&'a str>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v.chars().count() > MAX_FIELD_CHARS || v.chars().any(char::is_control) {
        return Err(AppError::BadRequest(
            "invalid_field",
            format!("{name} is 1 to {MAX_FIELD_CHARS} printable characters"),
        ));
    }
    Ok(Some(v))
}

async fn manual_transition(mut req: Request, env: &Env, id: &str) -> AppResult<Response> {
    let kind = resource_kind_of(id).ok_or_else(|| {
        AppError::BadRequest(
            "invalid_resource_id",
            "a resource id is inv_, wdr_ or pcd_ and 1 to 64 letters or digits".into(),
        )
    })?;
    let body: TransitionRequest = req.json().await.map_err(|_| {
        AppError::BadRequest(
            "invalid_json",
            r#"the body is {"to":"<state>","reason":"<why>"} with optional "order_ref", "amount", "currency""#.into(),
        )
    })?;
    let reason = body.reason.trim();
    // characters as sent, not bytes: a 200-character Chinese reason is 600 bytes and valid;
    // one that is only blanks says nothing and is refused
    if reason.is_empty() || body.reason.chars().count() > MAX_REASON_CHARS {
        return Err(AppError::BadRequest(
            "invalid_reason",
            format!("a reason of 1 to {MAX_REASON_CHARS} characters is required"),
        ));
    }
    let order_ref = optional_field(body.order_ref.as_deref(), "order_ref")?;
    let amount = optional_field(body.amount.as_deref(), "amount")?;
    let currency = optional_field(body.currency.as_deref(), "currency")?;
    let to = state_of(kind, body.to.trim()).ok_or_else(|| {
        AppError::BadRequest(
            "invalid_state",
            format!("`{}` is not a state of a {}", body.to.trim(), kind.as_str()),
        )
    })?;
    let db = sql::database(env)?;
    let result = transition::apply(
        &db,
        &Change {
            resource_id: id,
            kind,
            to,
            order_ref,
            amount,
            currency,
            cause_kind: CauseKind::Manual,
            cause: reason,
            delivery: None,
        },
    )
    .await?;
    // recorded either way (CONTRACT §3: anything the guard refuses is a recorded no-op), with
    // the delivery outcomes' words: applied, or stale
    let detail = format!(
        "{id} to {}: now {}; reason: {reason}",
        to.as_str(),
        result.status.map_or("absent", paymos_core::State::as_str)
    );
    let outcome = if result.applied { "applied" } else { "stale" };
    crate::log::line("manual_transition", "-", outcome, Some(&detail));
    crate::effects::send_released(env, &result.released).await;
    Ok(Response::from_json(
        &json!({ "applied": result.applied, "status": result.status }),
    )?)
}
