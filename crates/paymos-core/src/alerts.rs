//! Alerts (interface §9) as pure decisions: which conditions hold, given the facts the
//! metrics read, and what to do with each alert, given the clock (`now`, unix seconds).
//! The Worker reads the facts, keeps the alerts in D1 and sends them; nothing here sleeps.
//!
//! An acknowledgement covers what the alert counted when it was given (interface §9,
//! amended): each observation carries a **mark**, its newest instance, and a later one
//! reopens an acknowledged alert, which is then sent again. The marks, by kind:
//! - `delivery_dead`, `effect_dead`: when the newest dead delivery or effect not dismissed
//!   went dead (unix ms). Another one going dead (a new one, or a replayed one dying again)
//!   is later; dismissing one never makes the mark grow.
//! - `livemode_mismatch`: when the newest mismatched delivery was received (unix ms).
//! - `reconciliation`: the number of findings (0 for a run that only failed or was
//!   truncated). A daily run reports the same missing invoice for 7 days (interface §6): an
//!   acknowledgement covers those, and a run that finds more reopens it, the first finding
//!   after an acknowledged "provider unreachable" among them.
//! - `signature_refusals`: the running total of refused signatures. A new burst is another
//!   burst's worth of them (`ALERT_SIGNATURE_REFUSALS`) since the acknowledgement, while the
//!   condition holds: the alert's [`Observation::step`]. One more refusal is not a burst.
//! - `deliveries_backlog`, `effects_backlog`: how large the backlog is, in powers of two (the
//!   bit length of its count: 1, 2–3, 4–7, …). An acknowledged backlog is not told again for
//!   every delivery that joins it, but one that has grown past the next power of two is new.
//! - `database_size`: its share of the cap in steps of 5 points (80, 85, 90, 95 %): an
//!   acknowledged 80 % is told again at 85 %.
//!
//! So no acknowledged alert stays silent for ever while what it counts keeps growing.
//!
//! `database_unavailable` is decided without D1 ([`database_unavailable`]): the cron that
//! cannot read D1 cannot keep an alert there either.

use serde::Serialize;

/// An alert is re-sent at most this often while it stays open.
pub const RESEND_AFTER_SECONDS: i64 = 6 * 3600;
/// A backlog older than this is an alert (deliveries and effects).
pub const BACKLOG_SECONDS: i64 = 15 * 60;
/// Refused signatures within [`SIGNATURE_WINDOW_SECONDS`] that make a burst, by default.
pub const DEFAULT_SIGNATURE_BURST: i64 = 20;
pub const SIGNATURE_WINDOW_SECONDS: i64 = 15 * 60;
/// Livemode mismatches are looked for over the last day.
pub const LIVEMODE_WINDOW_SECONDS: i64 = 24 * 3600;
/// The `database_size` alert opens at this share of `DATABASE_SIZE_LIMIT_BYTES` (interface §10).
pub const DATABASE_SIZE_ALERT_PERCENT: i64 = 80;
/// An acknowledged `database_size` alert is sent again each time the database grows by this
/// many more points of its cap.
pub const DATABASE_SIZE_STEP_PERCENT: i64 = 5;

/// One kind per condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    DeliveryDead,
    EffectDead,
    DeliveriesBacklog,
    EffectsBacklog,
    Reconciliation,
    LivemodeMismatch,
    SignatureRefusals,
    DatabaseSize,
    Archive,
    /// The cron could not read D1 (sent without it; never kept open in D1).
    DatabaseUnavailable,
}

impl AlertKind {
    pub const ALL: [AlertKind; 10] = [
        AlertKind::DeliveryDead,
        AlertKind::EffectDead,
        AlertKind::DeliveriesBacklog,
        AlertKind::EffectsBacklog,
        AlertKind::Reconciliation,
        AlertKind::LivemodeMismatch,
        AlertKind::SignatureRefusals,
        AlertKind::DatabaseSize,
        AlertKind::Archive,
        AlertKind::DatabaseUnavailable,
    ];

