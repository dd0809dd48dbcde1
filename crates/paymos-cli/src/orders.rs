//! `paymos orders`: a reference order system (interface §7), the receiving end of effects.
//!
//! - `POST <any path>`: an effect. Verified the Standard Webhooks way (`webhook-id`,
//!   `webhook-timestamp`, `webhook-signature`; 401 otherwise), copies dropped by
//!   `Idempotency-Key` (200 `duplicate:true`, nothing shipped again), each new effect
//!   "shipped": recorded and printed as one line.
//! - Failure on demand: the first N requests answer 500 (`fail_first`), a seeded share of
//!   them answer 500 (`fail_rate`), or no request is answered at all (`hang`) until told
//!   otherwise.
//! - `GET /received`: what arrived, as JSON (`?after=N`: only what shipped after the first
//!   N, for pollers, who start from its `shipped_total`); `POST /control`: change the failure
//!   mode;
//!   `GET /healthz`.
//!
//! The decisions live in [`OrderSystem::handle`], apart from the socket, so that they are
//! testable; [`serve`] wires them to tiny_http with one thread per request (a hanging
//! request holds its thread, nothing else).

use std::collections::HashSet;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use paymos_core::standard_webhooks::{self, WebhookHeaders, WebhookSecret};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::CliError;

pub const DEFAULT_PORT: u16 = 8791;
const MAX_BODY: usize = 64 * 1024;
/// A hanging request is let go after this long at most (far past any client's timeout).
pub const MAX_HANG: Duration = Duration::from_secs(3600);
/// Requests held at once while hanging; beyond this they are answered 503 at once.
pub const MAX_HUNG: usize = 256;
pub const EFFECT_KINDS: [&str; 4] = ["fulfilment", "revocation", "settlement", "credit"];

/// A small deterministic PRNG (SplitMix64) for `--fail-rate`, so a seed replays a run.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The failure mode. `fail_first` counts down as requests are failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Failures {
    pub fail_first: u64,
    pub fail_rate: f64,
    pub hang: bool,
}

/// `POST /control`: only the fields given change.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Control {
    pub fail_first: Option<u64>,
    pub fail_rate: Option<f64>,
    pub hang: Option<bool>,
}

/// One shipped effect, as printed and as listed by `GET /received`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shipped {
    pub id: String,
    pub kind: String,
    pub resource_id: Option<String>,
    pub order_ref: Option<String>,
    pub license_code: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub cause: Option<String>,
    pub created_at: Option<String>,
    /// When it arrived here (unix seconds).
    pub received_at: i64,
    /// The sender's `webhook-timestamp`.
    pub signed_at: i64,
}

impl Shipped {
    /// The line printed for each shipped effect.
    pub fn line(&self) -> String {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        format!(
            "shipped {} kind={} resource_id={} order_ref={} license_code={}",
            self.id,
            self.kind,
            o(&self.resource_id),
            o(&self.order_ref),
            o(&self.license_code)
        )
    }
}

/// One request as the order system sees it.
pub struct Incoming<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// (name, value) pairs, names in any case.
    pub headers: Vec<(&'a str, &'a str)>,
    pub body: &'a [u8],
}

impl Incoming<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Reply {
        status: u16,
        body: Value,
        /// Set when an effect was shipped by this request (the server prints it).
        shipped: Option<Box<Shipped>>,
    },
    /// Do not answer while `hang` is on.
    Hang,
}

fn reply(status: u16, body: Value) -> Action {
    Action::Reply {
        status,
        body,
        shipped: None,
    }
}

fn refuse(status: u16, code: &str) -> Action {
    reply(status, json!({ "error": code }))
}

/// The order system's state.
pub struct OrderSystem {
    secret: WebhookSecret,
    tolerance: i64,
    failures: Failures,
    rng: SplitMix64,
    seen: HashSet<String>,
    shipped: Vec<Shipped>,
    /// Resources whose refund arrived: a fulfilment for one of them ships nothing, whenever
    /// it arrives (interface §3: a revocation may reach the order system before an attempt of
    /// its fulfilment that was in flight).
    revoked: HashSet<String>,
    /// Revocations of a fulfilment never accepted (answered 2xx, nothing to undo), and
    /// fulfilments withheld because their resource was revoked first.
    revoked_unshipped: u64,
    withheld: u64,
    requests: u64,
    duplicates: u64,
    rejected: u64,
    invalid: u64,
    failed: u64,
    hung: u64,
}

