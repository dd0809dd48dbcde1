//! The actors that move work back onto a queue, chunk by chunk, within a budget: the
//! deliveries sweeper (unprocessed deliveries whose message was lost or whose consumer died,
//! `CLAIM_UNPROCESSED`), the effects sweeper (pending effects the same way, `CLAIM_EFFECTS`),
//! and an operator's bulk replay (the matching deliveries reset to a new generation,
//! `REPLAY_CHUNK`, oldest first after a cursor). Each claim marks what it returns as handed
//! over in the same statement, so a second sweeper (or the next run) does not send the same
//! rows again at once; the rows are durable and unprocessed (or pending), so a send that
//! fails loses nothing: the next sweep claims them again.
//!
//! A [`Chunks`] is a state machine its driver asks what to do next: claim, send what was
//! claimed (`sendBatch`, at most 100 a message batch), again while the chunk came back full
//! and the budget lasts.
//!
//! A bulk replay over deliveries whose bodies are in the archive (interface §10;
//! [`Chunks::restoring`], when its count found some) first looks up the chunk's archived rows
//! (`ARCHIVED_IN_REPLAY_CHUNK`), and its claim becomes a batch that puts their bodies back,
//! read from their objects (`RESTORE_BODY`), before `REPLAY_CHUNK` resets them: at most a few
//! objects per chunk (the chunk is cut before the row that would need one more, keeping at
//! least its first row), each read counted against the budget. `REPLAY_CHUNK` leaves a row
//! whose body is (still, or again) archived alone, so a reset row always has its body.

use std::borrow::Cow;

mod drive;
pub use drive::{drive, Io};

use serde::Deserialize;

use crate::actors::archive::{restore_cut, ArchivedInChunk};
use crate::rows::opt_int;
use crate::statements::{self as st, Arg, Bound};

/// What the platform takes in one `sendBatch`, and what one claim takes.
pub const CHUNK: u32 = 100;

/// The bulk replay's filter (every field optional; at least one is asked by the API):
/// `status` is `received`, `processed` or an outcome; times are ISO-8601, normalised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayFilter {
    pub event_type: Option<String>,
    pub resource_id: Option<String>,
    pub status: Option<String>,
    pub received_after: Option<String>,
    pub received_before: Option<String>,
}

impl ReplayFilter {
    fn args(&self) -> Vec<Arg<'static>> {
        let o = |v: &Option<String>| v.clone().map_or(Arg::Null, |s| Arg::Text(Cow::Owned(s)));
        vec![
            o(&self.event_type),
            o(&self.resource_id),
            o(&self.status),
            o(&self.received_after),
            o(&self.received_before),
        ]
    }

    /// `COUNT_REPLAY` for a dry run (or the `matched` figure).
    pub fn count(&self) -> Bound<'static> {
        st::COUNT_REPLAY.bind(self.args())
    }
}

/// What is swept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Deliveries still unprocessed this long (seconds) after their last enqueue.
    Deliveries { older_than: i64 },
    /// Pending effects handed to the queue this long ago (or never).
    Effects { older_than: i64 },
    /// The deliveries matching the filter, after the cursor (received_at, event_id).
    Replay {
        filter: ReplayFilter,
        after: Option<(String, String)>,
    },
}

