//! The one guarded function through which every state change goes: deliveries, operators
//! and reconciliation alike. The plan, the token, the license code and the statements come
//! from the core (`paymos_core::actors::transition`); here the randomness is the platform's
//! and the statements run as one D1 batch.

use crate::error::{AppError, AppResult};
use crate::sql;
pub use paymos_core::actors::transition::Change;
use paymos_core::actors::transition::{prepare, Applied, Prepared};
use paymos_core::admin::audit::Record;
use worker::D1Database;

pub fn random_bytes<const N: usize>() -> AppResult<[u8; N]> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|e| AppError::Internal(format!("getrandom: {e}")))?;
    Ok(buf)
}

/// 16 bytes from the platform's CSPRNG, for the core's tokens and license codes. The
/// platform failing to give randomness is a broken runtime: the invocation ends (the queue
/// or the caller retries), nothing half-done, since nothing was written yet.
pub fn draw() -> [u8; 16] {
    random_bytes::<16>().expect("the platform's CSPRNG")
}

/// Lowercase hex (tokens, alert ids, secret ids).
pub fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// Plans `change` and runs it as one transaction; what it read back.
pub async fn apply(db: &D1Database, change: Change) -> AppResult<Applied> {
    let prepared = prepare(change, None, &mut draw)
        .map_err(|e| AppError::BadRequest("invalid_state", e.to_string()))?;
    let statements = prepared.statements();
    let results = sql::run_batch(db, &statements).await?;
    let rows = sql::json_rows(results);
    Prepared::read(&statements, &rows).map_err(|e| AppError::Internal(e.to_string()))
}

/// An operator's change (interface §11): as [`apply`], with the operator named in the history
/// row it may write and its audit row (`record`) in the same batch.
pub async fn apply_manual(db: &D1Database, change: Change, record: &Record) -> AppResult<Applied> {
    let prepared = prepare(change, None, &mut draw)
        .map_err(|e| AppError::BadRequest("invalid_state", e.to_string()))?;
    let statements = prepared.audited_statements(record);
    let results = sql::run_batch(db, &statements).await?;
    let rows = sql::json_rows(results);
    Prepared::read(&statements, &rows).map_err(|e| AppError::Internal(e.to_string()))
}
