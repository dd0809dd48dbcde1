//! The D1 calls of operations, over `paymos_core::statements`.

use super::audit::audit_outcome;
use super::{all, batch, first, first_row, rows_of, run, DbResult};
use paymos_core::admin::audit::{self, Record};
use paymos_core::statements::{self as st, Arg, Bound};
use serde::{Deserialize, Serialize};
use worker::D1Database;

/// Adds an isolate's counts: each into its minute and into the running total.
pub async fn flush_counts(db: &D1Database, rows: &[(&str, &str, &str, u64)]) -> DbResult<()> {
    let mut stmts = Vec::with_capacity(rows.len() * 2);
    let mut totals: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
    for (bucket, name, label, n) in rows {
        stmts.push(st::FLUSH_COUNT.bind(vec![
            Arg::text(bucket),
            Arg::text(name),
            Arg::text(label),
            Arg::Int(*n as i64),
        ]));
        *totals.entry((name, label)).or_insert(0) += n;
    }
    for ((name, label), n) in totals {
        stmts.push(st::FLUSH_COUNT.bind(vec![
            Arg::text("total"),
            Arg::text(name),
            Arg::text(label),
            Arg::Int(n as i64),
        ]));
    }
    batch(db, &stmts).await?;
    Ok(())
}

pub async fn prune_counts(db: &D1Database, before_bucket: &str) -> DbResult<()> {
    run(db, st::PRUNE_COUNTS.bind(vec![Arg::text(before_bucket)])).await
}

/// What the metrics read from D1, in one row.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct MetricsFacts {
    pub applied: i64,
    pub stale: i64,
    pub ignored: i64,
    /// Dead and not dismissed.
    pub dead: i64,
    /// Dead and dismissed.
    pub dismissed: i64,
    /// When the newest dead delivery not dismissed went dead (unix ms).
    pub dead_mark: Option<i64>,
    pub unprocessed: i64,
    pub oldest_unprocessed_seconds: Option<i64>,
    pub last_received_at: Option<String>,
    pub livemode_mismatches: i64,
    pub livemode_mismatches_recent: i64,
    pub livemode_mark: Option<i64>,
    pub effects_pending: i64,
    pub effects_delivered: i64,
    /// Dead and not dismissed.
    pub effects_dead: i64,
    pub effects_dismissed: i64,
    pub effects_cancelled: i64,
    pub effects_dead_mark: Option<i64>,
    pub effects_awaiting_order_ref: i64,
    pub oldest_pending_effect_seconds: Option<i64>,
    pub alerts_open: i64,
}

/// A flushed counter: `scope` is `hour`, `burst` (15 minutes) or `total`.
#[derive(Debug, Deserialize)]
pub struct CounterRow {
    pub scope: String,
    pub name: String,
    pub label: String,
    pub count: i64,
}

/// The facts and the counters, in one batch.
pub async fn metrics(
    db: &D1Database,
    hour_bucket: &str,
    burst_bucket: &str,
) -> DbResult<(MetricsFacts, Vec<CounterRow>)> {
    let results = batch(
        db,
        &[
            st::METRICS_FACTS.bind(vec![]),
            st::METRICS_COUNTERS.bind(vec![Arg::text(hour_bucket), Arg::text(burst_bucket)]),
        ],
    )
    .await?;
    let facts = first_row::<MetricsFacts>(&results, 0)?.unwrap_or_default();
    let counters = results.rows(1)?;
    Ok((facts, counters))
}

/// An unresolved alert as the cron's decision needs it.
#[derive(Debug, Deserialize)]
pub struct KeptAlert {
    pub id: String,
    pub kind: String,
    pub state: String,
    pub acked_mark: Option<i64>,
    pub sent_at_unix: Option<i64>,
    #[serde(deserialize_with = "paymos_core::rows::flag")]
    pub reopened_unsent: bool,
}

pub async fn kept_alerts(db: &D1Database) -> DbResult<Vec<KeptAlert>> {
    all(db, st::KEPT_ALERTS.bind(vec![])).await
}

/// An alert as the admin API and the webhook show it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AlertRow {
    pub id: String,
    pub kind: String,
    pub severity: String,
    pub summary: String,
    pub count: i64,
    pub state: String,
    pub first_seen: String,
    pub last_seen: String,
    pub sent_at: Option<String>,
    pub sends: i64,
    pub last_send_error: Option<String>,
    pub acknowledged_at: Option<String>,
    pub resolved_at: Option<String>,
    /// What the last acknowledgement covered (the count it showed).
    pub acked_count: Option<i64>,
    /// Reopened by a new instance after an acknowledgement: the last time, and how often.
    pub reopened_at: Option<String>,
    pub reopens: i64,
}

pub async fn open_alert(
    db: &D1Database,
    id: &str,
    kind: &str,
    severity: &str,
    summary: &str,
    count: i64,
    mark: Option<i64>,
) -> DbResult<()> {
    run(
        db,
        st::OPEN_ALERT.bind(vec![
            Arg::text(id),
            Arg::text(kind),
            Arg::text(severity),
            Arg::text(summary),
            Arg::Int(count),
            Arg::opt_int(mark),
        ]),
    )
    .await
}

