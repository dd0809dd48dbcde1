//! `GET /admin/api/metrics` (interface §9): facts from D1 (kept counts and indexes over the
//! working set, one batch: `METRICS_FACTS` says which fact reads what), the
//! request counters (flushed ones from D1 plus this isolate's unflushed ones), the last
//! reconciliation and configuration warnings; JSON, or the Prometheus text format.

use crate::counters::{self, REFUSED, SIGNATURE_VERIFIED};
use crate::error::AppResult;
use crate::sql::{self, CounterRow, MetricsFacts};
use crate::{config, reconcile};
use paymos_core::alerts::{ReconciliationFacts, SIGNATURE_WINDOW_SECONDS};
use paymos_core::time::{iso_minute, unix_of_iso};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write;
use worker::{D1Database, Env};

/// Everything the metrics and the alerts read.
pub struct Snapshot {
    pub facts: MetricsFacts,
    /// (status code, reason code) → refusals in the last hour.
    pub refused_hour: BTreeMap<(String, String), i64>,
    pub refused_total: BTreeMap<(String, String), i64>,
    /// 401 refusals in the last 15 minutes (a burst means a secret rotated on one side).
    pub signature_refusals_burst: i64,
    /// secret id → accepted signatures since the beginning.
    pub verified_total: BTreeMap<String, i64>,
    pub reconciliation: Option<reconcile::Latest>,
    pub warnings: Vec<String>,
    /// The database's size and the archive's state (interface §10).
    pub archive: crate::archive::Status,
}

fn split_label(label: &str) -> (String, String) {
    match label.split_once(' ') {
        Some((status, code)) => (status.to_string(), code.to_string()),
        None => (label.to_string(), String::new()),
    }
}

pub async fn snapshot(env: &Env, db: &D1Database) -> AppResult<Snapshot> {
    let now = crate::clock::now_seconds();
    let hour_bucket = iso_minute(now - 3600);
    let burst_bucket = iso_minute(now - SIGNATURE_WINDOW_SECONDS);
    let (facts, rows) = sql::metrics(db, &hour_bucket, &burst_bucket).await?;
    let mut s = Snapshot {
        facts,
        refused_hour: BTreeMap::new(),
        refused_total: BTreeMap::new(),
        signature_refusals_burst: 0,
        verified_total: BTreeMap::new(),
        reconciliation: reconcile::latest(env, Some(reconcile::LISTED)).await?,
        warnings: config::warnings(env),
        archive: crate::archive::status(env, db).await?,
    };
    let mut add = |scope: &str, name: &str, label: &str, n: i64| match (scope, name) {
        ("hour", REFUSED) => *s.refused_hour.entry(split_label(label)).or_insert(0) += n,
        ("total", REFUSED) => *s.refused_total.entry(split_label(label)).or_insert(0) += n,
        ("burst", REFUSED) if label.starts_with("401 ") => s.signature_refusals_burst += n,
        ("total", SIGNATURE_VERIFIED) => {
            *s.verified_total.entry(label.to_string()).or_insert(0) += n
        }
        _ => {}
    };
    for CounterRow {
        scope,
        name,
        label,
        count,
    } in &rows
    {
        add(scope, name, label, *count);
    }
    // this isolate's counts not flushed yet: in every scope they fall in
    for ((name, label), n) in counters::unflushed_since(&hour_bucket) {
        add("hour", name, &label, n as i64);
    }
    for ((name, label), n) in counters::unflushed_since(&burst_bucket) {
        add("burst", name, &label, n as i64);
    }
    for ((name, label), n) in counters::unflushed_since("") {
        add("total", name, &label, n as i64);
    }
    // every configured secret, even one that verified nothing yet (an old one, safe to remove)
    if let Ok(receive) = config::receive_config(env) {
        for id in &receive.secret_ids {
            s.verified_total.entry(id.clone()).or_insert(0);
        }
    }
    Ok(s)
}

impl Snapshot {
    /// Refused signatures (401) since the beginning: the `signature_refusals` alert's mark.
    pub fn signature_refusals_total(&self) -> i64 {
        let refused = self.refused_total.iter();
        refused
            .filter(|((status, _), _)| status == "401")
            .map(|(_, n)| n)
            .sum()
    }

