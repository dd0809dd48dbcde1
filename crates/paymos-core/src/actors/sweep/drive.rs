//! The chunked actors' driver, written once: the loop that walks [`Chunks`] (the deliveries
//! sweeper, the effects sweeper, a bulk replay) through its steps over whatever I/O it is
//! given. The Worker gives it D1, R2 and the queues (`src/sweep.rs`); the simulator gives it
//! SQLite and its queue model, one call per scheduler step.

use super::{ArchivedInChunk, Chunks, Claimed, Step, Summary};
use crate::statements::Bound;

/// What a chunked actor's driver does to the world. A database call that fails ends the run
/// (nothing is lost: what was not claimed waits for the next run).
#[allow(async_fn_in_trait)]
pub trait Io {
    type Error;
    /// Whether the run's time is spent: a claim then claims nothing, and the run ends.
    fn out_of_time(&self) -> bool {
        false
    }
    /// One transaction: the claim's rows are its last statement's.
    async fn claim(&mut self, b: Vec<Bound<'static>>) -> Result<Vec<Claimed>, Self::Error>;
    /// A restoring replay's look-up of the chunk's archived bodies.
    async fn look_up_archived(
        &mut self,
        b: Bound<'static>,
    ) -> Result<Vec<ArchivedInChunk>, Self::Error>;
    /// A restoring replay's claim: the bodies read back from the archive, restored in the
    /// claim's transaction.
    async fn restore_and_claim(
        &mut self,
        archived: Vec<(String, String)>,
        claim: Vec<Bound<'static>>,
    ) -> Result<Vec<Claimed>, Self::Error>;
    /// The claimed rows, to their queue: how many were sent, and the first failure.
    async fn send(&mut self, rows: Vec<Claimed>) -> (usize, Option<String>);
}

/// Runs `chunks` to its end.
pub async fn drive<I: Io>(mut chunks: Chunks, io: &mut I) -> Result<Summary, I::Error> {
    loop {
        match chunks.step() {
            Step::Claim(b) => {
                let rows = if io.out_of_time() {
                    Vec::new()
                } else {
                    io.claim(b).await?
                };
                chunks.claimed(rows);
            }
            Step::LookUpArchived(b) => chunks.archived(io.look_up_archived(b).await?),
            Step::RestoreAndClaim { archived, claim } => {
                chunks.claimed(io.restore_and_claim(archived, claim).await?)
            }
            Step::Send(rows) => {
                let (sent, failure) = io.send(rows).await;
                chunks.sent(sent, failure);
            }
            Step::Done(summary) => return Ok(summary),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::sweep::Kind;

    /// Claims `full` chunks of `chunk` rows, then an empty one; logs what was asked.
    struct World {
        asked: Vec<String>,
        full: usize,
        chunk: usize,
        out_of_time_after: Option<usize>,
        fail_claim: bool,
    }

    impl Io for World {
        type Error = String;
        fn out_of_time(&self) -> bool {
            self.out_of_time_after
                .is_some_and(|n| self.asked.iter().filter(|a| *a == "claim").count() >= n)
        }
        async fn claim(&mut self, _: Vec<Bound<'static>>) -> Result<Vec<Claimed>, String> {
            self.asked.push("claim".into());
            if self.fail_claim {
                return Err("D1_ERROR".into());
            }
            let claims = self.asked.iter().filter(|a| *a == "claim").count();
            let n = if claims <= self.full { self.chunk } else { 0 };
            Ok((0..n)
                .map(|i| Claimed {
                    id: format!("evt_{claims}_{i}"),
                    generation: Some(0),
                    received_at: None,
                })
                .collect())
        }
        async fn look_up_archived(
            &mut self,
            _: Bound<'static>,
        ) -> Result<Vec<ArchivedInChunk>, String> {
            unreachable!("a sweeper restores nothing")
        }
        async fn restore_and_claim(
            &mut self,
            _: Vec<(String, String)>,
            _: Vec<Bound<'static>>,
        ) -> Result<Vec<Claimed>, String> {
            unreachable!("a sweeper restores nothing")
        }
        async fn send(&mut self, rows: Vec<Claimed>) -> (usize, Option<String>) {
            self.asked.push(format!("send x{}", rows.len()));
            (rows.len(), None)
        }
    }

    fn world(full: usize) -> World {
        World {
            asked: Vec::new(),
            full,
            chunk: 2,
            out_of_time_after: None,
            fail_claim: false,
        }
    }

    fn chunks() -> Chunks {
        Chunks::new(Kind::Deliveries { older_than: 300 }, 2, 10)
    }

    #[test]
    fn the_driver_claims_and_sends_until_a_chunk_is_not_full() {
        let mut io = world(2);
        let summary = crate::actors::run_at_once(drive(chunks(), &mut io)).unwrap();
        assert_eq!(io.asked, ["claim", "send x2", "claim", "send x2", "claim"]);
        assert_eq!((summary.claimed, summary.sent), (4, 4));
    }

    #[test]
    fn out_of_time_the_driver_claims_no_more() {
        let mut io = world(5);
        io.out_of_time_after = Some(1);
        let summary = crate::actors::run_at_once(drive(chunks(), &mut io)).unwrap();
        assert_eq!(io.asked, ["claim", "send x2"]);
        assert_eq!(summary.sent, 2);
    }

    #[test]
    fn a_failed_claim_ends_the_run() {
        let mut io = world(5);
        io.fail_claim = true;
        assert_eq!(
            crate::actors::run_at_once(drive(chunks(), &mut io)),
            Err("D1_ERROR".to_string())
        );
        assert_eq!(io.asked, ["claim"]);
    }
}
