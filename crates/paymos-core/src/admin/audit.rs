//! The audit log (interface §11): every admin write recorded as `{id, at, actor, action,
//! target, outcome, detail}`. What a row holds is decided here, sans I/O: the action's name,
//! its target, `detail` (the request's fields as a JSON object, never a credential: the
//! commands hold none) and the outcome's words. The statements that write a row in the same
//! D1 batch as the change are `statements::audit`.
//!
//! Adding a write: an [`Action`] variant (its name is the `action` filter's word), its arm in
//! [`Record::of`] (the `every_write_is_audited` test fails until it has one), and in the
//! handler one audit statement pushed into the write's own batch: `statements::insert_audit`
//! when the outcome is known before the batch runs, or a statement that decides it inside the
//! transaction (as `AUDIT_REDELIVER` does) when the write's guard decides it: after the write,
//! or just before it on the write's own condition where a repeat and a first call leave the
//! same row (`AUDIT_EFFECT_ACK`, `AUDIT_DISMISS_DELIVERY`, `AUDIT_DISMISS_EFFECT`).

use super::command::{Archive, BulkReplay, Command, Transition};
use super::routes::Operation;
use serde_json::{json, Map, Value};

/// Defines an enum of words from one list: its `ALL`, `as_str` and `parse`.
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $variant:ident = $word:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$doc])* $variant,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)*
                }
            }

            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

words! {
    /// What an audited admin call did: the `action` column, and the list's `action` filter.
    Action {
        /// `POST /resources/{resource_id}/transition`
        Transition = "transition",
        /// `POST /deliveries/{event_id}/replay`
        Replay = "replay",
        /// `POST /deliveries/{event_id}/dismiss`
        DeliveryDismiss = "delivery_dismiss",
        /// `POST /deliveries/replay`
        BulkReplay = "bulk_replay",
        /// `POST /effects/{effect_id}/redeliver`
        Redeliver = "redeliver",
        /// `POST /effects/{effect_id}/ack` (pull mode)
        EffectAck = "effect_ack",
        /// `POST /effects/{effect_id}/dismiss`
        EffectDismiss = "effect_dismiss",
        /// `POST /alerts/{alert_id}/ack`
        AlertAck = "alert_ack",
        /// `POST /reconcile`
        Reconcile = "reconcile",
        /// `POST /archive`
        Archive = "archive",
    }
}

words! {
    /// How an audited call ended: the `outcome` column. A call refused by validation (400)
    /// is not recorded; one the guard refuses, or that conflicts (409), or whose target does
    /// not exist (404), is, with the word that says so.
    Outcome {
        /// A transition the guard let through (`applied: true`).
        Applied = "applied",
        /// A transition the guard refused (`applied: false`): a recorded no-op.
        Refused = "refused",
        /// A delivery reset for replay (one, or a bulk replay's deliveries).
        Replayed = "replayed",
        /// A bulk replay's `dry_run`: counted, nothing changed.
        DryRun = "dry_run",
        /// An effect made pending again, to be sent under the same id.
        Redelivered = "redelivered",
        /// An alert acknowledged.
        Acknowledged = "acknowledged",
        /// A pulled effect acknowledged: marked delivered now.
        Delivered = "delivered",
        /// A dead delivery or effect dismissed now.
        Dismissed = "dismissed",
        /// A repeated ack or dismissal: it was so already, nothing changed (answered 200
        /// with `already: true`).
        Already = "already",
        /// A reconciliation that finished and found nothing wrong; an archiving run that
        /// archived all it was asked to.
        Ok = "ok",
        /// A reconciliation that finished with missing invoices or doubled effects.
        Findings = "findings",
        /// A reconciliation cut short (the provider failed part-way, or a page did not move).
        Truncated = "truncated",
        /// A reconciliation larger than one invocation: it goes on by cron. An archiving run
        /// that stopped at its budget: it goes on when its `next_cursor` is posted back.
        Running = "running",
        /// 404: the target does not exist.
        NotFound = "not_found",
        /// 409: the target's state refuses the call (a cancelled effect, a resolved alert, a
        /// reconciliation another invocation is walking, a dismissal of what is not dead, an
        /// ack of a cancelled effect or of a fulfilment awaiting its order_ref).
        Conflict = "conflict",
        /// The call failed after it was admitted (reconciliation not configured, the
        /// provider unreachable).
        Failed = "failed",
    }
}

