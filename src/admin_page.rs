//! The operators' web page at /admin (static shell; all data comes from /admin/api with the token).

use crate::error::{AppError, AppResult};
use worker::{Env, Request, Response};

pub async fn serve(_req: Request, _env: &Env, _path: &str) -> AppResult<Response> {
    Err(AppError::NotFound)
}
