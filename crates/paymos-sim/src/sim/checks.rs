//! The invariants (as TigerBeetle keeps its simulator's checkers): the kept counts, each
//! delivery and resource a step touched, checked after every step, and the final checks at
//! quiescence.

use super::*;

impl Sim<'_> {
    /// The kept counts (`tally`, written by the statements that change them, in their own
    /// transactions) equal a full count of the rows: after every step and at quiescence.
    pub(super) fn check_tally(&mut self, when: &str) {
        let kept = self.db.read(&st::TALLY.bind(vec![]));
        let full = self.db.inspect(
            "SELECT \
               (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied') AS deliveries_applied, \
               (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale') AS deliveries_stale, \
               (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored') AS deliveries_ignored, \
               (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead' \
                  AND dismissed_at IS NOT NULL) AS deliveries_dismissed, \
               (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch') AS livemode_mismatches, \
               (SELECT count(*) FROM effect WHERE dispatch = 'delivered') AS effects_delivered, \
               (SELECT count(*) FROM effect WHERE dispatch = 'cancelled') AS effects_cancelled, \
               (SELECT count(*) FROM effect WHERE dispatch = 'dead' \
                  AND dismissed_at IS NOT NULL) AS effects_dismissed",
        );
        if kept.is_empty() {
            self.violation(format!("{when}: the tally row is missing"));
            return;
        }
        for (i, name) in full.columns.clone().iter().enumerate() {
            let want = full.rows[0][i].clone();
            let got = kept.value(0, name).clone();
            if got != want {
                self.violation(format!(
                    "{when}: the kept count {name} is {got:?}, a full count says {want:?}"
                ));
            }
        }
    }

    pub(super) fn check_touched(&mut self) {
        self.check_tally("after the step");
        let touched_d = std::mem::take(&mut self.touched_d);
        for (d, who) in touched_d {
            self.check_delivery(d, who);
            self.touched_r.insert(self.world.deliveries[d].resource);
        }
        let touched_r = std::mem::take(&mut self.touched_r);
        for r in touched_r {
            self.check_resource(r, false);
        }
    }

    pub(super) fn load_snap(&mut self, d: usize) -> Option<Snap> {
        let row = self
            .db
            .read(&st::LOAD_DELIVERY.bind(vec![Arg::text(&self.world.deliveries[d].event_id)]));
        (!row.is_empty()).then(|| Snap {
            processed: row.text(0, "processed_at").is_some(),
            outcome: row.text(0, "outcome"),
            generation: row.int(0, "generation").unwrap_or(-1),
            replays: row.int(0, "replays").unwrap_or(-1),
        })
    }

    /// A delivery row changes only as the protocol allows, and only by the step that may.
    pub(super) fn check_delivery(&mut self, d: usize, who: Who) {
        let id = self.eid(d).to_string();
        let new = self.load_snap(d);
        let old = self.dm[d].snap.clone();
        match (&old, &new) {
            (None, None) => {}
            (None, Some(n)) => {
                if who != Who::Insert
                    || n.processed
                    || n.outcome.is_some()
                    || n.generation != 0
                    || n.replays != 0
                {
                    self.violation(format!("{id}: appeared as {n:?} by {who:?}"));
                }
                self.stats.deliveries += 1;
            }
            (Some(_), None) => self.violation(format!("{id}: the delivery row vanished")),
            (Some(o), Some(n)) => {
                let reset = who == Who::Reset
                    || (who == Who::MaybeReset && n.generation == o.generation + 1);
                if reset {
                    if n.generation != o.generation + 1
                        || n.replays != o.replays + 1
                        || n.processed
                        || n.outcome.is_some()
                    {
                        self.violation(format!("{id}: replay left {n:?} (was {o:?})"));
                    }
                    if let Some(g) = self.dm[d].pending_replay {
                        self.trace(format!("  (the replay of generation {g} is superseded)"));
                    }
                    self.dm[d].pending_replay = Some(n.generation);
                } else {
                    if n.generation != o.generation || n.replays != o.replays {
                        self.violation(format!("{id}: generation moved by {who:?}: {o:?} → {n:?}"));
                    }
                    match (o.processed, n.processed) {
                        (true, true) => {
                            if o.outcome != n.outcome {
                                let dead_to_applied = o.outcome.as_deref() == Some("dead")
                                    && n.outcome.as_deref() == Some("applied")
                                    && matches!(who, Who::Batch { applied: true, .. });
                                if !dead_to_applied {
                                    self.violation(format!(
                                        "{id}: a processed outcome changed by {who:?}: {:?} → {:?}",
                                        o.outcome, n.outcome
                                    ));
                                }
                            }
                        }
                        (true, false) => {
                            self.violation(format!("{id}: unprocessed again by {who:?}"))
                        }
                        (false, false) => {
                            if n.outcome.is_some() {
                                self.violation(format!("{id}: unprocessed with an outcome {n:?}"));
                            }
                        }
                        (false, true) => {
                            let outcome = n.outcome.clone().unwrap_or_default();
                            match who {
                                Who::Batch { outcome: want, .. } => {
                                    if outcome != want.as_str() {
                                        self.violation(format!(
                                            "{id}: recorded {outcome}, the guard decided {}",
                                            want.as_str()
                                        ));
                                    }
                                }
                                Who::Ignore => {
                                    if outcome != "ignored" {
                                        self.violation(format!("{id}: ignored as {outcome}"));
                                    }
                                }
                                Who::MarkDead => {
                                    self.stats.marked_dead += 1;
                                    if self.chaos && self.rng.chance(0.5) {
                                        // the delivery_dead alert reaches an operator
                                        let at = self.now() + self.rng.range(5_000, 120_000) as i64;
                                        let i = self.ops.partition_point(|(t, _)| *t <= at);
                                        self.ops.insert(i, (at, Op::ReplayOne(d)));
                                    }
                                    if outcome != "dead" {
                                        self.violation(format!("{id}: marked dead as {outcome}"));
                                    }
                                    if self.dm[d]
                                        .failed_outside_outage
                                        .get(&n.generation)
                                        .is_none_or(|n| *n == 0)
                                    {
                                        self.violation(format!(
                                            "{id}: marked dead in generation {} although every \
                                             failed attempt of that generation was in a D1 \
                                             outage (a D1 outage makes no delivery dead)",
                                            n.generation
                                        ));
                                    }
                                    if !self.dm[d].exhausted.contains(&n.generation) {
                                        let replay = self.dm[d].pending_replay;
                                        self.violation(format!(
                                            "{id}: marked dead in generation {} although no \
                                             message of that generation exhausted its retries \
                                             (exhausted: {:?}); {}",
                                            n.generation,
                                            self.dm[d].exhausted,
                                            match replay {
                                                Some(g) => format!(
                                                    "the operator's replay (generation {g}) is \
                                                     lost: buried by an older dead letter"
                                                ),
                                                None => "no replay pending".into(),
                                            }
                                        ));
                                    }
                                }
                                _ => self
                                    .violation(format!("{id}: processed ({outcome}) by {who:?}")),
                            }
                            self.dm[d].pending_replay = None;
                        }
                    }
                }
            }
        }
        if let Some(n) = &new {
            // dead means nothing was applied for the current request; a copy that applied
            // after the dead letter turns it into `applied`
            if n.outcome.as_deref() == Some("dead")
                && self.dm[d].applied_gens.contains(&n.generation)
            {
                self.violation(format!(
                    "{id}: reported dead, yet it applied in generation {}",
                    n.generation
                ));
            }
        }
        self.dm[d].snap = new;
    }

    /// Everything about one resource: its history follows the contract's tables, its effects
    /// follow its history, its order_ref is the provider's and is carried by its effects.
    pub(super) fn check_resource(&mut self, r: usize, quiescent: bool) {
        let w = self.world.resources[r].clone();
        let id = w.id.clone();
        let res = self.db.read(&st::LOAD_RESOURCE.bind(vec![Arg::text(&id)]));
        let hist = self.db.read(&st::LOAD_HISTORY.bind(vec![Arg::text(&id)]));
        let eff = self.db.read(&st::LOAD_EFFECTS.bind(vec![Arg::text(&id)]));
        if res.is_empty() {
            if !hist.is_empty() || !eff.is_empty() || self.rm[r].applied != 0 {
                self.violation(format!("{id}: no resource row, but history or effects"));
            }
            return;
        }
        if !w.live {
            self.violation(format!(
                "{id}: a test-mode resource changed a live receiver"
            ));
        }
        if res.text(0, "kind").as_deref() != Some(w.kind.as_str()) {
            self.violation(format!("{id}: kind {:?}", res.text(0, "kind")));
        }
        // history: a chain of transitions the contract allows, one per applied transaction
        let mut prev: Option<State> = None;
        let mut entered = Vec::new();
        let mut per_event: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..hist.rows.len() {
            let to_s = hist.text(i, "state").unwrap_or_default();
            let from_s = hist.text(i, "from");
            let to = state_of(w.kind, &to_s);
            let from = from_s.as_deref().map(|s| state_of(w.kind, s));
            let (Some(to), Some(from)) = (to, from.map_or(Some(None), |f| f.map(Some))) else {
                self.violation(format!("{id}: history row {i} names unknown states"));
                continue;
            };
            if i == 0 && from.is_some() || i > 0 && from != prev {
                self.violation(format!(
                    "{id}: history row {i} starts from {from:?}, the previous row entered {prev:?}"
                ));
            }
            if !matches!(decide(w.kind, from, to), Decision::Apply { .. }) {
                self.violation(format!(
                    "{id}: history row {i}: {from:?} → {to} is not allowed by the contract's table"
                ));
            }
            let cause_kind = hist.text(i, "cause_kind").unwrap_or_default();
            let cause = hist.text(i, "cause").unwrap_or_default();
            if cause_kind == "event" {
                match self.by_event.get(&cause) {
                    Some(&d) => {
                        let wd = &self.world.deliveries[d];
                        let ev = &self.world.resources[wd.resource].events[wd.event];
                        if wd.resource != r || ev.to != Some(to) {
                            self.violation(format!(
                                "{id}: history row {i} ({to}) names {cause}, a {} of {}",
                                ev.event_type, self.world.resources[wd.resource].id
                            ));
                        }
                        *per_event.entry(cause.clone()).or_default() += 1;
                    }
                    None => self.violation(format!("{id}: history names unknown event {cause}")),
                }
            }
            entered.push((from, to, cause));
            prev = Some(to);
        }
        if hist.rows.len() != self.rm[r].applied {
            self.violation(format!(
                "{id}: {} history rows for {} applied transitions",
                hist.rows.len(),
                self.rm[r].applied
            ));
        }
        let status = res.text(0, "status").and_then(|s| state_of(w.kind, &s));
        if status != prev {
            self.violation(format!(
                "{id}: status {status:?}, the history ends in {prev:?}"
            ));
        }
        for (ev, n) in &per_event {
            let d = self.by_event[ev];
            let applied = self.dm[d].applied_gens.len();
            if *n > applied || (quiescent && *n != applied) {
                self.violation(format!(
                    "{id}: {ev} is the cause of {n} history rows, it applied {applied} time(s)"
                ));
            }
        }
        // effects: exactly those the history calls for
        let mut expected: Vec<(EffectKind, String)> = Vec::new();
        let mut fulfilled = false;
        for (from, to, cause) in &entered {
            let e = match (w.kind, to) {
                (ResourceKind::Invoice, State::Paid | State::Overpaid) if !fulfilled => {
                    fulfilled = true;
                    Some(EffectKind::Fulfilment)
                }
                (ResourceKind::Invoice, State::Refunded)
                    if fulfilled
                        && matches!(from, Some(State::Paid | State::Overpaid))
                        && self.rm[r].refund_revokes == Some(true) =>
                {
                    Some(EffectKind::Revocation)
                }
                (ResourceKind::Withdrawal, State::Completed) => Some(EffectKind::Settlement),
                (ResourceKind::Deposit, State::Confirmed) => Some(EffectKind::Credit),
                _ => None,
            };
            if let Some(e) = e {
                expected.push((e, cause.clone()));
            }
        }
        let actual: Vec<(EffectKind, String)> = (0..eff.rows.len())
            .map(|i| {
                (
                    EffectKind::from_str_name(&eff.text(i, "kind").unwrap_or_default())
                        .expect("an effect kind"),
                    eff.text(i, "cause").unwrap_or_default(),
                )
            })
            .collect();
        for kind in EffectKind::ALL {
            let n = actual.iter().filter(|(k, _)| *k == kind).count();
            if n > 1 {
                self.violation(format!("{id}: {n} {} effects (at most one)", kind.as_str()));
            }
        }
        if actual != expected {
            self.violation(format!(
                "{id}: effects {actual:?}, the history calls for {expected:?}"
            ));
        }
        let order_ref = res.text(0, "order_ref");
        if let Some(known) = &self.rm[r].order_ref {
            if order_ref.as_ref() != Some(known) {
                self.violation(format!(
                    "{id}: order_ref {known} overwritten by {order_ref:?}"
                ));
            }
        }
        if order_ref.is_some() && order_ref != w.order_ref {
            self.violation(format!(
                "{id}: order_ref {order_ref:?}, the provider's is {:?}",
                w.order_ref
            ));
        }
        self.rm[r].order_ref = order_ref.clone();
        for i in 0..eff.rows.len() {
            let kind = eff.text(i, "kind").unwrap_or_default();
            if order_ref.is_some() && eff.text(i, "order_ref") != order_ref {
                self.violation(format!(
                    "{id}: the {kind} carries order_ref {:?}, the invoice's is {order_ref:?}",
                    eff.text(i, "order_ref")
                ));
            }
            if kind == "fulfilment" {
                let code = eff.text(i, "license_code");
                if code.is_none() || code != self.rm[r].fulfilment_license {
                    self.violation(format!(
                        "{id}: fulfilment license {code:?}, the transaction drew {:?}",
                        self.rm[r].fulfilment_license
                    ));
                }
            }
        }
    }

    /// At quiescence: every resource, every delivery and the effects against the world.
    pub(super) fn final_checks(&mut self) {
        self.trace("— quiescent: final checks —".into());
        for r in 0..self.world.resources.len() {
            self.check_resource(r, true);
        }
        let rows = self
            .db
            .inspect("SELECT event_id FROM webhook_delivery ORDER BY event_id");
        let in_db: BTreeSet<String> = (0..rows.rows.len())
            .filter_map(|i| rows.text(i, "event_id"))
            .collect();
        let mut licenses = BTreeSet::new();
        for d in 0..self.world.deliveries.len() {
            let id = self.eid(d).to_string();
            let Some(s) = self.dm[d].snap.clone() else {
                self.violation(format!(
                    "{id}: sent by the provider until 2xx, never on record"
                ));
                continue;
            };
            if !in_db.contains(&id) {
                self.violation(format!("{id}: lost"));
            }
            let outcome = s.outcome.clone().unwrap_or_default();
            if !s.processed || !["applied", "stale", "ignored"].contains(&outcome.as_str()) {
                self.violation(format!("{id}: ends {s:?} at quiescence"));
            }
            if let Some(g) = self.dm[d].pending_replay {
                self.violation(format!("{id}: the replay of generation {g} never ran"));
            }
            let wd = &self.world.deliveries[d];
            let res = &self.world.resources[wd.resource];
            let ev = &res.events[wd.event];
            let applied_now = self.dm[d].applied_gens.last() == Some(&s.generation);
            let ok = match outcome.as_str() {
                "applied" => applied_now,
                "stale" => !applied_now && ev.to.is_some() && res.live,
                "ignored" => ev.to.is_none() || !res.live,
                _ => false,
            };
            if !ok {
                self.violation(format!(
                    "{id} ({}, {}): outcome {outcome} disagrees with what happened \
                     (applied in generations {:?}, now generation {})",
                    ev.event_type,
                    if res.live { "live" } else { "test-mode" },
                    self.dm[d].applied_gens,
                    s.generation
                ));
            }
        }
        if in_db.len() != self.dm.iter().filter(|m| m.snap.is_some()).count() {
            self.violation(format!(
                "{} delivery rows the simulator never sent",
                in_db.len()
            ));
        }
        let eff = self
            .db
            .inspect("SELECT resource_id, license_code FROM effect WHERE kind = 'fulfilment'");
        for i in 0..eff.rows.len() {
            match eff.text(i, "license_code") {
                Some(c) if licenses.insert(c.clone()) => {}
                c => self.violation(format!("fulfilment license {c:?} missing or not unique")),
            }
        }
        // the bounded doubled-effects check (the effects since its last run) finds what a
        // full grouping of the table finds: here, by construction, nothing
        let full = self.db.inspect(
            "SELECT resource_id, kind, count(*) AS count FROM effect \
             GROUP BY resource_id, kind HAVING count(*) > 1 ORDER BY resource_id, kind",
        );
        let bounded = self.db.batch(&st::check_doubled_batch(), Fault::None);
        match bounded.result {
            Ok(rows) => {
                let found = rows.last().cloned().unwrap_or_default();
                if found.rows != full.rows {
                    self.violation(format!(
                        "the bounded doubled-effects check found {:?}, a full count {:?}",
                        found.rows, full.rows
                    ));
                }
            }
            Err(e) => self.violation(format!("the doubled-effects check failed: {e}")),
        }
        if !full.is_empty() {
            self.violation(format!("doubled effects: {:?}", full.rows));
        }
        self.check_tally("at quiescence");
        let res = self.db.inspect("SELECT id FROM resource ORDER BY id");
        for i in 0..res.rows.len() {
            let id = res.text(i, "id").unwrap_or_default();
            if !self.by_resource.contains_key(&id) {
                self.violation(format!("resource {id} exists, no one sent it"));
            }
        }
        // the world, as the provider sees it, is reflected (what the contract promises)
        for r in 0..self.world.resources.len() {
            let w = self.world.resources[r].clone();
            if !w.live {
                continue;
            }
            let row = self
                .db
                .read(&st::LOAD_RESOURCE.bind(vec![Arg::text(&w.id)]));
            let status = (!row.is_empty())
                .then(|| row.text(0, "status").and_then(|s| state_of(w.kind, &s)))
                .flatten();
            let eff = self.db.read(&st::LOAD_EFFECTS.bind(vec![Arg::text(&w.id)]));
            let has =
                |k: &str| (0..eff.rows.len()).any(|i| eff.text(i, "kind").as_deref() == Some(k));
            match w.kind {
                ResourceKind::Invoice => {
                    let paid_at_provider = w.provider_final() == Some(State::Paid)
                        || (w.provider_final() == Some(State::Overpaid)
                            && w.events
                                .iter()
                                .any(|e| e.to == Some(State::Overpaid) && e.subscribed));
                    if paid_at_provider
                        && (!matches!(status, Some(State::Paid | State::Overpaid))
                            || !has("fulfilment"))
                    {
                        self.violation(format!(
                            "{}: paid at the provider, {status:?} here (fulfilled: {})",
                            w.id,
                            has("fulfilment")
                        ));
                    }
                    let refunded_at_provider = w.provider_final() == Some(State::Refunded)
                        && w.events
                            .iter()
                            .any(|e| e.to == Some(State::Refunded) && e.subscribed);
                    if w.live && refunded_at_provider && status != Some(State::Refunded) {
                        // a refund is entered from every state but refunded, and nothing
                        // leaves refunded: whatever order the events came in (interface §3)
                        self.violation(format!(
                            "{}: refunded at the provider, {status:?} here",
                            w.id
                        ));
                    }
                    if status == Some(State::Refunded) && !has("fulfilment") {
                        // a refund that overtook its payment: refunded, nothing made to ship
                        self.stats.refund_overtaken += 1;
                    }
                }
                _ if !self.rm[r].touched_by_operator => {
                    let last = w
                        .events
                        .iter()
                        .filter(|e| e.subscribed)
                        .filter_map(|e| e.to)
                        .next_back();
                    if status != last {
                        self.violation(format!(
                            "{}: the provider's last state is {last:?}, {status:?} here",
                            w.id
                        ));
                    }
                    let effect = match w.kind {
                        ResourceKind::Withdrawal => "settlement",
                        _ => "credit",
                    };
                    let want = matches!(last, Some(State::Completed | State::Confirmed));
                    if has(effect) != want {
                        self.violation(format!(
                            "{}: {effect} {} expected {want}",
                            w.id,
                            has(effect)
                        ));
                    }
                }
                _ => {}
            }
        }
    }
}
