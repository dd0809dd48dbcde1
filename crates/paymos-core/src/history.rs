//! The health charts' hourly series (`GET /admin/api/metrics/history`, issue #26), sans I/O:
//! from the rows of three bounded queries (`statements::HISTORY_*`, each a range of an index
//! over the window only) and the facts as they are now, one bucket per hour of the window.
//!
//! - **Deliveries per hour by outcome**: the deliveries received in that hour, by what each
//!   is now (`applied`, `stale`, `ignored`, `dead`, `dismissed`, `unprocessed`).
//! - **Refusals per hour**: the requests refused in that hour (401, 400, 413 and by reason),
//!   from the flushed minute counters and this isolate's unflushed ones.
//! - **The backlog** and **effects delivered against pending**: what the 5-minute cron saw
//!   (`health_sample`), the last sample of each hour; the current hour also takes the facts
//!   as they are now. Effects delivered in an hour are the growth of the delivered count over
//!   it (from the last sample before it); an hour without a sample has none (`null`), which
//!   the page draws as a gap, not as zero.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::rows::{int, opt_int};
use crate::time::iso_minute;

/// `HISTORY_DELIVERIES`: deliveries received in `hour` (`YYYY-MM-DDTHH`) that are `status`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DeliveryHour {
    pub hour: String,
    pub status: String,
    #[serde(deserialize_with = "int")]
    pub count: i64,
}

/// `HISTORY_REFUSALS`: requests refused in `hour` with `label` (`<status> <code>`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RefusalHour {
    pub hour: String,
    pub label: String,
    #[serde(deserialize_with = "int")]
    pub count: i64,
}

/// One `health_sample` row (or the facts now): what the alert run saw at `at` (a minute).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Sample {
    pub at: String,
    #[serde(deserialize_with = "int")]
    pub unprocessed: i64,
    #[serde(default, deserialize_with = "opt_int")]
    pub oldest_unprocessed_seconds: Option<i64>,
    #[serde(deserialize_with = "int")]
    pub deliveries_dead: i64,
    #[serde(deserialize_with = "int")]
    pub effects_pending: i64,
    #[serde(deserialize_with = "int")]
    pub effects_delivered: i64,
    #[serde(deserialize_with = "int")]
    pub effects_dead: i64,
    #[serde(default, deserialize_with = "opt_int")]
    pub oldest_pending_effect_seconds: Option<i64>,
}

/// What the three queries returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rows {
    pub deliveries: Vec<DeliveryHour>,
    pub refusals: Vec<RefusalHour>,
    /// Oldest first; the first may be from before the window (the delivered count's base).
    pub samples: Vec<Sample>,
}