    /// Whether the cron keeps this kind in D1, from the facts it reads there (every kind but
    /// `database_unavailable`).
    pub fn kept_in_d1(self) -> bool {
        self != AlertKind::DatabaseUnavailable
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::DeliveryDead => "delivery_dead",
            AlertKind::EffectDead => "effect_dead",
            AlertKind::DeliveriesBacklog => "deliveries_backlog",
            AlertKind::EffectsBacklog => "effects_backlog",
            AlertKind::Reconciliation => "reconciliation",
            AlertKind::LivemodeMismatch => "livemode_mismatch",
            AlertKind::SignatureRefusals => "signature_refusals",
            AlertKind::DatabaseSize => "database_size",
            AlertKind::Archive => "archive",
            AlertKind::DatabaseUnavailable => "database_unavailable",
        }
    }

    pub fn from_str_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Money or evidence at stake now (critical), or something to look at (warning).
    pub fn severity(self) -> &'static str {
        match self {
            AlertKind::DeliveryDead
            | AlertKind::EffectDead
            | AlertKind::Reconciliation
            | AlertKind::SignatureRefusals
            | AlertKind::DatabaseUnavailable => "critical",
            // a full database refuses every delivery; at 80 % there is time to act, and a
            // failed archiving run removed nothing (the bodies are still in D1)
            AlertKind::DeliveriesBacklog
            | AlertKind::EffectsBacklog
            | AlertKind::LivemodeMismatch
            | AlertKind::DatabaseSize
            | AlertKind::Archive => "warning",
        }
    }
}

/// The last reconciliation, as far as alerts care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconciliationFacts {
    /// `running`, `done`, `truncated` or `failed`.
    pub state: String,
    pub ok: bool,
    pub missing: i64,
    pub doubled: i64,
    pub error: Option<String>,
}

/// The database's size and the archive's last run, as alerts care (interface §10).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageFacts {
    /// As D1 reports it; `None` when it did not.
    pub database_bytes: Option<i64>,
    /// `DATABASE_SIZE_LIMIT_BYTES`.
    pub size_limit_bytes: i64,
    /// The last archiving run failed: its id and why.
    pub archive_failed: Option<(i64, String)>,
}

/// What the metrics read, as alerts need it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// Dead and not dismissed.
    pub dead_deliveries: i64,
    /// When the newest of them went dead (unix ms).
    pub dead_deliveries_mark: Option<i64>,
    /// Dead and not dismissed.
    pub dead_effects: i64,
    pub dead_effects_mark: Option<i64>,
    pub oldest_unprocessed_seconds: Option<i64>,
    pub oldest_pending_effect_seconds: Option<i64>,
    pub pending_effects: i64,
    pub unprocessed_deliveries: i64,
    pub reconciliation: Option<ReconciliationFacts>,
    pub livemode_mismatches_recent: i64,
    /// When the newest livemode mismatch was received (unix ms).
    pub livemode_mark: Option<i64>,
    pub signature_refusals_recent: i64,
    /// Refused signatures since the beginning: the `signature_refusals` alert's mark.
    pub signature_refusals_total: i64,
    pub signature_burst: i64,
    pub storage: Option<StorageFacts>,
}

/// `n` bytes in decimal units (D1's 10 GB is 10,000,000,000 bytes).
fn bytes_text(n: i64) -> String {
    let v = n as f64;
    match n {
        n if n >= 1_000_000_000 => format!("{:.1} GB", v / 1e9),
        n if n >= 1_000_000 => format!("{:.1} MB", v / 1e6),
        n if n >= 1_000 => format!("{:.1} kB", v / 1e3),
        n => format!("{n} bytes"),
    }
}

/// A backlog's size in powers of two, the bit length of its count (0 → 0, 1 → 1, 2–3 → 2,
/// 4–7 → 3, …): its mark.
fn magnitude(count: i64) -> i64 {
    i64::from(64 - count.max(0).leading_zeros())
}

/// A condition that holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub kind: AlertKind,
    pub count: i64,
    /// Its newest instance (see the module's doc); `None`: a condition without instances.
    pub mark: Option<i64>,
    /// How far past the acknowledged mark a new instance lies: 1 where the mark is a time or
    /// a number of findings; a burst's size where it is the running total of refusals.
    pub step: i64,
    pub summary: String,
}

/// The conditions that hold, one observation per kind at most.
pub fn observe(f: &Facts) -> Vec<Observation> {
    [
        dead_deliveries(f),
        dead_effects(f),
        deliveries_backlog(f),
        effects_backlog(f),
        reconciliation(f),
        livemode_mismatch(f),
        database_size(f),
        archive(f),
        signature_refusals(f),
    ]
    .into_iter()
    .flatten()
    .collect()
}

