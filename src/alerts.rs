//! Alerts (CONTRACT §9), evaluated by the 5-minute cron: the conditions come from the same
//! snapshot as the metrics, the decisions from the core (`paymos_core::alerts`), the alerts
//! are kept in D1 and sent to `ALERT_WEBHOOK_URL`, signed as effects are, once when they open
//! and again at most every 6 hours while they stay open. A failed send is logged and tried
//! again at the next run; it never stops the sweeper (which runs before).

use crate::config::{self, ConfigError, SignedEndpoint};
use crate::error::AppResult;
use crate::sql::{self, AlertRow};
use crate::{effects, log, metrics, transition};
use paymos_core::alerts::{decide, observe, Action, AlertKind, Facts, Kept};
use serde_json::json;
use worker::{D1Database, Date, Env};

/// An alert webhook must answer within this long; the cron has other work.
const SEND_TIMEOUT_MS: u64 = 5_000;

pub async fn evaluate(env: &Env) -> AppResult<()> {
    let db = sql::database(env)?;
    let snap = metrics::snapshot(env, &db).await?;
    let f = &snap.facts;
    let facts = Facts {
        dead_deliveries: f.dead,
        dead_effects: f.effects_dead,
        oldest_unprocessed_seconds: f.oldest_unprocessed_seconds,
        oldest_pending_effect_seconds: f.oldest_pending_effect_seconds,
        pending_effects: f.effects_pending,
        unprocessed_deliveries: f.unprocessed,
        reconciliation: snap.reconciliation_facts(),
        livemode_mismatches_recent: f.livemode_mismatches_recent,
        signature_refusals_recent: snap.signature_refusals_burst,
        signature_burst: config::signature_burst(env),
        storage: Some(snap.archive.storage_facts()),
    };
    let observed = observe(&facts);
    let kept = sql::kept_alerts(&db).await?;
    let webhook = config::alert_webhook(env);
    let now = (Date::now().as_millis() / 1000) as i64;
    for kind in AlertKind::ALL {
        let o = observed.iter().find(|o| o.kind == kind);
        let k = kept.iter().find(|k| k.kind == kind.as_str());
        let state = k.map(|k| Kept {
            acknowledged: k.state == "acknowledged",
            sent_at: k.sent_at_unix,
        });
        let send_id = match decide(o, state.as_ref(), now) {
            Action::Nothing => None,
            Action::Open => {
                let o = o.expect("open only for an observation");
                let id = format!(
                    "alt_{}",
                    transition::hex(&transition::random_bytes::<12>()?)
                );
                sql::open_alert(
                    &db,
                    &id,
                    kind.as_str(),
                    kind.severity(),
                    &o.summary,
                    o.count,
                )
                .await?;
                log::line("alert", &id, "opened", Some(kind.as_str()));
                Some(id)
            }
            Action::Update { send } => {
                let (o, k) = (o.expect("observed"), k.expect("kept"));
                sql::update_alert(&db, &k.id, &o.summary, o.count).await?;
                send.then(|| k.id.clone())
            }
            Action::Resolve => {
                let k = k.expect("kept");
                sql::resolve_alert(&db, &k.id).await?;
                log::line("alert", &k.id, "resolved", Some(kind.as_str()));
                None
            }
        };
        if let Some(id) = send_id {
            send(&db, &webhook, &id).await?;
        }
    }
    Ok(())
}

/// The webhook body: exactly the contract's fields (CONTRACT §9).
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
        // no URL: kept and shown on /admin, said here and in the metrics' warnings (CONTRACT
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
