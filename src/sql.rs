//! All SQL the Worker runs, in one place. D1 is SQLite: timestamps are ISO-8601 text in UTC
//! written by SQLite itself, so one clock orders everything.

use paymos_core::{EffectKind, Envelope, Guard, ResourceKind};
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

fn opt_text(s: Option<&str>) -> JsValue {
    s.map(JsValue::from_str).unwrap_or(JsValue::NULL)
}

fn int(i: i64) -> JsValue {
    JsValue::from_f64(i as f64)
}

fn json_list(items: &[&str]) -> JsValue {
    text(&serde_json::to_string(items).expect("a list of strings serialises"))
}

// ---------------------------------------------------------------- deliveries

/// Insert-or-nothing keyed by the event id. `true` when this call created the row,
/// `false` when the delivery was already on record (one index lookup, nothing written).
pub async fn insert_delivery(db: &D1Database, envelope: &Envelope, body: &str) -> Result<bool> {
    let sql = format!(
        "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, enqueued_at) \
         VALUES (?1, ?2, ?3, ?4, {NOW}) ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
    );
    let row: Option<serde_json::Value> = db
        .prepare(sql)
        .bind(&[
            text(&envelope.event_id),
            text(&envelope.resource_id),
            text(&envelope.event_type),
            text(body),
        ])?
        .first(None)
        .await?;
    Ok(row.is_some())
}

/// A delivery as the archive shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryRow {
    pub event_id: String,
    pub resource_id: String,
    pub event_type: String,
    pub received_at: String,
    pub processed_at: Option<String>,
    pub outcome: Option<String>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub enqueued_at: Option<String>,
    pub replays: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

const DELIVERY_COLUMNS: &str = "event_id, resource_id, event_type, received_at, processed_at, \
     outcome, attempts, last_error, enqueued_at, replays";

pub async fn load_delivery(db: &D1Database, event_id: &str) -> Result<Option<DeliveryRow>> {
    db.prepare(format!(
        "SELECT {DELIVERY_COLUMNS}, body FROM webhook_delivery WHERE event_id = ?1"
    ))
    .bind(&[text(event_id)])?
    .first(None)
    .await
}

/// Which deliveries a list shows; every field optional.
#[derive(Debug, Default)]
pub struct DeliveryFilter<'a> {
    pub event_type: Option<&'a str>,
    pub resource_id: Option<&'a str>,
    /// The SQL condition for a status filter (from a fixed set, never user text).
    pub status_condition: Option<&'static str>,
    /// Exclusive position to continue from: (received_at, event_id) of the last row seen.
    pub after: Option<(&'a str, &'a str)>,
    pub limit: u32,
}

/// Newest first. Fetches `limit + 1` rows so the caller knows whether another page exists.
pub async fn list_deliveries(db: &D1Database, f: &DeliveryFilter<'_>) -> Result<Vec<DeliveryRow>> {
    let status = f.status_condition.unwrap_or("1 = 1");
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_delivery \
         WHERE (?1 IS NULL OR event_type = ?1) AND (?2 IS NULL OR resource_id = ?2) AND ({status}) \
           AND (?3 IS NULL OR received_at < ?3 OR (received_at = ?3 AND event_id < ?4)) \
         ORDER BY received_at DESC, event_id DESC LIMIT ?5"
    );
    let (after_at, after_id) = match f.after {
        Some((at, id)) => (Some(at), Some(id)),
        None => (None, None),
    };
    db.prepare(sql)
        .bind(&[
            opt_text(f.event_type),
            opt_text(f.resource_id),
            opt_text(after_at),
            opt_text(after_id),
            int(i64::from(f.limit) + 1),
        ])?
        .all()
        .await?
        .results()
}

/// An unknown event type: stored, acknowledged, and recorded as ignored.
pub async fn mark_ignored(db: &D1Database, event_id: &str) -> Result<()> {
    db.prepare(format!(
        "UPDATE webhook_delivery SET processed_at = {NOW}, outcome = 'ignored', last_error = NULL \
         WHERE event_id = ?1 AND processed_at IS NULL"
    ))
    .bind(&[text(event_id)])?
    .run()
    .await?;
    Ok(())
}

