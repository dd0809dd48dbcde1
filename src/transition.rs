//! The one guarded function through which every state change goes: deliveries, operators
//! and reconciliation alike. The plan (guard, effect, "a revocation needs a fulfilment") and
//! the batch's statements come from the core; here they get their random token and license
//! code and run as one D1 batch.

use crate::error::{AppError, AppResult};
use crate::sql::{self, TransitionResult};
use paymos_core::statements::TransitionRequest;
use paymos_core::{license_code, plan, CauseKind, EffectKind, ResourceKind, State};
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
}

pub fn random_bytes<const N: usize>() -> AppResult<[u8; N]> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|e| AppError::Internal(format!("getrandom: {e}")))?;
    Ok(buf)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn apply(db: &D1Database, change: &Change<'_>) -> AppResult<TransitionResult> {
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
    let request = TransitionRequest {
        plan: &plan,
        resource_id: change.resource_id,
        order_ref: change.order_ref,
        amount: change.amount,
        currency: change.currency,
        cause_kind: change.cause_kind,
        cause: change.cause,
        token: &token,
        license_code: license.as_deref(),
        delivery: change.delivery,
    };
    Ok(sql::apply_transition(db, &request).await?)
}
