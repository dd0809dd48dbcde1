//! Blocking HTTP (ureq 2) with the error wording the commands promise:
//! `cannot reach http://…: connection refused`, `the admin token was refused (401)`.

use std::io;
use std::time::{Duration, Instant};

use paymos_core::Secret;
use serde_json::Value;

use crate::envelope::Built;
use crate::error::CliError;

/// Admin and sandbox calls give up after this long.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);

/// The settings every agent shares. With the `tls` feature (the default) https URLs go
/// through rustls, trusting the Mozilla root certificates (webpki-roots) compiled in.
pub fn agent_builder(timeout: Duration) -> ureq::AgentBuilder {
    ureq::AgentBuilder::new()
        .timeout_connect(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .max_idle_connections_per_host(4)
        .user_agent(concat!("paymos-cli/", env!("CARGO_PKG_VERSION")))
}

/// An agent keeps one idle keep-alive connection per host: give each thread its own.
pub fn agent(timeout: Duration) -> ureq::Agent {
    agent_builder(timeout).build()
}

/// True when this build can talk to https URLs.
pub const TLS: bool = cfg!(feature = "tls");

/// A reply of any status.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub text: String,
    pub elapsed: Duration,
}

impl Reply {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.text).ok()
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON when it is JSON, else as a string (for reports).
    pub fn body_value(&self) -> Value {
        self.json()
            .unwrap_or_else(|| Value::from(self.text.clone()))
    }

    /// `duplicate` from a `{"received":true,"duplicate":…}` reply.
    pub fn duplicate(&self) -> Option<bool> {
        self.json()?.get("duplicate")?.as_bool()
    }
}

/// Why a request got no reply at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    pub url: String,
    pub reason: String,
    pub timed_out: bool,
}

impl From<TransportError> for CliError {
    fn from(e: TransportError) -> Self {
        CliError::Unreachable {
            url: e.url,
            reason: e.reason,
        }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot reach {}: {}", self.url, self.reason)
    }
}

fn io_reason(kind: io::ErrorKind) -> Option<(&'static str, bool)> {
    use io::ErrorKind::*;
    Some(match kind {
        ConnectionRefused => ("connection refused", false),
        ConnectionReset => ("connection reset by peer", false),
        ConnectionAborted => ("connection aborted", false),
        TimedOut | WouldBlock => ("timed out", true),
        UnexpectedEof => ("the server closed the connection without a reply", false),
        BrokenPipe => ("the server closed the connection", false),
        AddrNotAvailable => ("address not available", false),
        _ => return None,
    })
}

/// Maps a transport failure to a short reason (the first io error in the chain decides).
pub fn transport_error(url: &str, t: &ureq::Transport) -> TransportError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(t);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if let Some((reason, timed_out)) = io_reason(io.kind()) {
                return TransportError {
                    url: url.to_string(),
                    reason: reason.to_string(),
                    timed_out,
                };
            }
        }
        source = e.source();
    }
    let text = t.to_string();
    let lower = text.to_lowercase();
    let (reason, timed_out) = match t.kind() {
        ureq::ErrorKind::Dns => ("could not resolve the host".to_string(), false),
        ureq::ErrorKind::UnknownScheme if url.starts_with("https:") && !TLS => (
            "this paymos was built without TLS (--no-default-features); rebuild with the default features for https".to_string(),
            false,
        ),
        _ if lower.contains("timed out") || lower.contains("timeout") => {
            ("timed out".to_string(), true)
        }
        _ if lower.contains("connection refused") => ("connection refused".to_string(), false),
        _ => {
            // e.g. "tls connection init failed: invalid peer certificate: UnknownIssuer"
            let mut reason = t.message().map(str::to_string).unwrap_or(text);
            let mut cause = std::error::Error::source(t);
            let mut deepest = None;
            while let Some(e) = cause {
                deepest = Some(e.to_string());
                cause = e.source();
            }
            if let Some(d) = deepest.filter(|d| !reason.contains(d.as_str())) {
                reason = format!("{reason}: {d}");
            }
            (reason, false)
        }
    };
    TransportError {
        url: url.to_string(),
        reason,
        timed_out,
    }
}

