//! `paymos sandbox`: a local stand-in for the provider's invoice API (interface §6).
//!
//! - `GET /v1/invoices?status=paid&limit=&starting_after=&paid_since=` (bearer key) pages
//!   invoices in id order, strictly after `starting_after`, paid at or after `paid_since`;
//! - `POST /sandbox/invoices` registers or updates one invoice, or an array of them (no key;
//!   loopback only); `GET` lists everything registered, `DELETE` forgets everything;
//! - `GET`/`POST /sandbox/control` reads or sets the faults: a stuck cursor, a failure after
//!   N pages (loopback only);
//! - `GET /healthz`.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Mutex;

use paymos_core::{resource_kind_of, ResourceKind};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::CliError;

pub const DEFAULT_API_KEY: &str = "sk_test_sandbox";
pub const DEFAULT_PORT: u16 = 8790;
pub const DEFAULT_LIMIT: usize = 10;
pub const MAX_LIMIT: usize = 100;
const MAX_BODY: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invoice {
    pub id: String,
    pub object: String,
    pub status: String,
    pub amount: String,
    pub currency: String,
    pub order_ref: String,
    pub paid_at: Option<i64>,
}

/// What `POST /sandbox/invoices` accepts: only `id` is required.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InvoiceInput {
    pub id: String,
    pub status: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub order_ref: Option<String>,
    pub paid_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct PageQuery {
    pub status: Option<String>,
    pub limit: usize,
    pub starting_after: Option<String>,
    /// Only invoices with `paid_at >= paid_since` (unix seconds); unpaid ones never match.
    pub paid_since: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    pub data: Vec<Invoice>,
    pub has_more: bool,
}

/// Invoices kept in id order (the order the API pages in).
#[derive(Debug, Default)]
pub struct Store {
    invoices: BTreeMap<String, Invoice>,
}

impl Store {
    /// Registers or updates (fields given override the stored ones).
    pub fn upsert(&mut self, input: InvoiceInput, now: i64) -> Result<Invoice, String> {
        if resource_kind_of(&input.id) != Some(ResourceKind::Invoice) {
            return Err("id must be inv_ followed by 1 to 64 letters or digits".into());
        }
        let existing = self.invoices.get(&input.id).cloned();
        let status = input
            .status
            .or_else(|| existing.as_ref().map(|e| e.status.clone()))
            .unwrap_or_else(|| "paid".into());
        let paid_like = status == "paid" || status == "overpaid";
        let inv = Invoice {
            object: "invoice".into(),
            amount: input
                .amount
                .or_else(|| existing.as_ref().map(|e| e.amount.clone()))
                .unwrap_or_else(|| "49.00".into()),
            currency: input
                .currency
                .or_else(|| existing.as_ref().map(|e| e.currency.clone()))
                .unwrap_or_else(|| "USDT".into()),
            order_ref: input
                .order_ref
                .or_else(|| existing.as_ref().map(|e| e.order_ref.clone()))
                .unwrap_or_else(|| format!("order_{}", &input.id[4..])),
            paid_at: input
                .paid_at
                .or_else(|| existing.as_ref().and_then(|e| e.paid_at))
                .or(if paid_like { Some(now) } else { None }),
            status,
            id: input.id,
        };
        self.invoices.insert(inv.id.clone(), inv.clone());
        Ok(inv)
    }

    pub fn len(&self) -> usize {
        self.invoices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.invoices.is_empty()
    }

    pub fn all(&self) -> Vec<Invoice> {
        self.invoices.values().cloned().collect()
    }

    pub fn clear(&mut self) {
        self.invoices.clear();
    }

