//! The D1 calls of the outbox, over `paymos_core::statements`.

use super::audit::audit_outcome;
use super::dismissals::{dismissal, dismissed_now};
use super::{
    all, batch, first, first_row, DbError, DbResult, Dismissal, EffectRow, OnRecord, Present,
};
use paymos_core::admin::audit::{self, Record};
use paymos_core::rows::flag;
use paymos_core::statements::{self as st, Arg, Bound};
use serde::Deserialize;
use worker::D1Database;

/// Every outcome of a dispatcher batch in one D1 batch (one transaction). Each statement
/// is guarded by `dispatch = 'pending'`, so an effect an operator changed meanwhile is left
/// as the operator left it.
///
/// Whether each statement returned a row (`DEFER_EFFECT`: whether this message holds the wait).
pub async fn record_dispatch_outcomes(
    db: &D1Database,
    statements: &[Bound<'_>],
) -> DbResult<Vec<bool>> {
    if statements.is_empty() {
        return Ok(Vec::new());
    }
    let results = batch(db, statements).await?;
    (0..statements.len())
        .map(|i| Ok(first_row::<Present>(&results, i)?.is_some()))
        .collect()
}

/// What an operator's redelivery came to.
pub enum Redelivery {
    /// Pending again, a fresh ladder; `true` when it awaits its order_ref (nothing to send yet).
    Pending {
        awaiting_order_ref: bool,
    },
    /// A cancelled fulfilment, or one whose invoice has a revocation: never sent again.
    Refused,
    Missing,
}

/// The redelivery and its audit row in one batch; the row's outcome (decided by the same
/// transaction, after the update) says which it was.
pub async fn redeliver_effect(
    db: &D1Database,
    effect_id: &str,
    record: &Record,
) -> DbResult<Redelivery> {
    #[derive(Deserialize)]
    struct Row {
        #[serde(deserialize_with = "flag")]
        awaiting_order_ref: bool,
    }
    // the tally, the redelivery, and the audit row last (`audited_redeliver_batch`)
    let results = batch(db, &st::audited_redeliver_batch(effect_id, record)).await?;
    let audit_at = results.len().saturating_sub(1);
    match audit_outcome(&results, audit_at)? {
        audit::Outcome::Redelivered => {
            let row: Row =
                results.expect(audit_at.saturating_sub(1), "the redelivered effect's row")?;
            Ok(Redelivery::Pending {
                awaiting_order_ref: row.awaiting_order_ref,
            })
        }
        audit::Outcome::Conflict => Ok(Redelivery::Refused),
        audit::Outcome::NotFound => Ok(Redelivery::Missing),
        other => Err(DbError::Unexpected {
            at: results.site(audit_at),
            what: format!("a redelivery recorded as {}", other.as_str()),
        }),
    }
}

/// What a pull-mode acknowledgement came to (`POST /effects/{id}/ack`).
pub enum EffectAck {
    /// Marked delivered now.
    Delivered,
    /// Delivered already (a repeated ack, or pushed): nothing changed.
    Already,
    /// Cancelled by its refund: never delivered.
    Cancelled,
    /// A fulfilment still awaiting its order_ref: not offered to ship yet.
    AwaitingOrderRef,
    Missing,
}

/// The ack and its audit row in one batch (`audited_ack_effect_batch`: the tally, the row,
/// the ack); the row's outcome says which it was, the effect as on record says why a refused
/// one was.
pub async fn ack_effect(db: &D1Database, effect_id: &str, record: &Record) -> DbResult<EffectAck> {
    let results = batch(db, &st::audited_ack_effect_batch(effect_id, record)).await?;
    let audit_at = results.len().saturating_sub(2);
    Ok(match audit_outcome(&results, audit_at)? {
        audit::Outcome::Delivered => EffectAck::Delivered,
        audit::Outcome::Already => EffectAck::Already,
        audit::Outcome::NotFound => EffectAck::Missing,
        audit::Outcome::Conflict => {
            let row: Option<EffectRow> =
                first(db, st::LOAD_EFFECT.bind(vec![Arg::text(effect_id)])).await?;
            match row {
                None => EffectAck::Missing,
                Some(e) if e.dispatch == "cancelled" => EffectAck::Cancelled,
                Some(_) => EffectAck::AwaitingOrderRef,
            }
        }
        other => {
            return Err(DbError::Unexpected {
                at: results.site(audit_at),
                what: format!("an effect ack recorded as {}", other.as_str()),
            })
        }
    })
}

/// A dead effect an operator has handled: out of the dead counts and alerts; its audit row
/// in the same batch.
pub async fn dismiss_effect(
    db: &D1Database,
    effect_id: &str,
    reason: &str,
    record: &Record,
) -> DbResult<Dismissal> {
    let batch_ = st::audited_dismiss_effect_batch(effect_id, reason, record);
    let results = batch(db, &batch_).await?;
    let on_record = if dismissed_now(&results)? {
        None
    } else {
        let row: Option<EffectRow> =
            first(db, st::LOAD_EFFECT.bind(vec![Arg::text(effect_id)])).await?;
        row.map(|e| OnRecord {
            state: e.dispatch,
            dismissed_at: e.dismissed_at,
            dismiss_reason: e.dismiss_reason,
        })
    };
    dismissal(&results, on_record)
}

/// The effects feed, oldest first; `limit + 1` rows so the caller knows about a next page.
/// In pull mode the page is marked served in the same batch (`paymos_core::statements::
/// feed_page`). Filtered by dispatch state (an order system pulling `pending`), it reads a
/// range of the (dispatch, id) index, so a page costs about its rows however long the history.
pub async fn list_effects(
    db: &D1Database,
    kind: Option<&str>,
    dispatch: Option<&str>,
    dismissed: Option<bool>,
    after_seq: Option<i64>,
    limit: u32,
    pull: Option<st::InFlight>,
) -> DbResult<Vec<EffectRow>> {
    let page = st::feed_page(kind, dispatch, dismissed, after_seq, limit, pull);
    match <[_; 1]>::try_from(page) {
        Ok([list]) => all(db, list).await,
        Err(page) => batch(db, &page).await?.rows(page.len() - 1),
    }
}
