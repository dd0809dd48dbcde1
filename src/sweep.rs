//! Drives the core's chunked actors (`paymos_core::actors::sweep::Chunks`): the deliveries
//! sweeper, the effects sweeper and an operator's bulk replay, over D1 and the queues.

use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage};
use crate::sql;
use paymos_core::actors::archive::ArchivedInChunk;
use paymos_core::actors::sweep::{self, Chunks, Claimed, Summary};
use paymos_core::statements::Bound;
use worker::{D1Database, Env};

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
    chunks: Chunks,
    to: Queue,
    millis: Option<u64>,
    first: Option<Bound<'_>>,
) -> AppResult<Summary> {
    let mut io = Worker {
        env,
        db,
        to,
        deadline: millis.map(|m| crate::clock::now_millis() + m),
        first,
    };
    let summary = sweep::drive(chunks, &mut io).await?;
    if let Some(row) = io.first.take() {
        sql::run_batch(db, &[row]).await?;
    }
    Ok(summary)
}

/// A chunked actor's I/O in a Worker: D1, R2 (a restoring replay) and the queues.
struct Worker<'a> {
    env: &'a Env,
    db: &'a D1Database,
    to: Queue,
    /// The wall clock's end for the run (a cron invocation has other work).
    deadline: Option<u64>,
    /// The audit row still to write, in the first claim's transaction.
    first: Option<Bound<'a>>,
}

impl sweep::Io for Worker<'_> {
    type Error = AppError;

    fn out_of_time(&self) -> bool {
        self.deadline
            .is_some_and(|d| crate::clock::now_millis() >= d)
    }

    async fn claim(&mut self, b: Vec<Bound<'static>>) -> AppResult<Vec<Claimed>> {
        // one transaction; the claim's rows are its last statement's, and a bulk replay's
        // audit row follows them in its first claim's batch
        let claim_at = b.len() - 1;
        let mut b: Vec<Bound<'_>> = b;
        if let Some(row) = self.first.take() {
            b.push(row);
        }
        let results = sql::run_batch(self.db, &b).await?;
        Ok(sql::rows_of::<Claimed>(&results, claim_at)?)
    }

    async fn look_up_archived(&mut self, b: Bound<'static>) -> AppResult<Vec<ArchivedInChunk>> {
        Ok(sql::all_rows(self.db, b).await?)
    }

    async fn restore_and_claim(
        &mut self,
        archived: Vec<(String, String)>,
        claim: Vec<Bound<'static>>,
    ) -> AppResult<Vec<Claimed>> {
        let first = self.first.take();
        crate::archive::restore_and_claim(self.env, self.db, &archived, claim, first).await
    }

    async fn send(&mut self, rows: Vec<Claimed>) -> (usize, Option<String>) {
        let (sent, err) = send(self.env, self.to, rows).await;
        (sent, err.map(|e| e.to_string()))
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
                    // the sweeper's: the consumer loads the delivery
                    facts: None,
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