    /// One page: matching invoices with id > `starting_after`, in id order.
    pub fn page(&self, q: &PageQuery) -> Page {
        use std::ops::Bound::{Excluded, Unbounded};
        let lower = match &q.starting_after {
            Some(a) => Excluded(a.clone()),
            None => Unbounded,
        };
        let mut it = self
            .invoices
            .range((lower, Unbounded))
            .map(|(_, v)| v)
            .filter(|i| q.status.as_deref().is_none_or(|s| s == i.status))
            .filter(|i| {
                q.paid_since
                    .is_none_or(|since| i.paid_at.is_some_and(|at| at >= since))
            });
        let data: Vec<Invoice> = it.by_ref().take(q.limit).cloned().collect();
        let has_more = it.next().is_some();
        Page { data, has_more }
    }
}

/// Parses the list call's query string; errors are messages for a 400.
pub fn parse_page_query(query: &str) -> Result<PageQuery, String> {
    let mut q = PageQuery {
        limit: DEFAULT_LIMIT,
        ..Default::default()
    };
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "status" if !v.is_empty() => q.status = Some(v.into_owned()),
            "limit" if !v.is_empty() => {
                q.limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| format!("limit must be 1 to {MAX_LIMIT}"))?
            }
            // form_urlencoded::parse has already decoded it (%5F, +, …)
            "starting_after" if !v.is_empty() => q.starting_after = Some(v.into_owned()),
            "paid_since" if !v.is_empty() => {
                q.paid_since = Some(
                    v.parse::<i64>()
                        .map_err(|_| "paid_since must be an integer (unix seconds)".to_string())?,
                )
            }
            _ => {}
        }
    }
    Ok(q)
}

/// Misbehaviour on demand, for testing the receiver's reconciliation walk (interface §6:
/// a page that does not move the cursor forward, a provider error part-way through).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    /// Every list call answers the first page of the filter, whatever `starting_after` says,
    /// with `has_more: true`: the cursor never moves forward.
    #[serde(default)]
    pub stuck_cursor: bool,
    /// After this many list pages served, every further list call answers 500.
    #[serde(default)]
    pub fail_after_pages: Option<u64>,
}

/// The sandbox's whole state: the invoices, the faults, and how many list pages were served
/// (counted for `fail_after_pages`; setting the faults resets it).
#[derive(Debug, Default)]
pub struct Sandbox {
    pub store: Store,
    pub faults: Faults,
    pub pages_served: u64,
}

impl Sandbox {
    pub fn new(faults: Faults) -> Self {
        Sandbox {
            faults,
            ..Default::default()
        }
    }

    /// One list call with the faults applied: the page, or a 500's message.
    pub fn list(&mut self, q: &PageQuery) -> Result<Page, String> {
        if let Some(n) = self.faults.fail_after_pages {
            if self.pages_served >= n {
                return Err(format!(
                    "simulated provider failure: fail_after_pages is {n} and {} pages were served",
                    self.pages_served
                ));
            }
        }
        self.pages_served += 1;
        if self.faults.stuck_cursor {
            let mut first = self.store.page(&PageQuery {
                starting_after: None,
                ..q.clone()
            });
            first.has_more = true;
            return Ok(first);
        }
        Ok(self.store.page(q))
    }

    fn control(&self) -> Value {
        json!({ "stuck_cursor": self.faults.stuck_cursor, "fail_after_pages": self.faults.fail_after_pages, "pages_served": self.pages_served })
    }
}

/// True when `header` is exactly `Bearer <key>`.
pub fn bearer_ok(header: Option<&str>, key: &str) -> bool {
    header
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|k| paymos_core_ct_eq(k.trim().as_bytes(), key.as_bytes()))
}

fn paymos_core_ct_eq(a: &[u8], b: &[u8]) -> bool {
    // A test stand-in, but no reason to compare keys with an early exit anyway.
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A routed answer: status and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

fn answer(status: u16, body: Value) -> Answer {
    Answer { status, body }
}

fn error(status: u16, code: &str, message: &str) -> Answer {
    answer(
        status,
        json!({ "error": { "code": code, "message": message } }),
    )
}

/// One request as the router sees it.
pub struct Incoming<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub authorization: Option<&'a str>,
    pub remote_is_loopback: bool,
    pub body: &'a [u8],
}