/// A row of the audit log before it is written: everything but its id, time and outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Who: the Access token's `email` (or a service token's `common_name`), or `token`.
    pub actor: String,
    pub action: Action,
    /// The event, resource, effect or alert id the call names; `None` for bulk replay and
    /// reconciliation.
    pub target: Option<String>,
    /// The request's fields, as a JSON object's text.
    pub detail: String,
}

impl Record {
    /// The row of a write command by `actor`; `None` for a read (a call that changes
    /// nothing is not audited).
    pub fn of(command: &Command, actor: &str) -> Option<Record> {
        let (action, target, detail) = match command {
            Command::Transition(t) => (
                Action::Transition,
                Some(t.resource_id.clone()),
                transition_detail(t),
            ),
            Command::ReplayDelivery { event_id } => {
                (Action::Replay, Some(event_id.clone()), Map::new())
            }
            Command::DismissDelivery { event_id, reason } => (
                Action::DeliveryDismiss,
                Some(event_id.clone()),
                object(json!({ "reason": reason })),
            ),
            Command::BulkReplay(b) => (Action::BulkReplay, None, bulk_replay_detail(b)),
            Command::RedeliverEffect { effect_id } => {
                (Action::Redeliver, Some(effect_id.clone()), Map::new())
            }
            Command::AckEffect { effect_id } => {
                (Action::EffectAck, Some(effect_id.clone()), Map::new())
            }
            Command::DismissEffect { effect_id, reason } => (
                Action::EffectDismiss,
                Some(effect_id.clone()),
                object(json!({ "reason": reason })),
            ),
            Command::AckAlert { alert_id } => {
                (Action::AlertAck, Some(alert_id.clone()), Map::new())
            }
            Command::ReconcileNow { full } => {
                (Action::Reconcile, None, object(json!({ "full": full })))
            }
            Command::Archive(a) => (Action::Archive, None, archive_detail(a)),
            Command::ListDeliveries(_)
            | Command::GetDelivery { .. }
            | Command::GetResource { .. }
            | Command::LatestReconcile
            | Command::ListEffects(_)
            | Command::Metrics { .. }
            | Command::MetricsHistory { .. }
            | Command::ListAlerts
            | Command::WhoAmI
            | Command::ListAudit(_)
            | Command::OpenApi => return None,
        };
        Some(Record {
            actor: actor.to_string(),
            action,
            target,
            detail: Value::Object(detail).to_string(),
        })
    }

    /// Whether an operation is a write (and so has an audit row): the operations
    /// [`Record::of`] records.
    pub fn audits(operation: Operation) -> bool {
        matches!(
            operation,
            Operation::Transition
                | Operation::ReplayDelivery
                | Operation::BulkReplay
                | Operation::RedeliverEffect
                | Operation::AckEffect
                | Operation::DismissEffect
                | Operation::DismissDelivery
                | Operation::AckAlert
                | Operation::ReconcileNow
                | Operation::Archive
        )
    }
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Puts `key` in `m` when there is a value.
fn put(m: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(v) = value {
        m.insert(key.into(), Value::String(v.into()));
    }
}

/// `{to, reason}` and those of `order_ref`, `amount`, `currency` that were given, as the
/// command holds them (trimmed, validated).
fn transition_detail(t: &Transition) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("to".into(), json!(t.to.as_str()));
    m.insert("reason".into(), json!(t.reason));
    put(&mut m, "order_ref", t.order_ref.as_deref());
    put(&mut m, "amount", t.amount.as_deref());
    put(&mut m, "currency", t.currency.as_deref());
    m
}

/// `before` as the command normalised it, and the `cursor` a continued run posted back.
fn archive_detail(a: &Archive) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("before".into(), json!(a.before));
    if let Some(c) = &a.after {
        m.insert(
            "cursor".into(),
            json!(super::DeliveryCursor::text(&c.received_at, &c.event_id)),
        );
    }
    m
}

