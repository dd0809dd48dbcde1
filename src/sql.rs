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
    /// Why it ended as it did when the outcome alone does not say (e.g. `livemode_mismatch`).
    pub reason: Option<String>,
    pub generation: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

const DELIVERY_COLUMNS: &str = "event_id, resource_id, event_type, received_at, processed_at, \
     outcome, attempts, last_error, enqueued_at, replays, reason, generation";

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

/// Stored, acknowledged, and recorded as ignored, with the reason (unknown event type,
/// livemode mismatch).
pub async fn mark_ignored(db: &D1Database, event_id: &str, reason: &str) -> Result<()> {
    db.prepare(format!(
        "UPDATE webhook_delivery SET processed_at = {NOW}, outcome = 'ignored', reason = ?2, \
           last_error = NULL \
         WHERE event_id = ?1 AND processed_at IS NULL"
    ))
    .bind(&[text(event_id), text(reason)])?
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
/// Only for the generation the message was sent for (`None`: a message from before
/// generations, any): after an operator's replay the old message's verdict is void.
/// `true` when the row was marked.
pub async fn mark_dead(db: &D1Database, event_id: &str, generation: Option<i64>) -> Result<bool> {
    let row: Option<serde_json::Value> = db
        .prepare(format!(
            "UPDATE webhook_delivery SET outcome = 'dead', processed_at = {NOW}, \
             last_error = coalesce(last_error, 'queue retries exhausted') \
             WHERE event_id = ?1 AND processed_at IS NULL AND (?2 IS NULL OR generation = ?2) \
             RETURNING event_id"
        ))
        .bind(&[text(event_id), generation.map_or(JsValue::NULL, int)])?
        .first(None)
        .await?;
    Ok(row.is_some())
}

/// Deliveries left unprocessed for longer than `older_than_seconds` since their last enqueue,
/// marked as enqueued now (the caller sends them), with their generation. Oldest first.
pub async fn claim_unprocessed(
    db: &D1Database,
    older_than_seconds: i64,
    limit: u32,
) -> Result<Vec<(String, i64)>> {
    #[derive(Deserialize)]
    struct Row {
        event_id: String,
        generation: i64,
    }
    let cutoff = format!("-{} seconds", older_than_seconds.max(0));
    let sql = format!(
        "UPDATE webhook_delivery SET enqueued_at = {NOW} WHERE event_id IN ( \
           SELECT event_id FROM webhook_delivery \
           WHERE processed_at IS NULL \
             AND coalesce(enqueued_at, received_at) <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
           ORDER BY coalesce(enqueued_at, received_at) LIMIT ?2) \
         RETURNING event_id, generation"
    );
    let rows: Vec<Row> = db
        .prepare(sql)
        .bind(&[text(&cutoff), int(i64::from(limit))])?
        .all()
        .await?
        .results()?;
    Ok(rows
        .into_iter()
        .map(|r| (r.event_id, r.generation))
        .collect())
}

