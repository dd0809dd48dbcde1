//! Alerts (interface §9), evaluated by the 5-minute cron: the conditions come from the same
//! snapshot as the metrics, the decisions from the core (`paymos_core::alerts`), the alerts
//! are kept in D1 and sent to `ALERT_WEBHOOK_URL`, signed as effects are, once when they open
//! and again at most every 6 hours while they stay open, and again when a new instance
//! reopens an acknowledged one. A failed send is logged and tried again at the next run; it
//! never stops the sweeper (which runs before).
//!
//! An alert cannot depend on the store it watches: when the cron cannot read D1, it sends
//! `database_unavailable` without it (its id derived from the hour, so the copies of every
//! run in that hour collapse), logs it, and remembers the outage in the isolate, to put it on
//! record (resolved) once D1 answers again.

use crate::config::{self, ConfigError, SignedEndpoint};
use crate::error::{AppError, AppResult};
use crate::sql::{self, AlertRow, KeptAlert};
use crate::{effects, log, metrics, transition};
use paymos_core::alerts::{
    by_severity, database_unavailable, database_unavailable_id, decide, observe, Action, AlertKind,
    Facts, Kept, Observation, RUN_COST, SEND_COST,
};
use paymos_core::statements::Bound;
use paymos_core::time::{iso_minute, iso_timestamp};
use serde_json::json;
use std::cell::RefCell;
use worker::{D1Database, Env};

/// An alert webhook must answer within this long; the cron has other work.
const SEND_TIMEOUT_MS: u64 = 5_000;

/// This isolate's view of a D1 outage: since when it could not read D1, how many runs
/// failed, and the alert it sent for it last (with how many sends got through).
struct Outage {
    since: i64,
    runs: i64,
    last: Option<AlertRow>,
    first_id: String,
    sends: i64,
}

thread_local! {
    static OUTAGE: RefCell<Option<Outage>> = const { RefCell::new(None) };
}

/// One cron run: the facts observed, each kind's decision carried out, the sends made, as
/// many as `budget` leaves room for (the rest are decided again at the next run).
pub async fn evaluate(env: &Env, budget: u32) -> AppResult<()> {
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => return unavailable(env, &e.to_string()).await,
    };
    let snap = match metrics::snapshot(env, &db).await {
        Ok(s) => s,
        Err(AppError::Database(e)) => return unavailable(env, &e.to_string()).await,
        Err(e) => return Err(e),
    };
    recovered(&db).await;
    let observed = observe(&facts(env, &snap));
    let kept = sql::kept_alerts(&db).await?;
    let webhook = config::alert_webhook(env);
    let now = crate::clock::now_seconds();
    let minute = iso_minute(now);
    // the writes that send nothing (an update not due, a resolution) and this run's sample go
    // in one batch at the end: one D1 call, not one each
    let mut run = Run {
        db: &db,
        quiet: Vec::new(),
        resolved: Vec::new(),
    };
    let mut sends_left = budget.saturating_sub(RUN_COST) / SEND_COST;
    for kind in by_severity() {
        let o = observed.iter().find(|o| o.kind == kind);
        let k = kept.iter().find(|k| k.kind == kind.as_str());
        let state = k.map(|k| Kept {
            acknowledged: k.state == "acknowledged",
            sent_at: k.sent_at_unix,
            acked_mark: k.acked_mark,
            reopened_unsent: k.reopened_unsent,
        });
        let mut action = decide(o, state.as_ref(), now);
        if action.sends() {
            if sends_left == 0 {
                log::line("alert", "-", "deferred", Some(kind.as_str()));
                action = action.deferred();
            } else {
                sends_left -= 1;
            }
        }
        if let Some(id) = run.act(kind, action, o, k).await? {
            send(&db, &webhook, &id).await?;
        }
    }
    // what this run saw, for the health charts (the backlog and the outbox over time)
    run.quiet.push(sql::sample_statement(&minute, &snap.facts));
    sql::run_batch(&db, &run.quiet).await?;
    for (id, kind) in run.resolved {
        log::line("alert", id, "resolved", Some(kind));
    }
    Ok(())
}

