//! Every failure the Worker can answer with, mapped to a status code in one place.

use crate::sql::DbError;
use paymos_core::access::AccessError;
use paymos_core::admin::CommandError;
use paymos_core::{EnvelopeError, SignatureError};
use serde_json::json;
use worker::Response;

#[derive(Debug)]
pub enum AppError {
    /// 401, or 503 when the receiver holds no secret (a config fault the sender should retry past).
    Signature(SignatureError),
    /// 400: the signature was valid but the envelope is not.
    Envelope(EnvelopeError),
    PayloadTooLarge,
    MethodNotAllowed(&'static str),
    NotFound,
    /// 401 on the admin surface.
    Unauthorized,
    /// 401: a Cloudflare Access token refused, with the core's code (interface §11), the team's
    /// keys that could not be read included (§11: any other failure is 401).
    Access(AccessError),
    /// 403: a mutating admin call that looks cross-site.
    Forbidden(&'static str),
    /// 409: the request is valid but the thing is in a state that refuses it.
    Conflict(&'static str, String),
    /// 409 `{"error":"cancelled"}`, the body interface §5 gives: an effect its refund cancelled
    /// (or a fulfilment whose invoice has a revocation) is never sent or delivered.
    Cancelled,
    BadRequest(&'static str, String),
    /// 502: the provider's API failed us (reconciliation).
    Upstream(String),
    /// 502: the archive in R2 failed us: a run that could not write or verify an object, a
    /// body that cannot be read back (interface §10).
    Archive(String),
    /// 503: a feature needs configuration this deployment lacks.
    NotConfigured(&'static str, String),
    /// 503 so that the sender retries: which statement failed, and how, is logged only.
    Database(DbError),
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> u16 {
        match self {
            AppError::Signature(SignatureError::NoSecretsConfigured) => 503,
            AppError::Signature(_) | AppError::Unauthorized | AppError::Access(_) => 401,
            AppError::Envelope(_) | AppError::BadRequest(..) => 400,
            AppError::PayloadTooLarge => 413,
            AppError::MethodNotAllowed(_) => 405,
            AppError::NotFound => 404,
            AppError::Forbidden(_) => 403,
            AppError::Conflict(..) | AppError::Cancelled => 409,
            AppError::Upstream(_) | AppError::Archive(_) => 502,
            AppError::Database(_) | AppError::NotConfigured(..) => 503,
            AppError::Internal(_) => 500,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::Signature(e) => e.code(),
            AppError::Envelope(e) => e.code(),
            AppError::PayloadTooLarge => "payload_too_large",
            AppError::MethodNotAllowed(_) => "method_not_allowed",
            AppError::NotFound => "not_found",
            AppError::Unauthorized => "unauthorized",
            AppError::Access(e) => e.code(),
            AppError::Forbidden(code) => code,
            AppError::BadRequest(code, _)
            | AppError::NotConfigured(code, _)
            | AppError::Conflict(code, _) => code,
            AppError::Cancelled => "cancelled",
            AppError::Upstream(_) => "provider_api_error",
            AppError::Archive(_) => "archive_failed",
            AppError::Database(_) => "database_unavailable",
            AppError::Internal(_) => "internal_error",
        }
    }

    /// What went wrong inside, for the logs only (never sent to the client): a database
    /// failure names its statement (`DbError`'s Display).
    pub fn detail(&self) -> Option<String> {
        match self {
            AppError::Database(e) => Some(e.to_string()),
            AppError::Internal(d) => Some(d.clone()),
            // why an Access token was refused: never echoes the token or ACCESS_AUD
            AppError::Access(e) => Some(e.to_string()),
            _ => None,
        }
    }

    /// A human-readable line (which field, which setting); never echoes secrets, signatures
    /// or expected values. In admin replies and in a refused delivery's log line.
    pub fn message(&self) -> Option<String> {
        match self {
            AppError::Envelope(e) => Some(e.to_string()),
            AppError::BadRequest(_, m)
            | AppError::Upstream(m)
            | AppError::Archive(m)
            | AppError::NotConfigured(_, m)
            | AppError::Conflict(_, m) => Some(m.clone()),
            AppError::PayloadTooLarge => Some("the body exceeds the size limit".into()),
            // interface §11 gives an Access refusal as `{"error":"<code>"}`: why is in the
            // Worker's log (`admin_reply` in lib.rs)
            _ => None,
        }
    }

    /// The reply: `{"error", "message"}`, or `{"error"}` when there is no message.
    pub fn into_response(self) -> worker::Result<Response> {
        let message = self.message();
        self.reply(message)
    }

    /// A refused delivery's reply, exactly as interface §1's replies table gives it:
    /// `{"error":"<code>"}`. What names the field is in the delivery's log line instead.
    pub fn into_delivery_response(self) -> worker::Result<Response> {
        self.reply(None)
    }

    fn reply(self, message: Option<String>) -> worker::Result<Response> {
        let body = match message {
            Some(m) => json!({ "error": self.code(), "message": m }),
            None => json!({ "error": self.code() }),
        };
        let mut resp = Response::from_json(&body)?.with_status(self.status());
        if let AppError::MethodNotAllowed(allow) = self {
            resp.headers_mut().set("Allow", allow)?;
        }
        Ok(resp)
    }
}

/// A runtime failure that is not the database's (reading headers, building a reply): 500.
/// D1 failures arrive as `DbError` and are 503.
impl From<worker::Error> for AppError {
    fn from(e: worker::Error) -> Self {
        AppError::Internal(e.to_string())
    }
}

impl From<DbError> for AppError {
    fn from(e: DbError) -> Self {
        AppError::Database(e)
    }
}

/// An admin request that is not a command: 400 with its code and message, 404, or 405.
impl From<CommandError> for AppError {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::BadRequest { code, message } => AppError::BadRequest(code, message),
            CommandError::NotFound => AppError::NotFound,
            CommandError::MethodNotAllowed { allow } => AppError::MethodNotAllowed(allow),
        }
    }
}

impl From<SignatureError> for AppError {
    fn from(e: SignatureError) -> Self {
        AppError::Signature(e)
    }
}

impl From<AccessError> for AppError {
    fn from(e: AccessError) -> Self {
        AppError::Access(e)
    }
}

impl From<EnvelopeError> for AppError {
    fn from(e: EnvelopeError) -> Self {
        AppError::Envelope(e)
    }
}

pub type AppResult<T> = Result<T, AppError>;

/// What a thrown JS value says: an `Error`'s message, else the value as a string, else its
/// debug form.
pub fn js_message(e: wasm_bindgen::JsValue) -> String {
    use wasm_bindgen::JsCast;
    e.dyn_ref::<worker::js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}
