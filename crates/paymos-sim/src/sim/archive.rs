//! The archive (interface §10) as part of the simulated world: the **core's** archiving run
//! (`paymos_core::actors::archive::Run`, the state machine the Worker's `src/archive.rs`
//! drives) over SQLite and an in-memory bucket that fails as R2 may (a put that fails, a put
//! that is lost, a read that comes back damaged), invocations that die between its steps, and
//! the replays that read bodies back from it (the core's restoring bulk replay, and a single
//! replay's restore in the batch of its reset).
//!
//! What is the simulator's own: the bucket, gzip (flate2, where the Worker has the runtime's
//! `CompressionStream`), the faults, and the check that every body archived is in the
//! bucket, under the key its row names, byte for byte as it was received.
//!
//! Its own lane and random stream, as the dispatcher's: one action per scheduler step when
//! one is due, never a step itself, so the rest of a seed's schedule is drawn as before. A
//! seed archives or not (its own draw); a run starts every few minutes of the chaos with a
//! retention of minutes, not days, and a budget of a few chunks.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

use paymos_core::actors::archive::{
    bodies_of_object, check_object, objects_to_read, Line, Object, ReadBack, Run, RunRow, RunState,
    Settings, Start, Step, BACKLOG_CAP, MIN_SHARE, REMOVED_AT,
};
use paymos_core::actors::sweep::restore_statements;
use paymos_core::admin::DeliveryCursor;
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::time::iso_minute;
use serde::Deserialize;

use super::{Op, Sim, Who, CRON_MS};
use crate::db::Fault;
use crate::rng::Rng;

/// An object as the bucket keeps it: its bytes and the SHA-256 its metadata records.
#[derive(Debug, Clone)]
struct Stored {
    bytes: Vec<u8>,
    sha256: String,
}

/// The archive's lane: the seed's settings, the run under way, the bucket.
pub(super) struct Ax {
    rng: Rng,
    /// This seed archives (an `ARCHIVE` binding).
    pub(super) on: bool,
    retention_ms: i64,
    budget: u32,
    max_lines: usize,
    p_put_fail: f64,
    p_put_lost: f64,
    p_corrupt: f64,
    p_crash: f64,
    /// How often an operator replays a delivery of a chunk between its load and its removal
    /// (the race the removal's `processed_at` condition is for).
    p_race: f64,
    /// How often a run that is not the daily one is an operator's (`POST
    /// /admin/api/archive`) rather than a cron's continuation.
    p_admin: f64,
    /// An operator's partial run answered this `next_cursor` (with its `before`): the next
    /// operator's run posts it back.
    admin_cursor: Option<(String, DeliveryCursor)>,
    /// When the next run starts (while the chaos lasts).
    next_at: i64,
    /// The run under way, its next step, and when it takes it.
    run: Option<(Run, Step, i64)>,
    bucket: BTreeMap<String, Stored>,
    /// (event id, key) pairs whose body was read back as received: an object never changes
    /// under its key, so each pair is read once.
    verified: BTreeSet<(String, String)>,
}

counters! {
#[derive(Debug, Clone, Default)]
pub struct ArchiveStats {
    pub runs: usize,
    pub objects: usize,
    pub archived: usize,
    pub failed_runs: usize,
    pub restored: usize,
    /// Operators' runs that answered what remains, checked by (j).
    pub remaining_answered: usize,
}
}

/// `ARCHIVED_AMONG`'s rows.
#[derive(Deserialize)]
struct ArchivedRow {
    event_id: String,
    archive_key: String,
}

