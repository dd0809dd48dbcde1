//! The dispatcher's driver, written once: the loop that walks a [`Batch`] through its steps,
//! over whatever I/O it is given. The Worker gives it D1 and `fetch` (`src/effects.rs`); the
//! simulator gives it SQLite and its simulated order system, and may drop it between any two
//! of its I/O calls (a crash).

use super::{Batch, PostError, Reply, Step};
use crate::rows::{DispatchRow, StartedAttempt};
use crate::statements::Bound;

/// Cloudflare's limit of simultaneous open connections per invocation: the POSTs go in waves
/// of this many, since a queued request's timeout would run while it waits.
pub const SIMULTANEOUS_POSTS: usize = 6;

/// What the dispatcher's driver does to the world. A call that fails is a D1 failure: the
/// driver stops and the caller answers every message with [`Batch::db_failed`].
// single-threaded drivers only (a Worker invocation, one simulated seed): no `Send` bound
#[allow(async_fn_in_trait)]
pub trait Io {
    type Error: std::fmt::Display;
    /// Seconds since the epoch.
    fn now(&self) -> i64;
    /// `LOAD_EFFECTS_FOR_DISPATCH`: the batch's rows.
    async fn load(&mut self, b: Bound<'static>) -> Result<Vec<DispatchRow>, Self::Error>;
    /// `START_ATTEMPTS`, committed before any request: the attempts it started.
    async fn start(&mut self, b: Bound<'static>) -> Result<Vec<StartedAttempt>, Self::Error>;
    /// One wave of signed POSTs (effect id, body), at once: a result for each, in order.
    async fn post(&mut self, wave: &[(String, String)]) -> Vec<Result<(), PostError>>;
    /// The outcomes, as one D1 batch: whether each statement returned a row.
    async fn record(&mut self, statements: Vec<Bound<'static>>) -> Result<Vec<bool>, Self::Error>;
}

/// Walks `batch` through its steps until it says how to answer the messages.
pub async fn drive<I: Io>(batch: &mut Batch, io: &mut I) -> Result<Vec<Reply>, I::Error> {
    loop {
        match batch.next(io.now()) {
            Step::Load(b) => {
                let rows = io.load(b).await?;
                batch.loaded(rows, io.now());
            }
            Step::Start(b) => batch.started(io.start(b).await?),
            Step::Post(posts) => {
                for wave in posts.chunks(SIMULTANEOUS_POSTS) {
                    let results = io.post(wave).await;
                    for ((id, _), result) in wave.iter().zip(results) {
                        batch.posted(id, result);
                    }
                }
            }
            Step::Record(statements) => batch.recorded(io.record(statements).await?),
            Step::Answer(replies) => return Ok(replies),
            Step::Done => return Ok(Vec::new()),
        }
    }
}