fn finish(
    url: &str,
    started: Instant,
    r: Result<ureq::Response, ureq::Error>,
) -> Result<Reply, TransportError> {
    let resp = match r {
        Ok(resp) => resp,
        Err(ureq::Error::Status(_, resp)) => resp,
        Err(ureq::Error::Transport(t)) => return Err(transport_error(url, &t)),
    };
    let status = resp.status();
    // Reading the whole body lets the agent reuse the connection.
    let text = resp.into_string().map_err(|e| TransportError {
        url: url.to_string(),
        reason: match io_reason(e.kind()) {
            Some((r, _)) => format!("reply cut short: {r}"),
            None => format!("reply cut short: {e}"),
        },
        timed_out: matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ),
    })?;
    Ok(Reply {
        status,
        text,
        elapsed: started.elapsed(),
    })
}

/// POSTs a delivery exactly as the provider would: the same body bytes, `X-Webhook-Id`, a
/// signature made now with `secrets` (several = a rotation header), `X-Webhook-Attempt`.
pub fn post_delivery(
    agent: &ureq::Agent,
    url: &str,
    built: &Built,
    secrets: &[Secret],
    attempt: Option<u32>,
    timeout: Option<Duration>,
) -> Result<Reply, TransportError> {
    let signature = built.signature(secrets, crate::now_unix());
    post_signed(
        agent,
        url,
        &built.event_id,
        &built.body,
        &signature,
        attempt,
        timeout,
    )
}

/// POSTs pre-signed bytes (the load generator signs before the clock starts). An empty
/// `signature` sends no `X-Webhook-Signature` at all (`paymos check`'s unsigned delivery).
pub fn post_signed(
    agent: &ureq::Agent,
    url: &str,
    event_id: &str,
    body: &[u8],
    signature: &str,
    attempt: Option<u32>,
    timeout: Option<Duration>,
) -> Result<Reply, TransportError> {
    let mut req = agent
        .post(url)
        .set("Content-Type", "application/json")
        .set("X-Webhook-Id", event_id);
    if !signature.is_empty() {
        req = req.set("X-Webhook-Signature", signature);
    }
    if let Some(n) = attempt {
        req = req.set("X-Webhook-Attempt", &n.to_string());
    }
    if let Some(t) = timeout {
        req = req.timeout(t);
    }
    let started = Instant::now();
    let r = req.send_bytes(body);
    finish(url, started, r)
}

/// The admin API (`<origin>/admin/api`) with its bearer token.
#[derive(Clone)]
pub struct Admin {
    pub base: String,
    token: String,
    agent: ureq::Agent,
}

impl Admin {
    pub fn new(base: String, token: String) -> Self {
        Admin {
            base,
            token,
            agent: agent(API_TIMEOUT),
        }
    }

    /// Any status comes back as a `Reply`; only transport failures are errors.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, TransportError> {
        let url = format!("{}{}", self.base, path);
        let req = self
            .agent
            .request(method, &url)
            .set("Authorization", &format!("Bearer {}", self.token));
        let started = Instant::now();
        let r = match body {
            Some(b) => req
                .set("Content-Type", "application/json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        finish(&url, started, r)
    }

    /// A call that must answer 2xx with JSON, with 401 and 404 on the surface explained.
    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, CliError> {
        let r = self.call(method, path, body)?;
        match r.status {
            200..=299 => r.json().ok_or_else(|| {
                CliError::Failed(format!(
                    "{method} {}{path} answered {} with a body that is not JSON",
                    self.base, r.status
                ))
            }),
            401 => Err(refused_token()),
            s => Err(CliError::Failed(format!(
                "{method} {}{path} answered {s}: {}",
                self.base,
                short(&r.text)
            ))),
        }
    }

    /// Checks the token and that the admin API is there (one cheap list call).
    pub fn preflight(&self) -> Result<(), CliError> {
        let r = self.call("GET", "/deliveries?limit=1", None)?;
        match r.status {
            200..=299 if r.json().is_some() => Ok(()),
            401 => Err(refused_token()),
            404 => Err(CliError::Refused(format!(
                "no admin API at {} (404): is ADMIN_TOKEN set on the receiver? An unset token turns /admin off",
                self.base
            ))),
            s => Err(CliError::Refused(format!(
                "the admin API at {} answered {s} to GET /deliveries?limit=1: {}",
                self.base,
                short(&r.text)
            ))),
        }
    }
}

pub fn refused_token() -> CliError {
    CliError::Refused("the admin token was refused (401)".into())
}

/// At most 300 characters of a reply, for error messages.
pub fn short(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s.to_string()
    }
}

