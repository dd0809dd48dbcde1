//! `GET /audit` (interface §11: who did what, newest first) and `GET /openapi.json` (§12).

use crate::error::AppResult;
use crate::sql;
use paymos_core::admin::audit::{Outcome, Record};
use paymos_core::admin::{openapi, AuditQuery, Page};
use paymos_core::statements::AuditEntry;
use worker::{Env, Response};

/// Newest first, cursor-paged (the cursor is the last row's id), by actor and action.
pub async fn list(env: &Env, q: &AuditQuery) -> AppResult<Response> {
    let db = sql::database(env)?;
    let rows = sql::list_audit(&db, q).await?;
    let page = Page::of(rows, q.limit, |r| r.id.to_string()).map(AuditEntry::from);
    Ok(Response::from_json(&page)?)
}

/// The audit row of a write that has no batch of its own to put it in (a run over many
/// batches, or a write that failed before its batch), written after it with how it ended.
/// Best effort: a row that cannot be written (D1 gone meanwhile) is logged, and the answer
/// stands.
pub async fn record_after(env: &Env, record: &Record, outcome: Outcome) {
    let written = match sql::database(env) {
        Ok(db) => sql::insert_audit(&db, record, outcome).await,
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        crate::log::line("audit", "-", "write_failed", Some(&e.to_string()));
    }
}

/// The admin API's OpenAPI 3.1 document, as the core keeps it beside the route table.
pub fn openapi() -> AppResult<Response> {
    let mut resp = Response::ok(openapi::DOCUMENT)?;
    resp.headers_mut()
        .set("Content-Type", "application/json; charset=utf-8")?;
    Ok(resp)
}