/// `POST /sandbox/invoices` takes one invoice or an array of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(InvoiceInput),
    Many(Vec<InvoiceInput>),
}

/// The sandbox's routing, apart from the socket (so it is testable).
pub fn route(state: &Mutex<Sandbox>, api_key: &str, req: &Incoming, now: i64) -> Answer {
    let (path, query) = req.url.split_once('?').unwrap_or((req.url, ""));
    let path = path.trim_end_matches('/');
    match (req.method, path) {
        ("GET", "/healthz") => answer(
            200,
            json!({ "status": "ok", "invoices": state.lock().unwrap().store.len() }),
        ),
        ("GET", "/v1/invoices") => list_invoices(state, api_key, req.authorization, query),
        (_, "/v1/invoices") => error(405, "method_not_allowed", "GET only"),
        (_, "/sandbox/invoices") | (_, "/sandbox/control") if !req.remote_is_loopback => error(
            403,
            "forbidden",
            "the sandbox's control API answers loopback clients only",
        ),
        ("POST", "/sandbox/invoices") => register_invoices(state, req.body, now),
        ("GET", "/sandbox/invoices") => {
            answer(200, json!({ "data": state.lock().unwrap().store.all() }))
        }
        ("DELETE", "/sandbox/invoices") => {
            let mut st = state.lock().unwrap();
            let n = st.store.len();
            st.store.clear();
            answer(200, json!({ "deleted": n }))
        }
        ("GET", "/sandbox/control") => answer(200, state.lock().unwrap().control()),
        ("POST", "/sandbox/control") => set_faults(state, req.body),
        (_, "/sandbox/invoices") | (_, "/sandbox/control") => {
            error(405, "method_not_allowed", "see GET /healthz for the routes")
        }
        _ => error(
            404,
            "not_found",
            "GET /v1/invoices, POST|GET|DELETE /sandbox/invoices, GET|POST /sandbox/control, GET /healthz",
        ),
    }
}

/// `GET /v1/invoices`: the provider's list call (bearer key), one page with the faults applied.
fn list_invoices(
    state: &Mutex<Sandbox>,
    api_key: &str,
    authorization: Option<&str>,
    query: &str,
) -> Answer {
    if !bearer_ok(authorization, api_key) {
        return error(
            401,
            "unauthorized",
            "send Authorization: Bearer <the sandbox's API key>",
        );
    }
    match parse_page_query(query) {
        Ok(q) => match state.lock().unwrap().list(&q) {
            Ok(page) => answer(200, serde_json::to_value(page).unwrap()),
            Err(m) => error(500, "sandbox_fault", &m),
        },
        Err(m) => error(400, "invalid_request", &m),
    }
}

/// `POST /sandbox/invoices`: registers or updates one invoice, or an array of them.
fn register_invoices(state: &Mutex<Sandbox>, body: &[u8], now: i64) -> Answer {
    match serde_json::from_slice::<OneOrMany>(body) {
        Ok(OneOrMany::One(input)) => match state.lock().unwrap().store.upsert(input, now) {
            Ok(inv) => answer(200, serde_json::to_value(inv).unwrap()),
            Err(m) => error(400, "invalid_request", &m),
        },
        Ok(OneOrMany::Many(inputs)) => register_all(state, inputs, now),
        Err(e) => error(
            400,
            "invalid_json",
            &format!("expected {{\"id\":\"inv_…\",…}} or an array of them: {e}"),
        ),
    }
}

/// An array of invoices, all or nothing: every id is checked before any is stored.
fn register_all(state: &Mutex<Sandbox>, inputs: Vec<InvoiceInput>, now: i64) -> Answer {
    let mut st = state.lock().unwrap();
    if let Some(bad) = inputs
        .iter()
        .find(|i| resource_kind_of(&i.id) != Some(ResourceKind::Invoice))
    {
        return error(
            400,
            "invalid_request",
            &format!(
                "{:?}: id must be inv_ followed by 1 to 64 letters or digits",
                bad.id
            ),
        );
    }
    let stored: Vec<Invoice> = inputs
        .into_iter()
        .filter_map(|i| st.store.upsert(i, now).ok())
        .collect();
    answer(200, json!({ "data": stored }))
}

