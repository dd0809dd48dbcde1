//! The audit log (interface §11): a row for each admin write, inserted in the same batch as the
//! change it records, and the list that reads them back newest first.
//!
//! Where the write's own guard decides how it ends (a transition's token, a redelivery refused
//! for a cancelled effect, an alert already resolved), the audit row's `outcome` is decided by
//! the same transaction, after the write, from what the write left: the row can never say
//! `applied` of what was refused. Each of these `RETURNING outcome`, so that the handler
//! answers from the very word the log keeps.

use super::{transition_batch, Arg, Bound, Statement, TransitionRequest};
use crate::admin::audit::{Outcome, Record};
use crate::admin::AuditQuery;
use crate::rows::int;
use serde::{Deserialize, Serialize};

/// The start of an audit insert whose outcome the transaction decides: ?1 actor, ?2 action,
/// ?3 target, ?4 detail; the outcome's expression follows.
macro_rules! audit_select {
    () => {
        concat!(
            "INSERT INTO audit (at, actor, action, target, detail, outcome) SELECT ",
            now!(),
            ", ?1, ?2, ?3, ?4, "
        )
    };
}

statement!(
    INSERT_AUDIT,
    ["actor", "action", "target", "detail", "outcome"],
    // an outcome known before the batch runs (a dry run, a reconciliation's report)
    "INSERT INTO audit (at, actor, action, target, detail, outcome) VALUES (",
    now!(),
    ", ?1, ?2, ?3, ?4, ?5) RETURNING outcome"
);

statement!(
    AUDIT_TRANSITION,
    ["actor", "action", "target", "detail", "token"],
    // after the guarded write: applied when this attempt's token is the resource's
    audit_select!(),
    "CASE WHEN EXISTS (SELECT 1 FROM resource WHERE id = ?3 AND transition_token = ?5) \
       THEN 'applied' ELSE 'refused' END RETURNING outcome"
);

statement!(
    AUDIT_REPLAY,
    ["actor", "action", "target", "detail"],
    // after RESET_FOR_REPLAY: a delivery on record was reset. None while its body is archived:
    // RESET_FOR_REPLAY left it as it was, and the replay restores the body and resets it in
    // a batch of its own, with this row (archive.rs), so one replay has one row
    audit_select!(),
    "CASE WHEN EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = ?3) \
       THEN 'replayed' ELSE 'not_found' END \
     WHERE NOT EXISTS (SELECT 1 FROM webhook_delivery \
                        WHERE event_id = ?3 AND archived_at IS NOT NULL) \
     RETURNING outcome"
);

statement!(
    AUDIT_REDELIVER,
    ["actor", "action", "target", "detail"],
    // after REDELIVER_EFFECT, with its refusal (`redelivery_refused!`): the effect's
    // cancellation and its invoice's revocation are what the update leaves as it found them
    audit_select!(),
    "CASE WHEN NOT EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3) THEN 'not_found' \
       WHEN EXISTS (SELECT 1 FROM effect e WHERE e.effect_id = ?3 AND ",
    redelivery_refused!("e"),
    ") THEN 'conflict' ELSE 'redelivered' END RETURNING outcome"
);

statement!(
    AUDIT_ALERT_ACK,
    ["actor", "action", "target", "detail"],
    // after ACK_ALERT, which acknowledges any alert not resolved
    audit_select!(),
    "CASE WHEN NOT EXISTS (SELECT 1 FROM alert WHERE id = ?3) THEN 'not_found' \
       WHEN EXISTS (SELECT 1 FROM alert WHERE id = ?3 AND state = 'resolved') THEN 'conflict' \
       ELSE 'acknowledged' END RETURNING outcome"
);

// The pull-mode ack and the dismissals cannot be told apart after their write (a repeat and
// a first call leave the same row), so their rows come just before the write, in the same
// transaction, from the very condition the write takes (`ackable!`, `delivery_dismissable!`,
// `effect_dismissable!`): what the row says is what the next statement does.