impl OrderSystem {
    pub fn new(secret: WebhookSecret, tolerance: i64, failures: Failures, seed: u64) -> Self {
        OrderSystem {
            secret,
            tolerance,
            failures,
            rng: SplitMix64::new(seed),
            seen: HashSet::new(),
            shipped: Vec::new(),
            revoked: HashSet::new(),
            revoked_unshipped: 0,
            withheld: 0,
            requests: 0,
            duplicates: 0,
            rejected: 0,
            invalid: 0,
            failed: 0,
            hung: 0,
        }
    }

    pub fn hanging(&self) -> bool {
        self.failures.hang
    }

    pub fn shipped(&self) -> &[Shipped] {
        &self.shipped
    }

    /// `GET /received`.
    pub fn received(&self) -> Value {
        json!({
            "shipped": self.shipped,
            // a poller's cursor to start from (`?after=N` lists only what shipped after N)
            "shipped_total": self.shipped.len(),
            "revoked_unshipped": self.revoked_unshipped,
            "withheld": self.withheld,
            "requests": self.requests,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "invalid": self.invalid,
            "failed": self.failed,
            "hung": self.hung,
            "mode": self.failures,
        })
    }

    /// Applies `POST /control`; errors are messages for a 400.
    pub fn control(&mut self, c: Control) -> Result<Value, String> {
        if let Some(r) = c.fail_rate {
            if !(0.0..=1.0).contains(&r) {
                return Err("fail_rate must be between 0 and 1".into());
            }
            self.failures.fail_rate = r;
        }
        if let Some(n) = c.fail_first {
            self.failures.fail_first = n;
        }
        if let Some(h) = c.hang {
            self.failures.hang = h;
        }
        Ok(json!({ "mode": self.failures }))
    }

