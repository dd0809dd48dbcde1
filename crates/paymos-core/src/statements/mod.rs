//! Every SQL statement the receiver runs, defined once, as data: the text and the order of
//! its parameters. The Worker binds and runs them on D1; the simulator (`paymos-sim`) runs
//! the very same text on SQLite (which is what D1 is). Nothing here does I/O.
//!
//! Times are ISO-8601 UTC text written by SQLite itself (`now!()`), so one clock orders
//! everything.

use std::borrow::Cow;

/// One statement: its text and what its `?N` parameters are, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Statement {
    pub name: &'static str,
    pub sql: &'static str,
    pub params: &'static [&'static str],
}

/// A parameter value, as both D1 and SQLite take it.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    Null,
    Int(i64),
    Text(Cow<'a, str>),
}

impl<'a> Arg<'a> {
    pub fn text(s: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(s))
    }

    pub fn opt(s: Option<&'a str>) -> Self {
        s.map_or(Arg::Null, Arg::text)
    }

    pub fn opt_int(i: Option<i64>) -> Self {
        i.map_or(Arg::Null, Arg::Int)
    }

    /// A JSON array of strings, read in SQL with `json_each` (one parameter for a list).
    pub fn json_list<S: AsRef<str>>(items: &[S]) -> Arg<'static> {
        let mut json =
            String::with_capacity(2 + items.iter().map(|s| s.as_ref().len() + 3).sum::<usize>());
        json.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            push_json_string(&mut json, item.as_ref());
        }
        json.push(']');
        Arg::Text(Cow::Owned(json))
    }
}

/// Appends `s` as a JSON string, byte for byte as `serde_json::to_string` writes it, without a
/// `String` of its own: the Worker writes every text argument of every D1 call so (`d1.js`
/// reads them with `JSON.parse`), and `serde_json`'s writer, an allocation per argument, was
/// the wasm's biggest function in a new delivery's profile (bench/README.md, "The envelope
/// in one pass").
pub fn push_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    // one pass over the bytes: every byte that needs an escape is ASCII, so each run between
    // two of them is whole characters (a `char` searcher decoded every character)
    let mut run = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if escape.is_empty() {
            // the other control characters as serde_json writes them: `\u00` and two hex digits
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Lowercase hex digits, as serde_json writes `\u00XX`.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// A statement with its arguments, ready for D1 or SQLite.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound<'a> {
    pub statement: &'static Statement,
    pub args: Vec<Arg<'a>>,
}

impl Bound<'_> {
    /// The same statement with its arguments owned, to keep beyond the borrowed values.
    pub fn into_owned(self) -> Bound<'static> {
        Bound {
            statement: self.statement,
            args: self
                .args
                .into_iter()
                .map(|a| match a {
                    Arg::Text(t) => Arg::Text(Cow::Owned(t.into_owned())),
                    Arg::Int(i) => Arg::Int(i),
                    Arg::Null => Arg::Null,
                })
                .collect(),
        }
    }
}

impl Statement {
    /// Binds `args` in the order of [`Statement::params`]; a wrong count is a bug here.
    pub fn bind<'a>(&'static self, args: Vec<Arg<'a>>) -> Bound<'a> {
        assert_eq!(
            args.len(),
            self.params.len(),
            "{}: {} arguments for {:?}",
            self.name,
            args.len(),
            self.params
        );
        Bound {
            statement: self,
            args,
        }
    }
}

macro_rules! now {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    };
}

macro_rules! statement {
    ($name:ident, [$($param:literal),* $(,)?], $($sql:expr),+ $(,)?) => {
        pub static $name: Statement = Statement {
            name: stringify!($name),
            sql: concat!($($sql),+),
            params: &[$($param),*],
        };
    };
}

/// The archive's columns of a delivery.
macro_rules! delivery_columns {
    () => {
        "event_id, resource_id, event_type, received_at, processed_at, outcome, attempts, \
         last_error, enqueued_at, replays, reason, generation, dismissed_at, dismiss_reason, \
         archived_at, archive_key"
    };
}