impl Ax {
    pub(super) fn new(mut rng: Rng, start: i64) -> Ax {
        let on = rng.chance(0.5);
        Ax {
            on,
            retention_ms: *rng.pick(&[0, 60_000, 600_000, 1_800_000]),
            budget: rng.range(u64::from(MIN_SHARE), 40) as u32,
            max_lines: rng.range(1, 4) as usize,
            p_put_fail: *rng.pick(&[0.0, 0.05, 0.2]),
            p_put_lost: *rng.pick(&[0.0, 0.02, 0.1]),
            p_corrupt: *rng.pick(&[0.0, 0.02, 0.1]),
            p_crash: *rng.pick(&[0.0, 0.02, 0.1]),
            p_race: *rng.pick(&[0.0, 0.2, 0.5]),
            next_at: start + rng.range(60_000, CRON_MS as u64) as i64,
            // drawn after the others, so that those are the seeds' draws before it
            p_admin: *rng.pick(&[0.0, 0.3, 0.6]),
            admin_cursor: None,
            run: None,
            bucket: BTreeMap::new(),
            verified: BTreeSet::new(),
            rng,
        }
    }

    pub(super) fn describe(&self) -> String {
        if !self.on {
            return "archive: off".into();
        }
        format!(
            "archive: retention {} s, budget {}, {} lines an object; faults: put {}, put lost {}, read damaged {}, crash {}, replay race {}",
            self.retention_ms / 1000,
            self.budget,
            self.max_lines,
            self.p_put_fail,
            self.p_put_lost,
            self.p_corrupt,
            self.p_crash,
            self.p_race
        )
    }
}

/// The generation a replay's batch returned (its last statement's rows, as
/// `write_delivery_batch` keeps them), if it reset the row.
fn generation_of(rows: Vec<crate::db::Rows>) -> Option<i64> {
    rows.last()
        .filter(|r| !r.is_empty())
        .and_then(|r| r.int(0, "generation"))
}

fn gzip(text: &str) -> Result<Vec<u8>, String> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    e.finish().map_err(|e| e.to_string())
}

fn gunzip(bytes: &[u8]) -> Result<String, String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