#[cfg(all(test, feature = "tls"))]
mod tls_tests {
    //! https through the default build: a real TLS handshake against a local rustls server
    //! whose certificate (127.0.0.1, signed by a test-only CA in tests/tls/) is not in the
    //! compiled-in roots.
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;

    use super::*;

    const CA: &[u8] = include_bytes!("../tests/tls/ca.der");
    const LEAF: &[u8] = include_bytes!("../tests/tls/leaf.der");
    const LEAF_KEY: &[u8] = include_bytes!("../tests/tls/leaf.key.der");

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// Serves `n` connections over TLS, answering each request 200 with a JSON body.
    fn tls_server(n: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(LEAF.to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(LEAF_KEY.to_vec())),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        let h = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..n {
                let (tcp, _) = listener.accept().unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let conn = rustls::ServerConnection::new(config.clone()).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                let ok = loop {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => break false,
                        Ok(k) => head.extend_from_slice(&buf[..k]),
                    }
                    if head.windows(4).any(|w| w == b"\r\n\r\n") {
                        break true;
                    }
                };
                if !ok {
                    seen.push("handshake or read failed".to_string());
                    continue;
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let body = r#"{"received":true,"duplicate":false}"#;
                let _ = write!(
                    tls,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
                seen.push(line);
            }
            seen
        });
        (url, h)
    }

    #[test]
    fn https_urls_are_spoken_not_refused_as_a_scheme() {
        let (url, server) = tls_server(2);

        // The default agent speaks TLS to it and refuses the certificate (unknown issuer):
        // proof that https is not an "unknown scheme" in the default build.
        let err = match agent(Duration::from_secs(5))
            .get(&format!("{url}/healthz"))
            .call()
        {
            Err(ureq::Error::Transport(t)) => t,
            other => panic!("expected a certificate error, got {other:?}"),
        };
        assert_ne!(err.kind(), ureq::ErrorKind::UnknownScheme);
        let reason = transport_error(&url, &err).to_string();
        eprintln!("the default agent against the test CA: {reason}");
        assert!(
            reason.to_lowercase().contains("certificate") || reason.contains("UnknownIssuer"),
            "{reason}"
        );

        // The same agent settings trusting the test CA: a full request over TLS.
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(CA.to_vec()))
            .unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let trusting = agent_builder(Duration::from_secs(5))
            .tls_config(Arc::new(client))
            .build();
        let built = crate::build_envelope(&crate::EventSpec {
            event_type: "invoice.paid".into(),
            ..Default::default()
        })
        .unwrap();
        let reply = post_delivery(
            &trusting,
            &format!("{url}/webhooks/paymos"),
            &built,
            &[Secret::new(crate::DEFAULT_SECRET)],
            Some(1),
            None,
        )
        .expect("a request over TLS");
        assert_eq!(reply.status, 200);
        assert_eq!(reply.duplicate(), Some(false));

        let seen = server.join().unwrap();
        assert_eq!(seen[0], "handshake or read failed");
        assert_eq!(seen[1], "POST /webhooks/paymos HTTP/1.1");
    }
}