statement!(
    AUDIT_EFFECT_ACK,
    ["actor", "action", "target", "detail"],
    // before ACK_EFFECT: delivered now, delivered already (nothing changes), or refused
    // (cancelled by its refund, or a fulfilment awaiting its order_ref)
    audit_select!(),
    "CASE WHEN NOT EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3) THEN 'not_found' \
       WHEN EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3 AND ",
    ackable!(),
    ") THEN 'delivered' \
       WHEN EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3 AND dispatch = 'delivered') \
       THEN 'already' ELSE 'conflict' END RETURNING outcome"
);

statement!(
    AUDIT_DISMISS_DELIVERY,
    ["actor", "action", "target", "detail"],
    // before DISMISS_DELIVERY: dismissed now, dismissed already, or not dead
    audit_select!(),
    "CASE WHEN NOT EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = ?3) \
       THEN 'not_found' \
       WHEN EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = ?3 AND ",
    delivery_dismissable!(),
    ") THEN 'dismissed' \
       WHEN EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = ?3 AND outcome = 'dead') \
       THEN 'already' ELSE 'conflict' END RETURNING outcome"
);

statement!(
    AUDIT_DISMISS_EFFECT,
    ["actor", "action", "target", "detail"],
    // before DISMISS_EFFECT, as AUDIT_DISMISS_DELIVERY
    audit_select!(),
    "CASE WHEN NOT EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3) THEN 'not_found' \
       WHEN EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3 AND ",
    effect_dismissable!(),
    ") THEN 'dismissed' \
       WHEN EXISTS (SELECT 1 FROM effect WHERE effect_id = ?3 AND dispatch = 'dead') \
       THEN 'already' ELSE 'conflict' END RETURNING outcome"
);

/// The columns of a listed row.
macro_rules! audit_columns {
    () => {
        "SELECT id, at, actor, action, target, outcome, detail FROM audit WHERE "
    };
}

/// Below the cursor (the last id seen), or from the top: a range of the index, read
/// backwards, stopping after `limit` rows.
macro_rules! below_cursor {
    ($n:literal) => {
        concat!(
            "id < coalesce(?",
            $n,
            ", 9223372036854775807) ORDER BY id DESC LIMIT ?"
        )
    };
}

statement!(
    LIST_AUDIT,
    ["after_id", "limit"],
    audit_columns!(),
    below_cursor!("1"),
    "2"
);

statement!(
    LIST_AUDIT_BY_ACTOR,
    ["actor", "after_id", "limit"],
    audit_columns!(),
    "actor = ?1 AND ",
    below_cursor!("2"),
    "3"
);

statement!(
    LIST_AUDIT_BY_ACTION,
    ["action", "after_id", "limit"],
    audit_columns!(),
    "action = ?1 AND ",
    below_cursor!("2"),
    "3"
);

statement!(
    LIST_AUDIT_BY_ACTOR_ACTION,
    ["actor", "action", "after_id", "limit"],
    audit_columns!(),
    "actor = ?1 AND action = ?2 AND ",
    below_cursor!("3"),
    "4"
);

/// The four arguments every audit insert starts with.
fn row_args(r: &Record) -> Vec<Arg<'_>> {
    vec![
        Arg::text(&r.actor),
        Arg::text(r.action.as_str()),
        Arg::opt(r.target.as_deref()),
        Arg::text(&r.detail),
    ]
}

/// A row whose outcome is known before its batch runs.
pub fn insert_audit(r: &Record, outcome: Outcome) -> Bound<'_> {
    let mut args = row_args(r);
    args.push(Arg::text(outcome.as_str()));
    INSERT_AUDIT.bind(args)
}

/// A row decided by `statement` (one of `AUDIT_REPLAY`, `AUDIT_REDELIVER`,
/// `AUDIT_ALERT_ACK`), to follow the write in its batch.
pub fn audit_after<'a>(statement: &'static Statement, r: &'a Record) -> Bound<'a> {
    statement.bind(row_args(r))
}

/// An operator's replay: `replay_batch` and its row (`AUDIT_REPLAY`) last; the new generation
/// is the statement before it.
pub fn audited_replay_batch<'a>(event_id: &'a str, r: &'a Record) -> Vec<Bound<'a>> {
    let mut batch = super::replay_batch(event_id);
    batch.push(audit_after(&AUDIT_REPLAY, r));
    batch
}