/// Counts a failed consumer attempt and keeps its error; returns the attempts so far.
pub async fn record_failure(db: &D1Database, event_id: &str, error: &str) -> Result<i64> {
    let attempts: Option<i64> = db
        .prepare(
            "UPDATE webhook_delivery SET attempts = attempts + 1, last_error = ?2 \
             WHERE event_id = ?1 RETURNING attempts",
        )
        .bind(&[text(event_id), text(error)])?
        .first(Some("attempts"))
        .await?;
    Ok(attempts.unwrap_or(1))
}

/// The dead-letter queue's verdict: the delivery stays on record, visible and replayable.
pub async fn mark_dead(db: &D1Database, event_id: &str) -> Result<()> {
    db.prepare(format!(
        "UPDATE webhook_delivery SET outcome = 'dead', processed_at = {NOW}, \
         last_error = coalesce(last_error, 'queue retries exhausted') \
         WHERE event_id = ?1 AND processed_at IS NULL"
    ))
    .bind(&[text(event_id)])?
    .run()
    .await?;
    Ok(())
}

/// Deliveries left unprocessed for longer than `older_than_seconds` since their last enqueue,
/// marked as enqueued now (the caller sends them). Oldest first.
pub async fn claim_unprocessed(
    db: &D1Database,
    older_than_seconds: i64,
    limit: u32,
) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        event_id: String,
    }
    let cutoff = format!("-{} seconds", older_than_seconds.max(0));
    let sql = format!(
        "UPDATE webhook_delivery SET enqueued_at = {NOW} WHERE event_id IN ( \
           SELECT event_id FROM webhook_delivery \
           WHERE processed_at IS NULL \
             AND coalesce(enqueued_at, received_at) <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
           ORDER BY coalesce(enqueued_at, received_at) LIMIT ?2) \
         RETURNING event_id"
    );
    let rows: Vec<Row> = db
        .prepare(sql)
        .bind(&[text(&cutoff), int(i64::from(limit))])?
        .all()
        .await?
        .results()?;
    Ok(rows.into_iter().map(|r| r.event_id).collect())
}

/// An operator's replay: the delivery becomes unprocessed again and is re-enqueued.
/// `false` when there is no such delivery.
pub async fn reset_for_replay(db: &D1Database, event_id: &str) -> Result<bool> {
    let row: Option<serde_json::Value> = db
        .prepare(format!(
            "UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL, attempts = 0, \
             last_error = NULL, replays = replays + 1, enqueued_at = {NOW} \
             WHERE event_id = ?1 RETURNING event_id"
        ))
        .bind(&[text(event_id)])?
        .first(None)
        .await?;
    Ok(row.is_some())
}