/// The filters given (normalised: a status's word, ISO-8601 times as the statements read
/// them), `dry_run`, and the `cursor` a continued replay posted back.
fn bulk_replay_detail(b: &BulkReplay) -> Map<String, Value> {
    let f = &b.filter;
    let mut m = Map::new();
    put(&mut m, "status", f.status.map(|s| s.as_str()));
    put(&mut m, "type", f.event_type.as_deref());
    put(&mut m, "resource_id", f.resource_id.as_deref());
    put(&mut m, "received_after", f.received_after.as_deref());
    put(&mut m, "received_before", f.received_before.as_deref());
    m.insert("dry_run".into(), json!(b.dry_run));
    if let Some(c) = &b.after {
        m.insert(
            "cursor".into(),
            json!(super::DeliveryCursor::text(&c.received_at, &c.event_id)),
        );
    }
    m
}

/// A finished manual reconciliation's outcome, from its report's `state` (`done`,
/// `truncated` or `running`) and `ok`.
pub fn reconcile_outcome(state: &str, ok: bool) -> Outcome {
    match state {
        "truncated" => Outcome::Truncated,
        "running" => Outcome::Running,
        _ if ok => Outcome::Ok,
        _ => Outcome::Findings,
    }
}

/// An operator's archiving run's outcome, from its `state` (`done`, `partial`, `failed`).
pub fn archive_outcome(state: &str) -> Outcome {
    match state {
        "done" => Outcome::Ok,
        "partial" => Outcome::Running,
        _ => Outcome::Failed,
    }
}