/// A delivery's body as read, from whichever place holds it (migration 0013): its own row in
/// `delivery_body` (every delivery received since 0013) or its delivery row's `body` (those
/// received before, and bodies a replay restored); NULL once archived. Neither `''` is seen.
/// For a statement over `webhook_delivery`, unaliased: one primary-key lookup.
macro_rules! body_value {
    () => {
        "CASE WHEN webhook_delivery.archived_at IS NULL THEN coalesce(nullif(webhook_delivery.body, ''), \
           (SELECT b.body FROM delivery_body b WHERE b.received_at = webhook_delivery.received_at \
              AND b.event_id = webhook_delivery.event_id)) END"
    };
}

macro_rules! body_column {
    () => {
        concat!(body_value!(), " AS body")
    };
}

/// Whether the invoice `$resource` names (an SQL expression) has an `invoice.refunded` on
/// record, not yet processed: a refund can only follow a payment, so no payment of it ships
/// goods meanwhile (interface §3). Along `webhook_delivery_refund_waiting` (migration 0025),
/// which holds only such refunds: a probe that finds nothing in the usual case. With
/// `received_by`, only a refund received no later than that time (a payment's receipt): a
/// payment received first is no payment the refund overtook, and applies (the refund then
/// cancels its fulfilment); a tie counts the refund first, the side that ships nothing.
macro_rules! refund_waiting {
    ($resource:literal) => {
        refund_waiting!($resource, "")
    };
    ($resource:literal, received_by $received:literal) => {
        // `+`: the time is no index's term, so the probe stays on the partial index (along
        // `webhook_delivery_resource` it would read the invoice's earlier deliveries)
        refund_waiting!(
            $resource,
            concat!(" AND +refund.received_at <= ", $received)
        )
    };
    ($resource:literal, $also:expr) => {
        concat!(
            "EXISTS (SELECT 1 FROM webhook_delivery AS refund WHERE refund.resource_id = ",
            $resource,
            " AND refund.event_type = 'invoice.refunded' AND refund.processed_at IS NULL",
            $also,
            ")"
        )
    };
}

/// Whether the delivery row in `webhook_delivery` is a payment overtaken by a refund on
/// record, received no later than it: it waits for that refund (the transition's writes,
/// `delivery_open!`) and its waiting is no failure (the dead letter's count).
macro_rules! payment_waits_for_refund {
    () => {
        concat!(
            "webhook_delivery.event_type IN ('invoice.paid', 'invoice.overpaid') AND ",
            refund_waiting!(
                "webhook_delivery.resource_id",
                received_by "webhook_delivery.received_at"
            )
        )
    };
}

/// Whether the delivery `$event_id` (a parameter) may be applied now: on record and
/// unprocessed (or dead: a copy that was decided before the dead-letter verdict still applies,
/// and its outcome overrides `dead`), and not a payment that waits for a refund received no
/// later than it (`payment_waits_for_refund!`). The transition's writes check it in their
/// transaction (GUARDED_UPSERT, FILL_RESOURCE, RECORD_OUTCOME), so a consumer needs no load
/// before it: neither a copy already processed nor a waiting payment writes anything, and a
/// refund decided earlier in the same transaction ends the wait of a payment after it.
macro_rules! delivery_open {
    ($event_id:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = ",
            $event_id,
            " AND (processed_at IS NULL OR outcome = 'dead') AND NOT (processed_at IS NULL AND ",
            payment_waits_for_refund!(),
            "))"
        )
    };
}

/// An effect's columns as the admin API and the dispatcher read them.
macro_rules! effect_columns {
    () => {
        "e.id AS seq, e.effect_id AS id, e.kind, e.resource_id, e.created_at, e.license_code, \
         e.order_ref, e.amount, e.currency, e.cause, e.dispatch, e.attempts, e.rung, \
         e.next_attempt_at, e.last_error, e.delivered_at, e.first_attempt_at, \
         e.attempt_started_at, e.cancelled_at, e.dead_at, e.dismissed_at, e.dismiss_reason, \
         e.acknowledged_at, \
         (e.dispatch = 'pending' AND e.kind = 'fulfilment' AND e.order_ref IS NULL) AS awaiting_order_ref"
    };
}

/// A run's columns, as `ReconciliationRun` reads them.
macro_rules! run_columns {
    () => {
        "id, full_walk, paid_since, cursor, pages"
    };
}

