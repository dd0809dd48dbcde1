//! Where the receiver may send credentials (the provider API key, signed effects, alerts).
//!
//! interface §4: a deployed worker sends them only over `https`. Plain `http` is accepted
//! only for a loopback host, a development value that a deployed worker cannot reach.

/// `true` for an `https://` URL with a host, or an `http://` URL whose host is loopback
/// (`localhost`, `127.0.0.0/8`, `[::1]`).
pub fn may_carry_credentials(url: &str) -> bool {
    // fetch's URL parser (WHATWG) reads `\` as `/` and drops tabs and newlines, where `host`
    // below does not: `http://192.0.2.2\@localhost/` reads as loopback here and goes to
    // 192.0.2.2. A URL that could be read two ways is refused, not guessed at.
    if url
        .bytes()
        .any(|b| b == b'\\' || b == b' ' || b.is_ascii_control())
    {
        return false;
    }
    if let Some(rest) = url.strip_prefix("https://") {
        return !host(rest).is_empty();
    }
    match url.strip_prefix("http://") {
        Some(rest) => is_loopback(host(rest)),
        None => false,
    }
}

/// The host and port of `rest` (what follows `scheme://`), without user info.
fn authority(rest: &str) -> &str {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // user info could smuggle a loopback-looking prefix: http://127.0.0.1@evil.example
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

/// The host of `rest` (what follows `scheme://`), without user info, port or brackets.
fn host(rest: &str) -> &str {
    let authority = authority(rest);
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    }
}

/// Why a URL [`may_carry_credentials`] takes cannot be fetched as it stands, if it cannot:
/// a port that is not 1 to 65535, a host that is neither a name nor an address. fetch refuses
/// such a URL at every send, so it is said as a configuration fault instead, where it is set.
pub fn malformed(url: &str) -> Option<&'static str> {
    let authority = authority(url.split_once("://").map_or(url, |(_, r)| r));
    let (host_ok, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, after)) => (
                addr.parse::<std::net::Ipv6Addr>().is_ok(),
                after
                    .strip_prefix(':')
                    .or((!after.is_empty()).then_some("x")),
            ),
            None => (false, None),
        },
        None => {
            let (host, port) = authority
                .split_once(':')
                .map_or((authority, None), |(h, p)| (h, Some(p)));
            // WHATWG's forbidden host code points (a name may be non-ASCII: IDNA maps it)
            let forbidden = |c: char| c.is_control() || " #/<>?@[\\]^|".contains(c);
            (!host.is_empty() && !host.contains(forbidden), port)
        }
    };
    if !host_ok {
        return Some("has a host that is neither a name nor an address");
    }
    // an empty port is the scheme's own (WHATWG), as `https://host:/`
    let port_ok = port.is_none_or(|p| {
        // digits only: `parse` would take a leading `+`
        p.is_empty()
            || (p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n)))
    });
    (!port_ok).then_some("has a port that is not 1 to 65535")
}

/// `true` for a URL [`may_carry_credentials`] takes only as a development value: plain
/// `http` to a loopback host, which a deployed worker cannot reach.
pub fn is_development(url: &str) -> bool {
    url.starts_with("http://") && may_carry_credentials(url)
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Percent-encodes a query value: everything but RFC 3986's unreserved characters, so a
/// cursor handed back by an API cannot add or change parameters.
pub fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{encode_query_value, malformed};

    #[test]
    fn a_url_fetch_would_refuse_is_malformed() {
        for good in [
            "https://orders.example.com/x?y=1",
            "https://orders.example.com:443/x",
            "https://orders.example.com:/x",
            "https://user:pw@orders.example.com:8443",
            "http://127.0.0.1:8790",
            "http://[::1]:65535/",
            "https://a_b.example",
            "https://bücher.example/",
        ] {
            assert_eq!(malformed(good), None, "{good}");
        }
        for bad in [
            "https://orders.example.com:99999/x",
            "https://orders.example.com:0/",
            "https://orders.example.com:80a/",
            "https://[zz]/",
            "https://[::1/",
            "https://[::1]x/",
            "https://orders example.com/",
            "https://orders.example.com:-1",
        ] {
            assert!(malformed(bad).is_some(), "{bad}");
        }
    }
    use super::may_carry_credentials as ok;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode_query_value("inv_abc123"), "inv_abc123");
        assert_eq!(
            encode_query_value("inv_a&b=c d/é#"),
            "inv_a%26b%3Dc%20d%2F%C3%A9%23"
        );
    }

    #[test]
    fn https_always_loopback_http_only() {
        assert!(ok("https://api.paymos.example"));
        assert!(ok("https://api.paymos.example:8443/v1"));
        assert!(ok("http://127.0.0.1:8790"));
        assert!(ok("http://127.3.4.5/x"));
        assert!(ok("http://localhost:8790/"));
        assert!(ok("http://[::1]:8790"));
        assert!(!ok("http://api.paymos.example"));
        assert!(!ok("http://127.evil.example"));
        assert!(!ok("http://127.0.0.1@evil.example/"));
        assert!(!ok("http://10.0.0.1:8790"));
        assert!(!ok("ftp://127.0.0.1"));
        assert!(!ok("https://"));
        assert!(!ok(""));
        assert!(!ok("127.0.0.1:8790"));
        // read by fetch as host 192.0.2.2 (`\` is `/` to it), by a naive split as localhost
        assert!(!ok("http://192.0.2.2:8790\\@localhost/orders"));
        assert!(!ok("http://192.0.2.2\\@127.0.0.1/"));
        assert!(!ok("https://orders.example\\path"));
        // fetch drops tabs and newlines inside a URL: nothing is read two ways
        assert!(!ok("http://127.0.0.1\t.evil.example/"));
        assert!(!ok("http://localhost\n/x"));
        assert!(!ok("http://local host/"));
    }

    #[test]
    fn development_values_are_loopback_http() {
        use super::is_development as dev;
        assert!(dev("http://127.0.0.1:8791/orders"));
        assert!(dev("http://localhost:8790"));
        assert!(
            !dev("https://127.0.0.1:8791"),
            "https is not a development value"
        );
        assert!(
            !dev("http://orders.example"),
            "refused, not a development value"
        );
        assert!(!dev(""));
    }
}
