//! The D1 calls of deliveries, over `paymos_core::statements`.

use super::{all, batch, first, first_row, prepare, rejected, DbError, DbResult, Present, Site};
use paymos_core::admin::audit::Record;
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::Envelope;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::D1Database;

/// Insert-or-nothing keyed by the event id: the runtime's promise of the returned `event_id`,
/// present when this call created the row, null when the delivery was already on record (one
/// index lookup, nothing written). Not awaited here: the receive path chains it
/// (`receive::after_body`), and reads only that one column, no row deserialised through serde.
pub fn insert_delivery_start(
    db: &D1Database,
    envelope: &Envelope,
    body: &str,
) -> DbResult<JsValue> {
    let bound = st::INSERT_DELIVERY.bind(vec![
        Arg::text(&envelope.event_id),
        Arg::text(&envelope.resource_id),
        Arg::text(&envelope.event_type),
        Arg::text(body),
    ]);
    let statement = prepare(db, &bound)?;
    Ok(statement
        .first(Some("event_id"))
        .map_err(insert_delivery_failed)?
        .into())
}

/// The insert's promise rejected (`insert_delivery_start`), or could not be made.
pub fn insert_delivery_failed(e: JsValue) -> DbError {
    rejected(Site::statement(&st::INSERT_DELIVERY), e)
}

pub use paymos_core::rows::DeliveryRow;

pub async fn load_delivery(db: &D1Database, event_id: &str) -> DbResult<Option<DeliveryRow>> {
    first(db, st::LOAD_DELIVERY.bind(vec![Arg::text(event_id)])).await
}

/// Which deliveries a list shows; every field optional.
#[derive(Debug, Default)]
pub struct DeliveryFilter<'a> {
    pub event_type: Option<&'a str>,
    pub resource_id: Option<&'a str>,
    /// `received`, `processed`, or an outcome (checked by the caller).
    pub status: Option<&'a str>,
    /// Exclusive position to continue from: (received_at, event_id) of the last row seen.
    pub after: Option<(&'a str, &'a str)>,
    pub limit: u32,
}

/// Newest first. Fetches `limit + 1` rows so the caller knows whether another page exists.
pub async fn list_deliveries(
    db: &D1Database,
    f: &DeliveryFilter<'_>,
) -> DbResult<Vec<DeliveryRow>> {
    let (after_at, after_id) = f.after.unzip();
    // the statement whose index the filters can use
    let list = match (f.resource_id, f.status) {
        (Some(_), _) => &st::LIST_DELIVERIES_OF_RESOURCE,
        (None, Some("received")) => &st::LIST_DELIVERIES_RECEIVED,
        _ => &st::LIST_DELIVERIES,
    };
    all(
        db,
        list.bind(vec![
            Arg::opt(f.event_type),
            Arg::opt(f.resource_id),
            Arg::opt(f.status),
            Arg::opt(after_at),
            Arg::opt(after_id),
            Arg::Int(i64::from(f.limit) + 1),
        ]),
    )
    .await
}

/// Runs a statement; whether it returned a row (`RETURNING`: whether it wrote).
pub async fn returned_row(db: &D1Database, b: Bound<'_>) -> DbResult<bool> {
    let row: Option<Present> = first(db, b).await?;
    Ok(row.is_some())
}

/// What an operator's replay's reset found.
pub enum Reset {
    /// Reset, in this new generation (audited `replayed`).
    Done(i64),
    /// No such delivery (audited `not_found`).
    Absent,
    /// Its body is in the archive: nothing changed, nothing audited; the replay restores the
    /// body and resets it in one batch of its own (archive.rs).
    Archived,
}

/// An operator's replay: unprocessed again, in a new generation, with its audit row in the
/// same batch.
pub async fn reset_for_replay(db: &D1Database, event_id: &str, record: &Record) -> DbResult<Reset> {
    #[derive(Deserialize)]
    struct Row {
        generation: i64,
    }
    // the tally, the reset, and the audit row last (`audited_replay_batch`)
    let results = batch(db, &st::audited_replay_batch(event_id, record)).await?;
    let n = results.len();
    if let Some(r) = first_row::<Row>(&results, n.saturating_sub(2))? {
        return Ok(Reset::Done(r.generation));
    }
    // AUDIT_REPLAY writes `not_found` for an absent delivery, and nothing for an archived one
    let audited = first_row::<Present>(&results, n.saturating_sub(1))?.is_some();
    Ok(if audited {
        Reset::Absent
    } else {
        Reset::Archived
    })
}
