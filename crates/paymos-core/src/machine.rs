//! Resource state machines as data (interface §3).
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

/// Every state a resource can be in, across the three kinds (interface §3). Which states
/// belong to which kind is [`states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Created,
    Confirming,
    PartiallyPaid,
    Paid,
    Overpaid,
    Expired,
    Failed,
    Refunded,
    Processing,
    Completed,
    Pending,
    Confirmed,
}

impl State {
    pub const ALL: [State; 12] = [
        State::Created,
        State::Confirming,
        State::PartiallyPaid,
        State::Paid,
        State::Overpaid,
        State::Expired,
        State::Failed,
        State::Refunded,
        State::Processing,
        State::Completed,
        State::Pending,
        State::Confirmed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Created => "created",
            State::Confirming => "confirming",
            State::PartiallyPaid => "partially_paid",
            State::Paid => "paid",
            State::Overpaid => "overpaid",
            State::Expired => "expired",
            State::Failed => "failed",
            State::Refunded => "refunded",
            State::Processing => "processing",
            State::Completed => "completed",
            State::Pending => "pending",
            State::Confirmed => "confirmed",
        }
    }

    /// Inverse of [`State::as_str`] (a stored `status` column, an operator's target).
    pub fn from_str_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What caused a transition (`resource_transition.cause_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CauseKind {
    /// A delivery: the cause is its `evt_` id.
    Event,
    /// An operator: the cause is the reason typed.
    Manual,
    /// The reconciliation job.
    Reconciliation,
}

impl CauseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Event => "event",
            CauseKind::Manual => "manual",
            CauseKind::Reconciliation => "reconciliation",
        }
    }
}

/// From which states entering a given state is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    pub from: &'static [State],
}

impl Guard {
    pub fn allows(&self, current: Option<State>) -> bool {
        match current {
            // a first-seen resource accepts every event (CONTRACT §3's "unknown resource"
            // row, in every table): the guarded write is an upsert (GUARDED_UPSERT)
            None => true,
            Some(s) => self.from.contains(&s),
        }
    }
}

const fn g(from: &'static [State]) -> Guard {
    Guard { from }
}

// ---- tables -------------------------------------------------------------

use State::*;

const INVOICE_STATES: &[State] = &[
    Created,
    Confirming,
    PartiallyPaid,
    Paid,
    Overpaid,
    Expired,
    Failed,
    Refunded,
];
const WITHDRAWAL_STATES: &[State] = &[Created, Processing, Completed, Failed];
const DEPOSIT_STATES: &[State] = &[Pending, Confirmed, Failed];

/// Payable again after expiry/failure: a late payment still counts.
const INVOICE_PAYABLE_FROM: &[State] = &[Created, Confirming, PartiallyPaid, Expired, Failed];
const INVOICE_OPEN: &[State] = &[Created, Confirming, PartiallyPaid];
/// A refund can only follow a payment: a `refunded` that overtakes its `paid` means the money
/// has already gone back, so it is entered from every state but itself, and the `paid` that
/// arrives after it is stale (interface §3, amended).
const INVOICE_REFUNDABLE_FROM: &[State] = &[
    Created,
    Confirming,
    PartiallyPaid,
    Paid,
    Overpaid,
    Expired,
    Failed,
];

/// (state entered, guard), per kind.
const INVOICE_GUARDS: &[(State, Guard)] = &[
    (Created, g(&[])),
    (Confirming, g(&[Created, PartiallyPaid])),
    (PartiallyPaid, g(&[Created, Confirming])),
    (Paid, g(INVOICE_PAYABLE_FROM)),
    (Overpaid, g(INVOICE_PAYABLE_FROM)),
    (Expired, g(INVOICE_OPEN)),
    (Failed, g(INVOICE_OPEN)),
    (Refunded, g(INVOICE_REFUNDABLE_FROM)),
];
const WITHDRAWAL_GUARDS: &[(State, Guard)] = &[
    (Created, g(&[])),
    (Processing, g(&[Created])),
    (Completed, g(&[Created, Processing])),
    (Failed, g(&[Created, Processing])),
];
const DEPOSIT_GUARDS: &[(State, Guard)] = &[
    (Pending, g(&[])),
    (Confirmed, g(&[Pending])),
    (Failed, g(&[Pending])),
];

/// Known event types and the state each one enters.
const EVENTS: &[(&str, ResourceKind, State)] = &[
    ("invoice.created", ResourceKind::Invoice, Created),
    ("invoice.confirming", ResourceKind::Invoice, Confirming),
    (
        "invoice.partially_paid",
        ResourceKind::Invoice,
        PartiallyPaid,
    ),
    ("invoice.paid", ResourceKind::Invoice, Paid),
    ("invoice.overpaid", ResourceKind::Invoice, Overpaid),
    ("invoice.expired", ResourceKind::Invoice, Expired),
    ("invoice.failed", ResourceKind::Invoice, Failed),
    ("invoice.refunded", ResourceKind::Invoice, Refunded),
    ("withdrawal.created", ResourceKind::Withdrawal, Created),
    (
        "withdrawal.processing",
        ResourceKind::Withdrawal,
        Processing,
    ),
    ("withdrawal.completed", ResourceKind::Withdrawal, Completed),
    ("withdrawal.failed", ResourceKind::Withdrawal, Failed),
    ("deposit.pending", ResourceKind::Deposit, Pending),
    ("deposit.confirmed", ResourceKind::Deposit, Confirmed),
    ("deposit.failed", ResourceKind::Deposit, Failed),
];

fn guards(kind: ResourceKind) -> &'static [(State, Guard)] {
    match kind {
        ResourceKind::Invoice => INVOICE_GUARDS,
        ResourceKind::Withdrawal => WITHDRAWAL_GUARDS,
        ResourceKind::Deposit => DEPOSIT_GUARDS,
    }
}

// ---- queries ------------------------------------------------------------

/// The resource kind and state a known event type enters; `None` if unknown.
pub fn target_state(event_type: &str) -> Option<(ResourceKind, State)> {
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
pub fn states(kind: ResourceKind) -> &'static [State] {
    match kind {
        ResourceKind::Invoice => INVOICE_STATES,
        ResourceKind::Withdrawal => WITHDRAWAL_STATES,
        ResourceKind::Deposit => DEPOSIT_STATES,
    }
}

/// A state of `kind` by name; `None` if `kind` has no such state.
pub fn state_of(kind: ResourceKind, name: &str) -> Option<State> {
    State::from_str_name(name).filter(|s| states(kind).contains(s))
}

/// The guard for entering `to`; `None` if `to` is not a state of `kind`.
pub fn guard(kind: ResourceKind, to: State) -> Option<Guard> {
    guards(kind)
        .iter()
        .find(|(s, _)| *s == to)
        .map(|&(_, guard)| guard)
}

/// The once-only effect entering `to` from `from` triggers. Legality is not
/// checked here (see [`decide`]); the DB's unique constraint enforces "once".
pub fn effect_on_entry(kind: ResourceKind, from: Option<State>, to: State) -> Option<EffectKind> {
    match (kind, to) {
        (ResourceKind::Invoice, Paid | Overpaid) => Some(EffectKind::Fulfilment),
        // From an unknown resource there was no fulfilment to revoke.
        (ResourceKind::Invoice, Refunded) => match from {
            Some(Paid | Overpaid) => Some(EffectKind::Revocation),
            _ => None,
        },
        (ResourceKind::Withdrawal, Completed) => Some(EffectKind::Settlement),
        (ResourceKind::Deposit, Confirmed) => Some(EffectKind::Credit),
        _ => None,
    }
}

/// Another effect that must already exist, and may have reached the order system (it was
/// delivered, or at least one attempt to send it was made: a timeout or a lost reply cannot
/// tell), for `effect` to be recorded: a revocation revokes a fulfilment the order system may
/// hold; one it can never have received is cancelled instead ([`effect_cancels`]).
pub fn effect_requires(effect: EffectKind) -> Option<EffectKind> {
    match effect {
        EffectKind::Revocation => Some(EffectKind::Fulfilment),
        _ => None,
    }
}

/// The effect of the resource that entering `to` cancels while it is not yet delivered:
/// entering `refunded` cancels the invoice's fulfilment, so that it is never sent again
/// (interface §3). Cancelling and revoking are independent: a fulfilment attempted but not
/// delivered is both cancelled and revoked.
pub fn effect_cancels(kind: ResourceKind, to: State) -> Option<EffectKind> {
    match (kind, to) {
        (ResourceKind::Invoice, Refunded) => Some(EffectKind::Fulfilment),
        _ => None,
    }
}

/// The effect a transition into `to` may record, and from which previous states: what the
/// transaction checks in SQL against the state its guarded write actually replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectPlan {
    pub kind: EffectKind,
    /// Previous states that trigger it.
    pub from: Vec<State>,
    /// Whether entering from no row (a first-seen resource) triggers it.
    pub from_unknown: bool,
    /// An effect that must already exist and may have reached the order system (a
    /// revocation needs a fulfilment that was delivered or attempted).
    pub requires: Option<EffectKind>,
}

/// Everything one guarded transition into `to` needs, independent of the current state
/// (which only the transaction knows): the guard and the effect plan. The Worker turns it
/// into one D1 batch; the simulator runs the same batch on SQLite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionPlan {
    pub kind: ResourceKind,
    pub to: State,
    pub guard: Guard,
    pub effect: Option<EffectPlan>,
    /// The effect this transition cancels if it is not yet delivered ([`effect_cancels`]).
    pub cancels: Option<EffectKind>,
}

/// What the plan needs to know of an effect the resource already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Existing {
    pub kind: EffectKind,
    /// Delivered, or at least one attempt to send it was made (in pull mode, the feed served
    /// it): the order system may hold it.
    pub may_have_reached: bool,
    /// Delivered or cancelled already: nothing left to cancel.
    pub settled: bool,
}

/// The plan for entering `to`; `None` if `to` is not a state of `kind`.
pub fn plan(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    let guard = guard(kind, to)?;
    let mut effect: Option<EffectPlan> = None;
    let candidates = std::iter::once(None).chain(states(kind).iter().map(|s| Some(*s)));
    for from in candidates {
        if let Some(kind_of_effect) = effect_on_entry(kind, from, to) {
            let p = effect.get_or_insert_with(|| EffectPlan {
                kind: kind_of_effect,
                from: Vec::new(),
                from_unknown: false,
                requires: effect_requires(kind_of_effect),
            });
            match from {
                None => p.from_unknown = true,
                Some(s) => p.from.push(s),
            }
        }
    }
    Some(TransitionPlan {
        kind,
        to,
        guard,
        effect,
        cancels: effect_cancels(kind, to),
    })
}

impl TransitionPlan {
    /// What the plan does from `current`, given the effects that already exist: the decision
    /// the SQL batch reaches, computed without SQL (the simulator's oracle).
    pub fn decide(&self, current: Option<State>, existing: &[Existing]) -> Decision {
        if !self.guard.allows(current) {
            return Decision::Stale;
        }
        let has = |kind: EffectKind| existing.iter().any(|x| x.kind == kind);
        let effect = self.effect.as_ref().and_then(|e| {
            let triggered = match current {
                None => e.from_unknown,
                Some(s) => e.from.contains(&s),
            };
            let satisfied = e
                .requires
                .is_none_or(|r| existing.iter().any(|x| x.kind == r && x.may_have_reached));
            (triggered && satisfied && !has(e.kind)).then_some(e.kind)
        });
        let cancels = self
            .cancels
            .filter(|c| existing.iter().any(|x| x.kind == *c && !x.settled));
        Decision::Apply {
            to: self.to,
            effect,
            cancels,
        }
    }
}

/// What to do with a request to move a resource to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Apply {
        to: State,
        effect: Option<EffectKind>,
        /// An undelivered effect this transition cancels (a refund's fulfilment).
        cancels: Option<EffectKind>,
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

/// Guarded transition of a `kind` resource currently in `current` (`None`: no row), by the
/// tables alone (effects not yet recorded). Used for webhooks, operators and reconciliation
/// alike; [`TransitionPlan::decide`] adds what already exists.
pub fn decide(kind: ResourceKind, current: Option<State>, to: State) -> Decision {
    let Some(guard) = guard(kind, to) else {
        return Decision::Ignored;
    };
    if guard.allows(current) {
        Decision::Apply {
            to,
            effect: effect_on_entry(kind, current, to),
            cancels: None,
        }
    } else {
        Decision::Stale
    }
}

/// [`decide`] for an event type; unknown types are `Ignored`.
pub fn decide_event(current: Option<State>, event_type: &str) -> Decision {
    match target_state(event_type) {
        Some((kind, to)) => decide(kind, current, to),
        None => Decision::Ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ResourceKind::*;

    // Literal grids mirroring interface §3. Rows: current state ("-" = unknown
    // resource); columns: the events of that kind, in contract order.
    // `.` stale, `A` apply without effect, `F` fulfilment, `R` revocation,
    // `S` settlement, `C` credit.
    #[rustfmt::skip]
    const INVOICE_GRID: &[(&str, &str)] = &[
        //                    cre conf part paid over exp fail ref
        ("-",               "A   A    A    F    F    A   A    A"),
        ("created",         ".   A    A    F    F    A   A    A"),
        ("confirming",      ".   .    A    F    F    A   A    A"),
        ("partially_paid",  ".   A    .    F    F    A   A    A"),
        ("paid",            ".   .    .    .    .    .   .    R"),
        ("overpaid",        ".   .    .    .    .    .   .    R"),
        ("expired",         ".   .    .    F    F    .   .    A"),
        ("failed",          ".   .    .    F    F    .   .    A"),
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

    fn expected(cell: &str, to: State) -> Decision {
        let effect = match cell {
            "." => return Decision::Stale,
            "A" => None,
            "F" => Some(EffectKind::Fulfilment),
            "R" => Some(EffectKind::Revocation),
            "S" => Some(EffectKind::Settlement),
            "C" => Some(EffectKind::Credit),
            other => panic!("bad cell {other}"),
        };
        Decision::Apply {
            to,
            effect,
            cancels: None,
        }
    }

    /// Checks every (row × event) cell, and that the grid covers every state.
    fn check_grid(kind: ResourceKind, grid: &[(&str, &str)], events: &[&str]) -> usize {
        let rows: Vec<&str> = grid.iter().skip(1).map(|(r, _)| *r).collect();
        let names: Vec<&str> = states(kind).iter().map(|s| s.as_str()).collect();
        assert_eq!(
            rows, names,
            "grid rows must be exactly the states of {kind:?}"
        );
        assert_eq!(grid[0].0, "-");
        let mut cells = 0;
        for (row, line) in grid {
            let current = if *row == "-" {
                None
            } else {
                Some(state_of(kind, row).unwrap())
            };
            let row_cells: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(row_cells.len(), events.len(), "row {row}");
            for (cell, event) in row_cells.iter().zip(events) {
                let (k, to) = target_state(event).unwrap();
                assert_eq!(k, kind);
                let want = expected(cell, to);
                assert_eq!(decide_event(current, event), want, "{row} × {event}");
                assert_eq!(decide(kind, current, to), want, "{row} × {to}");
                // The plan the SQL batch runs reaches the same decision (a revocation needs
                // the fulfilment it revokes to exist and to have maybe reached the order
                // system; the refund also cancels it, not being delivered).
                let (existing, want_plan): (&[Existing], Decision) = if *cell == "R" {
                    (
                        &[Existing {
                            kind: EffectKind::Fulfilment,
                            may_have_reached: true,
                            settled: false,
                        }],
                        Decision::Apply {
                            to,
                            effect: Some(EffectKind::Revocation),
                            cancels: Some(EffectKind::Fulfilment),
                        },
                    )
                } else {
                    (&[], want)
                };
                assert_eq!(
                    plan(kind, to).unwrap().decide(current, existing),
                    want_plan,
                    "plan: {row} × {to}"
                );
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
            assert_eq!(
                to.as_str(),
                action,
                "each event enters the state of the same name"
            );
            assert!(states(kind).contains(&to));
        }
        // Every state is entered by exactly one event.
        for kind in ResourceKind::ALL {
            for s in states(kind) {
                let n = all
                    .iter()
                    .filter(|e| target_state(e) == Some((kind, *s)))
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
            assert_eq!(decide_event(Some(Created), e), Decision::Ignored);
        }
    }

    #[test]
    fn foreign_states_ignored_or_stale() {
        // `to` not of this kind: ignored.
        assert_eq!(decide(Withdrawal, None, Paid), Decision::Ignored);
        assert_eq!(decide(Deposit, Some(Pending), Completed), Decision::Ignored);
        assert_eq!(decide(Invoice, None, Confirmed), Decision::Ignored);
        assert_eq!(guard(Invoice, Pending), None);
        assert_eq!(guard(Deposit, Created), None);
        assert_eq!(plan(Deposit, Created), None);
        assert_eq!(state_of(Deposit, "created"), None);
        assert_eq!(state_of(Invoice, "partially_paid"), Some(PartiallyPaid));
        // A current state that is not of this kind allows nothing.
        assert_eq!(decide(Invoice, Some(Processing), Paid), Decision::Stale);
    }

    #[test]
    fn guard_tables_are_consistent() {
        for kind in ResourceKind::ALL {
            let names: Vec<State> = guards(kind).iter().map(|(s, _)| *s).collect();
            assert_eq!(names, states(kind));
            for (to, g) in guards(kind) {
                assert!(g.allows(None), "first-seen resources accept any event");
                assert!(!g.from.contains(to), "{kind:?}: no self-loops ({to})");
                for f in g.from {
                    assert!(states(kind).contains(f), "{kind:?}: {f}");
                }
            }
        }
        assert_eq!(
            guard(Invoice, Paid),
            Some(Guard {
                from: &[Created, Confirming, PartiallyPaid, Expired, Failed]
            })
        );
        assert_eq!(guard(Invoice, Created).unwrap().from, &[] as &[State]);
    }

    #[test]
    fn effects() {
        use EffectKind::*;
        assert_eq!(effect_on_entry(Invoice, None, Paid), Some(Fulfilment));
        assert_eq!(
            effect_on_entry(Invoice, Some(Expired), Overpaid),
            Some(Fulfilment)
        );
        assert_eq!(
            effect_on_entry(Invoice, Some(Paid), Refunded),
            Some(Revocation)
        );
        assert_eq!(
            effect_on_entry(Invoice, Some(Overpaid), Refunded),
            Some(Revocation)
        );
        assert_eq!(effect_on_entry(Invoice, None, Refunded), None);
        assert_eq!(effect_on_entry(Invoice, Some(Created), Refunded), None);
        assert_eq!(effect_on_entry(Invoice, None, Created), None);
        assert_eq!(
            effect_on_entry(Withdrawal, None, Completed),
            Some(Settlement)
        );
        assert_eq!(effect_on_entry(Withdrawal, None, Failed), None);
        assert_eq!(
            effect_on_entry(Deposit, Some(Pending), Confirmed),
            Some(Credit)
        );
        assert_eq!(effect_on_entry(Deposit, None, Failed), None);
        // Kinds do not leak into each other.
        assert_eq!(effect_on_entry(Withdrawal, None, Paid), None);
        assert_eq!(effect_on_entry(Deposit, None, Completed), None);
    }

    #[test]
    fn a_refund_cancels_what_is_undelivered_and_revokes_what_may_have_arrived() {
        use EffectKind::*;
        let refund = plan(Invoice, Refunded).unwrap();
        let fulfilment = |may_have_reached, settled| Existing {
            kind: Fulfilment,
            may_have_reached,
            settled,
        };
        let apply = |effect, cancels| Decision::Apply {
            to: Refunded,
            effect,
            cancels,
        };
        // never attempted (or awaiting its order_ref): cancelled, nothing to revoke
        assert_eq!(
            refund.decide(Some(Paid), &[fulfilment(false, false)]),
            apply(None, Some(Fulfilment))
        );
        // attempted, not delivered (a timeout, a lost reply): cancelled and revoked
        assert_eq!(
            refund.decide(Some(Overpaid), &[fulfilment(true, false)]),
            apply(Some(Revocation), Some(Fulfilment))
        );
        // delivered: revoked, nothing left to cancel
        assert_eq!(
            refund.decide(Some(Paid), &[fulfilment(true, true)]),
            apply(Some(Revocation), None)
        );
        // a refund that overtakes its payment: no fulfilment, none made, and the paid after
        // it is stale
        assert_eq!(refund.decide(Some(Confirming), &[]), apply(None, None));
        assert_eq!(refund.decide(None, &[]), apply(None, None));
        assert_eq!(
            plan(Invoice, Paid).unwrap().decide(Some(Refunded), &[]),
            Decision::Stale
        );
        assert_eq!(
            plan(Invoice, Overpaid).unwrap().decide(Some(Refunded), &[]),
            Decision::Stale
        );
        // entering refunded never creates a fulfilment, whatever the state before
        for from in std::iter::once(None).chain(states(Invoice).iter().copied().map(Some)) {
            assert_ne!(effect_on_entry(Invoice, from, Refunded), Some(Fulfilment));
        }
        assert_eq!(plan(Invoice, Paid).unwrap().cancels, None);
        assert_eq!(plan(Withdrawal, Failed).unwrap().cancels, None);
    }

    #[test]
    fn fan_out_duplicate_is_stale() {
        // Two endpoints deliver invoice.paid under different evt_ ids.
        let first = decide_event(Some(Created), "invoice.paid");
        assert_eq!(
            first,
            Decision::Apply {
                to: Paid,
                effect: Some(EffectKind::Fulfilment),
                cancels: None,
            }
        );
        assert_eq!(decide_event(Some(Paid), "invoice.paid"), Decision::Stale);
        // Out of order: confirming after paid.
        assert_eq!(
            decide_event(Some(Paid), "invoice.confirming"),
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
                to: Paid,
                effect: None,
                cancels: None,
            }
            .outcome(),
            Outcome::Applied
        );
    }
}
