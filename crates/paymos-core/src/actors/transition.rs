//! The one guarded function through which every state change goes (deliveries, operators,
//! reconciliation): a change, prepared with its plan, a random token and (when it may fulfil)
//! a license code, becomes one transaction's statements (`statements::transition_batch`); its
//! results read back as what happened. Randomness comes from the driver (`draw`: 16 bytes
//! from the platform's CSPRNG in the Worker, from the seed in the simulator).

use serde::Deserialize;
use thiserror::Error;

use crate::admin::audit::Record;
use crate::license::license_code;
use crate::machine::{plan, CauseKind, EffectKind, Outcome, State, TransitionPlan};
use crate::rows::flag;
use crate::statements::{self as st, Bound, TransitionRequest};
use crate::ResourceKind;

/// Where the plan comes from: `machine::plan`, or a test-only replacement (the simulator's
/// teeth).
pub type PlanFn = fn(ResourceKind, State) -> Option<TransitionPlan>;

/// A requested change of one resource's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub resource_id: String,
    pub kind: ResourceKind,
    pub to: State,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub cause_kind: CauseKind,
    /// The `evt_` id, the operator's reason, or reconciliation's cause.
    pub cause: String,
    /// The delivery whose outcome the transaction records, if any.
    pub delivery: Option<String>,
    /// Pull mode (no `ORDER_SYSTEM_URL`): what the feed offers may have been pulled.
    pub pull: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{to}` is not a state of a {}", kind.as_str())]
pub struct NotAState {
    pub kind: ResourceKind,
    pub to: State,
}

/// A change with its plan, this attempt's token and license code.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub change: Change,
    pub plan: TransitionPlan,
    pub token: String,
    pub license: Option<String>,
}

/// Plans a change: the plan, a random token, a license code when it may fulfil (128 bits,
/// drawn only then).
pub fn prepare(
    change: Change,
    plan_of: Option<PlanFn>,
    draw: &mut dyn FnMut() -> [u8; 16],
) -> Result<Prepared, NotAState> {
    let plan = plan_of.unwrap_or(plan)(change.kind, change.to).ok_or(NotAState {
        kind: change.kind,
        to: change.to,
    })?;
    // lowercase hex, as the archive's and the signature's (a `format!` per byte was its cost)
    let token = hex::encode(draw());
    let license = match plan.effect.as_ref().map(|e| e.kind) {
        Some(EffectKind::Fulfilment) => Some(license_code(draw())),
        _ => None,
    };
    Ok(Prepared {
        change,
        plan,
        token,
        license,
    })
}

/// What a transition's statements read back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// Effects the transaction made ready to send (marked enqueued in it): the driver sends
    /// them once it committed.
    pub released: Vec<String>,
    /// The resource's state after the transaction.
    pub status: Option<State>,
    /// The resource's order_ref after it (the first known one is kept).
    pub order_ref: Option<String>,
    /// Whether this transaction's guarded write won.
    pub applied: bool,
    /// The delivery's recorded outcome, when the transition was for a delivery.
    pub outcome: Option<Outcome>,
    /// This transaction recorded the delivery's outcome (RECORD_OUTCOME changed its row): not
    /// a copy already processed, nor a delivery gone.
    pub recorded: bool,
    /// The delivery is a payment waiting for a refund received before it: nothing was written.
    pub held: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReadError {
    #[error("the transition's read-back returned no row")]
    NoReadBack,
    #[error("a transition's result does not read: {0}")]
    Rows(String),
}

#[derive(Deserialize)]
struct ReadBack {
    status: Option<String>,
    order_ref: Option<String>,
    #[serde(deserialize_with = "flag")]
    applied: bool,
    outcome: Option<String>,
    #[serde(default, deserialize_with = "flag")]
    held: bool,
}

#[derive(Deserialize)]
struct Released {
    effect_id: String,
}

fn rows<T: serde::de::DeserializeOwned>(rows: &[serde_json::Value]) -> Result<Vec<T>, ReadError> {
    rows.iter()
        // read in place: `from_value` would take a copy of each row first
        .map(|r| T::deserialize(r).map_err(|e| ReadError::Rows(e.to_string())))
        .collect()
}

impl Prepared {
    pub fn request(&self) -> TransitionRequest<'_> {
        let c = &self.change;
        TransitionRequest {
            plan: &self.plan,
            resource_id: &c.resource_id,
            order_ref: c.order_ref.as_deref(),
            amount: c.amount.as_deref(),
            currency: c.currency.as_deref(),
            cause_kind: c.cause_kind,
            cause: &c.cause,
            token: &self.token,
            license_code: self.license.as_deref(),
            delivery: c.delivery.as_deref(),
            pull: c.pull,
            actor: None,
        }
    }

    /// An operator's transition (interface §11): the statements with the operator (the audit
    /// row's actor) named in the history row they may write, and the audit row itself in the
    /// same transaction, before the read-back (which stays last, as `read` needs).
    pub fn audited_statements(&self, record: &Record) -> Vec<Bound<'static>> {
        let request = TransitionRequest {
            actor: Some(&record.actor),
            ..self.request()
        };
        st::audited_transition_batch(&request, record)
            .into_iter()
            .map(Bound::into_owned)
            .collect()
    }

    /// The one transaction's statements; its last reads back what happened.
    pub fn statements(&self) -> Vec<Bound<'static>> {
        st::transition_batch(&self.request())
            .into_iter()
            .map(Bound::into_owned)
            .collect()
    }

    /// What `statements` (this transition's slice of a batch) read back, from each
    /// statement's rows as JSON objects.
    pub fn read(
        statements: &[Bound<'_>],
        results: &[Vec<serde_json::Value>],
    ) -> Result<Applied, ReadError> {
        let release = statements
            .iter()
            .position(|b| std::ptr::eq(b.statement, &st::RELEASE_EFFECTS));
        let released = match release.and_then(|i| results.get(i)) {
            Some(r) => rows::<Released>(r)?
                .into_iter()
                .map(|r| r.effect_id)
                .collect(),
            None => Vec::new(),
        };
        let recorded = statements
            .iter()
            .position(|b| std::ptr::eq(b.statement, &st::RECORD_OUTCOME))
            .and_then(|i| results.get(i))
            .is_some_and(|r| !r.is_empty());
        let last = results.len().checked_sub(1).ok_or(ReadError::NoReadBack)?;
        let back = rows::<ReadBack>(&results[last])?
            .into_iter()
            .next()
            .ok_or(ReadError::NoReadBack)?;
        Ok(Applied {
            released,
            status: back.status.as_deref().and_then(State::from_str_name),
            order_ref: back.order_ref,
            applied: back.applied,
            outcome: back.outcome.as_deref().and_then(Outcome::from_str_name),
            recorded,
            held: back.held,
        })
    }
}

/// A later event whose `order_ref` disagrees with the one on record: the first known one
/// is kept (never overwritten), and the disagreement is said, never silently dropped.
pub fn order_ref_disagreement(change: &Change, applied: &Applied) -> Option<String> {
    let said = change.order_ref.as_deref()?;
    let kept = applied.order_ref.as_deref()?;
    (said != kept).then(|| {
        format!(
            "{} carries order_ref {said:?}, {} has {kept:?} on record: kept",
            change.cause, change.resource_id
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(to: State) -> Change {
        Change {
            resource_id: "inv_1".into(),
            kind: ResourceKind::Invoice,
            to,
            order_ref: Some("order_a".into()),
            amount: None,
            currency: None,
            cause_kind: CauseKind::Event,
            cause: "evt_1".into(),
            delivery: Some("evt_1".into()),
            pull: false,
        }
    }

    #[test]
    fn a_fulfilling_change_draws_a_token_and_a_license_code() {
        let mut n = 0u8;
        let mut draw = || {
            n += 1;
            [n; 16]
        };
        let p = prepare(change(State::Paid), None, &mut draw).unwrap();
        assert_eq!(p.token, "01".repeat(16));
        assert_eq!(p.license.as_deref(), Some(license_code([2; 16]).as_str()));
        let refund = prepare(change(State::Refunded), None, &mut draw).unwrap();
        assert_eq!(refund.license, None, "drawn only when it may fulfil");
        let err = prepare(
            Change {
                kind: ResourceKind::Deposit,
                ..change(State::Paid)
            },
            None,
            &mut draw,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "`paid` is not a state of a deposit");
    }

    #[test]
    fn the_read_back_says_what_happened() {
        let mut draw = || [7; 16];
        let p = prepare(change(State::Paid), None, &mut draw).unwrap();
        let statements = p.statements();
        let mut results: Vec<Vec<serde_json::Value>> = vec![Vec::new(); statements.len()];
        let release = statements
            .iter()
            .position(|b| b.statement.name == "RELEASE_EFFECTS")
            .unwrap();
        results[release] = vec![json!({"effect_id": "eff_1"})];
        *results.last_mut().unwrap() = vec![json!({
            "status": "paid", "order_ref": "order_b", "applied": 1, "outcome": "applied"
        })];
        let a = Prepared::read(&statements, &results).unwrap();
        assert_eq!(a.released, ["eff_1"]);
        assert_eq!(a.status, Some(State::Paid));
        assert!(a.applied);
        assert_eq!(a.outcome, Some(Outcome::Applied));
        assert_eq!(
            order_ref_disagreement(&p.change, &a).as_deref(),
            Some("evt_1 carries order_ref \"order_a\", inv_1 has \"order_b\" on record: kept")
        );
        let same = Applied {
            order_ref: Some("order_a".into()),
            ..a.clone()
        };
        assert_eq!(order_ref_disagreement(&p.change, &same), None);
        results.last_mut().unwrap().clear();
        assert_eq!(
            Prepared::read(&statements, &results),
            Err(ReadError::NoReadBack)
        );
    }
}
