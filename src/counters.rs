//! Counters kept in the isolate: refused requests by reason, accepted signatures by secret.
//!
//! A refused request must not cost a D1 write (CONTRACT §9: a flood of bad signatures is an
//! attack, not load to amplify). Counts are added up here, in memory, per minute, and
//! flushed to `request_count` at most once per `FLUSH_EVERY_MS` per isolate, after a
//! response, with `waitUntil`: one small batch whatever the volume. What is lost when an
//! isolate dies is what it counted since its last flush (at most a minute's worth); the
//! metrics of the isolate that answers add its own unflushed counts.

use crate::log;
use crate::sql;
use paymos_core::time::iso_minute;
use std::cell::RefCell;
use std::collections::BTreeMap;
use worker::{Date, Env};

/// Flush at most this often per isolate.
pub const FLUSH_EVERY_MS: u64 = 60_000;

pub const REFUSED: &str = "refused";
pub const SIGNATURE_VERIFIED: &str = "signature_verified";

/// (minute bucket, counter name, label) → count.
type Pending = BTreeMap<(String, &'static str, String), u64>;

struct State {
    pending: Pending,
    last_flush_ms: u64,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        pending: BTreeMap::new(),
        // an isolate's first requests do not flush at once: a flood of refusals right after
        // a cold start still costs no write before the first minute is over
        last_flush_ms: Date::now().as_millis(),
    });
}

fn add(name: &'static str, label: String, n: u64) {
    let bucket = iso_minute((Date::now().as_millis() / 1000) as i64);
    STATE.with(|s| {
        *s.borrow_mut()
            .pending
            .entry((bucket, name, label))
            .or_insert(0) += n;
    });
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

/// Whether a flush would write now (checked before registering one with `waitUntil`).
pub fn flush_due() -> bool {
    let now = Date::now().as_millis();
    STATE.with(|s| {
        let s = s.borrow();
        !s.pending.is_empty() && now.saturating_sub(s.last_flush_ms) >= FLUSH_EVERY_MS
    })
}

/// The pending counts when a flush is due (taken out of the isolate), else `None`.
fn take_if_due(force: bool) -> Option<Pending> {
    let now = Date::now().as_millis();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.pending.is_empty() || (!force && now.saturating_sub(s.last_flush_ms) < FLUSH_EVERY_MS)
        {
            return None;
        }
        s.last_flush_ms = now;
        Some(std::mem::take(&mut s.pending))
    })
}

fn put_back(pending: Pending) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (k, n) in pending {
            *s.pending.entry(k).or_insert(0) += n;
        }
    });
}

/// Writes the counts if a flush is due (or `force`, from the cron). On a D1 failure they go
/// back into the isolate for the next flush.
pub async fn flush(env: &Env, force: bool) {
    let Some(pending) = take_if_due(force) else {
        return;
    };
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            log::line("counters", "-", "flush_error", Some(&e.0));
            put_back(pending);
            return;
        }
    };
    let rows: Vec<(&str, &str, &str, u64)> = pending
        .iter()
        .map(|((bucket, name, label), n)| (bucket.as_str(), *name, label.as_str(), *n))
        .collect();
    if let Err(e) = sql::flush_counts(&db, &rows).await {
        log::line("counters", "-", "flush_error", Some(&e.0));
        put_back(pending);
    }
}