/// One row a claim returned: a delivery (with its generation, and for a replay its
/// `received_at`, the cursor) or an effect.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Claimed {
    #[serde(alias = "event_id", alias = "effect_id")]
    pub id: String,
    #[serde(default, deserialize_with = "opt_int")]
    pub generation: Option<i64>,
    #[serde(default)]
    pub received_at: Option<String>,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run them, one transaction (a claim, after its tally where it changes kept counts: a
    /// bulk replay's chunk); hand the last statement's rows to [`Chunks::claimed`].
    Claim(Vec<Bound<'static>>),
    /// A restoring replay: run it; hand its rows to [`Chunks::archived`].
    LookUpArchived(Bound<'static>),
    /// A restoring replay's claim: read the bodies of `archived` (event id, archive key) back
    /// from their objects (each checked against its recorded SHA-256), then run a
    /// `RESTORE_BODY` for each ([`restore_statement`]) and `claim` (its tally, then the
    /// chunk) as one batch; hand the last statement's rows to [`Chunks::claimed`].
    RestoreAndClaim {
        archived: Vec<(String, String)>,
        claim: Vec<Bound<'static>>,
    },
    /// Send these (deliveries: `{event_id, generation}`, effects: `{effect_id}`); hand how
    /// many were sent, and the first failure, to [`Chunks::sent`].
    Send(Vec<Claimed>),
    Done(Summary),
}

/// What the run did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    pub claimed: usize,
    pub sent: usize,
    /// The first send that failed (its rows wait for the next sweep, nothing lost).
    pub failure: Option<String>,
    /// A bulk replay cut short by the budget: where to go on (posted back by the operator).
    pub next_cursor: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Claim,
    /// A restoring replay, its chunk's archived rows looked up.
    Restore(Vec<ArchivedInChunk>),
    Send(Vec<Claimed>),
    Done,
}

/// A replay's chunk statement (`REPLAY_CHUNK`, or the look-up of its archived rows, which
/// takes the same arguments): the filter, the cursor, the limit.
fn replay_statement(
    statement: &'static st::Statement,
    filter: &ReplayFilter,
    after: &Option<(String, String)>,
    limit: u32,
) -> Bound<'static> {
    let mut args = filter.args();
    let (at, id) = after.clone().unzip();
    args.push(at.map_or(Arg::Null, |s| Arg::Text(Cow::Owned(s))));
    args.push(id.map_or(Arg::Null, |s| Arg::Text(Cow::Owned(s))));
    args.push(Arg::Int(i64::from(limit)));
    statement.bind(args)
}

/// A body read back from the archive put back in its row (in the batch of the reset).
pub fn restore_statement(event_id: &str, archive_key: &str, body: &str) -> Bound<'static> {
    let t = |s: &str| Arg::Text(Cow::Owned(s.to_string()));
    st::RESTORE_BODY.bind(vec![t(event_id), t(archive_key), t(body)])
}

/// [`restore_statement`] for each body read back, `(event id, archive key, body)`.
pub fn restore_statements(restored: &[(String, String, String)]) -> Vec<Bound<'static>> {
    restored
        .iter()
        .map(|(id, key, body)| restore_statement(id, key, body))
        .collect()
}

/// One run of claims and sends.
#[derive(Debug, Clone)]
pub struct Chunks {
    kind: Kind,
    chunk: u32,
    max_chunks: u32,
    chunks: u32,
    phase: Phase,
    summary: Summary,
    last_full: bool,
    /// D1 queries and subrequests left: two a chunk (its claim, its send), and for a
    /// restoring replay one more for the look-up and one per object read.
    ops_left: u32,
    /// A restoring replay: at most this many objects read per chunk.
    restore: Option<usize>,
    /// The limit of the claim under way (a restoring replay's chunk may be cut).
    limit: u32,
    /// What this sweep has sent: a claim can pick its own rows again (a sweep after 0 s, or
    /// one longer than the setting), and they are not sent twice by one run.
    swept: std::collections::HashSet<String>,
}

impl Chunks {
    /// A cron sweeper's run within `budget` (D1 queries and subrequests): each chunk of
    /// [`CHUNK`] costs a claim and a send.
    pub fn within(kind: Kind, budget: u32) -> Chunks {
        Chunks::new(kind, CHUNK, (budget / 2).max(1))
    }

    /// `chunk` rows a claim (at most [`CHUNK`]), at most `max_chunks` claims.
    pub fn new(kind: Kind, chunk: u32, max_chunks: u32) -> Chunks {
        Chunks {
            kind,
            chunk: chunk.clamp(1, CHUNK),
            max_chunks: max_chunks.max(1),
            chunks: 0,
            phase: Phase::Claim,
            summary: Summary::default(),
            last_full: false,
            ops_left: 2 * max_chunks.max(1),
            restore: None,
            limit: chunk.clamp(1, CHUNK),
            swept: std::collections::HashSet::new(),
        }
    }

    /// A bulk replay among whose deliveries some have their body in the archive: each chunk
    /// restores its archived rows' bodies, reading at most `max_objects` objects.
    pub fn restoring(mut self, max_objects: usize) -> Chunks {
        if matches!(self.kind, Kind::Replay { .. }) {
            self.restore = Some(max_objects.max(1));
        }
        self
    }

