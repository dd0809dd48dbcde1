//! Configuration read from the Worker's bindings (wrangler.toml vars, secrets, .dev.vars).

use paymos_core::signature::{SecretSet, SignatureError, DEFAULT_TOLERANCE_SECONDS};
use worker::Env;

pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;

/// A string binding, whether it was set as a var or as a secret.
pub fn string(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .map(|v| v.to_string())
        .or_else(|_| env.secret(name).map(|s| s.to_string()))
        .ok()
        .filter(|s| !s.trim().is_empty())
}

fn number<T: std::str::FromStr>(env: &Env, name: &str, default: T) -> T {
    string(env, name)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

pub fn secrets(env: &Env) -> Result<SecretSet, SignatureError> {
    SecretSet::parse(&string(env, "PAYMOS_WEBHOOK_SECRETS").unwrap_or_default())
}

pub fn tolerance_seconds(env: &Env) -> i64 {
    number(
        env,
        "PAYMOS_SIGNATURE_TOLERANCE_SECONDS",
        DEFAULT_TOLERANCE_SECONDS,
    )
}

pub fn max_body_bytes(env: &Env) -> usize {
    number(env, "PAYMOS_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)
}

pub fn sweep_after_seconds(env: &Env) -> i64 {
    number(env, "SWEEP_AFTER_SECONDS", 300)
}

pub fn retry_base_seconds(env: &Env) -> u32 {
    number(env, "QUEUE_RETRY_BASE_SECONDS", 10)
}

pub fn admin_token(env: &Env) -> Option<String> {
    string(env, "ADMIN_TOKEN")
}
