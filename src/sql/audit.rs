//! The D1 calls of the audit log, over `paymos_core::statements`.

use super::{all, run, DbError, DbResult, Results};
use paymos_core::admin::audit::{self, Record};
use paymos_core::admin::AuditQuery;
use paymos_core::statements::{self as st, AuditRow};
use serde::Deserialize;
use worker::D1Database;

/// The outcome an audit statement (`RETURNING outcome`) wrote, the `i`-th of a batch.
pub(super) fn audit_outcome(results: &Results, i: usize) -> DbResult<audit::Outcome> {
    #[derive(Deserialize)]
    struct Row {
        outcome: String,
    }
    let row: Row = results.expect(i, "the audit row's outcome")?;
    audit::Outcome::parse(&row.outcome).ok_or_else(|| DbError::Unexpected {
        at: results.site(i),
        what: format!("unknown audit outcome `{}`", row.outcome),
    })
}

/// A row whose outcome is known (a dry run, a reconciliation's report), on its own.
pub async fn insert_audit(
    db: &D1Database,
    record: &Record,
    outcome: audit::Outcome,
) -> DbResult<()> {
    run(db, st::insert_audit(record, outcome)).await
}

/// A page of the audit log, newest first: `limit + 1` rows.
pub async fn list_audit(db: &D1Database, q: &AuditQuery) -> DbResult<Vec<AuditRow>> {
    all(db, st::list_audit(q)).await
}