/// Longest `actor` filter, in characters (an e-mail address is at most 254).
pub const MAX_ACTOR_CHARS: usize = 320;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::{routes, Method, ROUTES};
    use serde_json::Value;

    fn command(method: &str, path: &str, body: &str) -> Command {
        Command::parse(method, path, "", body.as_bytes()).unwrap()
    }

    fn detail(r: &Record) -> Value {
        serde_json::from_str(&r.detail).unwrap()
    }

    #[test]
    fn words_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(*a));
            assert!(seen.insert(a.as_str()));
        }
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(*o));
            assert!(seen.insert(o.as_str()), "{o:?}");
        }
        assert_eq!(Action::parse("Transition"), None);
        assert_eq!(Outcome::parse(""), None);
    }

    /// Every POST route is a write, and each has its row; no GET route has one. A new
    /// write route fails here until `Record::of` records it.
    #[test]
    fn every_write_is_audited() {
        for route in ROUTES {
            assert_eq!(
                Record::audits(route.operation),
                route.method == Method::Post,
                "{} {}",
                route.method.as_str(),
                route.path
            );
        }
        let writes = [
            (
                "POST",
                "resources/inv_1/transition",
                r#"{"to":"paid","reason":"r"}"#,
            ),
            ("POST", "deliveries/evt_1/replay", ""),
            ("POST", "deliveries/replay", r#"{"type":"invoice.paid"}"#),
            ("POST", "effects/eff_1/redeliver", ""),
            ("POST", "effects/eff_1/ack", ""),
            (
                "POST",
                "effects/eff_1/dismiss",
                r#"{"reason":"settled by hand"}"#,
            ),
            (
                "POST",
                "deliveries/evt_1/dismiss",
                r#"{"reason":"a test event"}"#,
            ),
            ("POST", "alerts/alt_1/ack", ""),
            ("POST", "reconcile", ""),
            ("POST", "archive", r#"{"before":"2026-01-01"}"#),
        ];
        let mut actions = std::collections::HashSet::new();
        for (m, p, b) in writes {
            let c = command(m, p, b);
            let r = Record::of(&c, "ada@example.com").unwrap_or_else(|| panic!("{p}"));
            assert_eq!(r.actor, "ada@example.com");
            assert!(Record::audits(c.operation()));
            assert!(detail(&r).is_object());
            actions.insert(r.action);
        }
        assert_eq!(
            actions.len(),
            Action::ALL.len(),
            "each action is some write's"
        );
        for route in ROUTES.iter().filter(|r| r.method == Method::Get) {
            let path = route
                .path
                .replace("{event_id}", "evt_1")
                .replace("{resource_id}", "inv_1");
            let c = Command::parse("GET", &path, "", b"").unwrap();
            assert_eq!(Record::of(&c, "token"), None, "{path}");
        }
        assert!(routes::resolve("POST", "whoami").is_err());
    }

    #[test]
    fn a_transition_records_its_fields_as_validated() {
        let c = command(
            "POST",
            "resources/inv_9/transition",
            r#"{"to":" paid ","reason":"  bank statement 42 ","order_ref":"ord_1","amount":null,"currency":"","extra":"x"}"#,
        );
        let r = Record::of(&c, "token").unwrap();
        assert_eq!(r.action, Action::Transition);
        assert_eq!(r.target.as_deref(), Some("inv_9"));
        assert_eq!(
            detail(&r),
            json!({"to": "paid", "reason": "bank statement 42", "order_ref": "ord_1"}),
            "absent and empty fields are left out, unknown ones never kept"
        );
    }

    #[test]
    fn a_bulk_replay_records_its_filters_normalised() {
        let c = command(
            "POST",
            "deliveries/replay",
            r#"{"status":"unprocessed","received_after":"2026-01-02T03:04:05Z","dry_run":true,
                "cursor":"2026-01-02T03:04:05.678Z~evt_7"}"#,
        );
        let r = Record::of(&c, "ops@example.com").unwrap();
        assert_eq!(r.action, Action::BulkReplay);
        assert_eq!(r.target, None);
        assert_eq!(
            detail(&r),
            json!({
                "status": "received",
                "received_after": "2026-01-02T03:04:05Z",
                "dry_run": true,
                "cursor": "2026-01-02T03:04:05.678Z~evt_7"
            })
        );
        let plain = Record::of(
            &command("POST", "deliveries/replay", r#"{"type":"a.b"}"#),
            "t",
        );
        assert_eq!(
            detail(&plain.unwrap()),
            json!({"type": "a.b", "dry_run": false})
        );
    }

    #[test]
    fn targets_and_details_of_the_others() {
        let cases = [
            (
                "deliveries/evt_1/replay",
                "",
                Action::Replay,
                Some("evt_1"),
                json!({}),
            ),
            (
                "effects/eff_2/redeliver",
                "",
                Action::Redeliver,
                Some("eff_2"),
                json!({}),
            ),
            (
                "effects/eff_4/ack",
                "",
                Action::EffectAck,
                Some("eff_4"),
                json!({}),
            ),
            (
                "effects/eff_5/dismiss",
                r#"{"reason":"  refunded by hand ","note":"x"}"#,
                Action::EffectDismiss,
                Some("eff_5"),
                json!({"reason": "refunded by hand"}),
            ),
            (
                "deliveries/evt_6/dismiss",
                r#"{"reason":"a test event"}"#,
                Action::DeliveryDismiss,
                Some("evt_6"),
                json!({"reason": "a test event"}),
            ),
            (
                "alerts/alt_3/ack",
                "",
                Action::AlertAck,
                Some("alt_3"),
                json!({}),
            ),
            (
                "reconcile",
                "",
                Action::Reconcile,
                None,
                json!({"full": false}),
            ),
            (
                "reconcile",
                r#"{"full":true}"#,
                Action::Reconcile,
                None,
                json!({"full": true}),
            ),
        ];
        for (path, body, action, target, d) in cases {
            let r = Record::of(&command("POST", path, body), "token").unwrap();
            assert_eq!(
                (r.action, r.target.as_deref(), detail(&r)),
                (action, target, d),
                "{path}"
            );
        }
    }

    #[test]
    fn reconcile_outcomes() {
        assert_eq!(reconcile_outcome("done", true), Outcome::Ok);
        assert_eq!(reconcile_outcome("done", false), Outcome::Findings);
        assert_eq!(reconcile_outcome("truncated", false), Outcome::Truncated);
        assert_eq!(reconcile_outcome("running", true), Outcome::Running);
    }
}
