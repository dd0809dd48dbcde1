//! Receiver URLs: `--to http://127.0.0.1:8787` means the receiver's origin; the webhook
//! endpoint and the admin API hang off it.

use std::net::IpAddr;

use url::Url;

use crate::error::CliError;

/// The contract's webhook path.
pub const WEBHOOK_PATH: &str = "/webhooks/paymos";

/// Parses an http(s) URL given on the command line.
pub fn parse(flag: &str, s: &str) -> Result<Url, CliError> {
    let u = Url::parse(s.trim()).map_err(|e| {
        CliError::usage(format!(
            "{flag} {s:?} is not a URL ({e}); write it like http://127.0.0.1:8787"
        ))
    })?;
    match u.scheme() {
        "http" => {}
        "https" if cfg!(feature = "tls") => {}
        "https" => {
            return Err(CliError::usage(format!(
                "{flag} {s}: this paymos was built without TLS (--no-default-features); rebuild with the default features (`cargo build -p paymos-cli --release`) for https"
            )))
        }
        other => {
            return Err(CliError::usage(format!(
                "{flag} {s}: unsupported scheme {other:?} (http or https)"
            )))
        }
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(CliError::usage(format!("{flag} {s}: the URL has no host")));
    }
    Ok(u)
}

/// The delivery URL: `URL` as given when it has a path, else `URL` + `/webhooks/paymos`.
pub fn webhook_url(to: &Url) -> String {
    if to.path() == "/" || to.path().is_empty() {
        let mut u = to.clone();
        u.set_path(WEBHOOK_PATH);
        u.to_string()
    } else {
        to.to_string()
    }
}

/// `scheme://host[:port]`, without a trailing slash.
pub fn origin(to: &Url) -> String {
    let mut s = format!("{}://{}", to.scheme(), to.host_str().unwrap_or(""));
    if let Some(p) = to.port() {
        s.push_str(&format!(":{p}"));
    }
    s
}

/// `<origin>/admin/api`: the contract fixes the admin API's place relative to the origin.
pub fn admin_base(to: &Url) -> String {
    format!("{}/admin/api", origin(to))
}

/// A base URL for API calls: the URL as given, without trailing slashes.
pub fn base(to: &Url) -> String {
    to.as_str().trim_end_matches('/').to_string()
}

/// True for 127.0.0.0/8, ::1 and `localhost`.
pub fn is_loopback(to: &Url) -> bool {
    match to.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        parse("--to", s).unwrap()
    }

    #[test]
    fn webhook_path_added_only_when_missing() {
        assert_eq!(
            webhook_url(&u("http://127.0.0.1:8787")),
            "http://127.0.0.1:8787/webhooks/paymos"
        );
        assert_eq!(
            webhook_url(&u("http://127.0.0.1:8787/")),
            "http://127.0.0.1:8787/webhooks/paymos"
        );
        assert_eq!(webhook_url(&u("http://h:1/hooks/x")), "http://h:1/hooks/x");
        assert_eq!(
            webhook_url(&u("http://h:1/webhooks/paymos")),
            "http://h:1/webhooks/paymos"
        );
        assert_eq!(
            webhook_url(&u("http://h:1?x=1")),
            "http://h:1/webhooks/paymos?x=1"
        );
    }

    #[test]
    fn origin_and_admin() {
        assert_eq!(
            origin(&u("http://127.0.0.1:8787/webhooks/paymos")),
            "http://127.0.0.1:8787"
        );
        assert_eq!(
            admin_base(&u("http://localhost:8787/")),
            "http://localhost:8787/admin/api"
        );
        assert_eq!(origin(&u("http://example.com")), "http://example.com");
        assert_eq!(origin(&u("http://[::1]:9000/x")), "http://[::1]:9000");
        assert_eq!(base(&u("http://127.0.0.1:8790/")), "http://127.0.0.1:8790");
    }

    #[test]
    fn loopback() {
        for ok in [
            "http://127.0.0.1:1",
            "http://127.8.9.10",
            "http://localhost:8787",
            "http://LOCALHOST",
            "http://[::1]:80",
        ] {
            assert!(is_loopback(&u(ok)), "{ok}");
        }
        for no in [
            "http://10.0.0.1",
            "http://example.com",
            "http://[::2]",
            "http://localhost.example.com",
            "http://0.0.0.0",
        ] {
            assert!(!is_loopback(&u(no)), "{no}");
        }
    }

    #[test]
    fn bad_urls() {
        for bad in ["127.0.0.1:8787", "ftp://h/x", "not a url", "http://"] {
            let e = parse("--to", bad).unwrap_err();
            assert!(matches!(e, CliError::Usage(_)), "{bad}: {e}");
        }
        if !cfg!(feature = "tls") {
            assert!(parse("--to", "https://x.example")
                .unwrap_err()
                .to_string()
                .contains("built without TLS"));
        }
    }

    #[test]
    #[cfg(feature = "tls")]
    fn https_is_accepted_by_the_default_build() {
        let to = u("https://paymos-receiver.staging.example.workers.dev");
        assert_eq!(
            webhook_url(&to),
            "https://paymos-receiver.staging.example.workers.dev/webhooks/paymos"
        );
        assert_eq!(
            admin_base(&to),
            "https://paymos-receiver.staging.example.workers.dev/admin/api"
        );
        assert_eq!(origin(&u("https://h:8443/x")), "https://h:8443");
    }
}