    /// Routes one request. `now` is unix seconds.
    pub fn handle(&mut self, req: &Incoming, now: i64) -> Action {
        let path = req.url.split('?').next().unwrap_or("/");
        match (req.method, path.trim_end_matches('/')) {
            ("GET", "/healthz") => return reply(200, json!({ "status": "ok" })),
            ("GET", "/received") => {
                // `?after=N`: only what shipped after the first N (a poller's cursor)
                let after = req
                    .url
                    .split_once('?')
                    .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("after=")))
                    .and_then(|n| n.parse::<usize>().ok());
                let mut v = self.received();
                if let Some(n) = after {
                    v["shipped"] = json!(self.shipped.get(n..).unwrap_or(&[]));
                    v["after"] = json!(n);
                }
                return reply(200, v);
            }
            ("POST", "/control") => {
                return match serde_json::from_slice::<Control>(req.body) {
                    Ok(c) => match self.control(c) {
                        Ok(v) => reply(200, v),
                        Err(m) => reply(400, json!({ "error": "invalid_control", "message": m })),
                    },
                    Err(e) => reply(
                        400,
                        json!({ "error": "invalid_control", "message": format!("expected {{\"fail_first\":N,\"fail_rate\":F,\"hang\":bool}}: {e}") }),
                    ),
                }
            }
            (_, "/received") | (_, "/control") | (_, "/healthz") => {
                return refuse(405, "method_not_allowed")
            }
            ("POST", _) => {}
            _ => return refuse(405, "method_not_allowed"),
        }
        self.requests += 1;
        if self.failures.hang {
            self.hung += 1;
            return Action::Hang;
        }
        if self.failures.fail_first > 0 {
            self.failures.fail_first -= 1;
            self.failed += 1;
            return refuse(500, "simulated_failure");
        }
        if self.failures.fail_rate > 0.0 && self.rng.next_f64() < self.failures.fail_rate {
            self.failed += 1;
            return refuse(500, "simulated_failure");
        }
        self.effect(req, now)
    }

    /// An effect request that got past the failure modes: verified, copies dropped by key,
    /// checked, then shipped (or withheld: see [`Self::withheld_for_refund`]).
    fn effect(&mut self, req: &Incoming, now: i64) -> Action {
        let (key, body, signed_at) = match self.admit(req, now) {
            Ok(admitted) => admitted,
            Err(refusal) => return refusal,
        };
        if self.seen.contains(&key) {
            self.duplicates += 1;
            return reply(200, json!({ "received": true, "duplicate": true }));
        }
        let kind = body["kind"].as_str().unwrap_or_default();
        if !EFFECT_KINDS.contains(&kind) {
            self.invalid += 1;
            return refuse(422, "unknown_kind");
        }
        let text = |k: &str| body[k].as_str().map(str::to_string);
        if kind == "fulfilment" && text("order_ref").is_none_or(|s| s.is_empty()) {
            // interface §7: a fulfilment is useless without its order_ref and is not sent
            // before it is known; one that arrives anyway is refused, visibly.
            self.invalid += 1;
            return refuse(422, "fulfilment_without_order_ref");
        }
        let resource = text("resource_id").unwrap_or_default();
        if let Some(withheld) = self.withheld_for_refund(&key, kind, &resource) {
            return withheld;
        }
        if kind == "revocation" {
            self.revoked.insert(resource);
        }
        self.ship(key, kind, &body, now, signed_at)
    }

    /// The signature (Standard Webhooks), `Idempotency-Key` = `webhook-id` = the body's `id`,
    /// a JSON body: the key, the body and when it was signed; or the refusal (401, 400).
    fn admit(&mut self, req: &Incoming, now: i64) -> Result<(String, Value, i64), Action> {
        let headers = WebhookHeaders::from_pairs(req.headers.iter().copied());
        let signed_at = match standard_webhooks::verify(
            &self.secret,
            &headers,
            req.body,
            now,
            self.tolerance,
        ) {
            Ok(t) => t,
            Err(e) => {
                self.rejected += 1;
                return Err(refuse(401, e.code()));
            }
        };
        // verify() has checked that webhook-id is there
        let id = headers.id.unwrap_or_default().trim().to_string();
        let key = req.header("Idempotency-Key").unwrap_or(&id).to_string();
        if key != id {
            self.invalid += 1;
            return Err(refuse(400, "idempotency_key_differs_from_webhook_id"));
        }
        let Ok(body) = serde_json::from_slice::<Value>(req.body) else {
            self.invalid += 1;
            return Err(refuse(400, "body_not_json"));
        };
        if body["id"].as_str() != Some(id.as_str()) {
            self.invalid += 1;
            return Err(refuse(400, "body_id_differs_from_webhook_id"));
        }
        Ok((key, body, signed_at))
    }

    /// A refund that reached the order system first (interface §3): a revocation of a
    /// fulfilment never accepted, and any fulfilment of that resource after it, are answered
    /// 2xx and ship nothing. `None`: ship it.
    fn withheld_for_refund(&mut self, key: &str, kind: &str, resource: &str) -> Option<Action> {
        let fulfilled = |s: &Self| {
            s.shipped
                .iter()
                .any(|x| x.kind == "fulfilment" && x.resource_id.as_deref() == Some(resource))
        };
        if kind == "revocation" && !fulfilled(self) {
            // a revocation of a fulfilment never accepted: 2xx, nothing shipped, nothing to
            // undo; a fulfilment arriving after it ships nothing either
            self.seen.insert(key.to_string());
            self.revoked.insert(resource.to_string());
            self.revoked_unshipped += 1;
            return Some(reply(
                200,
                json!({ "received": true, "duplicate": false, "shipped": false }),
            ));
        }
        if kind == "fulfilment" && self.revoked.contains(resource) {
            self.seen.insert(key.to_string());
            self.withheld += 1;
            return Some(reply(
                200,
                json!({ "received": true, "duplicate": false, "shipped": false, "revoked": true }),
            ));
        }
        None
    }

    /// Records the effect as shipped (its key seen from now on); the 200 carries it for the
    /// server to print.
    fn ship(&mut self, id: String, kind: &str, body: &Value, now: i64, signed_at: i64) -> Action {
        let text = |k: &str| body[k].as_str().map(str::to_string);
        let shipped = Shipped {
            id: id.clone(),
            kind: kind.to_string(),
            resource_id: text("resource_id"),
            order_ref: text("order_ref"),
            license_code: text("license_code"),
            amount: text("amount"),
            currency: text("currency"),
            cause: text("cause"),
            created_at: text("created_at"),
            received_at: now,
            signed_at,
        };
        self.seen.insert(id);
        self.shipped.push(shipped.clone());
        Action::Reply {
            status: 200,
            body: json!({ "received": true, "duplicate": false }),
            shipped: Some(Box::new(shipped)),
        }
    }
}

