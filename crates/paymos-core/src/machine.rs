//! Resource state machines as data (CONTRACT.md §3).
//!
//! The guard says from which current states entering a state is allowed; the
//! caller performs the check and the write in one transaction. Anything the
//! guard refuses is a recorded no-op (`Stale`), which is what makes fan-out
//! duplicates (same change, different `evt_` ids) and out-of-order arrivals safe.
//!
//! A resource we have never seen (`current == None`) accepts any event of its
//! kind: the invoice table says so explicitly, and we apply the same rule to
//! withdrawals and deposits, because a lost or reordered `created`/`pending`
//! must not make the later, money-moving event unappliable.

use serde::Serialize;

use crate::ids::ResourceKind;

/// What processing a delivery ended in (the `outcome` column / admin API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The guard allowed the transition and it was written.
    Applied,
    /// The guard refused it (already there, moved past it, or out of order).
    Stale,
    /// Unknown event type: stored and acknowledged, nothing to do.
    Ignored,
    /// Processing kept failing and the message went to the dead-letter queue.
    Dead,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Applied,
        Outcome::Stale,
        Outcome::Ignored,
        Outcome::Dead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Stale => "stale",
            Outcome::Ignored => "ignored",
            Outcome::Dead => "dead",
        }
    }

    /// Inverse of [`Outcome::as_str`] (for reading the stored column).
    pub fn from_str_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// The once-only side effect a transition triggers (the `effects` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectKind {
    Fulfilment,
    Revocation,
    Settlement,
    Credit,
}

impl EffectKind {
    pub const ALL: [EffectKind; 4] = [
        EffectKind::Fulfilment,
        EffectKind::Revocation,
        EffectKind::Settlement,
        EffectKind::Credit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EffectKind::Fulfilment => "fulfilment",
            EffectKind::Revocation => "revocation",
            EffectKind::Settlement => "settlement",
            EffectKind::Credit => "credit",
        }
    }

    /// Inverse of [`EffectKind::as_str`].
    pub fn from_str_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// From which states entering a given state is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// Allowed when the resource has no row yet.
    pub from_unknown: bool,
    pub from: &'static [&'static str],
}

impl Guard {
    pub fn allows(&self, current: Option<&str>) -> bool {
        match current {
            None => self.from_unknown,
            Some(s) => self.from.contains(&s),
        }
    }
}

const fn g(from: &'static [&'static str]) -> Guard {
    Guard {
        from_unknown: true,
        from,
    }
}

// ---- tables -------------------------------------------------------------

const INVOICE_STATES: &[&str] = &[
    "created",
    "confirming",
    "partially_paid",
    "paid",
    "overpaid",
    "expired",
    "failed",
    "refunded",
];
const WITHDRAWAL_STATES: &[&str] = &["created", "processing", "completed", "failed"];
const DEPOSIT_STATES: &[&str] = &["pending", "confirmed", "failed"];

/// Payable again after expiry/failure: a late payment still counts.
const INVOICE_PAYABLE_FROM: &[&str] = &[
    "created",
    "confirming",
    "partially_paid",
    "expired",
    "failed",
];
const INVOICE_OPEN: &[&str] = &["created", "confirming", "partially_paid"];

/// (state entered, guard), per kind.
const INVOICE_GUARDS: &[(&str, Guard)] = &[
    ("created", g(&[])),
    ("confirming", g(&["created", "partially_paid"])),
    ("partially_paid", g(&["created", "confirming"])),
    ("paid", g(INVOICE_PAYABLE_FROM)),
    ("overpaid", g(INVOICE_PAYABLE_FROM)),
    ("expired", g(INVOICE_OPEN)),
    ("failed", g(INVOICE_OPEN)),
    ("refunded", g(&["paid", "overpaid"])),
];
const WITHDRAWAL_GUARDS: &[(&str, Guard)] = &[
    ("created", g(&[])),
    ("processing", g(&["created"])),
    ("completed", g(&["created", "processing"])),
    ("failed", g(&["created", "processing"])),
];
const DEPOSIT_GUARDS: &[(&str, Guard)] = &[
    ("pending", g(&[])),
    ("confirmed", g(&["pending"])),
    ("failed", g(&["pending"])),
];