impl Observation {
    /// An observation whose new instances lie one past the acknowledged mark.
    fn new(kind: AlertKind, count: i64, mark: Option<i64>, summary: String) -> Self {
        Observation {
            kind,
            count,
            mark,
            step: 1,
            summary,
        }
    }
}

fn dead_deliveries(f: &Facts) -> Option<Observation> {
    (f.dead_deliveries > 0).then(|| {
        Observation::new(
            AlertKind::DeliveryDead,
            f.dead_deliveries,
            f.dead_deliveries_mark,
            format!(
                "{} deliveries are dead (their processing kept failing); replay them once fixed, or dismiss them",
                f.dead_deliveries
            ),
        )
    })
}

fn dead_effects(f: &Facts) -> Option<Observation> {
    (f.dead_effects > 0).then(|| {
        Observation::new(
            AlertKind::EffectDead,
            f.dead_effects,
            f.dead_effects_mark,
            format!(
                "{} effects could not be delivered to the order system; redeliver them, or dismiss them",
                f.dead_effects
            ),
        )
    })
}

fn deliveries_backlog(f: &Facts) -> Option<Observation> {
    let age = f
        .oldest_unprocessed_seconds
        .filter(|a| *a > BACKLOG_SECONDS)?;
    Some(Observation::new(
        AlertKind::DeliveriesBacklog,
        f.unprocessed_deliveries,
        Some(magnitude(f.unprocessed_deliveries)),
        format!(
            "{} deliveries unprocessed, the oldest for {} min",
            f.unprocessed_deliveries,
            age / 60
        ),
    ))
}

fn effects_backlog(f: &Facts) -> Option<Observation> {
    let age = f
        .oldest_pending_effect_seconds
        .filter(|a| *a > BACKLOG_SECONDS)?;
    Some(Observation::new(
        AlertKind::EffectsBacklog,
        f.pending_effects,
        Some(magnitude(f.pending_effects)),
        format!(
            "{} effects pending, the oldest for {} min (an order system down, or a fulfilment awaiting its order_ref)",
            f.pending_effects,
            age / 60
        ),
    ))
}

/// Not ok: findings, an unreachable provider, or a truncated run, a run that did not finish
/// in one invocation included (interface §6: it reports `truncated`, `ok: false` until the
/// cron's continuations finish it; the alert resolves when a run is ok).
fn reconciliation(f: &Facts) -> Option<Observation> {
    let r = f.reconciliation.as_ref().filter(|r| !r.ok)?;
    let findings = r.missing + r.doubled;
    let mut summary = format!(
        "reconciliation {}: {} missing, {} doubled",
        r.state, r.missing, r.doubled
    );
    if r.state == "running" {
        summary.push_str(" so far (not finished in one invocation: continued by the cron)");
    }
    if let Some(e) = &r.error {
        summary.push_str(&format!(" ({e})"));
    }
    // counted as one at least; marked by its findings, so that the first one after an
    // acknowledged failure (provider unreachable, truncated) is new
    Some(Observation::new(
        AlertKind::Reconciliation,
        findings.max(1),
        Some(findings),
        summary,
    ))
}

fn livemode_mismatch(f: &Facts) -> Option<Observation> {
    (f.livemode_mismatches_recent > 0).then(|| {
        Observation::new(
            AlertKind::LivemodeMismatch,
            f.livemode_mismatches_recent,
            f.livemode_mark,
            format!(
                "{} deliveries in the last 24 h were for the other mode (live/test) and changed nothing",
                f.livemode_mismatches_recent
            ),
        )
    })
}

fn database_size(f: &Facts) -> Option<Observation> {
    let s = f.storage.as_ref()?;
    let limit = s.size_limit_bytes.max(1);
    let bytes = s.database_bytes.filter(|b| {
        i128::from(*b) * 100 >= i128::from(limit) * i128::from(DATABASE_SIZE_ALERT_PERCENT)
    })?;
    let percent = (i128::from(bytes) * 100 / i128::from(limit)) as i64;
    Some(Observation::new(
        AlertKind::DatabaseSize,
        percent,
        // 5 points more than an acknowledgement covered is new (80 → 85 → 90 %)
        Some(percent / DATABASE_SIZE_STEP_PERCENT),
        format!(
            "the database is {} of its {} cap ({percent} %): past it every delivery is refused; check the archive runs, lower RETENTION_DAYS or POST /admin/api/archive",
            bytes_text(bytes),
            bytes_text(limit)
        ),
    ))
}

