//! `paymos sandbox`: a local stand-in for the provider's invoice API (CONTRACT.md §6).
//!
//! - `GET /v1/invoices?status=paid&limit=&starting_after=` (bearer key) pages invoices in
//!   id order, strictly after `starting_after`;
//! - `POST /sandbox/invoices` registers or updates one invoice (no key; loopback only);
//! - `GET /sandbox/invoices` lists everything registered (no key; loopback only);
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

#[derive(Debug, Clone, PartialEq)]
pub struct PageQuery {
    pub status: Option<String>,
    pub limit: usize,
    pub starting_after: Option<String>,
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
            .filter(|i| q.status.as_deref().is_none_or(|s| s == i.status));
        let data: Vec<Invoice> = it.by_ref().take(q.limit).cloned().collect();
        let has_more = it.next().is_some();
        Page { data, has_more }
    }
}

/// Parses the list call's query string; errors are messages for a 400.
pub fn parse_page_query(query: &str) -> Result<PageQuery, String> {
    let mut q = PageQuery {
        status: None,
        limit: DEFAULT_LIMIT,
        starting_after: None,
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
            "starting_after" if !v.is_empty() => q.starting_after = Some(v.into_owned()),
            _ => {}
        }
    }
    Ok(q)
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

/// The sandbox's routing, apart from the socket (so it is testable).
pub fn route(store: &Mutex<Store>, api_key: &str, req: &Incoming, now: i64) -> Answer {
    let Incoming {
        method,
        url,
        authorization,
        remote_is_loopback,
        body,
    } = *req;
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let path = path.trim_end_matches('/');
    match (method, path) {
        ("GET", "/healthz") => answer(
            200,
            json!({ "status": "ok", "invoices": store.lock().unwrap().len() }),
        ),
        ("GET", "/v1/invoices") => {
            if !bearer_ok(authorization, api_key) {
                return error(
                    401,
                    "unauthorized",
                    "send Authorization: Bearer <the sandbox's API key>",
                );
            }
            match parse_page_query(query) {
                Ok(q) => answer(
                    200,
                    serde_json::to_value(store.lock().unwrap().page(&q)).unwrap(),
                ),
                Err(m) => error(400, "invalid_request", &m),
            }
        }
        (_, "/v1/invoices") => error(405, "method_not_allowed", "GET only"),
        ("POST", "/sandbox/invoices") | ("GET", "/sandbox/invoices") if !remote_is_loopback => {
            error(
                403,
                "forbidden",
                "the sandbox's control API answers loopback clients only",
            )
        }
        ("POST", "/sandbox/invoices") => match serde_json::from_slice::<InvoiceInput>(body) {
            Ok(input) => match store.lock().unwrap().upsert(input, now) {
                Ok(inv) => answer(200, serde_json::to_value(inv).unwrap()),
                Err(m) => error(400, "invalid_request", &m),
            },
            Err(e) => error(
                400,
                "invalid_json",
                &format!("expected {{\"id\":\"inv_…\",…}}: {e}"),
            ),
        },
        ("GET", "/sandbox/invoices") => answer(200, json!({ "data": store.lock().unwrap().all() })),
        _ => error(
            404,
            "not_found",
            "GET /v1/invoices, POST /sandbox/invoices, GET /healthz",
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
pub fn serve(server: tiny_http::Server, api_key: String, quiet: bool) {
    let server = std::sync::Arc::new(server);
    let store = std::sync::Arc::new(Mutex::new(Store::default()));
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
            status: None,
            limit: 10,
            starting_after: None,
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
                starting_after: Some("inv_x".into())
            }
        );
        assert_eq!(parse_page_query("").unwrap().limit, DEFAULT_LIMIT);
        assert!(parse_page_query("limit=0").is_err());
        assert!(parse_page_query("limit=101").is_err());
        assert!(parse_page_query("limit=x").is_err());
    }

    #[test]
    fn routes_and_auth() {
        let store = Mutex::new(store_with(&["inv_a"]));
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
}