/// An alert's columns as the admin API shows them.
macro_rules! alert_columns {
    () => {
        "id, kind, severity, summary, count, state, first_seen, last_seen, sent_at, sends, \
         last_send_error, acknowledged_at, resolved_at, acked_count, reopened_at, reopens"
    };
}

/// Why an operator's redelivery of effect `$e` (an alias or the table's name) is refused: a
/// cancelled effect, or a fulfilment whose invoice has a revocation (its refund was recorded,
/// and sending it again would ship goods for money returned). Shared by the redelivery and
/// its audit row, so that the two cannot disagree.
macro_rules! redelivery_refused {
    ($e:literal) => {
        concat!(
            "(",
            $e,
            ".dispatch = 'cancelled' OR (",
            $e,
            ".kind = 'fulfilment' \
             AND EXISTS (SELECT 1 FROM effect v WHERE v.resource_id = ",
            $e,
            ".resource_id \
             AND v.kind = 'revocation')))"
        )
    };
}

/// What a pull-mode acknowledgement marks delivered (the effect's columns, unqualified):
/// pending (or dead: the order system has it after all), and not a fulfilment still awaiting
/// its order_ref (useless to an order system without it, and sent with it once it is known).
/// Never a cancelled one. Shared by the ack, its tally and its audit row.
macro_rules! ackable {
    () => {
        "dispatch IN ('pending', 'dead') AND (kind <> 'fulfilment' OR order_ref IS NOT NULL)"
    };
}

/// What a dismissal of a delivery takes (its columns, unqualified): dead, not dismissed yet.
/// Shared by the dismissal, its tally and its audit row.
macro_rules! delivery_dismissable {
    () => {
        "outcome = 'dead' AND dismissed_at IS NULL"
    };
}

/// What a dismissal of an effect takes: dead, not dismissed yet (as `delivery_dismissable!`).
macro_rules! effect_dismissable {
    () => {
        "dispatch = 'dead' AND dismissed_at IS NULL"
    };
}

/// The deliveries' filters, as the list and the bulk replay read them: ?1 type, ?2 resource,
/// ?3 status (`received`, `processed`, or an outcome).
macro_rules! delivery_filter {
    () => {
        "(?1 IS NULL OR event_type = ?1) AND (?2 IS NULL OR resource_id = ?2) \
         AND (?3 IS NULL \
              OR (?3 = 'received' AND processed_at IS NULL) \
              OR (?3 = 'processed' AND outcome IN ('applied', 'ignored')) \
              OR outcome = ?3)"
    };
}

/// The bulk replay's filter: the deliveries' filters, then ?4 received at or after, ?5
/// received before (ISO-8601, normalised by SQLite to the stored form).
macro_rules! replay_filter {
    () => {
        concat!(
            delivery_filter!(),
            " AND (?4 IS NULL OR received_at >= strftime('%Y-%m-%dT%H:%M:%fZ', ?4)) \
             AND (?5 IS NULL OR received_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?5))"
        )
    };
}

/// What leaving its outcome takes out of the kept counts, for the deliveries of `x`
/// (`outcome`, `reason`, `dismissed_at` columns, one row or sums).
macro_rules! untally_outcomes {
    () => {
        "deliveries_applied = deliveries_applied - x.applied, \
         deliveries_stale = deliveries_stale - x.stale, \
         deliveries_ignored = deliveries_ignored - x.ignored, \
         deliveries_dismissed = deliveries_dismissed - x.dismissed, \
         livemode_mismatches = livemode_mismatches - x.livemode"
    };
}

/// The columns `untally_outcomes!` reads, summed over the rows selected.
macro_rules! outcome_sums {
    () => {
        "coalesce(sum(outcome = 'applied'), 0) AS applied, \
         coalesce(sum(outcome = 'stale'), 0) AS stale, \
         coalesce(sum(outcome = 'ignored'), 0) AS ignored, \
         coalesce(sum(outcome = 'dead' AND dismissed_at IS NOT NULL), 0) AS dismissed, \
         coalesce(sum(reason IS 'livemode_mismatch'), 0) AS livemode, count(*) AS n"
    };
}

mod archive;
mod audit;
mod deliveries;
mod error;
mod operations;
mod outbox;
mod reconciliation;
mod resources;
mod transition;

pub use archive::*;
pub use audit::*;
pub use deliveries::*;
pub use error::{DbError, Site};
pub use operations::*;
pub use outbox::*;
pub use reconciliation::*;
pub use resources::*;
pub use transition::*;