/// `POST /sandbox/control`: sets the faults (and starts counting pages served afresh).
fn set_faults(state: &Mutex<Sandbox>, body: &[u8]) -> Answer {
    match serde_json::from_slice::<Faults>(body) {
        Ok(f) => {
            let mut st = state.lock().unwrap();
            st.faults = f;
            st.pages_served = 0;
            answer(200, st.control())
        }
        Err(e) => error(
            400,
            "invalid_json",
            &format!("expected {{\"stuck_cursor\":bool,\"fail_after_pages\":N|null}}: {e}"),
        ),
    }
}

/// Binds 127.0.0.1:`port` (0 = any free port) and returns the server and its URL.
pub fn bind(port: u16) -> Result<(tiny_http::Server, String), CliError> {
    let server = tiny_http::Server::http(("127.0.0.1", port))
        .map_err(|e| CliError::usage(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| CliError::usage("the sandbox did not get an IP address"))?;
    Ok((server, format!("http://{addr}")))
}

/// Serves forever (until the process is stopped); one thread per core-ish is plenty.
pub fn serve(server: tiny_http::Server, api_key: String, faults: Faults, quiet: bool) {
    let server = std::sync::Arc::new(server);
    let store = std::sync::Arc::new(Mutex::new(Sandbox::new(faults)));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (server, store, api_key) = (server.clone(), store.clone(), api_key.clone());
            std::thread::spawn(move || {
                for mut req in server.incoming_requests() {
                    let mut body = Vec::new();
                    let _ = req
                        .as_reader()
                        .take(MAX_BODY as u64 + 1)
                        .read_to_end(&mut body);
                    let remote_loopback = req
                        .remote_addr()
                        .map(|a: &SocketAddr| a.ip().is_loopback())
                        .unwrap_or(false);
                    let auth = req
                        .headers()
                        .iter()
                        .find(|h| h.field.equiv("Authorization"))
                        .map(|h| h.value.as_str().to_string());
                    let a = if body.len() > MAX_BODY {
                        error(413, "payload_too_large", "64 KiB at most")
                    } else {
                        let incoming = Incoming {
                            method: req.method().as_str(),
                            url: req.url(),
                            authorization: auth.as_deref(),
                            remote_is_loopback: remote_loopback,
                            body: &body,
                        };
                        route(&store, &api_key, &incoming, crate::now_unix())
                    };
                    if !quiet {
                        let n = a.body.get("data").and_then(Value::as_array).map(Vec::len);
                        eprintln!(
                            "sandbox: {} {} → {}{}",
                            req.method(),
                            req.url(),
                            a.status,
                            n.map(|n| format!(" ({n} invoices)")).unwrap_or_default()
                        );
                    }
                    let resp = tiny_http::Response::from_string(a.body.to_string())
                        .with_status_code(a.status)
                        .with_header(
                            "Content-Type: application/json"
                                .parse::<tiny_http::Header>()
                                .unwrap(),
                        );
                    let _ = req.respond(resp);
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(ids: &[&str]) -> Store {
        let mut s = Store::default();
        for id in ids {
            s.upsert(
                InvoiceInput {
                    id: id.to_string(),
                    ..Default::default()
                },
                1000,
            )
            .unwrap();
        }
        s
    }

    fn q(limit: usize, after: Option<&str>) -> PageQuery {
        PageQuery {
            status: Some("paid".into()),
            limit,
            starting_after: after.map(str::to_string),
            paid_since: None,
        }
    }

    fn ids(p: &Page) -> Vec<&str> {
        p.data.iter().map(|i| i.id.as_str()).collect()
    }

    #[test]
    fn pages_in_id_order_after_the_cursor() {
        let s = store_with(&["inv_c", "inv_a", "inv_e", "inv_b", "inv_d"]);
        let p = s.page(&q(2, None));
        assert_eq!((ids(&p), p.has_more), (vec!["inv_a", "inv_b"], true));
        let p = s.page(&q(2, Some("inv_b")));
        assert_eq!((ids(&p), p.has_more), (vec!["inv_c", "inv_d"], true));
        let p = s.page(&q(2, Some("inv_d")));
        assert_eq!((ids(&p), p.has_more), (vec!["inv_e"], false));
        let p = s.page(&q(2, Some("inv_e")));
        assert_eq!((ids(&p), p.has_more), (Vec::<&str>::new(), false));
        // exactly a full last page: has_more is false
        let p = s.page(&q(5, None));
        assert_eq!((p.data.len(), p.has_more), (5, false));
        // a cursor that is not a stored id still pages by order
        let p = s.page(&q(10, Some("inv_bb")));
        assert_eq!(ids(&p), vec!["inv_c", "inv_d", "inv_e"]);
    }

    #[test]
    fn status_filter_and_upsert() {
        let mut s = store_with(&["inv_a", "inv_b", "inv_c"]);
        s.upsert(
            InvoiceInput {
                id: "inv_b".into(),
                status: Some("expired".into()),
                ..Default::default()
            },
            2000,
        )
        .unwrap();
        let p = s.page(&q(10, None));
        assert_eq!(ids(&p), vec!["inv_a", "inv_c"]);
        let all = s.page(&PageQuery {
            limit: 10,
            ..Default::default()
        });
        assert_eq!(all.data.len(), 3);
        let a = &p.data[0];
        assert_eq!(
            (
                a.amount.as_str(),
                a.currency.as_str(),
                a.order_ref.as_str(),
                a.paid_at
            ),
            ("49.00", "USDT", "order_a", Some(1000))
        );
        // an update keeps what it does not name
        let u = s
            .upsert(
                InvoiceInput {
                    id: "inv_a".into(),
                    amount: Some("5.00".into()),
                    ..Default::default()
                },
                3000,
            )
            .unwrap();
        assert_eq!(
            (
                u.amount.as_str(),
                u.order_ref.as_str(),
                u.paid_at,
                u.status.as_str()
            ),
            ("5.00", "order_a", Some(1000), "paid")
        );
        assert!(s
            .upsert(
                InvoiceInput {
                    id: "wdr_1".into(),
                    ..Default::default()
                },
                0
            )
            .is_err());
        assert!(s
            .upsert(
                InvoiceInput {
                    id: "inv_a-b".into(),
                    ..Default::default()
                },
                0
            )
            .is_err());
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            parse_page_query("status=paid&limit=100&starting_after=inv_x").unwrap(),
            PageQuery {
                status: Some("paid".into()),
                limit: 100,
                starting_after: Some("inv_x".into()),
                paid_since: None,
            }
        );
        assert_eq!(parse_page_query("").unwrap().limit, DEFAULT_LIMIT);
        assert!(parse_page_query("limit=0").is_err());
        assert!(parse_page_query("limit=101").is_err());
        assert!(parse_page_query("limit=x").is_err());
    }

    #[test]
    fn routes_and_auth() {
        let store = Mutex::new(Sandbox {
            store: store_with(&["inv_a"]),
            ..Default::default()
        });
        let r = |m: &str, u: &str, auth: Option<&str>, lo: bool, body: &str| {
            let req = Incoming {
                method: m,
                url: u,
                authorization: auth,
                remote_is_loopback: lo,
                body: body.as_bytes(),
            };
            route(&store, "sk_k", &req, 5)
        };
        assert_eq!(
            r("GET", "/v1/invoices?status=paid", None, true, "").status,
            401
        );
        assert_eq!(
            r(
                "GET",
                "/v1/invoices?status=paid",
                Some("Bearer sk_x"),
                true,
                ""
            )
            .status,
            401
        );
        assert_eq!(
            r("GET", "/v1/invoices?status=paid", Some("sk_k"), true, "").status,
            401
        );
        let ok = r(
            "GET",
            "/v1/invoices?status=paid&limit=100",
            Some("Bearer sk_k"),
            true,
            "",
        );
        assert_eq!(ok.status, 200);
        assert_eq!(ok.body["data"][0]["id"], "inv_a");
        assert_eq!(ok.body["data"][0]["object"], "invoice");
        assert_eq!(ok.body["has_more"], false);
        assert_eq!(
            r(
                "POST",
                "/sandbox/invoices",
                None,
                true,
                r#"{"id":"inv_b","order_ref":"o1"}"#
            )
            .status,
            200
        );
        assert_eq!(
            r(
                "POST",
                "/sandbox/invoices",
                None,
                false,
                r#"{"id":"inv_c"}"#
            )
            .status,
            403
        );
        assert_eq!(
            r("POST", "/sandbox/invoices", None, true, "nope").status,
            400
        );
        assert_eq!(
            r("POST", "/sandbox/invoices", None, true, r#"{"id":"evt_1"}"#).status,
            400
        );
        let p = r(
            "GET",
            "/v1/invoices?limit=1&starting_after=inv_a",
            Some("Bearer sk_k"),
            true,
            "",
        );
        assert_eq!(p.body["data"][0]["order_ref"], "o1");
        assert_eq!(p.body["data"][0]["paid_at"], 5);
        assert_eq!(r("GET", "/healthz", None, false, "").status, 200);
        assert_eq!(r("GET", "/nope", None, true, "").status, 404);
        assert_eq!(
            r("DELETE", "/v1/invoices", Some("Bearer sk_k"), true, "").status,
            405
        );
    }

    fn paid_at(s: &mut Store, id: &str, at: Option<i64>, status: &str) {
        s.upsert(
            InvoiceInput {
                id: id.into(),
                status: Some(status.into()),
                paid_at: at,
                ..Default::default()
            },
            0,
        )
        .unwrap();
    }

    #[test]
    fn paid_since_keeps_invoices_paid_at_or_after_it() {
        let mut s = Store::default();
        paid_at(&mut s, "inv_a", Some(100), "paid");
        paid_at(&mut s, "inv_b", Some(200), "paid");
        paid_at(&mut s, "inv_c", Some(199), "paid");
        paid_at(&mut s, "inv_d", Some(300), "paid");
        paid_at(&mut s, "inv_e", None, "expired"); // never paid: never matches paid_since
        let since = |t: i64, limit: usize, after: Option<&str>| {
            s.page(&PageQuery {
                status: Some("paid".into()),
                limit,
                starting_after: after.map(str::to_string),
                paid_since: Some(t),
            })
        };
        assert_eq!(ids(&since(200, 10, None)), vec!["inv_b", "inv_d"]);
        assert_eq!(
            ids(&since(0, 10, None)),
            vec!["inv_a", "inv_b", "inv_c", "inv_d"]
        );
        assert_eq!(ids(&since(301, 10, None)), Vec::<&str>::new());
        // paging within the filter: has_more counts only matching invoices
        let p = since(150, 1, None);
        assert_eq!((ids(&p), p.has_more), (vec!["inv_b"], true));
        let p = since(150, 1, Some("inv_b"));
        assert_eq!((ids(&p), p.has_more), (vec!["inv_c"], true));
        let p = since(150, 2, Some("inv_c"));
        assert_eq!((ids(&p), p.has_more), (vec!["inv_d"], false));
        let all_statuses = s.page(&PageQuery {
            limit: 10,
            paid_since: Some(0),
            ..Default::default()
        });
        assert_eq!(
            all_statuses.data.len(),
            4,
            "an unpaid invoice has no paid_at"
        );

        let q = parse_page_query("status=paid&paid_since=1764449990&limit=100").unwrap();
        assert_eq!(q.paid_since, Some(1764449990));
        assert!(parse_page_query("paid_since=yesterday").is_err());
        assert!(parse_page_query("paid_since=1.5").is_err());
        assert_eq!(parse_page_query("paid_since=").unwrap().paid_since, None);
    }

    #[test]
    fn starting_after_is_url_decoded() {
        assert_eq!(
            parse_page_query("starting_after=inv%5Fab%43")
                .unwrap()
                .starting_after,
            Some("inv_abC".into())
        );
        let s = store_with(&["inv_a", "inv_b", "inv_c"]);
        let q = parse_page_query("status=paid&limit=10&starting_after=inv%5Fa").unwrap();
        assert_eq!(ids(&s.page(&q)), vec!["inv_b", "inv_c"]);
    }

    #[test]
    fn limit_is_capped_at_100() {
        let mut s = Store::default();
        for i in 0..150 {
            paid_at(&mut s, &format!("inv_{i:03}"), Some(i), "paid");
        }
        let p = s.page(&parse_page_query("status=paid&limit=100").unwrap());
        assert_eq!((p.data.len(), p.has_more), (100, true));
        let p = s.page(&parse_page_query("status=paid&limit=100&starting_after=inv_099").unwrap());
        assert_eq!((p.data.len(), p.has_more), (50, false));
        assert!(parse_page_query("limit=1000").is_err());
    }

    /// Walks the API as a client would, stopping on a page that does not move the cursor.
    fn walk(sb: &mut Sandbox, limit: usize) -> (Vec<String>, &'static str) {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..100 {
            let page = match sb.list(&PageQuery {
                status: Some("paid".into()),
                limit,
                starting_after: after.clone(),
                paid_since: None,
            }) {
                Ok(p) => p,
                Err(_) => return (seen, "error"),
            };
            let last = page.data.last().map(|i| i.id.clone());
            seen.extend(page.data.iter().map(|i| i.id.clone()));
            if !page.has_more {
                return (seen, "done");
            }
            match (last, &after) {
                (Some(l), Some(a)) if l <= *a => return (seen, "stuck"),
                (None, _) => return (seen, "stuck"),
                (Some(l), _) => after = Some(l),
            }
        }
        (seen, "runaway")
    }

    #[test]
    fn faults_stuck_cursor_and_fail_after_pages() {
        let mk = |faults| Sandbox {
            store: store_with(&["inv_a", "inv_b", "inv_c", "inv_d", "inv_e"]),
            faults,
            pages_served: 0,
        };
        // no faults: a complete walk
        let (seen, end) = walk(&mut mk(Faults::default()), 2);
        assert_eq!((seen.len(), end), (5, "done"));

        // stuck: the second page repeats the first, and says there is more
        let mut sb = mk(Faults {
            stuck_cursor: true,
            ..Default::default()
        });
        let first = sb.list(&q(2, None)).unwrap();
        let second = sb.list(&q(2, Some("inv_b"))).unwrap();
        assert_eq!(ids(&first), vec!["inv_a", "inv_b"]);
        assert_eq!(
            (ids(&second), second.has_more),
            (vec!["inv_a", "inv_b"], true)
        );
        let mut sb = mk(Faults {
            stuck_cursor: true,
            ..Default::default()
        });
        assert_eq!(walk(&mut sb, 2).1, "stuck");
        // even a page bigger than everything says has_more:true
        assert!(sb.list(&q(100, None)).unwrap().has_more);

        // fail after 2 pages: the third list call is an error, and so is every later one
        let mut sb = mk(Faults {
            fail_after_pages: Some(2),
            ..Default::default()
        });
        let (seen, end) = walk(&mut sb, 2);
        assert_eq!(
            (seen, end),
            (
                vec![
                    "inv_a".to_string(),
                    "inv_b".into(),
                    "inv_c".into(),
                    "inv_d".into()
                ],
                "error"
            )
        );
        assert!(sb.list(&q(2, None)).is_err());
        assert_eq!(sb.pages_served, 2);
        // fail_after_pages 0: the provider is down
        assert!(mk(Faults {
            fail_after_pages: Some(0),
            ..Default::default()
        })
        .list(&q(2, None))
        .is_err());
    }

    #[test]
    fn control_api_sets_faults_and_seeds_arrays() {
        let state = Mutex::new(Sandbox::default());
        let r = |m: &str, u: &str, lo: bool, body: &str| {
            route(
                &state,
                "k",
                &Incoming {
                    method: m,
                    url: u,
                    authorization: Some("Bearer k"),
                    remote_is_loopback: lo,
                    body: body.as_bytes(),
                },
                1000,
            )
        };
        let seeded = r(
            "POST",
            "/sandbox/invoices",
            true,
            r#"[{"id":"inv_a","paid_at":10},{"id":"inv_b","paid_at":20,"order_ref":"o_b"},{"id":"inv_c"}]"#,
        );
        assert_eq!(seeded.status, 200, "{:?}", seeded.body);
        assert_eq!(seeded.body["data"].as_array().unwrap().len(), 3);
        assert_eq!(
            seeded.body["data"][2]["paid_at"], 1000,
            "paid_at defaults to now"
        );
        // a bad id anywhere in an array stores nothing
        assert_eq!(
            r(
                "POST",
                "/sandbox/invoices",
                true,
                r#"[{"id":"inv_z"},{"id":"wdr_1"}]"#
            )
            .status,
            400
        );
        assert_eq!(state.lock().unwrap().store.len(), 3);

        let p = r("GET", "/v1/invoices?status=paid&paid_since=20", true, "");
        assert_eq!(p.body["data"].as_array().unwrap().len(), 2);
        assert_eq!(p.body["data"][0]["id"], "inv_b");

        let c = r(
            "POST",
            "/sandbox/control",
            true,
            r#"{"fail_after_pages":1}"#,
        );
        assert_eq!(
            c.body,
            json!({"stuck_cursor": false, "fail_after_pages": 1, "pages_served": 0})
        );
        assert_eq!(r("GET", "/v1/invoices?status=paid", true, "").status, 200);
        let failed = r("GET", "/v1/invoices?status=paid", true, "");
        assert_eq!(failed.status, 500);
        assert_eq!(failed.body["error"]["code"], "sandbox_fault");
        assert_eq!(
            r("GET", "/sandbox/control", true, "").body["pages_served"],
            1
        );

        r("POST", "/sandbox/control", true, r#"{"stuck_cursor":true}"#);
        let stuck = r(
            "GET",
            "/v1/invoices?status=paid&limit=1&starting_after=inv_a",
            true,
            "",
        );
        assert_eq!(
            (
                stuck.status,
                stuck.body["data"][0]["id"].clone(),
                stuck.body["has_more"].clone()
            ),
            (200, json!("inv_a"), json!(true))
        );
        // {} clears every fault
        assert_eq!(
            r("POST", "/sandbox/control", true, "{}").body["stuck_cursor"],
            false
        );
        let ok = r(
            "GET",
            "/v1/invoices?status=paid&limit=1&starting_after=inv_a",
            true,
            "",
        );
        assert_eq!(ok.body["data"][0]["id"], "inv_b");

        assert_eq!(r("POST", "/sandbox/control", false, "{}").status, 403);
        assert_eq!(
            r(
                "POST",
                "/sandbox/control",
                true,
                r#"{"stuck_cursor":"yes"}"#
            )
            .status,
            400
        );
        assert_eq!(r("PUT", "/sandbox/control", true, "{}").status, 405);
        assert_eq!(
            r("DELETE", "/sandbox/invoices", true, "").body["deleted"],
            3
        );
        assert_eq!(state.lock().unwrap().store.len(), 0);
    }
}