// ---------------------------------------------------------------- resources

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResourceRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EffectRow {
    pub kind: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_ref: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    pub cause: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HistoryRow {
    /// The state entered.
    pub state: String,
    pub from: Option<String>,
    pub cause_kind: String,
    pub cause: String,
    pub at: String,
}

pub async fn load_resource(db: &D1Database, id: &str) -> Result<Option<ResourceRow>> {
    db.prepare(
        "SELECT id, kind, status, order_ref, amount, currency, created_at, updated_at \
         FROM resource WHERE id = ?1",
    )
    .bind(&[text(id)])?
    .first(None)
    .await
}

pub async fn load_effects(db: &D1Database, id: &str) -> Result<Vec<EffectRow>> {
    db.prepare(
        "SELECT kind, created_at, license_code, order_ref, amount, currency, cause \
         FROM effect WHERE resource_id = ?1 ORDER BY id",
    )
    .bind(&[text(id)])?
    .all()
    .await?
    .results()
}

pub async fn load_history(db: &D1Database, id: &str) -> Result<Vec<HistoryRow>> {
    db.prepare(
        "SELECT to_status AS state, from_status AS \"from\", cause_kind, cause, at \
         FROM resource_transition WHERE resource_id = ?1 ORDER BY id",
    )
    .bind(&[text(id)])?
    .all()
    .await?
    .results()
}

// ---------------------------------------------------------------- the guarded transition

/// The effect a transition may trigger, and the states it must come from for that.
pub struct EffectPlan {
    pub kind: EffectKind,
    /// Previous states that trigger it (checked in SQL against what the guard actually replaced).
    pub from: Vec<&'static str>,
    pub from_unknown: bool,
    /// Another effect that must already exist (a revocation needs a fulfilment).
    pub requires: Option<EffectKind>,
    pub license_code: Option<String>,
}

/// Everything one guarded transition writes, as data; `transition_statements` turns it into
/// one D1 batch, which D1 runs as one transaction.
pub struct TransitionPlan<'a> {
    pub resource_id: &'a str,
    pub kind: ResourceKind,
    pub to: &'static str,
    pub guard: Guard,
    pub effect: Option<EffectPlan>,
    pub order_ref: Option<&'a str>,
    pub amount: Option<&'a str>,
    pub currency: Option<&'a str>,
    /// `event`, `manual` or `reconciliation`.
    pub cause_kind: &'static str,
    pub cause: &'a str,
    /// Random per attempt: the later statements find the row only if this attempt's write won.
    pub token: &'a str,
    /// The delivery whose outcome this transaction records, if any.
    pub delivery: Option<&'a str>,
}

/// What the batch's last statement reads back.
#[derive(Debug, Deserialize)]
pub struct TransitionResult {
    pub status: Option<String>,
    pub applied: i64,
    pub outcome: Option<String>,
}