impl Sim<'_> {
    pub(super) fn ax_next_time(&self) -> Option<i64> {
        match &self.ax.run {
            Some((_, _, at)) => Some(*at),
            None => (self.ax.on && self.chaos).then_some(self.ax.next_at),
        }
    }

    /// One action of the archive's lane, if one is due. `true` if it did something.
    pub(super) fn ax_step(&mut self) -> bool {
        if !self.ax.on {
            return false;
        }
        let now = self.now();
        match self.ax.run.take() {
            None => {
                if !self.chaos || now < self.ax.next_at {
                    return false;
                }
                self.ax.next_at =
                    now + self.ax.rng.range(CRON_MS as u64 / 2, CRON_MS as u64) as i64;
                // the daily cron's run, a later cron's continuation of it, or an operator's
                let before = iso_minute((now - self.ax.retention_ms) / 1000);
                let start = if self.ax.rng.chance(0.4) {
                    Start::Daily { before }
                } else if self.ax.rng.chance(self.ax.p_admin) {
                    // a new cutoff, or the one of the partial run whose cursor is posted back
                    let (before, after) = match self.ax.admin_cursor.take() {
                        Some((before, cursor)) => (before, Some(cursor)),
                        None => (before, None),
                    };
                    Start::Admin { before, after }
                } else {
                    Start::Continue
                };
                self.trace(format!("archive: a run starts ({start:?})"));
                let mut settings = Settings::new(self.ax.budget);
                settings.max_lines = self.ax.max_lines;
                let mut run = Run::new(start, settings);
                let step = run.next();
                self.ax.run = Some((run, step, now));
                true
            }
            Some((run, step, at)) if now < at => {
                self.ax.run = Some((run, step, at));
                false
            }
            Some((mut run, step, _)) => {
                if self.chaos && self.ax.rng.chance(self.ax.p_crash) {
                    self.trace("archive: the invocation dies".into());
                    return true;
                }
                let next = self.archive_step(&mut run, step);
                if next == Step::Done {
                    let r = run.report();
                    if run.admin() {
                        self.admin_answered(&r);
                    }
                    self.stats.archive.runs += 1;
                    self.stats.archive.failed_runs += usize::from(r.state == RunState::Failed);
                    self.trace(format!(
                        "archive: run ends {} ({} archived in {} objects){}",
                        r.state.as_str(),
                        r.archived,
                        r.objects,
                        r.error.map(|e| format!(": {e}")).unwrap_or_default()
                    ));
                } else {
                    let at = now + self.ax.rng.below(1_500) as i64;
                    self.ax.run = Some((run, next, at));
                }
                self.check_archive();
                true
            }
        }
    }

    /// (j) An operator's run answered what remains: the bodies of processed deliveries
    /// received before its `before` still in D1, counted up to `BACKLOG_CAP`, as the
    /// checker's own query counts them at that moment. A partial run's `next_cursor` is posted
    /// back by the next operator's run.
    fn admin_answered(&mut self, r: &paymos_core::actors::archive::Report) {
        let before = r.before.clone().unwrap_or_default();
        if r.state == RunState::Partial {
            let cursor = r.next_cursor.as_deref().map(DeliveryCursor::parse);
            match cursor {
                Some(Ok(c)) => self.ax.admin_cursor = Some((before.clone(), c)),
                _ => self.violation(format!(
                    "(j) an operator's partial archive run answered no usable next_cursor ({:?})",
                    r.next_cursor
                )),
            }
        }
        if r.state == RunState::Failed {
            return;
        }
        let Some(remaining) = r.remaining else {
            return self.violation("(j) an operator's archive run answered no remaining".into());
        };
        self.stats.archive.remaining_answered += 1;
        let counted = self
            .db
            .inspect(&format!(
                "SELECT count(*) AS n FROM webhook_delivery d \
                 WHERE d.processed_at IS NOT NULL AND d.archived_at IS NULL \
                   AND d.received_at < '{before}' \
                   AND (d.body <> '' \
                        OR EXISTS (SELECT 1 FROM delivery_body b WHERE b.event_id = d.event_id))"
            ))
            .int(0, "n")
            .unwrap_or(0);
        if remaining != counted.min(BACKLOG_CAP) {
            self.violation(format!(
                "(j) an operator's archive run answered remaining {remaining}; \
                 {counted} bodies received before {before} are still in D1"
            ));
        }
    }

    /// What the Worker's `archive::run` does with one step; the run's next.
    fn archive_step(&mut self, run: &mut Run, step: Step) -> Step {
        match step {
            Step::Compress(text) => run.compressed(gzip(&text)),
            Step::Write(object) => {
                let read = self.put_and_read_back(object);
                run.read_back(read)
            }
            Step::Done => Step::Done,
            step => match self.archive_db(run, step) {
                Ok(()) => run.next(),
                Err(e) => {
                    self.trace(format!("archive: D1 failed ({e})"));
                    run.db_failed(&e)
                }
            },
        }
    }

    fn ax_fault(&mut self) -> Fault {
        let outage = self.in_outage();
        super::write_fault(self.chaos, outage, &self.k, &mut self.ax.rng)
    }

    /// A step that is a D1 call, its answer handed to the run.
    fn archive_db(&mut self, run: &mut Run, step: Step) -> Result<(), String> {
        let fault = self.ax_fault();
        match step {
            Step::Open(bs) => {
                let rows = self.db.batch(&bs, fault).result?;
                let run_row = rows.last().map(|r| r.to::<RunRow>()).transpose()?;
                run.opened(run_row.and_then(|r| r.into_iter().next()));
            }
            Step::Candidates(b) => run.candidates(self.one(&b, fault)?.to()?),
            Step::Load(b) => {
                let lines: Vec<Line> = self.one(&b, fault)?.to()?;
                self.race_a_replay(&lines);
                run.loaded(lines);
            }
            Step::Remove(bs) => {
                let rows = self.db.batch(&bs, fault).result?;
                let removed = rows.get(REMOVED_AT).map_or(0, |r| r.rows.len());
                self.stats.archive.archived += removed;
                self.stats.archive.objects += 1;
                self.trace(format!("archive: {removed} bodies removed from D1"));
                run.removed(removed);
            }
            Step::Finish(b) => {
                self.db.batch(&[b], fault).result?;
                run.finished();
            }
            Step::Remaining(b) => {
                let rows = self.one(&b, fault)?;
                run.remaining(rows.int(0, "bodies").unwrap_or(0));
            }
            Step::Compress(_) | Step::Write(_) | Step::Done => return Err("not a D1 call".into()),
        }
        Ok(())
    }

    /// Now and then an operator replays one of a loaded chunk's deliveries, due at once: it
    /// may reset the row before the chunk's removal.
    fn race_a_replay(&mut self, lines: &[Line]) {
        if !self.chaos || lines.is_empty() || !self.ax.rng.chance(self.ax.p_race) {
            return;
        }
        let line = &lines[self.ax.rng.below(lines.len() as u64) as usize];
        let Some(&d) = self.by_event.get(&line.event_id) else {
            return;
        };
        let now = self.now();
        let at = self.ops.partition_point(|(t, _)| *t <= now);
        self.ops.insert(at, (now, Op::ReplayOne(d)));
        self.trace(format!(
            "archive: an operator is about to replay {}",
            line.event_id
        ));
    }

    /// The put, then the get, as the bucket and its faults answer them.
    fn put_and_read_back(&mut self, object: Object) -> ReadBack {
        let chaos = self.chaos;
        if chaos && self.ax.rng.chance(self.ax.p_put_fail) {
            self.trace(format!("archive: the put of {} fails", object.key));
            return ReadBack::Failed("the put failed: simulated".into());
        }
        if chaos && self.ax.rng.chance(self.ax.p_put_lost) {
            self.trace(format!("archive: the put of {} is lost", object.key));
        } else {
            let stored = Stored {
                bytes: object.gzip,
                sha256: object.sha256,
            };
            self.ax.bucket.insert(object.key.clone(), stored);
        }
        let Some(stored) = self.ax.bucket.get(&object.key) else {
            return ReadBack::Missing;
        };
        let mut bytes = stored.bytes.clone();
        if chaos && self.ax.rng.chance(self.ax.p_corrupt) {
            let middle = bytes.len() / 2;
            if let Some(b) = bytes.get_mut(middle) {
                *b ^= 0x01;
            }
            self.trace(format!(
                "archive: the read-back of {} is damaged",
                object.key
            ));
        }
        let text = gunzip(&bytes);
        ReadBack::Read { bytes, text }
    }

    // ------------------------------------------------------------------ restores

    /// The bodies of `rows` (event id, archive key) read back as the Worker's `read_bodies`
    /// reads them: each object once, its SHA-256 checked against its metadata's, gunzipped,
    /// the bodies found in it by the core.
    fn read_bodies(
        &self,
        rows: &[(String, String)],
    ) -> Result<Vec<(String, String, String)>, String> {
        let mut out = Vec::with_capacity(rows.len());
        for key in objects_to_read(rows) {
            let stored = self
                .ax
                .bucket
                .get(key)
                .ok_or_else(|| format!("{key} is not in the archive"))?;
            check_object(key, &stored.bytes, Some(&stored.sha256))?;
            let text = gunzip(&stored.bytes)?;
            out.extend(bodies_of_object(key, &text, rows)?);
        }
        Ok(out)
    }

    /// A restoring bulk replay's claim: the bodies read back, put back (`RESTORE_BODY`) in the
    /// batch of the claim (whose rows are its last statement's).
    pub(super) fn restore_batch(
        &mut self,
        archived: &[(String, String)],
        claim: Vec<Bound<'static>>,
    ) -> Result<Vec<Bound<'static>>, String> {
        let restored = self.read_bodies(archived)?;
        self.stats.archive.restored += restored.len();
        let mut statements = restore_statements(&restored);
        statements.extend(claim);
        Ok(statements)
    }

    /// A single replay's reset (`replay_batch`), its body first restored in the same batch
    /// when it is archived, as the Worker's `archive::reset_for_replay`: the new generation,
    /// `Ok(None)` when the reset changed nothing, or why it failed.
    pub(super) fn reset_for_replay(&mut self, d: usize) -> Result<Option<i64>, String> {
        let id = self.eid(d).to_string();
        // the checker's own look (no fault, no draw): whether this batch may leave it alone
        let archived = !self
            .db
            .inspect(&format!(
                "SELECT 1 FROM webhook_delivery WHERE event_id = '{id}' AND archived_at IS NOT NULL"
            ))
            .is_empty();
        let who = if archived {
            Who::MaybeReset
        } else {
            Who::Reset
        };
        let ex = self.write_delivery_batch(d, who, &st::replay_batch(&id));
        self.stats.replays += usize::from(ex.committed && !archived);
        let generation = generation_of(ex.result?);
        if generation.is_some() || !self.ax.on {
            return Ok(generation);
        }
        // the rows this batch left alone are checked as such before the restore's batch
        self.check_touched();
        let look = st::ARCHIVED_AMONG.bind(vec![Arg::json_list(&[id.as_str()])]);
        let fault = self.ax_fault();
        let archived: Vec<ArchivedRow> = self.one(&look, fault)?.to()?;
        let Some(row) = archived.into_iter().next() else {
            return Ok(None);
        };
        let reset: Vec<Bound<'static>> = st::replay_batch(&id)
            .into_iter()
            .map(Bound::into_owned)
            .collect();
        let batch = self.restore_batch(&[(row.event_id, row.archive_key)], reset)?;
        let ex = self.write_delivery_batch(d, Who::Reset, &batch);
        self.stats.replays += usize::from(ex.committed);
        self.trace(format!(
            "operator: replay {id}: its body restored from the archive"
        ));
        generation_of(ex.result?)
            .map(Some)
            .ok_or_else(|| "the restore reset nothing".into())
    }

    // ------------------------------------------------------------------ the check

    /// Every body archived is in the bucket under the key its row names, byte for byte as
    /// received, and only a processed delivery's body is archived.
    pub(super) fn check_archive(&mut self) {
        if !self.ax.on || self.ax.bucket.is_empty() {
            return;
        }
        let rows = self.db.inspect(
            "SELECT event_id, archive_key, processed_at, body, \
               (SELECT count(*) FROM delivery_body b WHERE b.event_id = d.event_id) AS body_rows \
             FROM webhook_delivery d WHERE archived_at IS NOT NULL ORDER BY event_id",
        );
        for i in 0..rows.rows.len() {
            let id = rows.text(i, "event_id").unwrap_or_default();
            let Some(key) = rows.text(i, "archive_key") else {
                self.violation(format!("{id}: archived, with no archive key"));
                continue;
            };
            if rows.text(i, "processed_at").is_none() {
                self.violation(format!("{id}: archived while unprocessed"));
            }
            if rows.text(i, "body").as_deref() != Some("") || rows.int(i, "body_rows") != Some(0) {
                self.violation(format!("{id}: archived, and its body is still in D1"));
            }
            let Some(&d) = self.by_event.get(&id) else {
                continue;
            };
            let pair = (id.clone(), key.clone());
            if self.ax.verified.contains(&pair) {
                continue;
            }
            let sent = self.world.deliveries[d].body.clone();
            match self.read_bodies(std::slice::from_ref(&pair)) {
                Ok(read) if read.first().map(|r| r.2.as_str()) == Some(sent.as_str()) => {
                    self.ax.verified.insert(pair);
                }
                Ok(_) => self.violation(format!("{id}: {key} holds another body than received")),
                Err(e) => {
                    self.violation(format!("{id}: archived, its body cannot be read back: {e}"))
                }
            }
        }
    }
}
