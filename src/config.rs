//! Configuration read from the Worker's bindings (wrangler.toml vars, secrets, .dev.vars).

use paymos_core::receive_log::ReceiveLog;
use paymos_core::setting::{Numeric, Outside, Read};
use paymos_core::signature::{SecretSet, SignatureError, DEFAULT_TOLERANCE_SECONDS};
use paymos_core::standard_webhooks::{SecretError, WebhookSecret};
use worker::Env;

/// A setting that cannot be used as it is (or is missing where another needs it): which
/// setting, and why. Its text is the line said in the logs, the metrics' warnings and the
/// replies: `ORDER_SYSTEM_URL is not an https URL: credentials are sent only over https`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} {problem}")]
pub struct ConfigError {
    pub setting: &'static str,
    pub problem: Problem,
}

/// Why a setting cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("is not set")]
    NotSet,
    /// The secret that signs what is sent (`effects`, `alerts`) to a URL that is set.
    #[error("is not set: {0} cannot be signed")]
    SigningSecretNotSet(&'static str),
    #[error("is not an https URL: credentials are sent only over https")]
    NotHttps,
    /// A URL fetch would refuse at every send (`paymos_core::outbound::malformed`), or a
    /// base that other paths are appended to with a query or fragment.
    #[error("is not a URL that can be fetched: it {0}")]
    Malformed(&'static str),
    #[error("is not a whsec_ secret: {0}")]
    NotWhsec(SecretError),
    #[error("is neither `live` nor `test`")]
    NotAMode,
}

impl ConfigError {
    fn new(setting: &'static str, problem: Problem) -> ConfigError {
        ConfigError { setting, problem }
    }
}

pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;

/// A string binding, whether it was set as a var or as a secret (both are JS strings on the
/// `env` object). Read as the string itself rather than through workers-rs's `Env::var` and
/// `Env::secret`, which check the value's constructor's name and copy it through `Display`.
pub fn string(env: &Env, name: &str) -> Option<String> {
    crate::binding::get::<wasm_bindgen::JsValue>(env, name)
        .and_then(|v| v.as_string())
        .filter(|s| !s.trim().is_empty())
}

/// A numeric setting as read from its binding: the value to use and, when that is not the
/// value given, why (`paymos_core::setting`), said in `warnings` (metrics, the page, the cron's log).
fn read<T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display>(
    env: &Env,
    setting: &Numeric<T>,
) -> Read<T> {
    setting.read(string(env, setting.name).as_deref())
}

fn number<T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display>(
    env: &Env,
    setting: &Numeric<T>,
) -> T {
    read(env, setting).value
}

/// Why a numeric setting is not used as given, if it is not.
fn number_warning<T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display>(
    env: &Env,
    setting: &Numeric<T>,
) -> Option<String> {
    read(env, setting).warning
}

// The numeric settings and the values each may take. No upper bound on the tolerance (the
// core compares in i128): a test that admits an old signed vector sets a very wide one.
const TOLERANCE: Numeric<i64> = Numeric {
    name: "PAYMOS_SIGNATURE_TOLERANCE_SECONDS",
    default: DEFAULT_TOLERANCE_SECONDS,
    min: 1,
    max: i64::MAX,
    outside: Outside::Default,
};
const MAX_BODY: Numeric<usize> = Numeric {
    name: "PAYMOS_MAX_BODY_BYTES",
    default: DEFAULT_MAX_BODY_BYTES,
    min: 1,
    // at most 1 MiB: the body is stored in a D1 row, which holds 2 MB; a larger limit would
    // accept deliveries whose insert then fails with 503 on every retry
    max: 1024 * 1024,
    outside: Outside::Default,
};
const SWEEP_AFTER: Numeric<i64> = Numeric {
    name: "SWEEP_AFTER_SECONDS",
    default: 300,
    min: 0,
    max: 1_000_000_000,
    outside: Outside::Default,
};
const RETRY_BASE: Numeric<u32> = Numeric {
    name: "QUEUE_RETRY_BASE_SECONDS",
    default: 10,
    min: 0,
    // the delays are capped at 15 minutes whatever the base
    max: 900,
    outside: Outside::Nearest,
};
const COUNTERS_FLUSH: Numeric<u32> = Numeric {
    name: "COUNTERS_FLUSH_SECONDS",
    default: 20,
    min: 1,
    max: 25,
    outside: Outside::Nearest,
};
const BUDGET: Numeric<u32> = Numeric {
    name: "INVOCATION_BUDGET",
    default: 1000,
    min: 10,
    // D1 answers at most 1,000 queries per invocation on any plan: a larger budget would let
    // a loop run into the platform's limit instead of stopping at its own
    max: 1000,
    outside: Outside::Nearest,
};
const ORDER_TIMEOUT: Numeric<u64> = Numeric {
    name: "ORDER_SYSTEM_TIMEOUT_MS",
    default: 10_000,
    min: 100,
    max: 60_000,
    outside: Outside::Nearest,
};
const RETRY_SCALE: Numeric<f64> = Numeric {
    name: "EFFECT_RETRY_SCALE",
    default: 1.0,
    min: 1e-9,
    max: 1e6,
    outside: Outside::Default,
};
const SIGNATURE_BURST: Numeric<i64> = Numeric {
    name: "ALERT_SIGNATURE_REFUSALS",
    default: paymos_core::alerts::DEFAULT_SIGNATURE_BURST,
    min: 1,
    max: 1_000_000_000,
    outside: Outside::Default,
};

// interface §10: at least 7 days in D1 (a shorter value asked for is raised to 7, and said)
const RETENTION_DAYS: Numeric<u32> = Numeric {
    name: "RETENTION_DAYS",
    default: 30,
    min: 7,
    max: 36_500,
    outside: Outside::Nearest,
};
// D1's cap on a database; the `database_size` alert opens at 80 % of it
const DATABASE_SIZE_LIMIT: Numeric<u64> = Numeric {
    name: "DATABASE_SIZE_LIMIT_BYTES",
    default: 10_000_000_000,
    min: 1,
    max: 1_000_000_000_000_000,
    outside: Outside::Default,
};

/// `RECEIVE_LOG` as read from its binding (`paymos_core::receive_log`).
fn receive_log(env: &Env) -> Read<ReceiveLog> {
    paymos_core::receive_log::SETTING.read(string(env, "RECEIVE_LOG").as_deref())
}

/// Every numeric or named setting not used as given: said in `warnings`, and logged by the
/// cron.
pub fn setting_warnings(env: &Env) -> Vec<String> {
    [
        receive_log(env).warning,
        number_warning(env, &TOLERANCE),
        number_warning(env, &MAX_BODY),
        number_warning(env, &SWEEP_AFTER),
        number_warning(env, &RETRY_BASE),
        number_warning(env, &COUNTERS_FLUSH),
        number_warning(env, &BUDGET),
        number_warning(env, &ORDER_TIMEOUT),
        number_warning(env, &RETRY_SCALE),
        number_warning(env, &SIGNATURE_BURST),
        number_warning(env, &RETENTION_DAYS),
        number_warning(env, &DATABASE_SIZE_LIMIT),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub fn secrets(env: &Env) -> Result<SecretSet, SignatureError> {
    SecretSet::parse(&string(env, "PAYMOS_WEBHOOK_SECRETS").unwrap_or_default())
}

/// What `POST /webhooks/paymos` reads on every request, read once per isolate (the profile
/// showed the bindings read, the secrets parsed and their ids hashed per request). Bindings
/// cannot change under a running isolate: a new secret or var is a new deployment, which
/// runs in new isolates (as does `wrangler dev` reloading `.dev.vars`). A configuration
/// that does not parse is not kept: it is read again, and refused, on every request.
pub struct ReceiveConfig {
    pub secrets: SecretSet,
    /// each secret's public name (`receive::secret_id`), in the order of `secrets`
    pub secret_ids: Vec<String>,
    pub tolerance_seconds: i64,
    pub max_body_bytes: usize,
    /// which deliveries write their `receive` log line (`RECEIVE_LOG`)
    pub receive_log: ReceiveLog,
    /// `secrets` imported into WebCrypto for large bodies (`webcrypto::import_keys`), on the
    /// first large delivery; `None` without WebCrypto.
    pub webcrypto_keys: std::cell::OnceCell<Option<crate::webcrypto::HmacKeys>>,
}

thread_local! {
    static RECEIVE: std::cell::OnceCell<std::rc::Rc<ReceiveConfig>> = const { std::cell::OnceCell::new() };
}

pub fn receive_config(env: &Env) -> Result<std::rc::Rc<ReceiveConfig>, SignatureError> {
    if let Some(c) = RECEIVE.with(|c| c.get().cloned()) {
        return Ok(c);
    }
    let secrets = secrets(env)?;
    let (tolerance, max_body) = (read(env, &TOLERANCE), read(env, &MAX_BODY));
    let log = receive_log(env);
    // said once per isolate here (every request reads the kept config), and by every cron
    for warning in [&tolerance.warning, &max_body.warning, &log.warning]
        .into_iter()
        .flatten()
    {
        crate::log::line("config", "-", "invalid_setting", Some(warning));
    }
    let config = std::rc::Rc::new(ReceiveConfig {
        secret_ids: secrets
            .secrets()
            .iter()
            .map(|s| crate::receive::secret_id(s.expose()))
            .collect(),
        secrets,
        tolerance_seconds: tolerance.value,
        max_body_bytes: max_body.value,
        receive_log: log.value,
        webcrypto_keys: std::cell::OnceCell::new(),
    });
    Ok(RECEIVE.with(|c| c.get_or_init(|| config).clone()))
}

/// What the queue handler and the deliveries' consumer read on every batch, read once per
/// isolate for the reason `ReceiveConfig` is: each setting read is several calls into JS (the
/// binding, its type's name, its text): 30 calls per new delivery at 1 connection before this
/// was kept (bench/README.md, "Calls between the wasm and JS"). An invalid `PAYMOS_MODE` is
/// not kept.
pub struct ConsumeConfig {
    pub mode: Result<Mode, String>,
    pub pull: bool,
    pub retry_base_seconds: u32,
    pub dead_letter_queue: String,
    pub effects_queue: String,
    pub effects_dead_letter_queue: String,
    /// How many of a batch's deliveries one load reads, so that their bodies together stay
    /// within `LOAD_BYTES` whatever `PAYMOS_MAX_BODY_BYTES` allows.
    pub per_load: usize,
}

/// The bodies one consumer load may bring at most: 50 deliveries of the default 256 KiB in
/// one load, 16 of the largest allowed (1 MiB), so that a batch's answer and its copies (the
/// JSON text, the wasm's) stay well within a Worker's 128 MB.
const LOAD_BYTES: usize = 16 * 1024 * 1024;

thread_local! {
    static CONSUME: std::cell::OnceCell<std::rc::Rc<ConsumeConfig>> = const { std::cell::OnceCell::new() };
}

pub fn consume_config(env: &Env) -> std::rc::Rc<ConsumeConfig> {
    if let Some(c) = CONSUME.with(|c| c.get().cloned()) {
        return c;
    }
    let config = std::rc::Rc::new(ConsumeConfig {
        mode: mode(env).map_err(|e| e.to_string()),
        pull: pull_mode(env),
        retry_base_seconds: retry_base_seconds(env),
        dead_letter_queue: dead_letter_queue(env),
        effects_queue: effects_queue(env),
        effects_dead_letter_queue: effects_dead_letter_queue(env),
        per_load: (LOAD_BYTES / number(env, &MAX_BODY)).max(1),
    });
    if config.mode.is_err() {
        return config;
    }
    CONSUME.with(|c| c.get_or_init(|| config).clone())
}

pub fn sweep_after_seconds(env: &Env) -> i64 {
    number(env, &SWEEP_AFTER)
}

pub fn retry_base_seconds(env: &Env) -> u32 {
    number(env, &RETRY_BASE)
}

/// The admin API's bearer token, without the blanks around it: no client can send those (a
/// header's value is trimmed), so a token set with them would switch the surface on and
/// admit no one.
pub fn admin_token(env: &Env) -> Option<String> {
    string(env, "ADMIN_TOKEN").map(|t| t.trim().to_string())
}

/// Which deliveries may change state (interface §8).
pub use paymos_core::actors::consume::Mode;

/// `PAYMOS_MODE`: `live` when unset (the deploy default). Anything else than `live` or
/// `test` is a configuration fault, not a guess: the consumer refuses to decide (retries,
/// then dead-letters, all replayable) rather than fulfil under the wrong mode.
pub fn mode(env: &Env) -> Result<Mode, ConfigError> {
    match string(env, "PAYMOS_MODE").as_deref().map(str::trim) {
        None | Some("live") => Ok(Mode::Live),
        Some("test") => Ok(Mode::Test),
        Some(_) => Err(ConfigError::new("PAYMOS_MODE", Problem::NotAMode)),
    }
}

/// How long after the first count since the last write an isolate's counters are written
/// (counters.rs): `COUNTERS_FLUSH_SECONDS`, default 20, 1 to 25: at least a second, so that a
/// flood is written in batches, and at most 25, so that the write happens within the 30 s the
/// platform keeps a `waitUntil` alive after the reply.
pub fn counters_flush_seconds(env: &Env) -> u32 {
    number(env, &COUNTERS_FLUSH)
}

/// What one Worker invocation may do (Cloudflare: 1,000 subrequests and 1,000 D1 queries on
/// the paid plan, 50 on the free plan). `INVOCATION_BUDGET` (default 1000) sets both; the
/// sweeper and reconciliation size their loops from it.
pub fn invocation_budget(env: &Env) -> u32 {
    number(env, &BUDGET)
}

/// What an operator's call may spend of the budget on its work: the rest is its audit row
/// and, with Access, the fetch of Access's signing keys.
pub fn admin_budget(env: &Env) -> u32 {
    invocation_budget(env).saturating_sub(2)
}

/// The queue whose messages exhausted their retries (wrangler.toml's `dead_letter_queue`),
/// recognised by name.
pub fn dead_letter_queue(env: &Env) -> String {
    string(env, "DEAD_LETTER_QUEUE").unwrap_or_else(|| "paymos-deliveries-dlq".into())
}

/// An outbound URL that credentials may be sent to: `https`, or plain `http` to a loopback
/// host (a development value, interface §4: a deployed worker cannot reach loopback anyway).
pub fn credential_url(env: &Env, name: &'static str) -> Result<String, ConfigError> {
    let url = string(env, name).ok_or(ConfigError::new(name, Problem::NotSet))?;
    let trimmed = url.trim();
    if !paymos_core::outbound::may_carry_credentials(trimmed) {
        return Err(ConfigError::new(name, Problem::NotHttps));
    }
    if let Some(why) = paymos_core::outbound::malformed(trimmed) {
        return Err(ConfigError::new(name, Problem::Malformed(why)));
    }
    Ok(trimmed.to_string())
}

/// The provider API's base (interface §6), which `/v1/invoices?…` is appended to: a query or
/// a fragment in it would swallow that path, so it is refused, said where it is set.
pub fn api_base(env: &Env) -> Result<String, ConfigError> {
    let base = credential_url(env, "PAYMOS_API_BASE")?;
    match base.contains(['?', '#']) {
        true => Err(ConfigError::new(
            "PAYMOS_API_BASE",
            Problem::Malformed("has a query or fragment, which the API's paths would follow"),
        )),
        false => Ok(base),
    }
}

/// The order system that effects are delivered to (interface §7): its URL (https, or loopback
/// http in development) and its Standard Webhooks secret. `Ok(None)`: no URL set, effects
/// stay pending in the feed for the order system to pull. `Err`: set but unusable, said
/// plainly (log line, metrics) instead of failing silently.
pub struct SignedEndpoint {
    pub url: String,
    pub secret: WebhookSecret,
}

pub fn order_system(env: &Env) -> Result<Option<SignedEndpoint>, ConfigError> {
    signed_endpoint(env, "ORDER_SYSTEM_URL", "ORDER_SYSTEM_SECRET", "effects")
}

/// The endpoint at `url_setting`, signed with `secret_setting`, for sending `what`:
/// `Ok(None)` when no URL is set.
fn signed_endpoint(
    env: &Env,
    url_setting: &'static str,
    secret_setting: &'static str,
    what: &'static str,
) -> Result<Option<SignedEndpoint>, ConfigError> {
    if string(env, url_setting).is_none() {
        return Ok(None);
    }
    let url = credential_url(env, url_setting)?;
    let secret = string(env, secret_setting).ok_or(ConfigError::new(
        secret_setting,
        Problem::SigningSecretNotSet(what),
    ))?;
    let secret = WebhookSecret::parse(&secret)
        .map_err(|e| ConfigError::new(secret_setting, Problem::NotWhsec(e)))?;
    Ok(Some(SignedEndpoint { url, secret }))
}

/// The order system must answer within this long (interface §7: 10 s).
/// Pull mode: no `ORDER_SYSTEM_URL`, so effects wait in the feed for an order system to pull.
pub fn pull_mode(env: &Env) -> bool {
    matches!(order_system(env), Ok(None))
}

pub fn order_system_timeout_ms(env: &Env) -> u64 {
    number(env, &ORDER_TIMEOUT)
}

/// Compresses the effects' retry ladder (tests and demos); 1 in production.
pub fn effect_retry_scale(env: &Env) -> f64 {
    number(env, &RETRY_SCALE)
}

/// The effects queue and its dead-letter queue, recognised by name.
pub fn effects_queue(env: &Env) -> String {
    string(env, "EFFECTS_QUEUE").unwrap_or_else(|| "paymos-effects".into())
}

pub fn effects_dead_letter_queue(env: &Env) -> String {
    string(env, "EFFECTS_DEAD_LETTER_QUEUE").unwrap_or_else(|| "paymos-effects-dlq".into())
}

/// Where alerts are sent (interface §9), signed as effects are, with `ALERT_WEBHOOK_SECRET`.
/// `Ok(None)`: not configured (alerts are kept and shown, not sent).
pub fn alert_webhook(env: &Env) -> Result<Option<SignedEndpoint>, ConfigError> {
    signed_endpoint(env, "ALERT_WEBHOOK_URL", "ALERT_WEBHOOK_SECRET", "alerts")
}

/// Refused signatures in 15 minutes that make a `signature_refusals` alert.
pub fn signature_burst(env: &Env) -> i64 {
    number(env, &SIGNATURE_BURST)
}

/// How long a processed delivery keeps its body in D1 before the daily run archives it
/// (interface §10): `RETENTION_DAYS`, default 30, at least 7.
pub fn retention_days(env: &Env) -> u32 {
    number(env, &RETENTION_DAYS)
}

/// The size D1 may grow to: `DATABASE_SIZE_LIMIT_BYTES`, default 10,000,000,000.
pub fn database_size_limit_bytes(env: &Env) -> u64 {
    number(env, &DATABASE_SIZE_LIMIT)
}

/// A test-only fault of the archive's driver (`src/archive.rs`), never set in a deployment:
/// said in the warnings when it is.
pub fn archive_fault(env: &Env) -> Option<String> {
    string(env, "ARCHIVE_FAULT")
}

/// The URLs that credentials go to and that are set to development values (loopback
/// `http`, taken so that `npm start` and the tests can use local stubs): fine here, unreachable
/// from a deployed worker, so said as `ACCESS_TEAM_DOMAIN`'s is (interface §4).
fn development_urls(env: &Env) -> Vec<String> {
    ["PAYMOS_API_BASE", "ORDER_SYSTEM_URL", "ALERT_WEBHOOK_URL"]
        .into_iter()
        .filter_map(|name| {
            let url = string(env, name)?;
            let url = url.trim();
            paymos_core::outbound::is_development(url).then(|| {
                format!("{name} is {url}, a loopback development value: a deployed worker needs https://")
            })
        })
        .collect()
}

/// Configuration that will make something fail or stay silent, said plainly (interface §4):
/// shown in `/admin/api/metrics` and on the page.
pub fn warnings(env: &Env) -> Vec<String> {
    let mut w = setting_warnings(env);
    if let Err(e) = mode(env) {
        w.push(e.to_string());
    }
    if secrets(env).map(|s| s.is_empty()).unwrap_or(true) {
        w.push("PAYMOS_WEBHOOK_SECRETS is not set: every delivery is refused (503)".into());
    }
    match (api_base(env), string(env, "PAYMOS_API_KEY")) {
        (Err(e), _) => w.push(format!("reconciliation cannot run: {e}")),
        (Ok(_), None) => w.push("reconciliation cannot run: PAYMOS_API_KEY is not set".into()),
        _ => {}
    }
    match order_system(env) {
        Ok(None) => w.push(
            "ORDER_SYSTEM_URL is not set: effects stay pending in GET /admin/api/effects".into(),
        ),
        Err(e) => w.push(format!("effects cannot be delivered: {e}")),
        Ok(Some(_)) => {}
    }
    if let Some(access) = crate::access::warning(env) {
        w.push(access);
    }
    w.extend(development_urls(env));
    match alert_webhook(env) {
        Ok(None) => {
            w.push("ALERT_WEBHOOK_URL is not set: alerts are kept and shown, not sent".into())
        }
        Err(e) => w.push(format!("alerts cannot be sent: {e}")),
        Ok(Some(_)) => {}
    }
    w.extend(crate::archive::warnings(env));
    w
}