fn archive(f: &Facts) -> Option<Observation> {
    let (run, error) = f.storage.as_ref()?.archive_failed.as_ref()?;
    // its count is the failed run's id: a later run that fails too is another one
    Some(Observation::new(
        AlertKind::Archive,
        *run,
        // a later failing run is a new instance: it reopens an acknowledged alert
        Some(*run),
        format!("archiving run {run} failed and removed nothing of its failing chunk: {error}"),
    ))
}

fn signature_refusals(f: &Facts) -> Option<Observation> {
    let burst = f.signature_burst.max(1);
    (f.signature_refusals_recent >= burst).then(|| Observation {
        // a new burst is a burst's worth of refusals past the acknowledgement, not one more
        step: burst,
        ..Observation::new(
            AlertKind::SignatureRefusals,
            f.signature_refusals_recent,
            Some(f.signature_refusals_total),
            format!(
                "{} requests refused for their signature in 15 min: a secret rotated on one side only?",
                f.signature_refusals_recent
            ),
        )
    })
}

/// An alert as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub acknowledged: bool,
    /// Unix seconds of the last successful send; `None`: never sent (or every send failed).
    pub sent_at: Option<i64>,
    /// The newest instance the acknowledgement covered; `None`: not acknowledged, or
    /// acknowledged before marks were kept with nothing known (then never reopened).
    pub acked_mark: Option<i64>,
    /// Reopened (a new instance after an acknowledgement) since its last successful send:
    /// the new instance is not told yet, whenever the previous one was.
    pub reopened_unsent: bool,
}

/// What to do with one kind's alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The condition holds and no alert is open: open one and send it.
    Open,
    /// Still holds: update count/summary/mark/last_seen; `send` when it is due.
    Update {
        send: bool,
    },
    /// Acknowledged, and a new instance came after what the acknowledgement covered: open
    /// again, and sent now.
    Reopen,
    /// No longer holds: resolve.
    Resolve,
    Nothing,
}

impl Action {
    /// Whether carrying it out sends the alert.
    pub fn sends(self) -> bool {
        matches!(
            self,
            Action::Open | Action::Update { send: true } | Action::Reopen
        )
    }

    /// The same decision without its send, for a run whose budget has no room left for it:
    /// an update is still recorded; an opening or a reopening waits whole for the next run,
    /// which decides it again from the same state (nothing was written).
    pub fn deferred(self) -> Action {
        match self {
            Action::Update { .. } => Action::Update { send: false },
            Action::Open | Action::Reopen => Action::Nothing,
            other => other,
        }
    }
}

/// What one cron run's alerts may cost besides their sends: the metrics' facts (the counts,
/// the latest reconciliation and its report, the archive's state: 6), the outage's record,
/// the alerts kept, and the closing batch.
pub const RUN_COST: u32 = 9;
/// What sending one alert costs: its write (opened, updated or reopened), its reload, the
/// POST, and the send's record.
pub const SEND_COST: u32 = 4;

/// The kinds kept in D1 in the order a run decides them: the critical ones first, so that a
/// run whose budget cannot send every alert sends those.
pub fn by_severity() -> impl Iterator<Item = AlertKind> {
    let kept = AlertKind::ALL.into_iter().filter(|k| k.kept_in_d1());
    let critical = kept.clone().filter(|k| k.severity() == "critical");
    critical.chain(kept.filter(|k| k.severity() != "critical"))
}

pub fn decide(observed: Option<&Observation>, kept: Option<&Kept>, now: i64) -> Action {
    match (observed, kept) {
        (None, None) => Action::Nothing,
        (None, Some(_)) => Action::Resolve,
        (Some(_), None) => Action::Open,
        // acknowledged: silent while nothing new comes (its count and summary still follow
        // the condition on /admin); a newer instance than the acknowledgement covered reopens
        // it (interface §9, amended). A later occurrence, after it resolved, opens a new alert.
        (Some(o), Some(k)) if k.acknowledged => match (o.mark, k.acked_mark) {
            (Some(mark), Some(acked)) if mark >= acked.saturating_add(o.step.max(1)) => {
                Action::Reopen
            }
            _ => Action::Update { send: false },
        },
        // a reopening whose send failed is tried again at the next run, as a first send is
        (Some(_), Some(k)) => Action::Update {
            send: k.reopened_unsent
                || k.sent_at
                    .is_none_or(|at| now.saturating_sub(at) >= RESEND_AFTER_SECONDS),
        },
    }
}