/// An operator's replay: the delivery becomes unprocessed again, in a new generation, and is
/// re-enqueued. Its new generation; `None` when there is no such delivery.
pub async fn reset_for_replay(db: &D1Database, event_id: &str) -> Result<Option<i64>> {
    db.prepare(format!(
        "UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL, reason = NULL, \
         attempts = 0, last_error = NULL, replays = replays + 1, generation = generation + 1, \
         enqueued_at = {NOW} \
         WHERE event_id = ?1 RETURNING generation"
    ))
    .bind(&[text(event_id)])?
    .first(Some("generation"))
    .await
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
               order_ref = coalesce(resource.order_ref, excluded.order_ref), \
               amount = coalesce(excluded.amount, resource.amount), \
               currency = coalesce(excluded.currency, resource.currency), \
               transition_token = excluded.transition_token, updated_at = {NOW} \
             WHERE resource.status IN (SELECT value FROM json_each(?8))"
        ))
    } else {
        db.prepare(format!(
            "UPDATE resource SET previous_status = status, status = ?3, \
               order_ref = coalesce(order_ref, ?4), amount = coalesce(?5, amount), \
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

    // 4. Facts learned late (a stale event, reconciliation, an operator) fill what the
    //    resource and its effects lack, whatever the guard decided: a fulfilment made before
    //    the order_ref was known gets it now. A known value is never overwritten.
    if p.order_ref.is_some() || p.amount.is_some() || p.currency.is_some() {
        stmts.push(
            db.prepare(format!(
                "UPDATE resource SET order_ref = coalesce(order_ref, ?2), \
                   amount = coalesce(amount, ?3), currency = coalesce(currency, ?4), updated_at = {NOW} \
                 WHERE id = ?1 AND ((order_ref IS NULL AND ?2 IS NOT NULL) \
                   OR (amount IS NULL AND ?3 IS NOT NULL) OR (currency IS NULL AND ?4 IS NOT NULL))"
            ))
            .bind(&[
                text(p.resource_id),
                opt_text(p.order_ref),
                opt_text(p.amount),
                opt_text(p.currency),
            ])?,
        );
        stmts.push(
            db.prepare(
                "UPDATE effect SET order_ref = coalesce(effect.order_ref, r.order_ref), \
                   amount = coalesce(effect.amount, r.amount), currency = coalesce(effect.currency, r.currency) \
                 FROM resource r \
                 WHERE effect.resource_id = ?1 AND r.id = ?1 \
                   AND ((effect.order_ref IS NULL AND r.order_ref IS NOT NULL) \
                     OR (effect.amount IS NULL AND r.amount IS NOT NULL) \
                     OR (effect.currency IS NULL AND r.currency IS NOT NULL))",
            )
            .bind(&[text(p.resource_id)])?,
        );
    }

    // 5. The delivery's outcome, written once: a second consumer of the same delivery finds
    //    processed_at set and changes nothing. One exception: a copy that applied the
    //    transition after the dead-letter consumer marked the delivery dead (it loaded the
    //    row before) overrides `dead`, so the archive never says dead of what was applied.
    if let Some(event_id) = p.delivery {
        stmts.push(
            db.prepare(format!(
                "UPDATE webhook_delivery SET processed_at = {NOW}, last_error = NULL, reason = NULL, \
                   outcome = CASE WHEN EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3) \
                                  THEN 'applied' ELSE 'stale' END \
                 WHERE event_id = ?1 AND (processed_at IS NULL OR (outcome = 'dead' \
                   AND EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3)))"
            ))
            .bind(&[text(event_id), text(p.resource_id), text(p.token)])?,
        );
    }

    // 6. Read back what happened.
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

/// A reconciliation run as kept in D1 between invocations.
#[derive(Debug, Clone, Deserialize)]
pub struct ReconciliationRun {
    pub id: i64,
    pub full_walk: i64,
    pub paid_since: Option<i64>,
    pub cursor: Option<String>,
    pub pages: i64,
}

const RUN_COLUMNS: &str = "id, full_walk, paid_since, cursor, pages";

/// The unfinished run to continue, if any (the newest; older ones were superseded).
pub async fn open_reconciliation(db: &D1Database) -> Result<Option<ReconciliationRun>> {
    db.prepare(format!(
        "UPDATE reconciliation_run SET invocations = invocations + 1, updated_at = {NOW} \
         WHERE id = (SELECT max(id) FROM reconciliation_run WHERE state = 'running') \
         RETURNING {RUN_COLUMNS}"
    ))
    .first(None)
    .await
}

/// The newest run, whatever its state, for `GET /admin/api/reconcile` and the metrics.
pub struct LatestRun {
    pub run: ReconciliationRun,
    pub state: String,
    pub error: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
}

pub async fn latest_reconciliation(db: &D1Database) -> Result<Option<LatestRun>> {
    #[derive(Deserialize)]
    struct Row {
        id: i64,
        full_walk: i64,
        paid_since: Option<i64>,
        cursor: Option<String>,
        pages: i64,
        state: String,
        error: Option<String>,
        started_at: String,
        finished_at: Option<String>,
    }
    let row: Option<Row> = db
        .prepare(format!(
            "SELECT {RUN_COLUMNS}, state, error, started_at, finished_at FROM reconciliation_run \
             ORDER BY id DESC LIMIT 1"
        ))
        .first(None)
        .await?;
    Ok(row.map(|r| LatestRun {
        run: ReconciliationRun {
            id: r.id,
            full_walk: r.full_walk,
            paid_since: r.paid_since,
            cursor: r.cursor,
            pages: r.pages,
        },
        state: r.state,
        error: r.error,
        started_at: r.started_at,
        finished_at: r.finished_at,
    }))
}

/// Opens a new run; any run still open is closed as superseded (its findings stay on record).
pub async fn start_reconciliation(
    db: &D1Database,
    full: bool,
    paid_since: Option<i64>,
) -> Result<ReconciliationRun> {
    let results = db
        .batch(vec![
            db.prepare(format!(
                "UPDATE reconciliation_run SET state = 'truncated', \
                   error = 'superseded by a newer run', finished_at = {NOW}, updated_at = {NOW} \
                 WHERE state = 'running'"
            )),
            db.prepare(format!(
                "INSERT INTO reconciliation_run (full_walk, paid_since, invocations) VALUES (?1, ?2, 1) \
                 RETURNING {RUN_COLUMNS}"
            ))
            .bind(&[int(i64::from(full)), paid_since.map_or(JsValue::NULL, int)])?,
        ])
        .await?;
    results
        .last()
        .ok_or_else(|| worker::Error::RustError("empty batch result".into()))?
        .results::<ReconciliationRun>()?
        .into_iter()
        .next()
        .ok_or_else(|| worker::Error::RustError("the new run was not returned".into()))
}

pub async fn finish_reconciliation(
    db: &D1Database,
    run_id: i64,
    state: &str,
    error: Option<&str>,
) -> Result<()> {
    db.prepare(format!(
        "UPDATE reconciliation_run SET state = ?2, error = ?3, finished_at = {NOW}, updated_at = {NOW} \
         WHERE id = ?1"
    ))
    .bind(&[int(run_id), text(state), opt_text(error)])?
    .run()
    .await?;
    Ok(())
}

/// What the delivery table says of one paid invoice.
#[derive(Debug, Deserialize)]
pub struct PaidOnRecord {
    pub id: String,
    /// Some `invoice.paid` delivery is on record.
    #[serde(deserialize_with = "flag")]
    pub on_record: bool,
    /// The invoice's local status, if it has a row.
    pub status: Option<String>,
    /// An `invoice.paid` on record that shipped nothing: dead, or unprocessed for longer
    /// than the sweeper waits, while the invoice is not paid here.
    pub stuck_event_id: Option<String>,
    pub stuck_outcome: Option<String>,
}

fn flag<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    Ok(f64::deserialize(d)? != 0.0)
}

/// One lookup for a page of the provider's paid invoices.
pub async fn paid_deliveries_on_record(
    db: &D1Database,
    ids: &[&str],
    stuck_after_seconds: i64,
) -> Result<Vec<PaidOnRecord>> {
    let cutoff = format!("-{} seconds", stuck_after_seconds.max(0));
    db.prepare(
        "SELECT x.id, x.on_record, x.status, x.stuck_event_id, d.outcome AS stuck_outcome FROM ( \
           SELECT j.value AS id, \
             EXISTS (SELECT 1 FROM webhook_delivery w \
                     WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid') AS on_record, \
             (SELECT status FROM resource WHERE id = j.value) AS status, \
             (SELECT w.event_id FROM webhook_delivery w \
              WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid' \
                AND (w.outcome = 'dead' OR (w.processed_at IS NULL \
                     AND w.received_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2))) \
                AND NOT EXISTS (SELECT 1 FROM resource r WHERE r.id = j.value \
                                AND r.status IN ('paid', 'overpaid', 'refunded')) \
              ORDER BY w.received_at LIMIT 1) AS stuck_event_id \
           FROM json_each(?1) j) x \
         LEFT JOIN webhook_delivery d ON d.event_id = x.stuck_event_id",
    )
    .bind(&[json_list(ids), text(&cutoff)])?
    .all()
    .await?
    .results()
}

/// What a run found about one invoice.
pub enum Finding {
    Missing {
        invoice_id: String,
        order_ref: Option<String>,
        brought_to_paid: bool,
        status: Option<String>,
    },
    Unprocessed {
        invoice_id: String,
        order_ref: Option<String>,
        event_id: String,
        outcome: Option<String>,
        status: Option<String>,
    },
}

/// A page's findings and the run's progress, in one transaction. The findings' primary key
/// keeps an invoice from being listed twice in a run.
pub async fn record_reconciliation_page(
    db: &D1Database,
    run_id: i64,
    cursor: Option<&str>,
    pages: i64,
    checked: i64,
    findings: &[Finding],
) -> Result<()> {
    let mut stmts = Vec::with_capacity(findings.len() + 1);
    for f in findings {
        let (finding, invoice_id, order_ref, brought, status, event_id, outcome) = match f {
            Finding::Missing {
                invoice_id,
                order_ref,
                brought_to_paid,
                status,
            } => (
                "missing",
                invoice_id,
                order_ref,
                int(i64::from(*brought_to_paid)),
                status,
                None,
                None,
            ),
            Finding::Unprocessed {
                invoice_id,
                order_ref,
                event_id,
                outcome,
                status,
            } => (
                "unprocessed",
                invoice_id,
                order_ref,
                JsValue::NULL,
                status,
                Some(event_id.as_str()),
                outcome.as_deref(),
            ),
        };
        stmts.push(
            db.prepare(
                "INSERT INTO reconciliation_finding \
                   (run_id, finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome, seq) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
                   (SELECT coalesce(max(seq), 0) + 1 FROM reconciliation_finding WHERE run_id = ?1)) \
                 ON CONFLICT (run_id, finding, invoice_id) DO NOTHING",
            )
            .bind(&[
                int(run_id),
                text(finding),
                text(invoice_id),
                opt_text(order_ref.as_deref()),
                brought,
                opt_text(status.as_deref()),
                opt_text(event_id),
                opt_text(outcome),
            ])?,
        );
    }
    stmts.push(
        db.prepare(format!(
            "UPDATE reconciliation_run SET cursor = ?2, pages = pages + ?3, checked = checked + ?4, \
               updated_at = {NOW} WHERE id = ?1"
        ))
        .bind(&[int(run_id), opt_text(cursor), int(pages), int(checked)])?,
    );
    db.batch(stmts).await?;
    Ok(())
}

/// A run's report as far as it got.
pub struct ReconciliationReport {
    pub checked: i64,
    pub pages: i64,
    pub missing: Vec<serde_json::Value>,
    pub unprocessed: Vec<serde_json::Value>,
}

pub async fn reconciliation_report(db: &D1Database, run_id: i64) -> Result<ReconciliationReport> {
    #[derive(Deserialize)]
    struct Totals {
        checked: i64,
        pages: i64,
    }
    #[derive(Deserialize)]
    struct Row {
        finding: String,
        invoice_id: String,
        order_ref: Option<String>,
        brought_to_paid: Option<i64>,
        status: Option<String>,
        event_id: Option<String>,
        outcome: Option<String>,
    }
    let results = db
        .batch(vec![
            db.prepare("SELECT checked, pages FROM reconciliation_run WHERE id = ?1")
                .bind(&[int(run_id)])?,
            db.prepare(
                "SELECT finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome \
                 FROM reconciliation_finding WHERE run_id = ?1 ORDER BY seq",
            )
            .bind(&[int(run_id)])?,
        ])
        .await?;
    let totals = results
        .first()
        .map(|r| r.results::<Totals>())
        .transpose()?
        .and_then(|v| v.into_iter().next())
        .ok_or_else(|| worker::Error::RustError("reconciliation run vanished".into()))?;
    let rows: Vec<Row> = match results.get(1) {
        Some(r) => r.results()?,
        None => Vec::new(),
    };
    let mut report = ReconciliationReport {
        checked: totals.checked,
        pages: totals.pages,
        missing: Vec::new(),
        unprocessed: Vec::new(),
    };
    for r in rows {
        if r.finding == "missing" {
            report.missing.push(serde_json::json!({
                "id": r.invoice_id,
                "order_ref": r.order_ref,
                "brought_to_paid": r.brought_to_paid.unwrap_or(0) != 0,
                "status": r.status,
            }));
        } else {
            report.unprocessed.push(serde_json::json!({
                "id": r.invoice_id,
                "order_ref": r.order_ref,
                "event_id": r.event_id,
                "outcome": r.outcome,
                "status": r.status,
            }));
        }
    }
    Ok(report)
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
