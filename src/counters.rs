//! Counters kept in the isolate: refused requests by reason, accepted signatures by secret.
//!
//! A refused request must not cost a D1 write (interface §9: a flood of bad signatures is an
//! attack, not load to amplify). Counts are added up here, in memory, per minute, and written
//! to `request_count` in one small batch whatever the volume: the reply after the first count
//! since the last write schedules the next write `COUNTERS_FLUSH_SECONDS` later (default 20,
//! at most 25), in a `waitUntil`, which the platform keeps alive up to 30 s after the reply.
//! So an isolate writes at most once per that period, and the counts of a burst that ends
//! are written even if no request reaches that isolate again (the cron flushes only its own).
//! What is lost is what an isolate counted in the seconds before it was killed; the metrics
//! of the isolate that answers add its own unwritten counts.

use crate::log;
use crate::sql;
use paymos_core::time::iso_minute;
use std::cell::RefCell;
use std::collections::BTreeMap;
use worker::Env;

pub const REFUSED: &str = "refused";
pub const SIGNATURE_VERIFIED: &str = "signature_verified";

/// (minute bucket, counter name, label) and its count, each key once. A list searched in
/// order, not a `BTreeMap`: it holds a handful of keys (the labels seen in the last few
/// minutes), and a fresh isolate's first delivery counts into it, which compiled the map's
/// entry and insertion code (about 17 KB of Liftoff code) on that request (bench/README.md,
/// "Cold start").
type Pending = Vec<((String, &'static str, String), u64)>;

struct State {
    pending: Pending,
    /// A write is scheduled (a `waitUntil` waiting out the period).
    scheduled: bool,
}

thread_local! {
    static STATE: RefCell<State> = const {
        RefCell::new(State {
            pending: Vec::new(),
            scheduled: false,
        })
    };
}

fn add(name: &'static str, label: String, n: u64) {
    let bucket = iso_minute(crate::clock::now_seconds());
    STATE.with(|s| count(&mut s.borrow_mut().pending, (bucket, name, label), n));
}

/// `n` more under `key`, a new entry if it has none.
fn count(pending: &mut Pending, key: (String, &'static str, String), n: u64) {
    // from the end: the current minute's keys are the last ones pushed
    match pending.iter_mut().rev().find(|(k, _)| *k == key) {
        Some((_, c)) => *c += n,
        None => pending.push((key, n)),
    }
}

/// A request refused with `status` (401, 400, 413) and `code`.
pub fn refused(status: u16, code: &str) {
    add(REFUSED, format!("{status} {code}"), 1);
}

/// A delivery whose signature matched the secret with this id (first 8 hex of its SHA-256).
pub fn signature_verified(secret_id: &str) {
    add(SIGNATURE_VERIFIED, secret_id.to_string(), 1);
}

/// This isolate's unflushed counts since `since_bucket` (inclusive), by (name, label).
pub fn unflushed_since(since_bucket: &str) -> BTreeMap<(&'static str, String), u64> {
    STATE.with(|s| {
        let mut out = BTreeMap::new();
        for ((bucket, name, label), n) in &s.borrow().pending {
            if bucket.as_str() >= since_bucket {
                *out.entry((*name, label.clone())).or_insert(0) += n;
            }
        }
        out
    })
}

/// This isolate's unflushed refusals by minute: (minute bucket, label, count), for the health
/// charts' refusals per hour.
pub fn unflushed_refusals_by_minute() -> Vec<(String, String, i64)> {
    STATE.with(|s| {
        s.borrow()
            .pending
            .iter()
            .filter(|((_, name, _), _)| *name == REFUSED)
            .map(|((bucket, _, label), n)| (bucket.clone(), label.clone(), *n as i64))
            .collect()
    })
}

/// Whether this reply schedules the next write: there are counts and no write is scheduled.
/// True once per period, so that a reply costs no promise of its own.
pub fn schedule_flush() -> bool {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.scheduled || s.pending.is_empty() {
            return false;
        }
        s.scheduled = true;
        true
    })
}

/// The pending counts (taken out of the isolate), `None` when there are none; the next count
/// schedules the next write.
fn take() -> Option<Pending> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.scheduled = false;
        if s.pending.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut s.pending))
    })
}

fn put_back(pending: Pending) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (k, n) in pending {
            count(&mut s.pending, k, n);
        }
    });
}

/// Writes the counts now: the scheduled write (its timer in `after_reply`, lib.rs) and the
/// cron's, for its own isolate. On a D1 failure they go back into the isolate for the next
/// write.
pub async fn flush(env: &Env) {
    let Some(pending) = take() else {
        return;
    };
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            log::line("counters", "-", "flush_error", Some(&e.to_string()));
            put_back(pending);
            return;
        }
    };
    let rows: Vec<(&str, &str, &str, u64)> = pending
        .iter()
        .map(|((bucket, name, label), n)| (bucket.as_str(), *name, label.as_str(), *n))
        .collect();
    if let Err(e) = sql::flush_counts(&db, &rows).await {
        log::line("counters", "-", "flush_error", Some(&e.to_string()));
        put_back(pending);
    }
}
