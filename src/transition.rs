//! The one guarded function through which every state change goes: deliveries, operators
//! and reconciliation alike. The plan (guard, effect, "a revocation needs a fulfilment") and
//! the batch's statements come from the core; here they get their random token and license
//! code and run as one D1 batch.

use crate::error::{AppError, AppResult};
use crate::sql::{self, TransitionResult};
use paymos_core::statements::TransitionRequest;
use paymos_core::{license_code, plan, CauseKind, EffectKind, ResourceKind, State, TransitionPlan};
use worker::D1Database;

/// A requested change of one resource's state.
pub struct Change<'a> {
    pub resource_id: &'a str,
    pub kind: ResourceKind,
    pub to: State,
    pub order_ref: Option<&'a str>,
    pub amount: Option<&'a str>,
    pub currency: Option<&'a str>,
    pub cause_kind: CauseKind,
    pub cause: &'a str,
    pub delivery: Option<&'a str>,
    /// Pull mode (no `ORDER_SYSTEM_URL`): what the feed offers may have been pulled.
    pub pull: bool,
}

pub fn random_bytes<const N: usize>() -> AppResult<[u8; N]> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|e| AppError::Internal(format!("getrandom: {e}")))?;
    Ok(buf)
}

/// Lowercase hex (tokens, alert ids, secret ids).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A change's plan with this attempt's token and license code, ready to become statements.
pub struct Prepared {
    plan: TransitionPlan,
    token: String,
    license: Option<String>,
}

impl Prepared {
    pub fn request<'a>(&'a self, change: &Change<'a>) -> TransitionRequest<'a> {
        TransitionRequest {
            plan: &self.plan,
            resource_id: change.resource_id,
            order_ref: change.order_ref,
            amount: change.amount,
            currency: change.currency,
            cause_kind: change.cause_kind,
            cause: change.cause,
            token: &self.token,
            license_code: self.license.as_deref(),
            delivery: change.delivery,
            pull: change.pull,
        }
    }
}

/// Plans a change: the core's plan, a random token, a license code when it may fulfil.
pub fn prepare(change: &Change<'_>) -> AppResult<Prepared> {
    let plan = plan(change.kind, change.to).ok_or_else(|| {
        AppError::BadRequest(
            "invalid_state",
            format!(
                "`{}` is not a state of a {}",
                change.to,
                change.kind.as_str()
            ),
        )
    })?;
    let token = hex(&random_bytes::<16>()?);
    // 128 bits from the platform's CSPRNG, drawn only when the plan may fulfil
    let license = match plan.effect.as_ref().map(|e| e.kind) {
        Some(EffectKind::Fulfilment) => Some(license_code(random_bytes::<16>()?)),
        _ => None,
    };
    Ok(Prepared {
        plan,
        token,
        license,
    })
}

pub async fn apply(db: &D1Database, change: &Change<'_>) -> AppResult<TransitionResult> {
    let prepared = prepare(change)?;
    Ok(sql::apply_transition(db, &prepared.request(change)).await?)
}