    /// The last reconciliation as alerts read it.
    pub fn reconciliation_facts(&self) -> Option<ReconciliationFacts> {
        let r = &self.reconciliation.as_ref()?.report;
        Some(ReconciliationFacts {
            state: r.state.clone(),
            ok: r.ok,
            // counted on the run: the report lists only its first findings here
            missing: r.missing_count,
            doubled: r.doubled.len() as i64,
            error: r.error.clone(),
        })
    }

    pub fn json(&self) -> Value {
        let f = &self.facts;
        let by_reason: BTreeMap<String, i64> = self
            .refused_hour
            .iter()
            .map(|((status, code), n)| (format!("{status} {code}"), *n))
            .collect();
        let by_status = |status: &str| -> i64 {
            self.refused_hour
                .iter()
                .filter(|((s, _), _)| s == status)
                .map(|(_, n)| n)
                .sum()
        };
        json!({
            "deliveries": {
                // dead: not dismissed (interface §5, §9); dismissed: dead, handled by an operator
                "by_outcome": { "applied": f.applied, "stale": f.stale, "ignored": f.ignored, "dead": f.dead, "dismissed": f.dismissed },
                "unprocessed": f.unprocessed,
                "oldest_unprocessed_seconds": f.oldest_unprocessed_seconds,
                "dead": f.dead,
                "dismissed": f.dismissed,
                "last_received_at": f.last_received_at,
                "livemode_mismatches": f.livemode_mismatches,
            },
            "effects": {
                "by_dispatch": { "pending": f.effects_pending, "delivered": f.effects_delivered, "dead": f.effects_dead, "dismissed": f.effects_dismissed, "cancelled": f.effects_cancelled },
                "awaiting_order_ref": f.effects_awaiting_order_ref,
                "oldest_pending_seconds": f.oldest_pending_effect_seconds,
            },
            "refused_last_hour": {
                "total": self.refused_hour.values().sum::<i64>(),
                "401": by_status("401"),
                "400": by_status("400"),
                "413": by_status("413"),
                "by_reason": by_reason,
            },
            "signatures": self.verified_total.iter()
                .map(|(secret, n)| json!({ "secret": secret, "verified": n }))
                .collect::<Vec<_>>(),
            "reconciliation": self.reconciliation,
            "alerts_open": f.alerts_open,
            "config": { "warnings": self.warnings },
            "database": self.archive.database_json(),
            "archive": self.archive.archive_json(),
        })
    }

