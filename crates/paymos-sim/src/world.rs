//! The provider's side of one seed: resources, the state changes the provider goes through
//! (valid walks of the contract's tables), the events it emits for them, and each endpoint's
//! copy of each event (a delivery, with its own `evt_` id and the exact body on the wire).

use paymos_core::machine::guard;
use paymos_core::{ResourceKind, State};
use serde_json::json;

use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct Event {
    pub event_type: String,
    /// The state it enters; `None` for an event type the receiver does not know.
    pub to: Option<State>,
    /// Simulated Unix milliseconds at which the provider emits it.
    pub emit_at: i64,
    /// `false`: no endpoint ever receives it (a subscription or firewall problem that only
    /// reconciliation can make up for).
    pub subscribed: bool,
    pub carries_order_ref: bool,
}

#[derive(Debug, Clone)]
pub struct Resource {
    pub id: String,
    pub kind: ResourceKind,
    /// A live-mode resource (the receiver runs in live mode); test-mode ones are ignored.
    pub live: bool,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub events: Vec<Event>,
}

impl Resource {
    /// The provider's state at `now` (the last known event emitted by then).
    pub fn provider_state(&self, now: i64) -> Option<State> {
        self.events
            .iter()
            .filter(|e| e.emit_at <= now)
            .filter_map(|e| e.to)
            .next_back()
    }

    /// The provider's final state.
    pub fn provider_final(&self) -> Option<State> {
        self.events.iter().filter_map(|e| e.to).next_back()
    }
}

#[derive(Debug, Clone)]
pub struct Delivery {
    pub event_id: String,
    pub resource: usize,
    pub event: usize,
    pub endpoint: usize,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct World {
    pub resources: Vec<Resource>,
    pub deliveries: Vec<Delivery>,
    pub endpoints: usize,
}

fn walk(rng: &mut Rng, kind: ResourceKind) -> Vec<State> {
    use State::*;
    let (first, weights): (State, &[(State, u32)]) = match kind {
        ResourceKind::Invoice => (
            Created,
            &[
                (Confirming, 3),
                (PartiallyPaid, 3),
                (Paid, 6),
                (Overpaid, 1),
                (Expired, 2),
                (Failed, 1),
                (Refunded, 3),
            ],
        ),
        ResourceKind::Withdrawal => (Created, &[(Processing, 3), (Completed, 4), (Failed, 1)]),
        ResourceKind::Deposit => (Pending, &[(Confirmed, 4), (Failed, 1)]),
    };
    let mut path = vec![first];
    let mut current = first;
    for _ in 0..5 {
        let next: Vec<(State, u32)> = weights
            .iter()
            .copied()
            .filter(|(s, _)| guard(kind, *s).is_some_and(|g| g.allows(Some(current))))
            .collect();
        if next.is_empty() || (path.len() > 2 && rng.chance(0.25)) {
            break;
        }
        let w: Vec<u32> = next.iter().map(|(_, w)| *w).collect();
        current = next[rng.weighted(&w)].0;
        path.push(current);
    }
    path
}

const UNKNOWN_TYPES: [(&str, ResourceKind); 3] = [
    ("invoice.disputed", ResourceKind::Invoice),
    ("withdrawal.reversed", ResourceKind::Withdrawal),
    ("deposit.flagged", ResourceKind::Deposit),
];

/// The provider's side of a seed. `late` (a stream of its own, so the rest of the world is
/// drawn as before) moves a refund now and then hours after its payment: long enough for a
/// fulfilment to go dead by its ladder while the order system is down, then be refunded.
pub fn generate(rng: &mut Rng, late: &mut Rng, start: i64) -> World {
    let n_resources = rng.range(1, 4) as usize;
    let endpoints = rng.range(1, 3) as usize;
    let mut resources = Vec::new();
    for i in 0..n_resources {
        let kind = match rng.weighted(&[6, 2, 2]) {
            0 => ResourceKind::Invoice,
            1 => ResourceKind::Withdrawal,
            _ => ResourceKind::Deposit,
        };
        let id = format!("{}R{i}", kind.prefix());
        let live = !rng.chance(0.1);
        let invoice = kind == ResourceKind::Invoice;
        let mut t = start + rng.below(60_000) as i64;
        let mut events = Vec::new();
        for (k, state) in walk(rng, kind).into_iter().enumerate() {
            // a resource's first event (created/pending) is sometimes never sent at all
            if k == 0 && rng.chance(0.15) {
                continue;
            }
            // 0-90 s apart; a refund now and then within seconds of its payment (while the
            // fulfilment's first attempt may be in flight)
            t += match state {
                State::Refunded if rng.chance(0.3) => rng.below(12_000),
                _ => rng.below(90_000),
            } as i64;
            if state == State::Refunded && late.chance(0.15) {
                t += late.range(3_600_000, 10_800_000) as i64;
            }
            events.push(Event {
                event_type: format!("{}.{}", kind.as_str(), state.as_str()),
                to: Some(state),
                emit_at: t,
                subscribed: !rng.chance(0.05),
                carries_order_ref: invoice && rng.chance(0.75),
            });
        }
        if rng.chance(0.15) {
            let (ty, _) = UNKNOWN_TYPES
                .iter()
                .find(|(_, k)| *k == kind)
                .expect("an unknown type per kind");
            let at = start + rng.below(300_000) as i64;
            events.push(Event {
                event_type: ty.to_string(),
                to: None,
                emit_at: at,
                subscribed: true,
                carries_order_ref: false,
            });
            events.sort_by_key(|e| e.emit_at);
        }
        resources.push(Resource {
            id,
            kind,
            live,
            order_ref: invoice.then(|| format!("order_{}", 1000 + i)),
            amount: invoice.then(|| format!("{}.00", 10 + rng.below(90))),
            currency: invoice.then(|| "USDT".to_string()),
            events,
        });
    }
    let mut deliveries = Vec::new();
    for (r, res) in resources.iter().enumerate() {
        for (e, ev) in res.events.iter().enumerate() {
            if !ev.subscribed {
                continue;
            }
            for endpoint in 0..endpoints {
                let event_id = format!("evt_R{r}E{e}P{endpoint}");
                let mut data = json!({
                    "id": res.id,
                    "object": res.kind.as_str(),
                    "status": ev.event_type.split_once('.').map_or("", |(_, a)| a),
                });
                if let (Some(a), Some(c)) = (&res.amount, &res.currency) {
                    data["amount"] = json!(a);
                    data["currency"] = json!(c);
                }
                if ev.carries_order_ref {
                    data["order_ref"] = json!(res.order_ref);
                }
                let body = json!({
                    "event_id": event_id,
                    "type": ev.event_type,
                    "created": ev.emit_at / 1000,
                    "livemode": res.live,
                    "data": data,
                })
                .to_string();
                deliveries.push(Delivery {
                    event_id,
                    resource: r,
                    event: e,
                    endpoint,
                    body,
                });
            }
        }
    }
    World {
        resources,
        deliveries,
        endpoints,
    }
}
