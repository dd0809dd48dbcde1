//! `POST /deliveries/{event_id}/replay` and `POST /deliveries/replay` (bulk, interface §5).

use crate::config;
use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::sql;
use paymos_core::actors::sweep::{Chunks, Kind, ReplayFilter, CHUNK};
use paymos_core::admin::audit::{Outcome, Record};
use paymos_core::admin::{BulkReplay, DeliveryCursor};
use serde_json::json;
use worker::{Env, Response};

/// The delivery reset (a new generation) and enqueued again; the guard decides again. The
/// reset and its audit row are one batch.
pub async fn one(env: &Env, id: &str, record: &Record) -> AppResult<Response> {
    let db = sql::database(env)?;
    // an archived body is restored from R2 in the reset's batch (archive.rs)
    let generation = match crate::archive::reset_for_replay(env, &db, id, record).await {
        Ok(g) => g.ok_or(AppError::NotFound)?,
        // failed before its batch (the archived body unreadable, or archived again meanwhile):
        // it changed nothing, and is on record all the same (interface §11: every admin write)
        Err(e @ (AppError::Archive(_) | AppError::Conflict(..))) => {
            super::audit::record_after(env, record, Outcome::Failed).await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
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

/// Bulk replay: every matching delivery reset (a new generation) and re-enqueued, in chunks
/// of 100, within this invocation's budget (the core's `actors::sweep`); the guard decides
/// again, so repeating it doubles nothing. `dry_run` only counts. A replay larger than one
/// invocation answers `next_cursor`, to be posted back with the same filters. The audit row
/// goes in the first chunk's batch (a dry run, which changes nothing, writes it alone).
pub async fn bulk(env: &Env, b: &BulkReplay, record: &Record) -> AppResult<Response> {
    let f = &b.filter;
    let filter = ReplayFilter {
        event_type: f.event_type.clone(),
        resource_id: f.resource_id.clone(),
        status: f.status.map(|s| s.as_str().to_string()),
        received_after: f.received_after.clone(),
        received_before: f.received_before.clone(),
    };
    let db = sql::database(env)?;
    let (matched, archived) = crate::archive::count_replay(&db, &filter).await?;
    if b.dry_run {
        sql::insert_audit(&db, record, Outcome::DryRun).await?;
        return Ok(Response::from_json(
            &json!({ "matched": matched, "enqueued": 0, "dry_run": true, "next_cursor": null }),
        )?);
    }
    let after = b
        .after
        .as_ref()
        .map(|c| (c.received_at.clone(), c.event_id.clone()));
    // each chunk costs a statement and a sendBatch; keep a margin for the count before
    let max_chunks = (config::invocation_budget(env) / 2)
        .saturating_sub(2)
        .max(1);
    let mut chunks = Chunks::new(Kind::Replay { filter, after }, CHUNK, max_chunks);
    if archived > 0 {
        // some bodies are in the archive: each chunk puts its archived ones back first
        chunks = chunks.restoring(paymos_core::actors::archive::MAX_RESTORE_OBJECTS);
    }
    let row = paymos_core::statements::insert_audit(record, Outcome::Replayed);
    let done = crate::sweep::drive_recorded(
        env,
        &db,
        chunks,
        crate::sweep::Queue::Deliveries,
        None,
        Some(row),
    )
    .await?;
    if let Some(e) = &done.failure {
        // reset rows are durable and unprocessed: what was not sent is the sweeper's
        crate::log::line("bulk_replay", "-", "enqueue_error", Some(e));
    }
    crate::log::line(
        "bulk_replay",
        "-",
        &format!(
            "matched {matched}, reset {}, enqueued {}",
            done.claimed, done.sent
        ),
        None,
    );
    Ok(Response::from_json(&json!({
        "matched": matched,
        "enqueued": done.sent,
        "reset": done.claimed,
        "dry_run": false,
        "next_cursor": done.next_cursor.map(|(at, id)| DeliveryCursor::text(&at, &id)),
    }))?)
}
