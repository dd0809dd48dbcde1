//! Drives the core's chunked actors (`paymos_core::actors::sweep::Chunks`): the deliveries
//! sweeper, the effects sweeper and an operator's bulk replay, over D1 and the queues.

use crate::error::AppResult;
use crate::queue::{self, DeliveryMessage};
use crate::sql;
use paymos_core::actors::sweep::{Chunks, Claimed, Step, Summary};
use paymos_core::statements::Bound;
use worker::{D1Database, Date, Env};

/// What the claimed rows are sent to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Deliveries,
    Effects,
}

/// Runs `chunks` until done, or until `millis` of wall clock have passed (a cron invocation
/// has other work).
pub async fn drive(
    env: &Env,
    db: &D1Database,
    chunks: Chunks,
    to: Queue,
    millis: Option<u64>,
) -> AppResult<Summary> {
    drive_recorded(env, db, chunks, to, millis, None).await
}

/// As [`drive`], with `first` (an admin write's audit row, interface §11) in the first claim's
/// batch, or on its own when no claim runs: a bulk replay's row is in the transaction of its
/// first reset.
pub async fn drive_recorded(
    env: &Env,
    db: &D1Database,
    mut chunks: Chunks,
    to: Queue,
    millis: Option<u64>,
    mut first: Option<Bound<'_>>,
) -> AppResult<Summary> {
    let started = Date::now().as_millis();
    loop {
        match chunks.step() {
            Step::Claim(b) => {
                let out_of_time =
                    millis.is_some_and(|m| Date::now().as_millis().saturating_sub(started) >= m);
                if out_of_time {
                    chunks.claimed(Vec::new());
                    continue;
                }
                // one transaction; the claim's rows are its last statement's, and a bulk
                // replay's audit row follows them in its first claim's batch
                let claim_at = b.len() - 1;
                let mut b: Vec<Bound<'_>> = b;
                if let Some(row) = first.take() {
                    b.push(row);
                }
                let results = sql::run_batch(db, &b).await?;
                let rows = sql::rows_of::<Claimed>(&results, claim_at)?;
                chunks.claimed(rows);
            }
            // a bulk replay over archived bodies (archive.rs)
            Step::LookUpArchived(b) => chunks.archived(sql::all_rows(db, b).await?),
            Step::RestoreAndClaim { archived, claim } => {
                let rows =
                    crate::archive::restore_and_claim(env, db, &archived, claim, first.take())
                        .await?;
                chunks.claimed(rows);
            }
            Step::Send(rows) => {
                let (sent, err) = send(env, to, rows).await;
                chunks.sent(sent, err.map(|e| e.to_string()));
            }
            Step::Done(summary) => {
                if let Some(row) = first.take() {
                    sql::run_batch(db, &[row]).await?;
                }
                return Ok(summary);
            }
        }
    }
}

async fn send(env: &Env, to: Queue, rows: Vec<Claimed>) -> (usize, Option<worker::Error>) {
    match to {
        Queue::Deliveries => {
            let messages = rows
                .into_iter()
                .map(|r| DeliveryMessage {
                    event_id: r.id,
                    generation: r.generation,
                })
                .collect();
            queue::enqueue_all(env, messages).await
        }
        Queue::Effects => {
            let ids: Vec<String> = rows.into_iter().map(|r| r.id).collect();
            queue::enqueue_effects(env, &ids).await
        }
    }
}