    /// The Prometheus text exposition format (0.0.4): `# HELP`, `# TYPE`, then samples.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        self.deliveries_text(&mut out);
        self.effects_text(&mut out);
        self.requests_text(&mut out);
        self.reconciliation_text(&mut out);
        out.push_str(&self.archive.prometheus());
        out
    }

    /// Deliveries by outcome, the backlog, dead ones, mismatches, the last one's time.
    fn deliveries_text(&self, out: &mut String) {
        let f = &self.facts;
        family(
            out,
            "paymos_deliveries",
            "gauge",
            "Deliveries on record by outcome (unprocessed: not processed yet; dead: not dismissed; dismissed: dead, handled by an operator).",
            &labelled(
                "outcome",
                &[
                    ("applied", f.applied),
                    ("stale", f.stale),
                    ("ignored", f.ignored),
                    ("dead", f.dead),
                    ("dismissed", f.dismissed),
                    ("unprocessed", f.unprocessed),
                ],
            ),
        );
        let last = f
            .last_received_at
            .as_deref()
            .and_then(unix_of_iso)
            .unwrap_or(0);
        gauges(
            out,
            &[
                (
                    "paymos_deliveries_unprocessed",
                    "Deliveries received and not processed yet.",
                    f.unprocessed,
                ),
                (
                    "paymos_deliveries_oldest_unprocessed_seconds",
                    "Age of the oldest unprocessed delivery (0 when there is none).",
                    f.oldest_unprocessed_seconds.unwrap_or(0),
                ),
                (
                    "paymos_deliveries_dead",
                    "Deliveries whose processing kept failing (replayable), not dismissed.",
                    f.dead,
                ),
                (
                    "paymos_livemode_mismatches",
                    "Deliveries ignored because their livemode is not this deployment's mode.",
                    f.livemode_mismatches,
                ),
                (
                    "paymos_last_delivery_timestamp_seconds",
                    "When the last delivery was received (unix seconds; 0: never).",
                    last,
                ),
            ],
        );
    }

    /// The outbox by dispatch state, its backlog and dead effects.
    fn effects_text(&self, out: &mut String) {
        let f = &self.facts;
        family(
            out,
            "paymos_effects",
            "gauge",
            "Effects in the outbox by dispatch state (dead: not dismissed; dismissed: dead, handled by an operator; cancelled: by a refund).",
            &labelled(
                "dispatch",
                &[
                    ("pending", f.effects_pending),
                    ("delivered", f.effects_delivered),
                    ("dead", f.effects_dead),
                    ("dismissed", f.effects_dismissed),
                    ("cancelled", f.effects_cancelled),
                ],
            ),
        );
        gauges(out, &[
            ("paymos_effects_pending", "Effects not delivered to the order system yet.", f.effects_pending),
            ("paymos_effects_dead", "Effects the order system did not take within the retry ladder (redeliverable), not dismissed.", f.effects_dead),
            ("paymos_effects_awaiting_order_ref", "Fulfilments waiting for their order_ref before they can be sent.", f.effects_awaiting_order_ref),
            ("paymos_effects_oldest_pending_seconds", "Age of the oldest pending effect (0 when there is none).", f.oldest_pending_effect_seconds.unwrap_or(0)),
        ]);
    }

    /// Requests refused by status and reason, signatures accepted by secret.
    fn requests_text(&self, out: &mut String) {
        let refused = |m: &BTreeMap<(String, String), i64>| -> Vec<(String, i64)> {
            m.iter()
                .map(|((status, code), n)| {
                    (
                        format!(
                            "{{status=\"{}\",reason=\"{}\"}}",
                            escape(status),
                            escape(code)
                        ),
                        *n,
                    )
                })
                .collect()
        };
        family(
            out,
            "paymos_requests_refused_total",
            "counter",
            "Requests refused (401, 400, 413) by status and reason, since counting began.",
            &refused(&self.refused_total),
        );
        family(
            out,
            "paymos_requests_refused_last_hour",
            "gauge",
            "Requests refused (401, 400, 413) by status and reason in the last hour.",
            &refused(&self.refused_hour),
        );
        family(
            out,
            "paymos_signatures_verified_total",
            "counter",
            "Accepted signatures by configured secret (first 8 hex of its SHA-256).",
            &self
                .verified_total
                .iter()
                .map(|(s, n)| (format!("{{secret=\"{}\"}}", escape(s)), *n))
                .collect::<Vec<_>>(),
        );
    }

    /// The last reconciliation's result, open alerts, configuration warnings.
    fn reconciliation_text(&self, out: &mut String) {
        let f = &self.facts;
        // before the first run there is no result: no sample (a 0 would read as a failed run)
        let r = self.reconciliation_facts();
        let last = |value: fn(&ReconciliationFacts) -> i64| -> Vec<(String, i64)> {
            r.iter().map(|r| (String::new(), value(r))).collect()
        };
        family(
            out,
            "paymos_reconciliation_last_ok",
            "gauge",
            "1 if the last reconciliation run finished with nothing missing or doubled (no sample before the first run).",
            &last(|r| i64::from(r.ok)),
        );
        family(
            out,
            "paymos_reconciliation_last_missing",
            "gauge",
            "Paid invoices the last reconciliation run found with no invoice.paid on record (no sample before the first run).",
            &last(|r| r.missing),
        );
        gauges(
            out,
            &[
                ("paymos_alerts_open", "Open alerts.", f.alerts_open),
                (
                    "paymos_config_warnings",
                    "Configuration problems (see /admin/api/metrics config.warnings).",
                    self.warnings.len() as i64,
                ),
            ],
        );
    }
}

/// Samples labelled `{label="value"}`, one per row.
fn labelled(label: &str, rows: &[(&str, i64)]) -> Vec<(String, i64)> {
    rows.iter()
        .map(|(v, n)| (format!("{{{label}=\"{v}\"}}"), *n))
        .collect()
}

/// One metric family: `# HELP`, `# TYPE`, then its samples (labels, value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, i64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// Families of one unlabelled gauge each: (name, help, value).
fn gauges(out: &mut String, rows: &[(&str, &str, i64)]) {
    for (name, help, value) in rows {
        family(out, name, "gauge", help, &[(String::new(), *value)]);
    }
}

/// Label values escaped as the text format wants (`\`, `"`, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