/// The outcomes a delivery bucket counts, in the order the page stacks them.
pub const DELIVERY_STATUSES: [&str; 6] = [
    "applied",
    "stale",
    "ignored",
    "dead",
    "dismissed",
    "unprocessed",
];
/// The refusals' statuses (interface §9).
pub const REFUSAL_STATUSES: [&str; 3] = ["401", "400", "413"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    pub total: i64,
    #[serde(rename = "401")]
    pub unauthorized: i64,
    #[serde(rename = "400")]
    pub bad_request: i64,
    #[serde(rename = "413")]
    pub too_large: i64,
    pub by_reason: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backlog {
    /// Unprocessed deliveries at the hour's last sample; `None`: no sample in that hour.
    pub unprocessed: Option<i64>,
    pub oldest_seconds: Option<i64>,
    /// Dead deliveries not dismissed, at the same sample.
    pub dead: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Effects {
    /// Effects delivered during the hour (growth of the delivered count); `None`: unknown.
    pub delivered: Option<i64>,
    /// Pending at the hour's last sample.
    pub pending: Option<i64>,
    pub dead: Option<i64>,
    pub oldest_pending_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// The hour's start, `YYYY-MM-DDTHH:00Z`.
    pub hour: String,
    /// By [`DELIVERY_STATUSES`], and `total`.
    pub deliveries: BTreeMap<String, i64>,
    pub refused: Refused,
    pub backlog: Backlog,
    pub effects: Effects,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct History {
    pub hours: u32,
    /// The first bucket's start and the moment the series was read.
    pub from: String,
    pub now: String,
    pub buckets: Vec<Bucket>,
}

/// `YYYY-MM-DDTHH` of unix seconds (UTC): the prefix every stored time of that hour has.
pub fn iso_hour(unix_seconds: i64) -> String {
    iso_minute(unix_seconds)[..13].to_string()
}

/// The window of `hours` buckets ending with the current hour: what the queries take as
/// `since` (the first hour, for the deliveries; its first minute, for the counters and the
/// samples).
pub fn window(now: i64, hours: u32) -> (String, String) {
    let first = now - now.rem_euclid(3600) - 3600 * (i64::from(hours.max(1)) - 1);
    let hour = iso_hour(first);
    let minute = format!("{hour}:00");
    (hour, minute)
}

/// The series: `rows` from the queries, `unflushed` this isolate's refusals not written yet
/// (minute bucket, label, count), `current` the facts now (a sample of the current hour).
pub fn hourly(
    now: i64,
    hours: u32,
    rows: &Rows,
    unflushed: &[(String, String, i64)],
    current: Option<Sample>,
) -> History {
    let hours = hours.max(1);
    let first = now - now.rem_euclid(3600) - 3600 * (i64::from(hours) - 1);
    let keys: Vec<String> = (0..i64::from(hours))
        .map(|i| iso_hour(first + 3600 * i))
        .collect();
    let (first_hour, first_minute) = window(now, hours);
    let mut buckets: Vec<Bucket> = keys.iter().map(|h| Bucket::empty(h)).collect();
    let at = |hour: &str| keys.iter().position(|k| k == hour);
    for d in &rows.deliveries {
        if let Some(i) = at(&d.hour) {
            buckets[i].add_deliveries(&d.status, d.count);
        }
    }
    let refusals = rows
        .refusals
        .iter()
        .map(|r| (r.hour.as_str(), r.label.as_str(), r.count));
    // this isolate's, from the window's first minute on
    let unflushed = unflushed
        .iter()
        .filter(|(minute, _, _)| minute.as_str() >= first_minute.as_str() && minute.len() >= 13)
        .map(|(minute, label, n)| (&minute[..13], label.as_str(), *n));
    for (hour, label, n) in refusals.chain(unflushed) {
        if let Some(i) = at(hour) {
            buckets[i].refused.add(label, n);
        }
    }
    add_samples(&mut buckets, &keys, &first_hour, rows, current);
    History {
        hours,
        from: format!("{first_hour}:00Z"),
        now: format!("{}Z", iso_minute(now)),
        buckets,
    }
}

impl Bucket {
    /// An hour with nothing counted and no sample.
    fn empty(hour: &str) -> Bucket {
        Bucket {
            hour: format!("{hour}:00Z"),
            deliveries: DELIVERY_STATUSES
                .iter()
                .map(|s| (s.to_string(), 0))
                .chain([("total".to_string(), 0)])
                .collect(),
            refused: Refused {
                total: 0,
                unauthorized: 0,
                bad_request: 0,
                too_large: 0,
                by_reason: BTreeMap::new(),
            },
            backlog: Backlog {
                unprocessed: None,
                oldest_seconds: None,
                dead: None,
            },
            effects: Effects {
                delivered: None,
                pending: None,
                dead: None,
                oldest_pending_seconds: None,
            },
        }
    }

    /// Deliveries received this hour that are now `status` (any other status: unprocessed).
    fn add_deliveries(&mut self, status: &str, count: i64) {
        let status = if DELIVERY_STATUSES.contains(&status) {
            status
        } else {
            "unprocessed"
        };
        *self.deliveries.entry(status.to_string()).or_insert(0) += count;
        *self.deliveries.entry("total".into()).or_insert(0) += count;
    }
}

impl Refused {
    /// Refusals under `label` (`"<status> <reason>"`).
    fn add(&mut self, label: &str, n: i64) {
        self.total += n;
        match label.split(' ').next().unwrap_or("") {
            "401" => self.unauthorized += n,
            "400" => self.bad_request += n,
            "413" => self.too_large += n,
            _ => {}
        }
        *self.by_reason.entry(label.to_string()).or_insert(0) += n;
    }
}

/// Each hour's backlog and outbox from its last sample, the current facts as the newest; the
/// effects delivered during the hour from the difference with the sample before it.
fn add_samples(
    buckets: &mut [Bucket],
    keys: &[String],
    first_hour: &str,
    rows: &Rows,
    current: Option<Sample>,
) {
    let mut samples: Vec<Sample> = rows.samples.clone();
    samples.sort_by(|a, b| a.at.cmp(&b.at));
    samples.extend(current);
    // the delivered count at the end of the previous hour: the last sample before the window
    let mut before: Option<i64> = samples
        .iter()
        .rfind(|s| s.at.as_str() < first_hour)
        .map(|s| s.effects_delivered);
    for (b, key) in buckets.iter_mut().zip(keys) {
        let Some(s) = samples.iter().rfind(|s| s.at.starts_with(key.as_str())) else {
            // no sample this hour: the base stays the last one known
            continue;
        };
        b.backlog = Backlog {
            unprocessed: Some(s.unprocessed),
            oldest_seconds: s.oldest_unprocessed_seconds,
            dead: Some(s.deliveries_dead),
        };
        b.effects = Effects {
            delivered: before.map(|base| (s.effects_delivered - base).max(0)),
            pending: Some(s.effects_pending),
            dead: Some(s.effects_dead),
            oldest_pending_seconds: s.oldest_pending_effect_seconds,
        };
        before = Some(s.effects_delivered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_450_000 + 25 * 60; // 2025-11-29T21:25Z

    fn sample(at: &str, unprocessed: i64, pending: i64, delivered: i64) -> Sample {
        Sample {
            at: at.into(),
            unprocessed,
            oldest_unprocessed_seconds: (unprocessed > 0).then_some(60),
            deliveries_dead: 1,
            effects_pending: pending,
            effects_delivered: delivered,
            effects_dead: 0,
            oldest_pending_effect_seconds: None,
        }
    }

    #[test]
    fn the_window_ends_with_the_current_hour() {
        assert_eq!(iso_hour(NOW), "2025-11-29T21");
        assert_eq!(
            window(NOW, 24),
            ("2025-11-28T22".to_string(), "2025-11-28T22:00".to_string())
        );
        assert_eq!(window(NOW, 1).0, "2025-11-29T21");
        let h = hourly(NOW, 3, &Rows::default(), &[], None);
        let hours: Vec<&str> = h.buckets.iter().map(|b| b.hour.as_str()).collect();
        assert_eq!(
            hours,
            [
                "2025-11-29T19:00Z",
                "2025-11-29T20:00Z",
                "2025-11-29T21:00Z"
            ]
        );
        assert_eq!(h.from, "2025-11-29T19:00Z");
        assert_eq!(h.now, "2025-11-29T21:25Z");
        // nothing known: zero deliveries and refusals, gaps for the sampled series
        assert!(h.buckets.iter().all(|b| b.deliveries["total"] == 0
            && b.refused.total == 0
            && b.backlog.unprocessed.is_none()
            && b.effects.delivered.is_none()));
    }

    #[test]
    fn buckets_add_up_what_the_queries_read() {
        let d = |hour: &str, status: &str, count| DeliveryHour {
            hour: hour.into(),
            status: status.into(),
            count,
        };
        let r = |hour: &str, label: &str, count| RefusalHour {
            hour: hour.into(),
            label: label.into(),
            count,
        };
        let rows = Rows {
            deliveries: vec![
                d("2025-11-29T20", "applied", 5),
                d("2025-11-29T20", "stale", 2),
                d("2025-11-29T21", "dead", 1),
                d("2025-11-29T21", "dismissed", 1),
                d("2025-11-29T21", "unprocessed", 3),
                d("2025-11-20T21", "applied", 99), // outside the window: not counted
            ],
            refusals: vec![
                r("2025-11-29T20", "401 signature_mismatch", 7),
                r("2025-11-29T21", "413 payload_too_large", 1),
            ],
            samples: vec![
                sample("2025-11-29T18:55", 0, 0, 100), // before the window: the base
                sample("2025-11-29T19:05", 2, 1, 104),
                sample("2025-11-29T19:55", 0, 3, 110),
                // no sample in 20:00
                sample("2025-11-29T21:05", 9, 0, 130),
            ],
        };
        let unflushed = vec![
            (
                "2025-11-29T21:24".to_string(),
                "401 signature_mismatch".to_string(),
                2,
            ),
            (
                "2025-11-29T17:00".to_string(),
                "400 invalid_json".to_string(),
                5,
            ),
        ];
        let h = hourly(NOW, 3, &rows, &unflushed, None);
        let [b19, b20, b21] = [&h.buckets[0], &h.buckets[1], &h.buckets[2]];
        assert_eq!(b20.deliveries["applied"], 5);
        assert_eq!(b20.deliveries["total"], 7);
        assert_eq!(
            (
                b21.deliveries["dead"],
                b21.deliveries["dismissed"],
                b21.deliveries["unprocessed"]
            ),
            (1, 1, 3)
        );
        assert_eq!(b19.deliveries["total"], 0);
        assert_eq!((b20.refused.total, b20.refused.unauthorized), (7, 7));
        assert_eq!(b21.refused.too_large, 1);
        assert_eq!(
            b21.refused.unauthorized, 2,
            "this isolate's unflushed refusals count"
        );
        assert_eq!(b21.refused.total, 3);
        assert_eq!(
            b19.refused.total, 0,
            "an unflushed count before the window is left out"
        );
        // the last sample of each hour; delivered from the last one before
        assert_eq!(b19.backlog.unprocessed, Some(0));
        assert_eq!(b19.effects.pending, Some(3));
        assert_eq!(
            b19.effects.delivered,
            Some(10),
            "110 at 19:55, 100 before the window"
        );
        assert_eq!(b20.backlog.unprocessed, None, "no sample: a gap, not zero");
        assert_eq!(b20.effects.delivered, None);
        assert_eq!(
            b21.effects.delivered,
            Some(20),
            "130 at 21:05 against 110 at 19:55"
        );
        assert_eq!(b21.backlog.unprocessed, Some(9));
        // the facts now are the current hour's last sample
        let now = sample("2025-11-29T21:25", 0, 4, 131);
        let h = hourly(NOW, 3, &rows, &[], Some(now));
        assert_eq!(h.buckets[2].backlog.unprocessed, Some(0));
        assert_eq!(h.buckets[2].effects.pending, Some(4));
        assert_eq!(h.buckets[2].effects.delivered, Some(21));
        // a redelivery made the count shrink: never negative
        let shrunk = Rows {
            samples: vec![
                sample("2025-11-29T20:10", 0, 0, 50),
                sample("2025-11-29T21:10", 0, 1, 49),
            ],
            ..Rows::default()
        };
        let h = hourly(NOW, 3, &shrunk, &[], None);
        assert_eq!(h.buckets[1].effects.delivered, None, "no base before 20:10");
        assert_eq!(h.buckets[2].effects.delivered, Some(0));
    }

    #[test]
    fn rows_read_as_d1_hands_them_over() {
        let rows: Vec<Sample> = serde_json::from_str(
            r#"[{"at":"2025-11-29T21:05","unprocessed":1.0,"oldest_unprocessed_seconds":null,
                 "deliveries_dead":0,"effects_pending":2,"effects_delivered":3,"effects_dead":0,
                 "oldest_pending_effect_seconds":65.0}]"#,
        )
        .unwrap();
        assert_eq!(rows[0].unprocessed, 1);
        assert_eq!(rows[0].oldest_pending_effect_seconds, Some(65));
        let d: Vec<DeliveryHour> =
            serde_json::from_str(r#"[{"hour":"2025-11-29T21","status":"applied","count":4}]"#)
                .unwrap();
        assert_eq!(d[0].count, 4);
    }
}