/// UPDATE_ALERT, for a batch of the alert run's writes.
pub fn update_alert_statement<'a>(
    id: &'a str,
    summary: &'a str,
    count: i64,
    mark: Option<i64>,
) -> Bound<'a> {
    st::UPDATE_ALERT.bind(alert_args(id, summary, count, mark))
}

/// An alert's id, summary, count and mark, as UPDATE_ALERT and REOPEN_ALERT take them.
fn alert_args<'a>(id: &'a str, summary: &'a str, count: i64, mark: Option<i64>) -> Vec<Arg<'a>> {
    vec![
        Arg::text(id),
        Arg::text(summary),
        Arg::Int(count),
        Arg::opt_int(mark),
    ]
}

/// RESOLVE_ALERT, for a batch of the alert run's writes.
pub fn resolve_alert_statement(id: &str) -> Bound<'_> {
    st::RESOLVE_ALERT.bind(vec![Arg::text(id)])
}

/// RECORD_SAMPLE, for a batch of the alert run's writes.
pub fn sample_statement<'a>(at: &'a str, f: &MetricsFacts) -> Bound<'a> {
    st::RECORD_SAMPLE.bind(vec![
        Arg::text(at),
        Arg::Int(f.unprocessed),
        Arg::opt_int(f.oldest_unprocessed_seconds),
        Arg::Int(f.dead),
        Arg::Int(f.effects_pending),
        Arg::Int(f.effects_delivered),
        Arg::Int(f.effects_dead),
        Arg::opt_int(f.oldest_pending_effect_seconds),
    ])
}

pub async fn update_alert(
    db: &D1Database,
    id: &str,
    summary: &str,
    count: i64,
    mark: Option<i64>,
) -> DbResult<()> {
    run(db, update_alert_statement(id, summary, count, mark)).await
}

/// An acknowledged alert with a new instance: open again (and sent by the caller).
pub async fn reopen_alert(
    db: &D1Database,
    id: &str,
    summary: &str,
    count: i64,
    mark: Option<i64>,
) -> DbResult<()> {
    run(
        db,
        st::REOPEN_ALERT.bind(alert_args(id, summary, count, mark)),
    )
    .await
}

/// An alert sent while D1 could not be read, put on record (resolved) once it can.
pub async fn record_past_alert(db: &D1Database, a: &AlertRow) -> DbResult<()> {
    run(
        db,
        st::RECORD_PAST_ALERT.bind(vec![
            Arg::text(&a.id),
            Arg::text(&a.kind),
            Arg::text(&a.severity),
            Arg::text(&a.summary),
            Arg::Int(a.count),
            Arg::text(&a.first_seen),
            Arg::text(&a.last_seen),
            Arg::Int(a.sends),
        ]),
    )
    .await
}

pub async fn prune_samples(db: &D1Database, before_minute: &str) -> DbResult<()> {
    run(db, st::PRUNE_SAMPLES.bind(vec![Arg::text(before_minute)])).await
}

/// The health charts' rows, in one batch: deliveries by received hour and what each is now
/// (from `since_hour`), refusals per hour and the cron's samples (from `since_minute`), and
/// the facts now (the current hour's newest sample).
pub async fn history(
    db: &D1Database,
    since_hour: &str,
    since_minute: &str,
) -> DbResult<(paymos_core::history::Rows, MetricsFacts)> {
    let results = batch(
        db,
        &[
            st::HISTORY_DELIVERIES.bind(vec![Arg::text(since_hour)]),
            st::HISTORY_REFUSALS.bind(vec![Arg::text(since_minute)]),
            st::HISTORY_SAMPLES.bind(vec![Arg::text(since_minute)]),
            st::METRICS_FACTS.bind(vec![]),
        ],
    )
    .await?;
    let facts = first_row::<MetricsFacts>(&results, 3)?.unwrap_or_default();
    let rows = paymos_core::history::Rows {
        deliveries: rows_of(&results, 0)?,
        refusals: rows_of(&results, 1)?,
        samples: rows_of(&results, 2)?,
    };
    Ok((rows, facts))
}

pub async fn alert_sent(db: &D1Database, id: &str) -> DbResult<()> {
    run(db, st::ALERT_SENT.bind(vec![Arg::text(id)])).await
}

pub async fn alert_send_failed(db: &D1Database, id: &str, error: &str) -> DbResult<()> {
    run(
        db,
        st::ALERT_SEND_FAILED.bind(vec![Arg::text(id), Arg::text(error)]),
    )
    .await
}

/// The acknowledgement and its audit row in one batch: `Acknowledged` (it exists and is not
/// resolved), `Conflict` (resolved already) or `NotFound`, as the row records it.
pub async fn ack_alert(db: &D1Database, id: &str, record: &Record) -> DbResult<audit::Outcome> {
    let results = batch(
        db,
        &[
            st::ACK_ALERT.bind(vec![Arg::text(id)]),
            st::audit_after(&st::AUDIT_ALERT_ACK, record),
        ],
    )
    .await?;
    audit_outcome(&results, 1)
}

pub async fn load_alert(db: &D1Database, id: &str) -> DbResult<Option<AlertRow>> {
    first(db, st::LOAD_ALERT.bind(vec![Arg::text(id)])).await
}

pub async fn list_alerts(db: &D1Database, limit: u32) -> DbResult<Vec<AlertRow>> {
    all(db, st::LIST_ALERTS.bind(vec![Arg::Int(i64::from(limit))])).await
}