/// Every statement, for checks that run them all (parameter counts here; the simulator
/// prepares each against the migrated schema).
pub static ALL: &[&Statement] = &[
    &PROBE,
    &INSERT_DELIVERY,
    &LOAD_DELIVERY,
    &LOAD_DELIVERIES,
    &REFUND_WAITING,
    &LIST_DELIVERIES,
    &LIST_DELIVERIES_OF_RESOURCE,
    &LIST_DELIVERIES_RECEIVED,
    &MARK_IGNORED,
    &RECORD_FAILURE,
    &COUNT_HAND_BACK,
    &MARK_DEAD,
    &CLAIM_UNPROCESSED,
    &RESET_FOR_REPLAY,
    &TALLY_REPLAY,
    &DISMISS_DELIVERY,
    &TALLY_DISMISS_DELIVERY,
    &LOAD_RESOURCE,
    &LOAD_EFFECTS,
    &LOAD_HISTORY,
    &GUARDED_UPSERT,
    &INSERT_HISTORY,
    &INSERT_EFFECT,
    &CANCEL_EFFECT,
    &TALLY_CANCEL,
    &FILL_RESOURCE,
    &RELEASE_EFFECTS,
    &RECORD_OUTCOME,
    &READ_BACK,
    &LOAD_EFFECTS_FOR_DISPATCH,
    &DEFER_EFFECT,
    &START_ATTEMPTS,
    &MARK_EFFECT_DELIVERED,
    &TALLY_DELIVERED,
    &RECORD_EFFECT_FAILURE,
    &MARK_EFFECT_DEAD,
    &REDELIVER_EFFECT,
    &TALLY_REDELIVER,
    &ACK_EFFECT,
    &TALLY_ACK,
    &DISMISS_EFFECT,
    &TALLY_DISMISS_EFFECT,
    &LOAD_EFFECT,
    &CLAIM_EFFECTS,
    &LIST_EFFECTS,
    &LIST_EFFECTS_BY_DISPATCH,
    &LIST_DEAD_EFFECTS_OPEN,
    &LIST_DEAD_EFFECTS_DISMISSED,
    &MARK_SERVED,
    &MARK_SERVED_BY_DISPATCH,
    &ACQUIRE_LEASE,
    &RELEASE_LEASE,
    &RENEW_LEASE,
    &SUPERSEDE_RECONCILIATIONS,
    &START_RECONCILIATION,
    &OPEN_RECONCILIATION,
    &FINISH_RECONCILIATION,
    &FORGET_SEEN,
    &LATEST_RECONCILIATION,
    &UNSEEN_IDS,
    &MARK_SEEN,
    &CLAIM_CURSOR,
    &PAID_ON_RECORD,
    &INSERT_FINDING,
    &RECORD_RECONCILIATION_PAGE,
    &RECONCILIATION_TOTALS,
    &RECONCILIATION_FINDINGS,
    &CHECK_DOUBLED_EFFECTS,
    &MARK_DOUBLED_CHECKED,
    &DOUBLED_EFFECTS,
    &METRICS_FACTS,
    &TALLY,
    &METRICS_COUNTERS,
    &FLUSH_COUNT,
    &PRUNE_COUNTS,
    &KEPT_ALERTS,
    &OPEN_ALERT,
    &UPDATE_ALERT,
    &REOPEN_ALERT,
    &RESOLVE_ALERT,
    &RECORD_PAST_ALERT,
    &ALERT_SENT,
    &ALERT_SEND_FAILED,
    &ACK_ALERT,
    &LOAD_ALERT,
    &LIST_ALERTS,
    &RECORD_SAMPLE,
    &PRUNE_SAMPLES,
    &HISTORY_DELIVERIES,
    &HISTORY_REFUSALS,
    &HISTORY_SAMPLES,
    &COUNT_REPLAY,
    &REPLAY_CHUNK,
    &TALLY_REPLAY_CHUNK,
    &INSERT_AUDIT,
    &AUDIT_TRANSITION,
    &AUDIT_REPLAY,
    &AUDIT_REDELIVER,
    &AUDIT_ALERT_ACK,
    &AUDIT_EFFECT_ACK,
    &AUDIT_DISMISS_DELIVERY,
    &AUDIT_DISMISS_EFFECT,
    &LIST_AUDIT,
    &LIST_AUDIT_BY_ACTOR,
    &LIST_AUDIT_BY_ACTION,
    &LIST_AUDIT_BY_ACTOR_ACTION,
    &OPEN_ARCHIVE_RUN,
    &SUPERSEDE_ARCHIVE_RUNS,
    &START_ARCHIVE_RUN,
    &ARCHIVE_CANDIDATES,
    &ARCHIVE_BODIES,
    &DROP_BODY_ROWS,
    &REMOVE_ARCHIVED_BODIES,
    &RECORD_ARCHIVE_CHUNK,
    &FINISH_ARCHIVE_RUN,
    &ARCHIVE_BACKLOG,
    &LATEST_ARCHIVE_RUN,
    &ARCHIVED_AMONG,
    &ARCHIVED_IN_REPLAY_CHUNK,
    &RESTORE_BODY,
];

