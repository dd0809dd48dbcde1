//! The D1 calls of the guarded transition, over `paymos_core::statements`.

use super::{batch, DbResult, Results};
use paymos_core::statements::Bound;
use worker::D1Database;

/// Runs statements as one D1 batch (one transaction, all or nothing).
pub async fn run_batch(db: &D1Database, statements: &[Bound<'_>]) -> DbResult<Results> {
    batch(db, statements).await
}

/// Each statement's rows as JSON objects, for the core to read: moved out of the answer, where
/// reading each `Value` into another copied every row.
pub fn json_rows(results: Results) -> Vec<Vec<serde_json::Value>> {
    results.rows
}