    pub fn step(&mut self) -> Step {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Claim => {
                self.phase = Phase::Claim;
                self.chunks += 1;
                self.ops_left = self.ops_left.saturating_sub(2);
                self.limit = self.chunk;
                if let (Some(_), Kind::Replay { filter, after }) = (self.restore, &self.kind) {
                    self.ops_left = self.ops_left.saturating_sub(1);
                    return Step::LookUpArchived(replay_statement(
                        &st::ARCHIVED_IN_REPLAY_CHUNK,
                        filter,
                        after,
                        self.limit,
                    ));
                }
                Step::Claim(self.claim_statement())
            }
            Phase::Restore(archived) => {
                // the objects this chunk may read: what the budget leaves, a few at most, and
                // always the first (a replay moves on)
                let affordable = (self.ops_left as usize).clamp(1, self.restore.unwrap_or(1));
                let (cut, kept) = restore_cut(&archived, self.chunk, affordable);
                let mut keys: Vec<&str> = Vec::new();
                for a in &kept {
                    if !keys.contains(&a.archive_key.as_str()) {
                        keys.push(&a.archive_key);
                    }
                }
                self.ops_left = self.ops_left.saturating_sub(keys.len() as u32);
                self.limit = cut;
                let claim = self.claim_statement();
                self.phase = Phase::Restore(archived);
                if kept.is_empty() {
                    return Step::Claim(claim);
                }
                Step::RestoreAndClaim {
                    archived: kept
                        .into_iter()
                        .map(|a| (a.event_id, a.archive_key))
                        .collect(),
                    claim,
                }
            }
            Phase::Send(rows) => {
                self.phase = Phase::Send(rows.clone());
                Step::Send(rows)
            }
            Phase::Done => Step::Done(self.summary.clone()),
        }
    }

    fn claim_statement(&self) -> Vec<Bound<'static>> {
        let limit = Arg::Int(i64::from(self.chunk));
        match &self.kind {
            Kind::Deliveries { older_than } => vec![st::CLAIM_UNPROCESSED.bind(vec![
                Arg::Text(Cow::Owned(st::seconds_ago(*older_than))),
                limit,
            ])],
            Kind::Effects { older_than } => vec![st::CLAIM_EFFECTS.bind(vec![
                Arg::Text(Cow::Owned(st::seconds_ago(*older_than))),
                limit,
            ])],
            Kind::Replay { filter, after } => {
                // the chunk's outcomes leave the kept counts in its transaction
                // (TALLY_REPLAY_CHUNK first, on the same chunk)
                st::replay_chunk_batch(
                    replay_statement(&st::REPLAY_CHUNK, filter, after, self.limit).args,
                )
            }
        }
    }

    /// What a chunk needs of the budget at least: its claim and send, and for a restoring
    /// replay its look-up and one object.
    fn chunk_cost(&self) -> u32 {
        if self.restore.is_some() {
            4
        } else {
            2
        }
    }

    /// A restoring replay's look-up: the chunk's archived rows, with their positions.
    pub fn archived(&mut self, rows: Vec<ArchivedInChunk>) {
        self.phase = Phase::Restore(rows);
    }

    /// The claim's rows; an empty claim ends the run.
    pub fn claimed(&mut self, rows: Vec<Claimed>) {
        self.last_full = rows.len() >= self.limit as usize;
        let rows: Vec<Claimed> = match self.kind {
            // a replay's chunks move on by their cursor; a sweeper's claims by time alone
            Kind::Replay { .. } => rows,
            _ => rows
                .into_iter()
                .filter(|r| self.swept.insert(r.id.clone()))
                .collect(),
        };
        if rows.is_empty() {
            // nothing left, or only what this run sent already
            self.phase = Phase::Done;
            return;
        }
        self.summary.claimed += rows.len();
        if let Kind::Replay { after, .. } = &mut self.kind {
            // oldest first: the next chunk starts after the newest of this one
            *after = rows
                .iter()
                .filter_map(|r| Some((r.received_at.clone()?, r.id.clone())))
                .max();
        }
        self.phase = Phase::Send(rows);
    }

    /// The send: how many went, and the first failure.
    pub fn sent(&mut self, sent: usize, failure: Option<String>) {
        self.summary.sent += sent;
        let stop_on_failure = !matches!(self.kind, Kind::Replay { .. });
        if let Some(e) = failure {
            // the claimed rows wait for the next sweep (their enqueued_at moved): nothing
            // lost; a replay goes on with its other chunks, the sweeper sends the rest
            self.summary.failure.get_or_insert(e);
            if stop_on_failure {
                self.phase = Phase::Done;
                return;
            }
        }
        if !self.last_full {
            self.phase = Phase::Done;
        } else if self.chunks >= self.max_chunks || self.ops_left < self.chunk_cost() {
            if let Kind::Replay { after, .. } = &self.kind {
                self.summary.next_cursor = after.clone();
            }
            self.phase = Phase::Done;
        } else {
            self.phase = Phase::Claim;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(ids: &[&str]) -> Vec<Claimed> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| Claimed {
                id: (*id).into(),
                generation: Some(0),
                received_at: Some(format!("2026-12-01T00:00:0{i}.000Z")),
            })
            .collect()
    }

    #[test]
    fn the_sweeper_claims_while_its_chunks_come_back_full() {
        let mut s = Chunks::new(Kind::Deliveries { older_than: 300 }, 2, 3);
        let Step::Claim(c) = s.step() else { panic!() };
        let [c] = &c[..] else { panic!("one statement") };
        assert_eq!(c.statement.name, "CLAIM_UNPROCESSED");
        assert_eq!(c.args[0], Arg::text("-300 seconds"));
        s.claimed(rows(&["evt_a", "evt_b"]));
        assert_eq!(s.step(), Step::Send(rows(&["evt_a", "evt_b"])));
        s.sent(2, None);
        assert!(matches!(s.step(), Step::Claim(_)), "full: again");
        s.claimed(rows(&["evt_c"]));
        let _ = s.step();
        s.sent(1, None);
        assert_eq!(
            s.step(),
            Step::Done(Summary {
                claimed: 3,
                sent: 3,
                failure: None,
                next_cursor: None
            })
        );
    }

    #[test]
    fn a_failed_send_ends_a_sweep_but_not_a_replay() {
        let mut s = Chunks::new(Kind::Effects { older_than: 300 }, 1, 5);
        let Step::Claim(c) = s.step() else { panic!() };
        assert_eq!(c[0].statement.name, "CLAIM_EFFECTS");
        s.claimed(rows(&["eff_a"]));
        let _ = s.step();
        s.sent(0, Some("queue down".into()));
        assert!(matches!(
            s.step(),
            Step::Done(Summary {
                failure: Some(_),
                ..
            })
        ));
        let mut r = Chunks::new(
            Kind::Replay {
                filter: ReplayFilter {
                    status: Some("dead".into()),
                    ..ReplayFilter::default()
                },
                after: None,
            },
            2,
            2,
        );
        let Step::Claim(c) = r.step() else { panic!() };
        let names: Vec<&str> = c.iter().map(|b| b.statement.name).collect();
        assert_eq!(
            names,
            ["TALLY_REPLAY_CHUNK", "REPLAY_CHUNK"],
            "the tally first, on the same chunk"
        );
        assert_eq!(c[0].args, c[1].args);
        let c = &c[1];
        assert_eq!(c.args[2], Arg::text("dead"));
        r.claimed(rows(&["evt_a", "evt_b"]));
        let _ = r.step();
        r.sent(0, Some("queue down".into()));
        let Step::Claim(c) = r.step() else { panic!() };
        let c = c.last().unwrap();
        assert_eq!(
            c.args[5],
            Arg::text("2026-12-01T00:00:01.000Z"),
            "after the newest"
        );
        assert_eq!(c.args[6], Arg::text("evt_b"));
        r.claimed(rows(&["evt_c", "evt_d"]));
        let _ = r.step();
        r.sent(2, None);
        // the budget's last chunk came back full: the operator posts the cursor back
        let Step::Done(done) = r.step() else { panic!() };
        assert_eq!(done.claimed, 4);
        assert_eq!(done.sent, 2);
        assert_eq!(
            done.next_cursor,
            Some(("2026-12-01T00:00:01.000Z".into(), "evt_d".into()))
        );
    }

    #[test]
    fn a_restoring_replay_puts_archived_bodies_back_in_the_batch_of_its_reset() {
        let a = |id: &str, key: &str, pos| ArchivedInChunk {
            event_id: id.into(),
            archive_key: key.into(),
            pos,
        };
        let filter = ReplayFilter {
            status: Some("dead".into()),
            ..ReplayFilter::default()
        };
        // budget: 5 chunks, 10 operations
        let mut r = Chunks::new(
            Kind::Replay {
                filter: filter.clone(),
                after: None,
            },
            100,
            5,
        )
        .restoring(4);
        let Step::LookUpArchived(look) = r.step() else {
            panic!()
        };
        assert_eq!(look.statement.name, "ARCHIVED_IN_REPLAY_CHUNK");
        assert_eq!(look.args[7], Arg::Int(100));
        // six objects needed: the budget (10 - 3) and the cap (4) allow four
        r.archived(
            ["k1", "k2", "k3", "k4", "k5", "k6"]
                .iter()
                .enumerate()
                .map(|(i, k)| a(&format!("evt_{i}"), k, 10 * i as i64 + 1))
                .collect(),
        );
        let Step::RestoreAndClaim { archived, claim } = r.step() else {
            panic!()
        };
        let names: Vec<&str> = claim.iter().map(|b| b.statement.name).collect();
        assert_eq!(names, ["TALLY_REPLAY_CHUNK", "REPLAY_CHUNK"]);
        assert_eq!(
            claim[0].args, claim[1].args,
            "the tally reads the same chunk"
        );
        assert_eq!(
            claim[1].args[7],
            Arg::Int(40),
            "cut before the fifth object's row"
        );
        assert_eq!(archived.len(), 4);
        assert_eq!(archived[3], ("evt_3".into(), "k4".into()));
        r.claimed(
            (0..40)
                .map(|i| Claimed {
                    id: format!("evt_x{i:02}"),
                    generation: Some(1),
                    received_at: Some(format!("2026-01-01T00:00:{i:02}.000Z")),
                })
                .collect(),
        );
        let _ = r.step();
        r.sent(40, None);
        // 10 - 3 - 4 = 3 left: not enough for another restoring chunk (4)
        let Step::Done(done) = r.step() else { panic!() };
        assert_eq!(done.claimed, 40);
        assert_eq!(
            done.next_cursor,
            Some(("2026-01-01T00:00:39.000Z".into(), "evt_x39".into())),
            "a cut chunk that came back full goes on from its cursor"
        );
        // a chunk with nothing archived is its claim alone
        let mut r = Chunks::new(
            Kind::Replay {
                filter,
                after: None,
            },
            100,
            5,
        )
        .restoring(4);
        let _ = r.step();
        r.archived(Vec::new());
        let Step::Claim(c) = r.step() else { panic!() };
        assert_eq!(c.last().unwrap().args[7], Arg::Int(100));
        // a sweeper is never restored
        let mut s = Chunks::new(Kind::Deliveries { older_than: 1 }, 100, 5).restoring(4);
        assert!(matches!(s.step(), Step::Claim(_)));
        let st = restore_statement("evt_1", "k", "{}");
        assert_eq!(st.statement.name, "RESTORE_BODY");
    }

    /// A sweep after 0 seconds (or one that outlasts its setting) claims its own rows again:
    /// they are not sent twice, and a claim of nothing new ends the run.
    #[test]
    fn a_sweep_sends_a_row_once_however_often_it_is_claimed() {
        let row = |id: &str| Claimed {
            id: id.into(),
            generation: Some(0),
            received_at: None,
        };
        let mut s = Chunks::new(Kind::Deliveries { older_than: 0 }, 2, 10);
        let _ = s.step();
        s.claimed(vec![row("evt_a"), row("evt_b")]);
        let Step::Send(first) = s.step() else {
            panic!()
        };
        assert_eq!(first.len(), 2);
        s.sent(2, None);
        let _ = s.step();
        s.claimed(vec![row("evt_c"), row("evt_a")]);
        let Step::Send(second) = s.step() else {
            panic!()
        };
        assert_eq!(
            second.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["evt_c"]
        );
        s.sent(1, None);
        let _ = s.step();
        s.claimed(vec![row("evt_a"), row("evt_b")]);
        assert_eq!(
            s.step(),
            Step::Done(Summary {
                claimed: 3,
                sent: 3,
                ..Summary::default()
            })
        );
    }

    #[test]
    fn an_empty_claim_ends_the_run() {
        let mut s = Chunks::new(Kind::Deliveries { older_than: 0 }, 100, 10);
        let _ = s.step();
        s.claimed(Vec::new());
        assert_eq!(s.step(), Step::Done(Summary::default()));
    }
}