/// What the alert conditions are decided from: the metrics' snapshot, and the burst size.
fn facts(env: &Env, snap: &metrics::Snapshot) -> Facts {
    let f = &snap.facts;
    Facts {
        dead_deliveries: f.dead,
        dead_deliveries_mark: f.dead_mark,
        dead_effects: f.effects_dead,
        dead_effects_mark: f.effects_dead_mark,
        oldest_unprocessed_seconds: f.oldest_unprocessed_seconds,
        oldest_pending_effect_seconds: f.oldest_pending_effect_seconds,
        pending_effects: f.effects_pending,
        unprocessed_deliveries: f.unprocessed,
        reconciliation: snap.reconciliation_facts(),
        livemode_mismatches_recent: f.livemode_mismatches_recent,
        livemode_mark: f.livemode_mark,
        signature_refusals_recent: snap.signature_refusals_burst,
        signature_refusals_total: snap.signature_refusals_total(),
        signature_burst: config::signature_burst(env),
        storage: Some(snap.archive.storage_facts()),
    }
}

/// One cron run's writes over the alerts kept in D1: those that send nothing wait in `quiet`
/// for one batch at the end.
struct Run<'a> {
    db: &'a D1Database,
    quiet: Vec<Bound<'a>>,
    resolved: Vec<(&'a str, &'static str)>,
}

impl<'a> Run<'a> {
    /// Carries out the core's decision for one kind; the id of the alert to send, if any.
    async fn act(
        &mut self,
        kind: AlertKind,
        action: Action,
        o: Option<&'a Observation>,
        k: Option<&'a KeptAlert>,
    ) -> AppResult<Option<String>> {
        let db = self.db;
        Ok(match action {
            Action::Nothing => None,
            Action::Open => {
                let o = o.expect("open only for an observation");
                let id = format!(
                    "alt_{}",
                    transition::hex(&transition::random_bytes::<12>()?)
                );
                sql::open_alert(
                    db,
                    &id,
                    kind.as_str(),
                    kind.severity(),
                    &o.summary,
                    o.count,
                    o.mark,
                )
                .await?;
                log::line("alert", &id, "opened", Some(kind.as_str()));
                Some(id)
            }
            Action::Update { send: false } => {
                let (o, k) = (o.expect("observed"), k.expect("kept"));
                self.quiet.push(sql::update_alert_statement(
                    &k.id, &o.summary, o.count, o.mark,
                ));
                None
            }
            Action::Update { send: true } => {
                // updated before its send: the message carries the count and summary now
                let (o, k) = (o.expect("observed"), k.expect("kept"));
                sql::update_alert(db, &k.id, &o.summary, o.count, o.mark).await?;
                Some(k.id.clone())
            }
            Action::Reopen => {
                let (o, k) = (o.expect("observed"), k.expect("kept"));
                sql::reopen_alert(db, &k.id, &o.summary, o.count, o.mark).await?;
                log::line("alert", &k.id, "reopened", Some(kind.as_str()));
                Some(k.id.clone())
            }
            Action::Resolve => {
                let k = k.expect("kept");
                self.quiet.push(sql::resolve_alert_statement(&k.id));
                self.resolved.push((&k.id, kind.as_str()));
                None
            }
        })
    }
}

/// D1 could not be read: `database_unavailable`, sent without D1, logged.
pub async fn unavailable(env: &Env, error: &str) -> AppResult<()> {
    let now = crate::clock::now_seconds();
    let id = database_unavailable_id(now);
    let (since, runs) = OUTAGE.with(|o| {
        let mut o = o.borrow_mut();
        let outage = o.get_or_insert_with(|| Outage {
            since: now,
            runs: 0,
            last: None,
            first_id: id.clone(),
            sends: 0,
        });
        outage.runs += 1;
        (outage.since, outage.runs)
    });
    let o = database_unavailable(since, runs, error);
    let alert = AlertRow {
        id: id.clone(),
        kind: o.kind.as_str().to_string(),
        severity: o.kind.severity().to_string(),
        summary: o.summary,
        count: o.count,
        state: "open".into(),
        first_seen: iso_timestamp(since),
        last_seen: iso_timestamp(now),
        sent_at: None,
        sends: 0,
        last_send_error: None,
        acknowledged_at: None,
        resolved_at: None,
        acked_count: None,
        reopened_at: None,
        reopens: 0,
    };
    log::line("alert", &id, "database_unavailable", Some(error));
    let sent = send_without_d1(env, &alert).await;
    OUTAGE.with(|o| {
        if let Some(outage) = o.borrow_mut().as_mut() {
            outage.sends += i64::from(sent);
            outage.last = Some(alert);
        }
    });
    Ok(())
}

