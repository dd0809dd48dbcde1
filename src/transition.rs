//! The one guarded function through which every state change goes: deliveries, operators
//! and reconciliation alike. The decision tables live in the core crate; here they become
//! one D1 batch whose guard is in SQL.

use crate::error::{AppError, AppResult};
use crate::sql::{self, EffectPlan, TransitionPlan, TransitionResult};
use paymos_core::{license_code, machine, EffectKind, ResourceKind};
use worker::D1Database;

/// A requested change of one resource's state.
pub struct Change<'a> {
    pub resource_id: &'a str,
    pub kind: ResourceKind,
    pub to: &'a str,
    pub order_ref: Option<&'a str>,
    pub amount: Option<&'a str>,
    pub currency: Option<&'a str>,
    /// `event`, `manual` or `reconciliation`.
    pub cause_kind: &'static str,
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

/// Which effect entering `to` can trigger, and from which previous states.
fn effect_plan(kind: ResourceKind, to: &'static str) -> AppResult<Option<EffectPlan>> {
    let mut plan: Option<EffectPlan> = None;
    let candidates = std::iter::once(None).chain(machine::states(kind).iter().map(|s| Some(*s)));
    for from in candidates {
        if let Some(effect) = machine::effect_on_entry(kind, from, to) {
            let p = plan.get_or_insert_with(|| EffectPlan {
                kind: effect,
                from: Vec::new(),
                from_unknown: false,
                requires: (effect == EffectKind::Revocation).then_some(EffectKind::Fulfilment),
                license_code: None,
            });
            match from {
                None => p.from_unknown = true,
                Some(s) => p.from.push(s),
            }
        }
    }
    if let Some(p) = plan.as_mut() {
        if p.kind == EffectKind::Fulfilment {
            // 128 bits from the platform's CSPRNG
            p.license_code = Some(license_code(random_bytes::<16>()?));
        }
    }
    Ok(plan)
}

pub async fn apply(db: &D1Database, change: &Change<'_>) -> AppResult<TransitionResult> {
    let to = machine::states(change.kind)
        .iter()
        .copied()
        .find(|s| *s == change.to)
        .ok_or_else(|| {
            AppError::BadRequest(
                "invalid_state",
                format!(
                    "`{}` is not a state of a {}",
                    change.to,
                    change.kind.as_str()
                ),
            )
        })?;
    let guard = machine::guard(change.kind, to)
        .ok_or_else(|| AppError::Internal(format!("no guard for {to}")))?;
    let token = hex(&random_bytes::<16>()?);
    let plan = TransitionPlan {
        resource_id: change.resource_id,
        kind: change.kind,
        to,
        guard,
        effect: effect_plan(change.kind, to)?,
        order_ref: change.order_ref,
        amount: change.amount,
        currency: change.currency,
        cause_kind: change.cause_kind,
        cause: change.cause,
        token: &token,
        delivery: change.delivery,
    };
    Ok(sql::apply_transition(db, &plan).await?)
}
