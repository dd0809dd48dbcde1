//! The D1 calls of dismissals, over `paymos_core::statements`.

use super::audit::audit_outcome;
use super::{batch, first_row, load_delivery, DbError, DbResult, Results};
use paymos_core::admin::audit::{self, Record};
use paymos_core::statements as st;
use serde::Deserialize;
use worker::D1Database;

/// What a dismissal came to (interface §5), as its audit row says.
pub enum Dismissal {
    /// Dismissed now, or already: when, and the reason on record.
    Dismissed {
        at: String,
        reason: String,
        already: bool,
    },
    /// It is not dead (unprocessed, or processed otherwise; or an effect not dead).
    NotDead(String),
    Missing,
}

#[derive(Deserialize)]
struct DismissedRow {
    dismissed_at: String,
    dismiss_reason: String,
}

/// What is on record of a dismissed (or refused) one: when, why, and its state's word.
pub struct OnRecord {
    pub dismissed_at: Option<String>,
    pub dismiss_reason: Option<String>,
    pub state: String,
}

/// A dismissal's batch ran: its tally, its audit row (second to last: the outcome, decided in
/// the transaction on the write's own condition) and the write (last: the row when it was
/// dismissed now). The audit's word decides the answer; `on_record` (read after the batch,
/// only when nothing was dismissed now) gives the first dismissal's time and reason, or the
/// state that refused it.
pub(super) fn dismissal(results: &Results, on_record: Option<OnRecord>) -> DbResult<Dismissal> {
    let audit_at = results.len().saturating_sub(2);
    let outcome = audit_outcome(results, audit_at)?;
    Ok(match (outcome, on_record) {
        (audit::Outcome::Dismissed, _) => {
            let r: DismissedRow =
                results.expect(results.len().saturating_sub(1), "the dismissed one's row")?;
            Dismissal::Dismissed {
                at: r.dismissed_at,
                reason: r.dismiss_reason,
                already: false,
            }
        }
        (audit::Outcome::NotFound, _) | (_, None) => Dismissal::Missing,
        (
            audit::Outcome::Already,
            Some(OnRecord {
                dismissed_at: Some(at),
                dismiss_reason,
                ..
            }),
        ) => Dismissal::Dismissed {
            at,
            reason: dismiss_reason.unwrap_or_default(),
            already: true,
        },
        (audit::Outcome::Already | audit::Outcome::Conflict, Some(r)) => {
            Dismissal::NotDead(r.state)
        }
        (other, _) => {
            return Err(DbError::Unexpected {
                at: results.site(audit_at),
                what: format!("a dismissal recorded as {}", other.as_str()),
            })
        }
    })
}

/// Whether a dismissal's write (the batch's last statement) returned its row.
pub(super) fn dismissed_now(results: &Results) -> DbResult<bool> {
    Ok(first_row::<DismissedRow>(results, results.len().saturating_sub(1))?.is_some())
}

/// A dead delivery an operator has handled: out of the dead counts and alerts; its audit
/// row in the same batch.
pub async fn dismiss_delivery(
    db: &D1Database,
    event_id: &str,
    reason: &str,
    record: &Record,
) -> DbResult<Dismissal> {
    let batch_ = st::audited_dismiss_delivery_batch(event_id, reason, record);
    let results = batch(db, &batch_).await?;
    let on_record = if dismissed_now(&results)? {
        None
    } else {
        load_delivery(db, event_id).await?.map(|r| OnRecord {
            state: r.outcome.clone().unwrap_or_else(|| "unprocessed".into()),
            dismissed_at: r.dismissed_at,
            dismiss_reason: r.dismiss_reason,
        })
    };
    dismissal(&results, on_record)
}