/// The state shared by the request threads; the condvar wakes hanging requests.
pub struct Shared {
    pub state: Mutex<OrderSystem>,
    pub wake: Condvar,
    hung_now: Mutex<usize>,
}

impl Shared {
    pub fn new(system: OrderSystem) -> Arc<Self> {
        Arc::new(Shared {
            state: Mutex::new(system),
            wake: Condvar::new(),
            hung_now: Mutex::new(0),
        })
    }
}

/// Binds 127.0.0.1:`port` (0 = any free port) and returns the server and its URL.
pub fn bind(port: u16) -> Result<(tiny_http::Server, String), CliError> {
    let server = tiny_http::Server::http(("127.0.0.1", port))
        .map_err(|e| CliError::usage(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| CliError::usage("the order system did not get an IP address"))?;
    Ok((server, format!("http://{addr}")))
}

/// How the server reports.
#[derive(Clone, Copy)]
pub struct Output {
    /// Shipped lines as JSON objects instead of text.
    pub json: bool,
    /// No per-request log on stderr.
    pub quiet: bool,
}

fn respond(req: tiny_http::Request, status: u16, body: &Value) {
    let resp = tiny_http::Response::from_string(body.to_string())
        .with_status_code(status)
        .with_header(
            "Content-Type: application/json"
                .parse::<tiny_http::Header>()
                .unwrap(),
        );
    let _ = req.respond(resp);
}

/// One request, on its own thread: decided by the order system under its lock, then
/// answered (a shipped effect printed first), or held while `hang` is on.
fn handle_one(shared: &Shared, mut req: tiny_http::Request, out: Output) {
    let mut body = Vec::new();
    let _ = req
        .as_reader()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut body);
    let method = req.method().as_str().to_string();
    let url = req.url().to_string();
    if body.len() > MAX_BODY {
        respond(req, 413, &json!({ "error": "payload_too_large" }));
        return;
    }
    let header_text = header_pairs(&req);
    let incoming = Incoming {
        method: &method,
        url: &url,
        headers: header_text
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect(),
        body: &body,
    };
    let mut state = shared.state.lock().unwrap();
    let action = state.handle(&incoming, crate::now_unix());
    if method == "POST" && url.starts_with("/control") {
        // a change of mode may release hanging requests
        shared.wake.notify_all();
    }
    match action {
        Action::Reply {
            status,
            body,
            shipped,
        } => {
            drop(state);
            if let Some(s) = shipped {
                print_shipped(&s, out);
            }
            let introspection = method == "GET" && url.starts_with("/received");
            if !out.quiet && !introspection {
                eprintln!("orders: {method} {url} → {status} {body}");
            }
            respond(req, status, &body);
        }
        Action::Hang => hang(shared, state, req, &format!("{method} {url}"), out),
    }
}

/// The request's headers as owned (name, value) pairs.
fn header_pairs(req: &tiny_http::Request) -> Vec<(String, String)> {
    req.headers()
        .iter()
        .map(|h| {
            (
                h.field.as_str().as_str().to_string(),
                h.value.as_str().to_string(),
            )
        })
        .collect()
}

