//! The operators' admin API (`/admin/api`), sans I/O: a request (method, path, query string,
//! body) is resolved through the route table ([`routes::ROUTES`]) and parsed into a typed,
//! validated [`Command`], or refused with a [`CommandError`] (400 with a code and a message,
//! 404, or 405 with its `Allow`). The Worker authorizes the request, parses it here, and
//! applies the command on D1 and the queues, in the manner of mini-redis's
//! `Command::from_frame` then `apply`.

pub mod audit;
mod command;
pub mod openapi;
pub mod paging;
pub mod redact;
pub mod routes;

pub use command::{
    Archive, AuditQuery, BulkReplay, Command, DeliveryQuery, DispatchFilter, EffectQuery,
    MetricsFormat, ReplayFilter, StatusFilter, Transition, DEFAULT_HISTORY_HOURS, MAX_FIELD_CHARS,
    MAX_HISTORY_HOURS, MAX_REASON_CHARS,
};
pub use paging::{DeliveryCursor, Page, DEFAULT_PAGE, MAX_PAGE};
pub use routes::{Operation, RequestBody, Resolved, Route, ROUTES};

/// The HTTP methods the admin API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    /// `GET` or `POST` (as sent: method tokens are case-sensitive); any other is `None`.
    pub fn from_token(token: &str) -> Option<Method> {
        match token {
            "GET" => Some(Method::Get),
            "POST" => Some(Method::Post),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// Why a request is not a command. The Worker maps each to its reply (`src/error.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// 400 `{"error": code, "message": message}`.
    #[error("{code}: {message}")]
    BadRequest { code: &'static str, message: String },
    /// 404: no admin endpoint has this path.
    #[error("no admin endpoint has this path")]
    NotFound,
    /// 405: the path is an endpoint's, the method is not; `allow` is the `Allow` header.
    #[error("the method is not allowed here (Allow: {allow})")]
    MethodNotAllowed { allow: &'static str },
}

pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> CommandError {
    CommandError::BadRequest {
        code,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests;