/// Known event types and the state each one enters.
const EVENTS: &[(&str, ResourceKind, &str)] = &[
    ("invoice.created", ResourceKind::Invoice, "created"),
    ("invoice.confirming", ResourceKind::Invoice, "confirming"),
    (
        "invoice.partially_paid",
        ResourceKind::Invoice,
        "partially_paid",
    ),
    ("invoice.paid", ResourceKind::Invoice, "paid"),
    ("invoice.overpaid", ResourceKind::Invoice, "overpaid"),
    ("invoice.expired", ResourceKind::Invoice, "expired"),
    ("invoice.failed", ResourceKind::Invoice, "failed"),
    ("invoice.refunded", ResourceKind::Invoice, "refunded"),
    ("withdrawal.created", ResourceKind::Withdrawal, "created"),
    (
        "withdrawal.processing",
        ResourceKind::Withdrawal,
        "processing",
    ),
    (
        "withdrawal.completed",
        ResourceKind::Withdrawal,
        "completed",
    ),
    ("withdrawal.failed", ResourceKind::Withdrawal, "failed"),
    ("deposit.pending", ResourceKind::Deposit, "pending"),
    ("deposit.confirmed", ResourceKind::Deposit, "confirmed"),
    ("deposit.failed", ResourceKind::Deposit, "failed"),
];

fn guards(kind: ResourceKind) -> &'static [(&'static str, Guard)] {
    match kind {
        ResourceKind::Invoice => INVOICE_GUARDS,
        ResourceKind::Withdrawal => WITHDRAWAL_GUARDS,
        ResourceKind::Deposit => DEPOSIT_GUARDS,
    }
}

// ---- queries ------------------------------------------------------------

/// The resource kind and state a known event type enters; `None` if unknown.
pub fn target_state(event_type: &str) -> Option<(ResourceKind, &'static str)> {
    EVENTS
        .iter()
        .find(|(t, _, _)| *t == event_type)
        .map(|&(_, kind, to)| (kind, to))
}

/// Every known event type, in contract order (e.g. for admin filters).
pub fn known_event_types() -> impl Iterator<Item = &'static str> {
    EVENTS.iter().map(|(t, _, _)| *t)
}

/// All states of a kind.
pub fn states(kind: ResourceKind) -> &'static [&'static str] {
    match kind {
        ResourceKind::Invoice => INVOICE_STATES,
        ResourceKind::Withdrawal => WITHDRAWAL_STATES,
        ResourceKind::Deposit => DEPOSIT_STATES,
    }
}

/// The guard for entering `to`; `None` if `to` is not a state of `kind`.
pub fn guard(kind: ResourceKind, to: &str) -> Option<Guard> {
    guards(kind)
        .iter()
        .find(|(s, _)| *s == to)
        .map(|&(_, guard)| guard)
}

/// The once-only effect entering `to` from `from` triggers. Legality is not
/// checked here (see [`decide`]); the DB's unique constraint enforces "once".
pub fn effect_on_entry(kind: ResourceKind, from: Option<&str>, to: &str) -> Option<EffectKind> {
    match (kind, to) {
        (ResourceKind::Invoice, "paid" | "overpaid") => Some(EffectKind::Fulfilment),
        // From an unknown resource there was no fulfilment to revoke.
        (ResourceKind::Invoice, "refunded") => match from {
            Some("paid" | "overpaid") => Some(EffectKind::Revocation),
            _ => None,
        },
        (ResourceKind::Withdrawal, "completed") => Some(EffectKind::Settlement),
        (ResourceKind::Deposit, "confirmed") => Some(EffectKind::Credit),
        _ => None,
    }
}

