//! `POST /deliveries/{event_id}/replay` and `POST /deliveries/replay` (bulk, CONTRACT §5).

use crate::config;
use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::sql::{self, ReplayFilter};
use paymos_core::admin::{BulkReplay, DeliveryCursor};
use serde_json::json;
use worker::{D1Database, Env, Response};

/// A chunk: one claim statement and one `sendBatch`.
const REPLAY_CHUNK: u32 = 100;

/// The delivery reset (a new generation) and enqueued again; the guard decides again.
pub async fn one(env: &Env, id: &str) -> AppResult<Response> {
    let db = sql::database(env)?;
    let generation = sql::reset_for_replay(&db, id)
        .await?
        .ok_or(AppError::NotFound)?;
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
/// of 100, within this invocation's budget; the guard decides again, so repeating it doubles
/// nothing. `dry_run` only counts. A replay larger than one invocation answers
/// `next_cursor`, to be posted back with the same filters.
pub async fn bulk(env: &Env, b: &BulkReplay) -> AppResult<Response> {
    let f = &b.filter;
    let filter = ReplayFilter {
        event_type: f.event_type.as_deref(),
        resource_id: f.resource_id.as_deref(),
        status: f.status.map(|s| s.as_str()),
        received_after: f.received_after.as_deref(),
        received_before: f.received_before.as_deref(),
    };
    let db = sql::database(env)?;
    let matched = sql::count_replay(&db, &filter).await?;
    if b.dry_run {
        return Ok(Response::from_json(
            &json!({ "matched": matched, "enqueued": 0, "dry_run": true, "next_cursor": null }),
        )?);
    }
    let after = b
        .after
        .as_ref()
        .map(|c| (c.received_at.clone(), c.event_id.clone()));
    let done = replay_chunks(env, &db, &filter, after).await?;
    crate::log::line(
        "bulk_replay",
        "-",
        &format!(
            "matched {matched}, reset {}, enqueued {}",
            done.reset, done.enqueued
        ),
        None,
    );
    Ok(Response::from_json(&json!({
        "matched": matched,
        "enqueued": done.enqueued,
        "reset": done.reset,
        "dry_run": false,
        "next_cursor": done.next_cursor,
    }))?)
}

/// What the chunks of one invocation did.
struct Replayed {
    reset: usize,
    enqueued: usize,
    /// Set when the budget ran out before the last chunk.
    next_cursor: Option<String>,
}

/// Chunk after chunk from `after` (received_at, event_id), until a chunk is short or the
/// budget is spent: each chunk costs a statement and a sendBatch, with a margin kept for the
/// count before.
async fn replay_chunks(
    env: &Env,
    db: &D1Database,
    filter: &ReplayFilter<'_>,
    mut after: Option<(String, String)>,
) -> AppResult<Replayed> {
    let max_chunks = (config::invocation_budget(env) / 2)
        .saturating_sub(2)
        .max(1);
    let mut done = Replayed {
        reset: 0,
        enqueued: 0,
        next_cursor: None,
    };
    for i in 0..max_chunks {
        let cursor = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        let rows = sql::replay_chunk(db, filter, cursor, REPLAY_CHUNK).await?;
        let n = rows.len();
        if n == 0 {
            break;
        }
        done.reset += n;
        after = rows
            .iter()
            .map(|(id, _, at)| (at.clone(), id.clone()))
            .max();
        let messages = rows
            .into_iter()
            .map(|(id, generation, _)| DeliveryMessage::new(id, generation))
            .collect();
        // reset rows are durable and unprocessed: a failed send is the sweeper's
        let (sent, err) = queue::enqueue_all(env, messages).await;
        done.enqueued += sent;
        if let Some(e) = err {
            crate::log::line("bulk_replay", "-", "enqueue_error", Some(&e.to_string()));
        }
        if n < REPLAY_CHUNK as usize {
            break;
        }
        if i + 1 == max_chunks {
            done.next_cursor = after.as_ref().map(|(at, id)| DeliveryCursor::text(at, id));
        }
    }
    Ok(done)
}