/// A shipped effect on stdout, one line (text or JSON), flushed at once for whoever reads it.
fn print_shipped(s: &Shipped, out: Output) {
    if out.json {
        println!("{}", serde_json::to_string(s).unwrap());
    } else {
        println!("{}", s.line());
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// Holds `req` (`what`: its method and URL) until `hang` is turned off or `MAX_HANG` passes,
/// then answers 503: a request let go from a hang was never processed. Beyond `MAX_HUNG`
/// held at once, answers 503 at once.
fn hang(
    shared: &Shared,
    state: MutexGuard<'_, OrderSystem>,
    req: tiny_http::Request,
    what: &str,
    out: Output,
) {
    {
        let mut n = shared.hung_now.lock().unwrap();
        if *n >= MAX_HUNG {
            drop(n);
            drop(state);
            respond(req, 503, &json!({ "error": "too_many_hanging_requests" }));
            return;
        }
        *n += 1;
    }
    if !out.quiet {
        eprintln!("orders: {what} → (hanging)");
    }
    let (state, _) = shared
        .wake
        .wait_timeout_while(state, MAX_HANG, |s| s.hanging())
        .unwrap();
    drop(state);
    *shared.hung_now.lock().unwrap() -= 1;
    // released (or given up on): the request was never processed
    respond(
        req,
        503,
        &json!({ "error": "released_from_hang_unprocessed" }),
    );
}

/// Serves until the server is unblocked (or forever): one thread per request.
pub fn serve(server: Arc<tiny_http::Server>, shared: Arc<Shared>, out: Output) {
    for req in server.incoming_requests() {
        let shared = shared.clone();
        std::thread::spawn(move || handle_one(&shared, req, out));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paymos_core::standard_webhooks::sign;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const NOW: i64 = 1_764_450_000;

    fn system(f: Failures) -> OrderSystem {
        OrderSystem::new(WebhookSecret::parse(SECRET).unwrap(), 300, f, 7)
    }

    fn effect_body(id: &str, kind: &str, order_ref: Option<&str>) -> String {
        json!({ "id": id, "kind": kind, "resource_id": "inv_1", "order_ref": order_ref,
                "license_code": "LC-1", "amount": "49.00", "currency": "USDT",
                "cause": "evt_1", "created_at": "2025-11-29T21:00:00Z" })
        .to_string()
    }

    /// A signed effect request: (headers, body).
    struct Req {
        headers: Vec<(String, String)>,
        body: String,
    }

    fn signed(id: &str, body: String) -> Req {
        let sig = sign(
            &WebhookSecret::parse(SECRET).unwrap(),
            id,
            NOW,
            body.as_bytes(),
        );
        Req {
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("webhook-id".into(), id.into()),
                ("webhook-timestamp".into(), NOW.to_string()),
                ("webhook-signature".into(), sig),
                ("Idempotency-Key".into(), id.into()),
            ],
            body,
        }
    }

    fn post(s: &mut OrderSystem, r: &Req) -> Action {
        let req = Incoming {
            method: "POST",
            url: "/",
            headers: r
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect(),
            body: r.body.as_bytes(),
        };
        s.handle(&req, NOW)
    }

    fn status(a: &Action) -> u16 {
        match a {
            Action::Reply { status, .. } => *status,
            Action::Hang => 0,
        }
    }

    fn code(a: &Action) -> String {
        match a {
            Action::Reply { body, .. } => body["error"].as_str().unwrap_or_default().into(),
            Action::Hang => "hang".into(),
        }
    }

    fn get(s: &mut OrderSystem, url: &str, method: &str, body: &str) -> Action {
        s.handle(
            &Incoming {
                method,
                url,
                headers: vec![],
                body: body.as_bytes(),
            },
            NOW,
        )
    }

    #[test]
    fn received_after_a_cursor_lists_only_what_shipped_since() {
        let mut s = system(Failures::default());
        for id in ["eff_1", "eff_2", "eff_3"] {
            let r = signed(id, effect_body(id, "credit", None));
            assert_eq!(status(&post(&mut s, &r)), 200);
        }
        let shipped = |a: Action| match a {
            Action::Reply { body, .. } => body["shipped"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
            Action::Hang => panic!("hang"),
        };
        assert_eq!(shipped(get(&mut s, "/received", "GET", "")).len(), 3);
        assert_eq!(
            shipped(get(&mut s, "/received?after=1", "GET", "")),
            ["eff_2", "eff_3"]
        );
        assert!(shipped(get(&mut s, "/received?after=9", "GET", "")).is_empty());
        // where a poller starts: the total, whatever the cursor asked for
        match get(
            &mut s,
            &format!("/received?after={}", usize::MAX),
            "GET",
            "",
        ) {
            Action::Reply { body, .. } => {
                assert_eq!(body["shipped"], json!([]), "{body}");
                assert_eq!(body["shipped_total"], 3, "{body}");
            }
            Action::Hang => panic!("hang"),
        }
    }

    #[test]
    fn ships_once_and_drops_copies_by_idempotency_key() {
        let mut s = system(Failures::default());
        let r = signed("eff_1", effect_body("eff_1", "fulfilment", Some("order_9")));
        let first = post(&mut s, &r);
        let Action::Reply {
            status: 200,
            body,
            shipped: Some(shipped),
        } = &first
        else {
            panic!("{first:?}")
        };
        assert_eq!(body["duplicate"], false);
        assert_eq!(
            shipped.line(),
            "shipped eff_1 kind=fulfilment resource_id=inv_1 order_ref=order_9 license_code=LC-1"
        );
        // a copy (even re-signed later, as a retry would be) is answered 200 and not shipped
        for _ in 0..3 {
            let again = post(&mut s, &r);
            assert_eq!(
                again,
                Action::Reply {
                    status: 200,
                    body: json!({"received": true, "duplicate": true}),
                    shipped: None
                }
            );
        }
        let other = post(
            &mut s,
            &signed("eff_2", effect_body("eff_2", "revocation", None)),
        );
        assert_eq!(status(&other), 200);
        let rec = s.received();
        assert_eq!(rec["shipped"].as_array().unwrap().len(), 2);
        assert_eq!(rec["shipped"][0]["order_ref"], "order_9");
        assert_eq!(rec["shipped"][0]["signed_at"], NOW);
        assert_eq!(rec["shipped"][1]["kind"], "revocation");
        assert_eq!(
            (rec["requests"].clone(), rec["duplicates"].clone()),
            (json!(5), json!(3))
        );
    }

    #[test]
    fn a_revocation_of_a_fulfilment_never_accepted_ships_nothing_and_so_does_a_late_fulfilment() {
        let mut s = system(Failures::default());
        let revoke = post(
            &mut s,
            &signed("eff_r", effect_body("eff_r", "revocation", None)),
        );
        assert_eq!(status(&revoke), 200);
        // the fulfilment's attempt that was in flight arrives after its revocation
        let late = post(
            &mut s,
            &signed("eff_f", effect_body("eff_f", "fulfilment", Some("order_9"))),
        );
        assert_eq!(status(&late), 200);
        let rec = s.received();
        assert_eq!(
            rec["shipped"].as_array().unwrap().len(),
            0,
            "nothing shipped"
        );
        assert_eq!(
            (rec["revoked_unshipped"].clone(), rec["withheld"].clone()),
            (json!(1), json!(1))
        );
    }

    #[test]
    fn the_key_falls_back_to_webhook_id_and_must_agree_with_it() {
        let mut s = system(Failures::default());
        let mut r = signed("eff_1", effect_body("eff_1", "credit", None));
        r.headers.retain(|(n, _)| n != "Idempotency-Key");
        assert_eq!(status(&post(&mut s, &r)), 200);
        assert_eq!(status(&post(&mut s, &r)), 200);
        assert_eq!(s.shipped().len(), 1);
        let mut r = signed("eff_3", effect_body("eff_3", "credit", None));
        r.headers.push(("idempotency-key".into(), "x".into()));
        r.headers
            .retain(|(n, v)| n != "Idempotency-Key" || v == "x");
        assert_eq!(
            code(&post(&mut s, &r)),
            "idempotency_key_differs_from_webhook_id"
        );
        let r = signed("eff_4", effect_body("eff_5", "credit", None));
        assert_eq!(code(&post(&mut s, &r)), "body_id_differs_from_webhook_id");
        assert_eq!(s.received()["invalid"], 2);
    }

    #[test]
    fn bad_or_missing_signatures_are_401_and_ship_nothing() {
        let mut s = system(Failures::default());
        let good = signed("eff_1", effect_body("eff_1", "settlement", None));
        let mut tampered = signed("eff_1", effect_body("eff_1", "settlement", None));
        tampered.body = tampered.body.replace("49.00", "4900.00");
        assert_eq!(code(&post(&mut s, &tampered)), "signature_mismatch");
        let mut unsigned = good.headers.clone();
        unsigned.retain(|(n, _)| n != "webhook-signature");
        let r = Req {
            headers: unsigned,
            body: good.body.clone(),
        };
        assert_eq!(code(&post(&mut s, &r)), "missing_webhook_signature");
        let other = OrderSystem::new(
            WebhookSecret::from_key(b"other").unwrap(),
            300,
            Failures::default(),
            0,
        );
        let mut other = other;
        assert_eq!(status(&post(&mut other, &good)), 401);
        // stale: the signature's timestamp is 301 s old
        let stale = s.handle(
            &Incoming {
                method: "POST",
                url: "/",
                headers: good
                    .headers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect(),
                body: good.body.as_bytes(),
            },
            NOW + 301,
        );
        assert_eq!(code(&stale), "timestamp_out_of_tolerance");
        assert_eq!(s.shipped().len(), 0);
        assert_eq!(s.received()["rejected"], 3);
        // and the real one still ships: a refusal does not burn the key
        assert_eq!(status(&post(&mut s, &good)), 200);
        assert_eq!(s.shipped().len(), 1);
    }

    #[test]
    fn fulfilments_need_an_order_ref_and_kinds_are_known() {
        let mut s = system(Failures::default());
        let r = signed("eff_1", effect_body("eff_1", "fulfilment", None));
        assert_eq!(
            (status(&post(&mut s, &r)), code(&post(&mut s, &r))),
            (422, "fulfilment_without_order_ref".into())
        );
        let r = signed("eff_2", effect_body("eff_2", "refund", None));
        assert_eq!(code(&post(&mut s, &r)), "unknown_kind");
        let r = signed("eff_3", "not json".into());
        assert_eq!(code(&post(&mut s, &r)), "body_not_json");
        assert!(s.shipped().is_empty());
    }

    #[test]
    fn a_fulfilment_with_an_empty_order_ref_is_refused_too() {
        // §7: an empty order_ref is no order_ref; nothing ships
        let mut s = system(Failures::default());
        let r = signed("eff_1", effect_body("eff_1", "fulfilment", Some("")));
        assert_eq!(code(&post(&mut s, &r)), "fulfilment_without_order_ref");
        assert!(s.shipped().is_empty());
    }

    #[test]
    fn after_a_shipped_revocation_a_fulfilment_of_the_same_resource_ships_nothing() {
        // fulfilment shipped, then revoked: another fulfilment of that invoice (a new id from
        // a broken outbox) is withheld, never shipped after its revocation
        let mut s = system(Failures::default());
        for (id, kind) in [
            ("eff_f", "fulfilment"),
            ("eff_r", "revocation"),
            ("eff_g", "fulfilment"),
        ] {
            let r = signed(id, effect_body(id, kind, Some("order_9")));
            assert_eq!(status(&post(&mut s, &r)), 200);
        }
        let kinds: Vec<&str> = s.shipped().iter().map(|x| x.kind.as_str()).collect();
        assert_eq!(kinds, ["fulfilment", "revocation"]);
        assert_eq!(s.received()["withheld"], 1);
    }

    #[test]
    fn fail_first_fails_then_the_retry_ships_once() {
        let mut s = system(Failures {
            fail_first: 2,
            ..Default::default()
        });
        let r = signed("eff_1", effect_body("eff_1", "credit", None));
        assert_eq!(code(&post(&mut s, &r)), "simulated_failure");
        assert_eq!(status(&post(&mut s, &r)), 500);
        assert!(s.shipped().is_empty(), "a failed request ships nothing");
        assert_eq!(status(&post(&mut s, &r)), 200);
        assert_eq!(s.shipped().len(), 1);
        assert_eq!(
            post(&mut s, &r),
            Action::Reply {
                status: 200,
                body: json!({"received": true, "duplicate": true}),
                shipped: None
            }
        );
        let rec = s.received();
        assert_eq!(
            (rec["failed"].clone(), rec["requests"].clone()),
            (json!(2), json!(4))
        );
        assert_eq!(rec["mode"]["fail_first"], 0);
    }

    #[test]
    fn fail_rate_is_seeded_and_about_right() {
        let outcomes = |seed: u64, rate: f64| {
            let mut s = OrderSystem::new(
                WebhookSecret::parse(SECRET).unwrap(),
                300,
                Failures {
                    fail_rate: rate,
                    ..Default::default()
                },
                seed,
            );
            (0..1000)
                .map(|i| {
                    let id = format!("eff_{i}");
                    status(&post(
                        &mut s,
                        &signed(&id, effect_body(&id, "credit", None)),
                    ))
                })
                .collect::<Vec<_>>()
        };
        let a = outcomes(42, 0.3);
        assert_eq!(a, outcomes(42, 0.3), "same seed, same run");
        assert_ne!(a, outcomes(43, 0.3), "another seed, another run");
        let failed = a.iter().filter(|&&s| s == 500).count();
        assert!(
            (220..=380).contains(&failed),
            "{failed} of 1000 failed at 0.3"
        );
        assert!(outcomes(1, 0.0).iter().all(|&s| s == 200));
        assert!(outcomes(1, 1.0).iter().all(|&s| s == 500));
    }

    #[test]
    fn hang_and_control() {
        let mut s = system(Failures {
            hang: true,
            ..Default::default()
        });
        let r = signed("eff_1", effect_body("eff_1", "credit", None));
        assert_eq!(post(&mut s, &r), Action::Hang);
        assert!(s.shipped().is_empty());
        // the introspection and control endpoints still answer
        assert_eq!(status(&get(&mut s, "/received", "GET", "")), 200);
        assert_eq!(status(&get(&mut s, "/healthz", "GET", "")), 200);
        let c = get(
            &mut s,
            "/control",
            "POST",
            r#"{"hang":false,"fail_first":1}"#,
        );
        let Action::Reply {
            status: 200, body, ..
        } = c
        else {
            panic!("{c:?}")
        };
        assert_eq!(
            body["mode"],
            json!({"fail_first": 1, "fail_rate": 0.0, "hang": false})
        );
        assert_eq!(status(&post(&mut s, &r)), 500);
        assert_eq!(status(&post(&mut s, &r)), 200);
        // only the fields given change
        get(&mut s, "/control", "POST", r#"{"fail_rate":0.5}"#);
        assert_eq!(
            s.received()["mode"],
            json!({"fail_first": 0, "fail_rate": 0.5, "hang": false})
        );
        assert_eq!(
            code(&get(&mut s, "/control", "POST", r#"{"fail_rate":2}"#)),
            "invalid_control"
        );
        assert_eq!(
            code(&get(&mut s, "/control", "POST", r#"{"hang":"yes"}"#)),
            "invalid_control"
        );
        assert_eq!(
            code(&get(&mut s, "/control", "POST", r#"{"hnag":true}"#)),
            "invalid_control"
        );
        assert_eq!(status(&get(&mut s, "/received", "POST", "")), 405);
        assert_eq!(status(&get(&mut s, "/", "GET", "")), 405);
        assert_eq!(s.received()["hung"], 1);
    }

    #[test]
    fn over_a_socket_hang_times_out_the_client_until_released() {
        let (server, url) = bind(0).unwrap();
        let server = Arc::new(server);
        let shared = Shared::new(system(Failures {
            hang: true,
            ..Default::default()
        }));
        let t = {
            let (server, shared) = (server.clone(), shared.clone());
            std::thread::spawn(move || {
                serve(
                    server,
                    shared,
                    Output {
                        json: false,
                        quiet: true,
                    },
                )
            })
        };
        let now = crate::now_unix();
        let body = effect_body("eff_s", "credit", None);
        let key = WebhookSecret::parse(SECRET).unwrap();
        let send = |timeout_ms: u64| {
            let hs = standard_webhooks::headers(&[&key], "eff_s", now, body.as_bytes());
            let mut req = crate::http::agent(Duration::from_millis(timeout_ms)).post(&url);
            for (n, v) in &hs {
                req = req.set(n, v);
            }
            req.set("Idempotency-Key", "eff_s")
                .send_string(&body)
                .map_err(Box::new)
        };
        let hung = send(300);
        assert!(
            matches!(hung.as_ref().map_err(|e| &**e), Err(ureq::Error::Transport(t)) if t.to_string().contains("timed out") || t.to_string().to_lowercase().contains("timeout")),
            "{hung:?}"
        );
        let ctl = ureq::post(&format!("{url}/control")).send_string(r#"{"hang":false}"#);
        assert_eq!(ctl.unwrap().status(), 200);
        let ok = send(5000).unwrap();
        assert_eq!(ok.status(), 200);
        let rec: Value = serde_json::from_str(
            &ureq::get(&format!("{url}/received"))
                .call()
                .unwrap()
                .into_string()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(rec["shipped"].as_array().unwrap().len(), 1, "{rec}");
        assert_eq!(rec["hung"], 1);
        server.unblock();
        t.join().unwrap();
    }
}
