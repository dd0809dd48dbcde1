//! `paymos`: a command-line stand-in for the Paymos provider, built on the receiver's own
//! core crate (`paymos-core`) for ids and signatures.
//!
//! The library part holds everything that is worth testing without a network: envelope
//! building, the scaled retry ladder, latency percentiles, URL handling and the sandbox's
//! invoice paging. The commands themselves (`send`, `deliver`, `check`, `sandbox`, `load`,
//! `orders`)
//! live in their own modules and are wired to the command line in `main.rs`.

pub mod check;
pub mod deliver;
pub mod envelope;
pub mod error;
pub mod http;
pub mod ids;
pub mod ladder;
pub mod load;
pub mod orders;
pub mod sandbox;
pub mod stats;
pub mod urls;

pub use envelope::{build_envelope, Built, EventSpec};
pub use error::CliError;
pub use stats::{percentile, LatencySummary};

/// The development secret every example and test uses (docs/interface.md's test vector).
pub const DEFAULT_SECRET: &str = "whsec_test_new_6f1d2a9c";

/// Seconds since the Unix epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
