//! The deliveries sweeper (the 5-minute cron), an operator's bulk replay and the effects
//! sweeper as part of the simulated world: the **core's** driver of its chunked actor
//! (`paymos_core::actors::sweep::drive` over `Chunks`, the Worker's too) over SQLite. The
//! deliveries' runs make one call per scheduler step; the effects sweeper runs whole in one
//! action of its lane.

use paymos_core::actors::archive::{ArchivedInChunk, MAX_RESTORE_OBJECTS};
use paymos_core::actors::sweep::{self, Chunks, Claimed, Kind, ReplayFilter, Summary};
use paymos_core::statements::Bound;

use super::{Actor, Sim, Who, SWEEP_AFTER_SECONDS};
use crate::coroutine::{Coroutine, Port, Resumed, Returned};
use crate::db::Fault;

/// What the core's driver asks of the world, one call at a time.
#[derive(Debug)]
pub(super) enum Call {
    Claim(Vec<Bound<'static>>),
    LookUpArchived(Bound<'static>),
    RestoreAndClaim(Vec<(String, String)>, Vec<Bound<'static>>),
    Send(Vec<Claimed>),
}

pub(super) type Sweeper = Coroutine<Call, Result<Summary, String>>;

/// A chunked run's I/O in the simulated world; a bulk replay restores from the archive's
/// bucket (`archive.rs`) when the seed archives.
struct Io(Port<Call>);

impl sweep::Io for Io {
    type Error = String;
    async fn claim(&mut self, b: Vec<Bound<'static>>) -> Result<Vec<Claimed>, String> {
        self.0.call(Call::Claim(b)).await
    }
    async fn look_up_archived(
        &mut self,
        b: Bound<'static>,
    ) -> Result<Vec<ArchivedInChunk>, String> {
        self.0.call(Call::LookUpArchived(b)).await
    }
    async fn restore_and_claim(
        &mut self,
        archived: Vec<(String, String)>,
        claim: Vec<Bound<'static>>,
    ) -> Result<Vec<Claimed>, String> {
        self.0.call(Call::RestoreAndClaim(archived, claim)).await
    }
    async fn send(&mut self, rows: Vec<Claimed>) -> (usize, Option<String>) {
        self.0.call(Call::Send(rows)).await
    }
}

pub(super) fn sweeper(chunks: Chunks) -> Box<Sweeper> {
    Box::new(Coroutine::new(|port| async move {
        sweep::drive(chunks, &mut Io(port)).await
    }))
}

/// Which run of the deliveries' lane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Run {
    Sweep,
    BulkReplay,
}

impl Sim<'_> {
    /// The cron's sweeper: the seed's chunk size and chunk count (the Worker's are 100 and
    /// the budget's).
    pub(super) fn start_sweep(&mut self) {
        let kind = Kind::Deliveries {
            older_than: SWEEP_AFTER_SECONDS,
        };
        let chunks = Chunks::new(kind, self.k.sweep_chunk as u32, self.k.sweep_max_chunks);
        self.chunked(Run::Sweep, sweeper(chunks), None);
    }

    /// `POST /admin/api/deliveries/replay {status}`: chunks of 2, at most 4 per call; with the
    /// archive on, restoring (the Worker restores when its count finds archived rows).
    pub(super) fn start_bulk_replay(&mut self, status: &'static str) {
        let kind = Kind::Replay {
            filter: ReplayFilter {
                status: Some(status.into()),
                ..ReplayFilter::default()
            },
            after: None,
        };
        let mut chunks = Chunks::new(kind, 2, 4);
        if self.ax.on {
            chunks = chunks.restoring(MAX_RESTORE_OBJECTS);
        }
        self.chunked(Run::BulkReplay, sweeper(chunks), None);
    }

    /// One call of a run: a claim or a send. A claim that failed ends the run at the next
    /// (the invocation ends with a 503 / a logged error, nothing lost).
    pub(super) fn chunked(
        &mut self,
        run: Run,
        mut driver: Box<Sweeper>,
        returned: Option<Returned>,
    ) {
        let who = match run {
            Run::Sweep => "sweeper",
            Run::BulkReplay => "operator: bulk replay",
        };
        let returned: Returned = match driver.resume(returned) {
            Resumed::Done(_) => {
                self.sweeper_busy &= run != Run::Sweep;
                return;
            }
            Resumed::Asks(Call::Claim(b)) => Box::new(self.claim(&b, who, run)),
            Resumed::Asks(Call::LookUpArchived(b)) => Box::new(self.look_up_archived(&b)),
            Resumed::Asks(Call::RestoreAndClaim(archived, claim)) => {
                let claimed = self
                    .restore_batch(&archived, claim)
                    .and_then(|batch| self.claim(&batch, who, run));
                Box::new(claimed)
            }
            Resumed::Asks(Call::Send(rows)) => Box::new(self.send_claimed(&rows, who, run)),
        };
        let returned = Some(returned);
        self.actors.push(Actor::Chunked {
            run,
            driver,
            returned,
        });
    }

    /// One transaction (a replay's chunk after its tally); the rows are the last's.
    fn claim(&mut self, b: &[Bound<'static>], who: &str, run: Run) -> Result<Vec<Claimed>, String> {
        let fault = self.fault_write();
        let ex = self.db.batch(b, fault);
        if ex.committed && run == Run::BulkReplay {
            // which rows it reset: the checker looks at every row it may have touched
            for d in 0..self.dm.len() {
                if self.dm[d].snap.is_some() {
                    self.touched_d.push((d, Who::MaybeReset));
                }
            }
        }
        let rows = ex
            .result
            .and_then(|r| r.last().cloned().unwrap_or_default().to::<Claimed>());
        match &rows {
            Ok(rows) => {
                if run == Run::BulkReplay {
                    self.stats.replays += rows.len();
                }
                let names: Vec<String> = rows
                    .iter()
                    .map(|r| format!("{} gen {:?}", r.id, r.generation))
                    .collect();
                self.trace(format!("{who}: claimed [{}]", names.join(", ")));
            }
            Err(e) => self.trace(format!("{who}: claim failed ({e})")),
        }
        rows
    }

    /// A restoring replay's look-up of its chunk's archived rows.
    fn look_up_archived(&mut self, b: &Bound<'static>) -> Result<Vec<ArchivedInChunk>, String> {
        let fault = self.fault_read();
        self.one(b, fault)?.to()
    }

    fn send_claimed(&mut self, rows: &[Claimed], who: &str, run: Run) -> (usize, Option<String>) {
        let msgs = rows
            .iter()
            .map(|r| self.new_msg(self.by_event[&r.id], r.generation))
            .collect();
        let sent = self.send(msgs);
        if run == Run::Sweep {
            self.stats.swept += rows.len();
        }
        self.trace(format!(
            "{who}: send {}",
            if sent.is_ok() { "ok" } else { "failed" }
        ));
        match sent {
            Ok(()) => (rows.len(), None),
            Err(()) => (0, Some("the queue send failed".into())),
        }
    }

    /// `effects::sweep`: the core's driver (`CLAIM_EFFECTS('-300 seconds', 100)`, send,
    /// again while full), at most 3 chunks, in one lane action.
    pub(super) fn fx_sweep(&mut self) {
        let kind = Kind::Effects {
            older_than: SWEEP_AFTER_SECONDS,
        };
        let mut driver = sweeper(Chunks::new(kind, paymos_core::actors::sweep::CHUNK, 3));
        let mut returned: Option<Returned> = None;
        loop {
            returned = Some(match driver.resume(returned) {
                Resumed::Done(_) => return,
                Resumed::Asks(Call::Claim(b)) => Box::new(self.fx_claim(&b)),
                Resumed::Asks(Call::LookUpArchived(_) | Call::RestoreAndClaim(..)) => {
                    unreachable!("the effects sweeper restores nothing")
                }
                Resumed::Asks(Call::Send(rows)) => {
                    let ids: Vec<String> = rows.into_iter().map(|r| r.id).collect();
                    self.fx_send(&ids, "the sweeper");
                    Box::new((ids.len(), None::<String>))
                }
            });
        }
    }

    fn fx_claim(&mut self, b: &[Bound<'static>]) -> Result<Vec<Claimed>, String> {
        let fault = match self.fx_fault_batch(1) {
            Fault::At(_) => Fault::Before,
            f => f,
        };
        let rows = self.db.batch(b, fault).result;
        let rows = rows.and_then(|r| r.last().cloned().unwrap_or_default().to::<Claimed>());
        match &rows {
            Ok(rows) => self.fx.stats.claimed += rows.len(),
            Err(e) => self.trace(format!("effects sweeper: claim failed ({e})")),
        }
        rows
    }
}