/// The SQLite modifier for "`seconds` ago", as `CLAIM_UNPROCESSED` and `PAID_ON_RECORD` take it.
pub fn seconds_ago(seconds: i64) -> String {
    format!("-{} seconds", seconds.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ResourceKind;
    use crate::machine::{plan, CauseKind, State};

    /// The highest `?N` in a statement's text.
    fn max_param(sql: &str) -> usize {
        let bytes = sql.as_bytes();
        let mut max = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'?' {
                let digits: String = sql[i + 1..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                assert!(!digits.is_empty(), "unnumbered ? in {sql}");
                max = max.max(digits.parse().unwrap());
            }
        }
        max
    }

    #[test]
    fn every_statement_names_each_of_its_parameters() {
        let mut names = std::collections::HashSet::new();
        for s in ALL {
            assert!(names.insert(s.name), "{} listed twice", s.name);
            assert_eq!(max_param(s.sql), s.params.len(), "{}", s.name);
            assert!(!s.sql.contains("  "), "{}: stray double space", s.name);
        }
    }

    #[test]
    fn a_transition_batch_reads_back_last_and_fulfils_with_the_license() {
        let p = plan(ResourceKind::Invoice, State::Paid).unwrap();
        let r = TransitionRequest {
            plan: &p,
            resource_id: "inv_1",
            order_ref: Some("o"),
            amount: None,
            currency: None,
            cause_kind: CauseKind::Event,
            cause: "evt_1",
            token: "t",
            license_code: Some("LIC"),
            delivery: Some("evt_1"),
            pull: false,
            actor: None,
        };
        let b = transition_batch(&r);
        let names: Vec<&str> = b.iter().map(|x| x.statement.name).collect();
        assert_eq!(
            names,
            [
                "GUARDED_UPSERT",
                "FILL_RESOURCE",
                "INSERT_HISTORY",
                "INSERT_EFFECT",
                "RELEASE_EFFECTS",
                "RECORD_OUTCOME",
                "READ_BACK"
            ]
        );
        assert_eq!(b[3].args[3], Arg::text("LIC"));
        assert_eq!(
            b[0].args[7],
            Arg::json_list(&[
                "created",
                "confirming",
                "partially_paid",
                "expired",
                "failed"
            ])
        );
        // a revocation carries no license code and requires a fulfilment
        let p = plan(ResourceKind::Invoice, State::Refunded).unwrap();
        let b = transition_batch(&TransitionRequest {
            plan: &p,
            delivery: None,
            pull: false,
            order_ref: None,
            ..r
        });
        let effect = b
            .iter()
            .find(|x| x.statement.name == "INSERT_EFFECT")
            .unwrap();
        assert_eq!(effect.args[3], Arg::Null);
        assert_eq!(effect.args[7], Arg::text("fulfilment"));
        let names: Vec<&str> = b.iter().map(|x| x.statement.name).collect();
        assert_eq!(
            names,
            [
                "GUARDED_UPSERT",
                "INSERT_HISTORY",
                "INSERT_EFFECT",
                "TALLY_CANCEL",
                "CANCEL_EFFECT",
                "RELEASE_EFFECTS",
                "READ_BACK"
            ],
            "no fill, no outcome without order_ref and delivery; a refund cancels"
        );
    }
}
