//! `GET /audit` (interface §11: who did what, newest first) and `GET /openapi.json` (§12).

use crate::error::AppResult;
use crate::sql;
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

/// The admin API's OpenAPI 3.1 document, as the core keeps it beside the route table.
pub fn openapi() -> AppResult<Response> {
    let mut resp = Response::ok(openapi::DOCUMENT)?;
    resp.headers_mut()
        .set("Content-Type", "application/json; charset=utf-8")?;
    Ok(resp)
}