/// An operator's redelivery: `redeliver_batch` and its row (`AUDIT_REDELIVER`) last; the
/// redelivered row is the statement before it.
pub fn audited_redeliver_batch<'a>(effect_id: &'a str, r: &'a Record) -> Vec<Bound<'a>> {
    let mut batch = super::redeliver_batch(effect_id);
    batch.push(audit_after(&AUDIT_REDELIVER, r));
    batch
}

/// `batch` with `row` just before its last statement (the write, which stays last).
fn before_last<'a>(mut batch: Vec<Bound<'a>>, row: Bound<'a>) -> Vec<Bound<'a>> {
    let at = batch.len().saturating_sub(1);
    batch.insert(at, row);
    batch
}

/// A pull-mode acknowledgement: `ack_effect_batch` with its row (`AUDIT_EFFECT_ACK`) second
/// to last, the ack last.
pub fn audited_ack_effect_batch<'a>(effect_id: &'a str, r: &'a Record) -> Vec<Bound<'a>> {
    before_last(
        super::ack_effect_batch(effect_id),
        AUDIT_EFFECT_ACK.bind(row_args(r)),
    )
}

/// A delivery's dismissal: `dismiss_delivery_batch` with its row second to last.
pub fn audited_dismiss_delivery_batch<'a>(
    event_id: &'a str,
    reason: &'a str,
    r: &'a Record,
) -> Vec<Bound<'a>> {
    before_last(
        super::dismiss_delivery_batch(event_id, reason),
        AUDIT_DISMISS_DELIVERY.bind(row_args(r)),
    )
}

/// An effect's dismissal: `dismiss_effect_batch` with its row second to last.
pub fn audited_dismiss_effect_batch<'a>(
    effect_id: &'a str,
    reason: &'a str,
    r: &'a Record,
) -> Vec<Bound<'a>> {
    before_last(
        super::dismiss_effect_batch(effect_id, reason),
        AUDIT_DISMISS_EFFECT.bind(row_args(r)),
    )
}

/// An operator's transition: the guarded transition's batch with the operator named in the
/// history row it may write (`r.actor`), and the audit row just before the read-back (which
/// stays last, as `transition_batch` promises).
pub fn audited_transition_batch<'a>(
    r: &TransitionRequest<'a>,
    record: &'a Record,
) -> Vec<Bound<'a>> {
    let mut batch = transition_batch(r);
    let mut args = row_args(record);
    args.push(Arg::text(r.token));
    let at = batch.len() - 1;
    batch.insert(at, AUDIT_TRANSITION.bind(args));
    batch
}

/// The page of the audit log a query asks for: `limit + 1` rows (one more says another
/// page exists), through the statement whose index fits its filters.
pub fn list_audit(q: &AuditQuery) -> Bound<'_> {
    let after = Arg::opt_int(q.after);
    let limit = Arg::Int(i64::from(q.limit) + 1);
    match (q.actor.as_deref(), q.action) {
        (None, None) => LIST_AUDIT.bind(vec![after, limit]),
        (Some(actor), None) => LIST_AUDIT_BY_ACTOR.bind(vec![Arg::text(actor), after, limit]),
        (None, Some(action)) => {
            LIST_AUDIT_BY_ACTION.bind(vec![Arg::text(action.as_str()), after, limit])
        }
        (Some(actor), Some(action)) => LIST_AUDIT_BY_ACTOR_ACTION.bind(vec![
            Arg::text(actor),
            Arg::text(action.as_str()),
            after,
            limit,
        ]),
    }
}

/// A row of the audit log as listed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AuditRow {
    #[serde(deserialize_with = "int")]
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: Option<String>,
    pub outcome: String,
    /// The JSON object's text, as stored.
    pub detail: String,
}

/// A row as `GET /admin/api/audit` shows it: `detail` a JSON object, not its text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: Option<String>,
    pub outcome: String,
    pub detail: serde_json::Value,
}