/// The `database_unavailable` alert the cron sends when it cannot read D1 (interface §9):
/// `since` is when this isolate first failed to read D1 in this outage (unix seconds),
/// `count` how many runs failed so far. Its id is [`database_unavailable_id`].
pub fn database_unavailable(since: i64, count: i64, error: &str) -> Observation {
    Observation {
        kind: AlertKind::DatabaseUnavailable,
        count,
        mark: None,
        step: 1,
        summary: format!(
            "the cron could not read D1 ({error}) since {} UTC: deliveries are refused with 503 \
             while it lasts (the sender retries), and no other alert can be evaluated",
            crate::time::iso_minute(since)
        ),
    }
}

/// `alt_dbdown_<YYYYMMDDHH>`, the hour of `now` (unix seconds, UTC): the copies every
/// 5-minute run sends within an hour collapse at a receiver that drops copies by id, and the
/// next hour's is a reminder.
pub fn database_unavailable_id(now: i64) -> String {
    let m = crate::time::iso_minute(now);
    // "YYYY-MM-DDTHH:MM" -> "YYYYMMDDHH"
    let digits: String = m[..13].chars().filter(char::is_ascii_digit).collect();
    format!("alt_dbdown_{digits}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_450_000;

    #[test]
    fn a_deferred_send_is_decided_again_at_the_next_run() {
        let o = obs(AlertKind::DeliveryDead, 1);
        // nothing open: the opening waits whole (nothing written), and is decided again
        assert_eq!(decide(Some(&o), None, NOW).deferred(), Action::Nothing);
        assert_eq!(decide(Some(&o), None, NOW + 300), Action::Open);
        // open, its resend due: updated without the send, which stays due
        let k = Kept {
            acknowledged: false,
            sent_at: Some(NOW - RESEND_AFTER_SECONDS),
            acked_mark: None,
            reopened_unsent: false,
        };
        assert_eq!(
            decide(Some(&o), Some(&k), NOW).deferred(),
            Action::Update { send: false }
        );
        assert_eq!(
            decide(Some(&o), Some(&k), NOW + 300),
            Action::Update { send: true }
        );
        for a in [
            Action::Resolve,
            Action::Nothing,
            Action::Update { send: false },
        ] {
            assert!(!a.sends());
            assert_eq!(a.deferred(), a);
        }
        for a in [Action::Open, Action::Reopen, Action::Update { send: true }] {
            assert!(a.sends() && !a.deferred().sends());
        }
    }

    #[test]
    fn a_run_decides_the_critical_kinds_first() {
        let order: Vec<_> = by_severity().map(AlertKind::severity).collect();
        assert_eq!(
            order.len(),
            AlertKind::ALL.len() - 1,
            "every kind kept in D1"
        );
        let first_warning = order.iter().position(|s| *s == "warning").unwrap();
        assert!(order[first_warning..].iter().all(|s| *s == "warning"));
        assert!(order[..first_warning].iter().all(|s| *s == "critical"));
    }

    fn obs(kind: AlertKind, count: i64) -> Observation {
        Observation {
            kind,
            count,
            mark: None,
            step: 1,
            summary: String::new(),
        }
    }

    fn marked(kind: AlertKind, count: i64, mark: i64) -> Observation {
        Observation {
            mark: Some(mark),
            ..obs(kind, count)
        }
    }

    #[test]
    fn conditions() {
        assert!(observe(&Facts {
            signature_burst: 20,
            ..Facts::default()
        })
        .is_empty());
        let f = Facts {
            dead_deliveries: 2,
            dead_effects: 1,
            oldest_unprocessed_seconds: Some(BACKLOG_SECONDS + 1),
            unprocessed_deliveries: 40,
            oldest_pending_effect_seconds: Some(BACKLOG_SECONDS),
            pending_effects: 3,
            reconciliation: Some(ReconciliationFacts {
                state: "done".into(),
                ok: false,
                missing: 2,
                ..Default::default()
            }),
            livemode_mismatches_recent: 1,
            signature_refusals_recent: 20,
            signature_burst: 20,
            ..Facts::default()
        };
        let kinds: Vec<AlertKind> = observe(&f).iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                AlertKind::DeliveryDead,
                AlertKind::EffectDead,
                AlertKind::DeliveriesBacklog,
                AlertKind::Reconciliation,
                AlertKind::LivemodeMismatch,
                AlertKind::SignatureRefusals
            ],
            "the effects backlog is exactly 15 min: not yet"
        );
        let quiet = Facts {
            reconciliation: Some(ReconciliationFacts {
                state: "done".into(),
                ok: true,
                ..Default::default()
            }),
            signature_burst: 20,
            signature_refusals_recent: 19,
            ..Facts::default()
        };
        assert!(observe(&quiet).is_empty(), "a run that was ok, 19 < 20");
        let running = Facts {
            reconciliation: Some(ReconciliationFacts {
                state: "running".into(),
                missing: 3,
                ..Default::default()
            }),
            signature_burst: 20,
            ..Facts::default()
        };
        let o = observe(&running);
        assert_eq!(
            o.len(),
            1,
            "a run not finished in one invocation is truncated so far"
        );
        assert_eq!((o[0].kind, o[0].count), (AlertKind::Reconciliation, 3));
        assert!(o[0].summary.contains("3 missing") && o[0].summary.contains("continued"));
        let failed = Facts {
            reconciliation: Some(ReconciliationFacts {
                state: "failed".into(),
                error: Some("the provider API answered 500".into()),
                ..Default::default()
            }),
            signature_burst: 20,
            ..Facts::default()
        };
        let o = observe(&failed);
        assert_eq!(o[0].count, 1);
        assert!(o[0].summary.contains("500"));
    }

    #[test]
    fn lifecycle() {
        let o = obs(AlertKind::DeliveryDead, 1);
        assert_eq!(decide(Some(&o), None, NOW), Action::Open);
        assert_eq!(decide(None, None, NOW), Action::Nothing);
        let sent = Kept {
            acknowledged: false,
            sent_at: Some(NOW - 3600),
            acked_mark: None,
            reopened_unsent: false,
        };
        assert_eq!(
            decide(Some(&o), Some(&sent), NOW),
            Action::Update { send: false },
            "not re-sent within 6 hours"
        );
        assert_eq!(
            decide(Some(&o), Some(&sent), NOW + RESEND_AFTER_SECONDS - 3600),
            Action::Update { send: true },
            "re-sent after 6 hours open"
        );
        let never = Kept {
            sent_at: None,
            ..sent.clone()
        };
        assert_eq!(
            decide(Some(&o), Some(&never), NOW),
            Action::Update { send: true },
            "a failed send is retried at the next run"
        );
        let acked = Kept {
            acknowledged: true,
            sent_at: Some(NOW - 7 * 3600),
            acked_mark: None,
            reopened_unsent: false,
        };
        assert_eq!(
            decide(Some(&o), Some(&acked), NOW),
            Action::Update { send: false },
            "acknowledged: silent"
        );
        assert_eq!(
            decide(
                Some(&obs(AlertKind::DeliveriesBacklog, 4000)),
                Some(&acked),
                NOW
            ),
            Action::Update { send: false },
            "acknowledged with no mark (before backlogs had one): silent until it resolves"
        );
        assert_eq!(decide(None, Some(&acked), NOW), Action::Resolve);
    }

    /// interface §9 (amended): an acknowledgement covers what was counted when it was given.
    #[test]
    fn a_new_instance_reopens_an_acknowledged_alert() {
        let t = 1_764_450_000_000; // the newest dead one went dead then (unix ms)
        let acked = Kept {
            acknowledged: true,
            sent_at: Some(NOW - 60),
            acked_mark: Some(t),
            reopened_unsent: false,
        };
        // the same dead ones: silent
        assert_eq!(
            decide(
                Some(&marked(AlertKind::DeliveryDead, 2, t)),
                Some(&acked),
                NOW
            ),
            Action::Update { send: false }
        );
        // one more went dead after the acknowledgement: reopened, sent now (even within 6 h)
        assert_eq!(
            decide(
                Some(&marked(AlertKind::DeliveryDead, 3, t + 1)),
                Some(&acked),
                NOW
            ),
            Action::Reopen
        );
        // one dismissed, another gone dead: the count is what was acknowledged, the mark is
        // newer: a count would miss it, the mark does not
        assert_eq!(
            decide(
                Some(&marked(AlertKind::EffectDead, 2, t + 5_000)),
                Some(&acked),
                NOW
            ),
            Action::Reopen
        );
        // the newest dismissed: the mark goes back, nothing new
        assert_eq!(
            decide(
                Some(&marked(AlertKind::DeliveryDead, 1, t - 90_000)),
                Some(&acked),
                NOW
            ),
            Action::Update { send: false }
        );
        // reconciliation: the mark is the count of findings; more findings reopen
        let recon = Kept {
            acked_mark: Some(2),
            ..acked.clone()
        };
        assert_eq!(
            decide(
                Some(&marked(AlertKind::Reconciliation, 2, 2)),
                Some(&recon),
                NOW
            ),
            Action::Update { send: false },
            "the same missing invoice, run after run: covered"
        );
        assert_eq!(
            decide(
                Some(&marked(AlertKind::Reconciliation, 3, 3)),
                Some(&recon),
                NOW
            ),
            Action::Reopen
        );
        // an open (not acknowledged) alert is never "reopened": it is re-sent on its schedule
        let open = Kept {
            acknowledged: false,
            ..acked.clone()
        };
        assert_eq!(
            decide(
                Some(&marked(AlertKind::DeliveryDead, 3, t + 1)),
                Some(&open),
                NOW
            ),
            Action::Update { send: false }
        );
        // reopened, and its send failed: open, last sent a minute ago (the instance before)
        let reopened = Kept {
            reopened_unsent: true,
            ..open.clone()
        };
        assert_eq!(
            decide(
                Some(&marked(AlertKind::DeliveryDead, 3, t + 1)),
                Some(&reopened),
                NOW
            ),
            Action::Update { send: true },
            "the new instance is sent at the next run, not 6 hours after the last send"
        );
        // all dismissed: the condition no longer holds
        assert_eq!(decide(None, Some(&acked), NOW), Action::Resolve);
        // acknowledged without a mark (before marks were kept): never reopened by one
        let unmarked = Kept {
            acked_mark: None,
            ..acked
        };
        assert_eq!(
            decide(
                Some(&marked(AlertKind::DeliveryDead, 9, t)),
                Some(&unmarked),
                NOW
            ),
            Action::Update { send: false }
        );
    }

    #[test]
    fn a_new_burst_and_a_first_finding_reopen() {
        let facts = |recent, total| Facts {
            signature_refusals_recent: recent,
            signature_refusals_total: total,
            signature_burst: 20,
            ..Facts::default()
        };
        let seen = |f: &Facts| observe(f).into_iter().next().expect("a burst");
        let acked = |mark| Kept {
            acknowledged: true,
            sent_at: Some(NOW),
            acked_mark: Some(mark),
            reopened_unsent: false,
        };
        // acknowledged at 26 refused in all; refusals go on
        let k = acked(seen(&facts(26, 26)).mark.expect("marked by the total"));
        assert_eq!(
            decide(Some(&seen(&facts(30, 45))), Some(&k), NOW),
            Action::Update { send: false },
            "19 more: not yet a burst"
        );
        assert_eq!(
            decide(Some(&seen(&facts(30, 46))), Some(&k), NOW),
            Action::Reopen,
            "a burst's worth (20) past the acknowledgement"
        );
        // reconciliation: acknowledged while the provider was unreachable (no findings); the
        // next run finds a missing invoice: new
        let recon = |state: &str, missing| Facts {
            reconciliation: Some(ReconciliationFacts {
                state: state.into(),
                missing,
                ..Default::default()
            }),
            signature_burst: 20,
            ..Facts::default()
        };
        let failed = seen(&recon("failed", 0));
        assert_eq!((failed.count, failed.mark), (1, Some(0)));
        let k = acked(failed.mark.unwrap());
        assert_eq!(
            decide(Some(&seen(&recon("failed", 0))), Some(&k), NOW),
            Action::Update { send: false }
        );
        assert_eq!(
            decide(Some(&seen(&recon("done", 1))), Some(&k), NOW),
            Action::Reopen
        );
    }

    #[test]
    fn a_backlog_or_the_database_grown_past_the_acknowledgement_reopens() {
        assert_eq!(
            [0, 1, 2, 3, 4, 7, 8, 1000].map(magnitude),
            [0, 1, 2, 2, 3, 3, 4, 10]
        );
        let backlog = |n| Facts {
            oldest_unprocessed_seconds: Some(BACKLOG_SECONDS + 60),
            unprocessed_deliveries: n,
            signature_burst: 20,
            ..Facts::default()
        };
        let seen = |f: &Facts| observe(f).into_iter().next().expect("observed");
        let acked = |o: Observation| Kept {
            acknowledged: true,
            sent_at: Some(NOW),
            acked_mark: o.mark,
            reopened_unsent: false,
        };
        let k = acked(seen(&backlog(5)));
        for (n, action) in [
            (7, Action::Update { send: false }),
            (3, Action::Update { send: false }),
            (8, Action::Reopen),
        ] {
            assert_eq!(
                decide(Some(&seen(&backlog(n))), Some(&k), NOW),
                action,
                "{n}"
            );
        }
        let size = |bytes| Facts {
            storage: Some(StorageFacts {
                database_bytes: Some(bytes),
                size_limit_bytes: 100,
                archive_failed: None,
            }),
            signature_burst: 20,
            ..Facts::default()
        };
        let k = acked(seen(&size(82)));
        assert_eq!(
            decide(Some(&seen(&size(84))), Some(&k), NOW),
            Action::Update { send: false }
        );
        assert_eq!(
            decide(Some(&seen(&size(85))), Some(&k), NOW),
            Action::Reopen
        );
    }

    #[test]
    fn database_unavailable_is_one_id_per_hour() {
        // 2025-11-29T21:00:00Z .. 21:59:59Z
        let h = 1_764_450_000; // an hour's start
        assert_eq!(database_unavailable_id(h), "alt_dbdown_2025112921");
        assert_eq!(database_unavailable_id(h + 3599), "alt_dbdown_2025112921");
        assert_eq!(database_unavailable_id(h + 3600), "alt_dbdown_2025112922");
        let o = database_unavailable(h - 600, 3, "D1_ERROR: no such table: webhook_delivery");
        assert_eq!(
            (o.kind, o.count, o.mark),
            (AlertKind::DatabaseUnavailable, 3, None)
        );
        assert_eq!(o.kind.severity(), "critical");
        assert!(o.summary.contains("2025-11-29T20:50") && o.summary.contains("no such table"));
        assert!(!AlertKind::DatabaseUnavailable.kept_in_d1());
        assert!(AlertKind::ALL
            .iter()
            .filter(|k| **k != AlertKind::DatabaseUnavailable)
            .all(|k| k.kept_in_d1()));
    }

    #[test]
    fn database_size_at_80_percent_and_a_failed_archiving_run() {
        let at = |bytes: Option<i64>, failed: Option<(i64, String)>| {
            observe(&Facts {
                signature_burst: 20,
                storage: Some(StorageFacts {
                    database_bytes: bytes,
                    size_limit_bytes: 10_000_000_000,
                    archive_failed: failed,
                }),
                ..Facts::default()
            })
        };
        assert!(at(Some(7_999_999_999), None).is_empty());
        assert!(at(None, None).is_empty(), "no size reported: no alert");
        let o = at(Some(8_000_000_000), None);
        assert_eq!((o[0].kind, o[0].count), (AlertKind::DatabaseSize, 80));
        assert_eq!(o[0].kind.severity(), "warning");
        assert!(
            o[0].summary
                .starts_with("the database is 8.0 GB of its 10.0 GB cap (80 %)"),
            "{}",
            o[0].summary
        );
        let o = at(
            Some(12_000_000_000),
            Some((7, "deliveries/… was written but is not there".into())),
        );
        assert_eq!(
            o.iter().map(|o| (o.kind, o.count)).collect::<Vec<_>>(),
            [(AlertKind::DatabaseSize, 120), (AlertKind::Archive, 7)]
        );
        assert!(o[1].summary.contains("run 7 failed") && o[1].summary.contains("not there"));
        // a tiny cap (tests) does not divide by zero or overflow
        let tiny = observe(&Facts {
            storage: Some(StorageFacts {
                database_bytes: Some(i64::MAX),
                size_limit_bytes: 0,
                archive_failed: None,
            }),
            signature_burst: 20,
            ..Facts::default()
        });
        assert_eq!(tiny[0].kind, AlertKind::DatabaseSize);
    }

    #[test]
    fn names() {
        for k in AlertKind::ALL {
            assert_eq!(AlertKind::from_str_name(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}