/// What to do with a request to move a resource to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Apply {
        to: &'static str,
        effect: Option<EffectKind>,
    },
    /// Refused by the guard: record, change nothing.
    Stale,
    /// `to` (or the event type) is not part of this machine.
    Ignored,
}

impl Decision {
    /// The outcome to record for this decision.
    pub fn outcome(&self) -> Outcome {
        match self {
            Decision::Apply { .. } => Outcome::Applied,
            Decision::Stale => Outcome::Stale,
            Decision::Ignored => Outcome::Ignored,
        }
    }
}

/// Guarded transition of a `kind` resource currently in `current` (`None`: no row).
/// Used for webhooks, operators and reconciliation alike.
pub fn decide(kind: ResourceKind, current: Option<&str>, to: &str) -> Decision {
    let Some(&(to, guard)) = guards(kind).iter().find(|(s, _)| *s == to) else {
        return Decision::Ignored;
    };
    if guard.allows(current) {
        Decision::Apply {
            to,
            effect: effect_on_entry(kind, current, to),
        }
    } else {
        Decision::Stale
    }
}

/// [`decide`] for an event type; unknown types are `Ignored`.
pub fn decide_event(current: Option<&str>, event_type: &str) -> Decision {
    match target_state(event_type) {
        Some((kind, to)) => decide(kind, current, to),
        None => Decision::Ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ResourceKind::*;

    // Literal grids mirroring CONTRACT.md §3. Rows: current state ("-" = unknown
    // resource); columns: the events of that kind, in contract order.
    // `.` stale, `A` apply without effect, `F` fulfilment, `R` revocation,
    // `S` settlement, `C` credit.
    #[rustfmt::skip]
    const INVOICE_GRID: &[(&str, &str)] = &[
        //                    cre conf part paid over exp fail ref
        ("-",               "A   A    A    F    F    A   A    A"),
        ("created",         ".   A    A    F    F    A   A    ."),
        ("confirming",      ".   .    A    F    F    A   A    ."),
        ("partially_paid",  ".   A    .    F    F    A   A    ."),
        ("paid",            ".   .    .    .    .    .   .    R"),
        ("overpaid",        ".   .    .    .    .    .   .    R"),
        ("expired",         ".   .    .    F    F    .   .    ."),
        ("failed",          ".   .    .    F    F    .   .    ."),
        ("refunded",        ".   .    .    .    .    .   .    ."),
    ];
    const INVOICE_EVENTS: &[&str] = &[
        "invoice.created",
        "invoice.confirming",
        "invoice.partially_paid",
        "invoice.paid",
        "invoice.overpaid",
        "invoice.expired",
        "invoice.failed",
        "invoice.refunded",
    ];
    #[rustfmt::skip]
    const WITHDRAWAL_GRID: &[(&str, &str)] = &[
        //                cre proc comp fail
        ("-",           "A   A    S    A"),
        ("created",     ".   A    S    A"),
        ("processing",  ".   .    S    A"),
        ("completed",   ".   .    .    ."),
        ("failed",      ".   .    .    ."),
    ];
    const WITHDRAWAL_EVENTS: &[&str] = &[
        "withdrawal.created",
        "withdrawal.processing",
        "withdrawal.completed",
        "withdrawal.failed",
    ];
    #[rustfmt::skip]
    const DEPOSIT_GRID: &[(&str, &str)] = &[
        //               pend conf fail
        ("-",          "A    C    A"),
        ("pending",    ".    C    A"),
        ("confirmed",  ".    .    ."),
        ("failed",     ".    .    ."),
    ];
    const DEPOSIT_EVENTS: &[&str] = &["deposit.pending", "deposit.confirmed", "deposit.failed"];

    fn expected(cell: &str, to: &'static str) -> Decision {
        let effect = match cell {
            "." => return Decision::Stale,
            "A" => None,
            "F" => Some(EffectKind::Fulfilment),
            "R" => Some(EffectKind::Revocation),
            "S" => Some(EffectKind::Settlement),
            "C" => Some(EffectKind::Credit),
            other => panic!("bad cell {other}"),
        };
        Decision::Apply { to, effect }
    }

    /// Checks every (row × event) cell, and that the grid covers every state.
    fn check_grid(kind: ResourceKind, grid: &[(&str, &str)], events: &[&str]) -> usize {
        let rows: Vec<&str> = grid.iter().skip(1).map(|(r, _)| *r).collect();
        assert_eq!(
            rows,
            states(kind),
            "grid rows must be exactly the states of {kind:?}"
        );
        assert_eq!(grid[0].0, "-");
        let mut cells = 0;
        for (row, line) in grid {
            let current = if *row == "-" { None } else { Some(*row) };
            let row_cells: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(row_cells.len(), events.len(), "row {row}");
            for (cell, event) in row_cells.iter().zip(events) {
                let (k, to) = target_state(event).unwrap();
                assert_eq!(k, kind);
                let want = expected(cell, to);
                assert_eq!(decide_event(current, event), want, "{row} × {event}");
                assert_eq!(decide(kind, current, to), want, "{row} × {to}");
                // The guard table agrees with the decision.
                assert_eq!(
                    guard(kind, to).unwrap().allows(current),
                    *cell != ".",
                    "{row} × {to}"
                );
                cells += 1;
            }
        }
        cells
    }

    #[test]
    fn invoice_grid() {
        assert_eq!(check_grid(Invoice, INVOICE_GRID, INVOICE_EVENTS), 9 * 8);
    }

    #[test]
    fn withdrawal_grid() {
        assert_eq!(
            check_grid(Withdrawal, WITHDRAWAL_GRID, WITHDRAWAL_EVENTS),
            5 * 4
        );
    }

    #[test]
    fn deposit_grid() {
        assert_eq!(check_grid(Deposit, DEPOSIT_GRID, DEPOSIT_EVENTS), 4 * 3);
    }

    #[test]
    fn events_map_to_states() {
        let all: Vec<&str> = INVOICE_EVENTS
            .iter()
            .chain(WITHDRAWAL_EVENTS)
            .chain(DEPOSIT_EVENTS)
            .copied()
            .collect();
        assert_eq!(known_event_types().collect::<Vec<_>>(), all);
        for e in &all {
            let (kind, to) = target_state(e).unwrap();
            let (cat, action) = e.split_once('.').unwrap();
            assert_eq!(kind.as_str(), cat);
            assert_eq!(to, action, "each event enters the state of the same name");
            assert!(states(kind).contains(&to));
        }
        // Every state is entered by exactly one event.
        for kind in ResourceKind::ALL {
            for s in states(kind) {
                let n = all
                    .iter()
                    .filter(|e| target_state(e) == Some((kind, s)))
                    .count();
                assert_eq!(n, 1, "{kind:?} {s}");
            }
        }
    }

    #[test]
    fn unknown_events_ignored() {
        for e in [
            "",
            "invoice",
            "invoice.disputed",
            "invoice.PAID",
            "payout.sent",
            "deposit.completed",
            "withdrawal.confirmed",
            "invoice.paid ",
            "paid",
        ] {
            assert_eq!(target_state(e), None, "{e:?}");
            assert_eq!(decide_event(None, e), Decision::Ignored);
            assert_eq!(decide_event(Some("created"), e), Decision::Ignored);
        }
    }

    #[test]
    fn foreign_states_ignored_or_stale() {
        // `to` not of this kind: ignored.
        assert_eq!(decide(Withdrawal, None, "paid"), Decision::Ignored);
        assert_eq!(
            decide(Deposit, Some("pending"), "completed"),
            Decision::Ignored
        );
        assert_eq!(decide(Invoice, None, "confirmed"), Decision::Ignored);
        assert_eq!(guard(Invoice, "pending"), None);
        assert_eq!(guard(Deposit, "created"), None);
        // A current state that is not of this kind allows nothing.
        assert_eq!(decide(Invoice, Some("processing"), "paid"), Decision::Stale);
        assert_eq!(decide(Invoice, Some(""), "paid"), Decision::Stale);
    }

    #[test]
    fn guard_tables_are_consistent() {
        for kind in ResourceKind::ALL {
            let names: Vec<&str> = guards(kind).iter().map(|(s, _)| *s).collect();
            assert_eq!(names, states(kind));
            for (to, g) in guards(kind) {
                assert!(g.from_unknown, "first-seen resources accept any event");
                assert!(!g.from.contains(to), "{kind:?}: no self-loops ({to})");
                for f in g.from {
                    assert!(states(kind).contains(f), "{kind:?}: {f}");
                }
            }
        }
        assert_eq!(
            guard(Invoice, "paid"),
            Some(Guard {
                from_unknown: true,
                from: &[
                    "created",
                    "confirming",
                    "partially_paid",
                    "expired",
                    "failed"
                ]
            })
        );
        assert_eq!(guard(Invoice, "created").unwrap().from, &[] as &[&str]);
    }

    #[test]
    fn effects() {
        use EffectKind::*;
        assert_eq!(effect_on_entry(Invoice, None, "paid"), Some(Fulfilment));
        assert_eq!(
            effect_on_entry(Invoice, Some("expired"), "overpaid"),
            Some(Fulfilment)
        );
        assert_eq!(
            effect_on_entry(Invoice, Some("paid"), "refunded"),
            Some(Revocation)
        );
        assert_eq!(
            effect_on_entry(Invoice, Some("overpaid"), "refunded"),
            Some(Revocation)
        );
        assert_eq!(effect_on_entry(Invoice, None, "refunded"), None);
        assert_eq!(effect_on_entry(Invoice, Some("created"), "refunded"), None);
        assert_eq!(effect_on_entry(Invoice, None, "created"), None);
        assert_eq!(
            effect_on_entry(Withdrawal, None, "completed"),
            Some(Settlement)
        );
        assert_eq!(effect_on_entry(Withdrawal, None, "failed"), None);
        assert_eq!(
            effect_on_entry(Deposit, Some("pending"), "confirmed"),
            Some(Credit)
        );
        assert_eq!(effect_on_entry(Deposit, None, "failed"), None);
        // Kinds do not leak into each other.
        assert_eq!(effect_on_entry(Withdrawal, None, "paid"), None);
        assert_eq!(effect_on_entry(Deposit, None, "completed"), None);
    }

    #[test]
    fn fan_out_duplicate_is_stale() {
        // Two endpoints deliver invoice.paid under different evt_ ids.
        let first = decide_event(Some("created"), "invoice.paid");
        assert_eq!(
            first,
            Decision::Apply {
                to: "paid",
                effect: Some(EffectKind::Fulfilment)
            }
        );
        assert_eq!(decide_event(Some("paid"), "invoice.paid"), Decision::Stale);
        // Out of order: confirming after paid.
        assert_eq!(
            decide_event(Some("paid"), "invoice.confirming"),
            Decision::Stale
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            Outcome::ALL.map(Outcome::as_str),
            ["applied", "stale", "ignored", "dead"]
        );
        assert_eq!(
            EffectKind::ALL.map(EffectKind::as_str),
            ["fulfilment", "revocation", "settlement", "credit"]
        );
        for o in Outcome::ALL {
            assert_eq!(Outcome::from_str_name(o.as_str()), Some(o));
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
        for e in EffectKind::ALL {
            assert_eq!(EffectKind::from_str_name(e.as_str()), Some(e));
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
        }
        assert_eq!(Outcome::from_str_name("Applied"), None);
        assert_eq!(EffectKind::from_str_name(""), None);
        assert_eq!(Decision::Stale.outcome(), Outcome::Stale);
        assert_eq!(Decision::Ignored.outcome(), Outcome::Ignored);
        assert_eq!(
            Decision::Apply {
                to: "paid",
                effect: None
            }
            .outcome(),
            Outcome::Applied
        );
    }
}
