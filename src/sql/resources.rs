//! The D1 calls of resources, over `paymos_core::statements`.

use super::{all, first, DbResult};
use paymos_core::statements::{self as st, Arg};
use serde::{Deserialize, Serialize};
use worker::D1Database;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResourceRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

pub use paymos_core::rows::EffectRow;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HistoryRow {
    /// The state entered.
    pub state: String,
    pub from: Option<String>,
    pub cause_kind: String,
    pub cause: String,
    pub at: String,
    /// Who made a manual transition (interface §11); `null` for a delivery's or
    /// reconciliation's.
    pub actor: Option<String>,
}

pub async fn load_resource(db: &D1Database, id: &str) -> DbResult<Option<ResourceRow>> {
    first(db, st::LOAD_RESOURCE.bind(vec![Arg::text(id)])).await
}

pub async fn load_effects(db: &D1Database, id: &str) -> DbResult<Vec<EffectRow>> {
    all(db, st::LOAD_EFFECTS.bind(vec![Arg::text(id)])).await
}

pub async fn load_history(db: &D1Database, id: &str) -> DbResult<Vec<HistoryRow>> {
    all(db, st::LOAD_HISTORY.bind(vec![Arg::text(id)])).await
}