impl From<AuditRow> for AuditEntry {
    fn from(r: AuditRow) -> Self {
        AuditEntry {
            // the column's CHECK keeps it JSON; an empty object should that ever fail
            detail: serde_json::from_str(&r.detail)
                .unwrap_or_else(|_| serde_json::Value::Object(Default::default())),
            id: r.id,
            at: r.at,
            actor: r.actor,
            action: r.action,
            target: r.target,
            outcome: r.outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::audit::Action;
    use crate::admin::Command;
    use crate::ids::ResourceKind;
    use crate::machine::{plan, CauseKind, State};

    /// The words an audit statement writes as its outcome, from its text.
    fn outcome_words(sql: &str) -> Vec<&str> {
        sql.split("THEN '")
            .skip(1)
            .chain(sql.split("ELSE '").skip(1))
            .map(|s| s.split('\'').next().unwrap())
            .collect()
    }

    #[test]
    fn the_outcomes_written_in_sql_are_the_cores_words() {
        for s in [
            &AUDIT_TRANSITION,
            &AUDIT_REPLAY,
            &AUDIT_REDELIVER,
            &AUDIT_ALERT_ACK,
            &AUDIT_EFFECT_ACK,
            &AUDIT_DISMISS_DELIVERY,
            &AUDIT_DISMISS_EFFECT,
        ] {
            let words = outcome_words(s.sql);
            assert!(words.len() >= 2, "{}", s.name);
            for w in words {
                assert!(Outcome::parse(w).is_some(), "{}: `{w}`", s.name);
            }
            assert!(s.sql.ends_with("RETURNING outcome"), "{}", s.name);
        }
    }

    #[test]
    fn the_list_picks_the_statement_of_its_filters() {
        let q = |actor: Option<&str>, action| AuditQuery {
            actor: actor.map(str::to_string),
            action,
            after: Some(7),
            limit: 50,
        };
        let none = AuditQuery::default();
        let b = list_audit(&none);
        assert_eq!(b.statement.name, "LIST_AUDIT");
        assert_eq!(b.args, vec![Arg::Null, Arg::Int(51)]);
        let actor = q(Some("ada@example.com"), None);
        let b = list_audit(&actor);
        assert_eq!(b.statement.name, "LIST_AUDIT_BY_ACTOR");
        assert_eq!(b.args[1], Arg::Int(7));
        let action = q(None, Some(Action::BulkReplay));
        let b = list_audit(&action);
        assert_eq!(b.statement.name, "LIST_AUDIT_BY_ACTION");
        assert_eq!(b.args[0], Arg::text("bulk_replay"));
        let both = q(Some("a"), Some(Action::Replay));
        let b = list_audit(&both);
        assert_eq!(b.statement.name, "LIST_AUDIT_BY_ACTOR_ACTION");
        assert_eq!(
            b.args,
            vec![
                Arg::text("a"),
                Arg::text("replay"),
                Arg::Int(7),
                Arg::Int(51)
            ]
        );
    }

    #[test]
    fn an_operators_transition_names_them_and_audits_before_the_read_back() {
        let p = plan(ResourceKind::Invoice, State::Paid).unwrap();
        let c = Command::parse(
            "POST",
            "resources/inv_1/transition",
            "",
            br#"{"to":"paid","reason":"bank"}"#,
        )
        .unwrap();
        let record = Record::of(&c, "ada@example.com").unwrap();
        let r = TransitionRequest {
            plan: &p,
            resource_id: "inv_1",
            order_ref: None,
            amount: None,
            currency: None,
            cause_kind: CauseKind::Manual,
            cause: "bank",
            token: "tok",
            license_code: Some("LIC"),
            delivery: None,
            pull: false,
            actor: Some("ada@example.com"),
        };
        let b = audited_transition_batch(&r, &record);
        let names: Vec<&str> = b.iter().map(|x| x.statement.name).collect();
        assert_eq!(
            names,
            [
                "GUARDED_UPSERT",
                "INSERT_HISTORY",
                "INSERT_EFFECT",
                "RELEASE_EFFECTS",
                "AUDIT_TRANSITION",
                "READ_BACK"
            ]
        );
        assert_eq!(
            b[1].args[4],
            Arg::text("ada@example.com"),
            "the history's actor"
        );
        assert_eq!(
            b[4].args,
            vec![
                Arg::text("ada@example.com"),
                Arg::text("transition"),
                Arg::text("inv_1"),
                Arg::text(r#"{"reason":"bank","to":"paid"}"#),
                Arg::text("tok"),
            ]
        );
    }
}