pub fn transition_statements(
    db: &D1Database,
    p: &TransitionPlan<'_>,
) -> Result<Vec<D1PreparedStatement>> {
    let mut stmts = Vec::with_capacity(5);
    let from = json_list(p.guard.from);

    // 1. The guarded write: the allowed-from check is in the WHERE, so no concurrent writer
    //    can slip between check and write.
    let guarded = if p.guard.from_unknown {
        db.prepare(format!(
            "INSERT INTO resource (id, kind, status, order_ref, amount, currency, transition_token) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE 1 \
             ON CONFLICT (id) DO UPDATE SET previous_status = resource.status, status = excluded.status, \
               order_ref = coalesce(excluded.order_ref, resource.order_ref), \
               amount = coalesce(excluded.amount, resource.amount), \
               currency = coalesce(excluded.currency, resource.currency), \
               transition_token = excluded.transition_token, updated_at = {NOW} \
             WHERE resource.status IN (SELECT value FROM json_each(?8))"
        ))
    } else {
        db.prepare(format!(
            "UPDATE resource SET previous_status = status, status = ?3, \
               order_ref = coalesce(?4, order_ref), amount = coalesce(?5, amount), \
               currency = coalesce(?6, currency), transition_token = ?7, updated_at = {NOW} \
             WHERE id = ?1 AND kind = ?2 AND status IN (SELECT value FROM json_each(?8))"
        ))
    };
    stmts.push(guarded.bind(&[
        text(p.resource_id),
        text(p.kind.as_str()),
        text(p.to),
        opt_text(p.order_ref),
        opt_text(p.amount),
        opt_text(p.currency),
        text(p.token),
        from,
    ])?);

    // 2. The history row, only if this attempt's write won.
    stmts.push(
        db.prepare(
            "INSERT INTO resource_transition (resource_id, from_status, to_status, cause_kind, cause) \
             SELECT id, previous_status, status, ?3, ?4 FROM resource \
             WHERE id = ?1 AND transition_token = ?2",
        )
        .bind(&[text(p.resource_id), text(p.token), text(p.cause_kind), text(p.cause)])?,
    );

    // 3. The effect, once per (resource, kind) by the UNIQUE constraint.
    if let Some(e) = &p.effect {
        let requires = e.requires.map(|k| k.as_str());
        stmts.push(
            db.prepare(
                "INSERT INTO effect (resource_id, kind, license_code, order_ref, amount, currency, cause) \
                 SELECT r.id, ?3, ?4, r.order_ref, r.amount, r.currency, ?5 FROM resource r \
                 WHERE r.id = ?1 AND r.transition_token = ?2 \
                   AND ((r.previous_status IS NULL AND ?6 = 1) \
                        OR r.previous_status IN (SELECT value FROM json_each(?7))) \
                   AND (?8 IS NULL OR EXISTS (SELECT 1 FROM effect x WHERE x.resource_id = r.id AND x.kind = ?8)) \
                 ON CONFLICT (resource_id, kind) DO NOTHING",
            )
            .bind(&[
                text(p.resource_id),
                text(p.token),
                text(e.kind.as_str()),
                opt_text(e.license_code.as_deref()),
                text(p.cause),
                int(i64::from(e.from_unknown)),
                json_list(&e.from),
                opt_text(requires),
            ])?,
        );
    }

    // 4. The delivery's outcome, written once: a second consumer of the same delivery finds
    //    processed_at set and changes nothing.
    if let Some(event_id) = p.delivery {
        stmts.push(
            db.prepare(format!(
                "UPDATE webhook_delivery SET processed_at = {NOW}, last_error = NULL, \
                   outcome = CASE WHEN EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3) \
                                  THEN 'applied' ELSE 'stale' END \
                 WHERE event_id = ?1 AND processed_at IS NULL"
            ))
            .bind(&[text(event_id), text(p.resource_id), text(p.token)])?,
        );
    }

    // 5. Read back what happened.
    stmts.push(
        db.prepare(
            "SELECT (SELECT status FROM resource WHERE id = ?1) AS status, \
                    EXISTS (SELECT 1 FROM resource WHERE id = ?1 AND transition_token = ?2) AS applied, \
                    (SELECT outcome FROM webhook_delivery WHERE event_id = ?3) AS outcome",
        )
        .bind(&[text(p.resource_id), text(p.token), opt_text(p.delivery)])?,
    );
    Ok(stmts)
}

/// Runs the plan as one batch (one transaction) and reads back the result.
pub async fn apply_transition(
    db: &D1Database,
    plan: &TransitionPlan<'_>,
) -> Result<TransitionResult> {
    let results = db.batch(transition_statements(db, plan)?).await?;
    let last = results
        .last()
        .ok_or_else(|| worker::Error::RustError("empty batch result".into()))?;
    last.results::<TransitionResult>()?
        .into_iter()
        .next()
        .ok_or_else(|| worker::Error::RustError("transition read-back returned no row".into()))
}

// ---------------------------------------------------------------- reconciliation

/// Of these invoice ids, the ones with no `invoice.paid` delivery on record.
pub async fn invoices_without_paid_delivery(db: &D1Database, ids: &[&str]) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
    }
    let rows: Vec<Row> = db
        .prepare(
            "SELECT value AS id FROM json_each(?1) WHERE value NOT IN ( \
               SELECT resource_id FROM webhook_delivery \
               WHERE event_type = 'invoice.paid' AND resource_id IN (SELECT value FROM json_each(?1)))",
        )
        .bind(&[json_list(ids)])?
        .all()
        .await?
        .results()?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DoubledEffect {
    pub resource_id: String,
    pub kind: String,
    pub count: i64,
}

/// Resources with more than one effect of a kind. The UNIQUE constraint makes this empty by
/// construction; reconciliation asks anyway, because that is what it is for.
pub async fn doubled_effects(db: &D1Database) -> Result<Vec<DoubledEffect>> {
    db.prepare(
        "SELECT resource_id, kind, count(*) AS count FROM effect \
         GROUP BY resource_id, kind HAVING count(*) > 1",
    )
    .all()
    .await?
    .results()
}