/// `database_unavailable` sent to the alert webhook, if one is configured: whether it went.
/// The alert's id is the message's, so every copy within the hour is one message.
async fn send_without_d1(env: &Env, alert: &AlertRow) -> bool {
    let id = alert.id.as_str();
    let endpoint = match config::alert_webhook(env) {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => {
            let why = "ALERT_WEBHOOK_URL is not set: database_unavailable is only logged";
            log::line("alert", id, "not_sent", Some(why));
            return false;
        }
        Err(why) => {
            log::line("alert", id, "not_configured", Some(&why.to_string()));
            return false;
        }
    };
    match effects::post_signed(&endpoint, id, body(alert), SEND_TIMEOUT_MS).await {
        Ok(()) => {
            log::line("alert", id, "sent", Some(&alert.kind));
            true
        }
        Err(e) => {
            let why = format!("the alert webhook {e}");
            log::line("alert", id, "send_failed", Some(&why));
            false
        }
    }
}

/// D1 answers again: an outage this isolate saw is put on record, resolved (best effort: a
/// failed write keeps it for the next run; another isolate's outage is only in the logs).
async fn recovered(db: &D1Database) {
    let Some((first_id, sends, last)) = OUTAGE.with(|o| {
        o.borrow()
            .as_ref()
            .and_then(|x| Some((x.first_id.clone(), x.sends, x.last.clone()?)))
    }) else {
        return;
    };
    let record = AlertRow {
        id: first_id.clone(),
        sends,
        ..last
    };
    if sql::record_past_alert(db, &record).await.is_ok() {
        log::line(
            "alert",
            &first_id,
            "database_available",
            Some(&record.last_seen),
        );
        OUTAGE.with(|o| *o.borrow_mut() = None);
    }
}

/// The webhook body: exactly the contract's fields (interface §9).
fn body(a: &AlertRow) -> String {
    json!({
        "id": a.id,
        "kind": a.kind,
        "severity": a.severity,
        "summary": a.summary,
        "count": a.count,
        "first_seen": a.first_seen,
        "last_seen": a.last_seen,
    })
    .to_string()
}

/// The send's message id (`webhook-id` and `Idempotency-Key`): the alert's id for its first
/// message, `<id>_<n>` for the reminder after `n` messages delivered. A reminder is a new
/// message (Standard Webhooks keeps an id only for retries of one message), so a receiver that
/// drops copies by id keeps it; a failed send is retried under the same id (`sends` counts the
/// delivered ones). The body's `id` is always the alert's.
fn message_id(a: &AlertRow) -> String {
    if a.sends == 0 {
        a.id.clone()
    } else {
        format!("{}_{}", a.id, a.sends)
    }
}

async fn send(
    db: &D1Database,
    webhook: &Result<Option<SignedEndpoint>, ConfigError>,
    id: &str,
) -> AppResult<()> {
    let endpoint = match webhook {
        Ok(Some(e)) => e,
        // no URL: kept and shown on /admin, said here and in the metrics' warnings (interface
        // §4: never silently); the next run that finds it due says it again
        Ok(None) => {
            log::line(
                "alert",
                id,
                "not_sent",
                Some(
                    "ALERT_WEBHOOK_URL is not set: the alert is kept and shown on /admin, not sent",
                ),
            );
            return Ok(());
        }
        Err(why) => {
            let why = why.to_string();
            log::line("alert", id, "not_configured", Some(&why));
            sql::alert_send_failed(db, id, &why).await?;
            return Ok(());
        }
    };
    let Some(alert) = sql::load_alert(db, id).await? else {
        return Ok(());
    };
    match effects::post_signed(endpoint, &message_id(&alert), body(&alert), SEND_TIMEOUT_MS).await {
        Ok(()) => {
            sql::alert_sent(db, id).await?;
            log::line("alert", id, "sent", Some(&alert.kind));
        }
        Err(e) => {
            let error = format!("the alert webhook {e}");
            log::line("alert", id, "send_failed", Some(&error));
            sql::alert_send_failed(db, id, &error).await?;
        }
    }
    Ok(())
}
