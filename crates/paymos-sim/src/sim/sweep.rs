//! The deliveries sweeper (the 5-minute cron) and an operator's bulk replay as part of the
//! simulated world: the **core's** chunked actor (`paymos_core::actors::sweep::Chunks`, the
//! Worker's too) over SQLite, one claim or one send per scheduler step.

use paymos_core::actors::sweep::{Chunks, Claimed, Kind, ReplayFilter, Step};

use super::{Actor, Sim, Who, SWEEP_AFTER_SECONDS};

impl Sim<'_> {
    /// The cron's sweeper: the seed's chunk size and chunk count (the Worker's are 100 and
    /// the budget's).
    pub(super) fn start_sweep(&mut self) {
        let kind = Kind::Deliveries {
            older_than: SWEEP_AFTER_SECONDS,
        };
        let chunks = Chunks::new(kind, self.k.sweep_chunk as u32, self.k.sweep_max_chunks);
        self.sweep(Box::new(chunks));
    }

    /// `POST /admin/api/deliveries/replay {status}`: chunks of 2, at most 4 per call.
    pub(super) fn start_bulk_replay(&mut self, status: &'static str) {
        let kind = Kind::Replay {
            filter: ReplayFilter {
                status: Some(status.into()),
                ..ReplayFilter::default()
            },
            after: None,
        };
        self.bulk_replay(Box::new(Chunks::new(kind, 2, 4)));
    }

    pub(super) fn sweep(&mut self, mut chunks: Box<Chunks>) {
        if self.chunk_step(&mut chunks, "sweeper", false) {
            self.actors.push(Actor::Sweep { chunks });
        } else {
            self.sweeper_busy = false;
        }
    }

    pub(super) fn bulk_replay(&mut self, mut chunks: Box<Chunks>) {
        if self.chunk_step(&mut chunks, "operator: bulk replay", true) {
            self.actors.push(Actor::BulkReplay { chunks });
        }
    }

    /// One claim or one send; `false` once the run is over (done, or a claim that failed:
    /// the invocation ends with a 503 / a logged error, nothing lost).
    fn chunk_step(&mut self, chunks: &mut Chunks, who: &str, replay: bool) -> bool {
        match chunks.step() {
            Step::Claim(b) => {
                let fault = self.fault_write();
                // one transaction (a replay's chunk after its tally); the rows are the last's
                let ex = self.db.batch(&b, fault);
                if ex.committed && replay {
                    // which rows it reset: the checker looks at every row it may have touched
                    for d in 0..self.dm.len() {
                        if self.dm[d].snap.is_some() {
                            self.touched_d.push((d, Who::MaybeReset));
                        }
                    }
                }
                match ex
                    .result
                    .and_then(|r| r.last().cloned().unwrap_or_default().to::<Claimed>())
                {
                    Ok(rows) => {
                        if replay {
                            self.stats.replays += rows.len();
                        }
                        let names: Vec<String> = rows
                            .iter()
                            .map(|r| format!("{} gen {:?}", r.id, r.generation))
                            .collect();
                        self.trace(format!("{who}: claimed [{}]", names.join(", ")));
                        chunks.claimed(rows);
                        true
                    }
                    Err(e) => {
                        self.trace(format!("{who}: claim failed ({e})"));
                        false
                    }
                }
            }
            Step::Send(rows) => {
                let msgs = rows
                    .iter()
                    .map(|r| self.new_msg(self.by_event[&r.id], r.generation))
                    .collect();
                let sent = self.send(msgs);
                if !replay {
                    self.stats.swept += rows.len();
                }
                self.trace(format!(
                    "{who}: send {}",
                    if sent.is_ok() { "ok" } else { "failed" }
                ));
                match sent {
                    Ok(()) => chunks.sent(rows.len(), None),
                    Err(()) => chunks.sent(0, Some("the queue send failed".into())),
                }
                true
            }
            // the simulated world has no archive, and never asks a replay to restore
            Step::LookUpArchived(_) | Step::RestoreAndClaim { .. } => {
                unreachable!("no replay restores from an archive in the simulation")
            }
            Step::Done(_) => false,
        }
    }
}
