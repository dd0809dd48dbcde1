//! Errors that end a command, with the exit code they map to.
//!
//! Exit codes: 0 success; 1 the thing under test failed (a delivery that was never
//! acknowledged, a check step that did not pass, a non-2xx reply to `send`); 2 the command
//! could not do its job (bad usage, an unreachable URL, a refused admin token).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// Bad arguments or input (exit 2).
    Usage(String),
    /// The target could not be reached at all (exit 2).
    Unreachable { url: String, reason: String },
    /// A credential was refused, or the admin API is off (exit 2).
    Refused(String),
    /// The operation ran and its result is a failure (exit 1).
    Failed(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Failed(_) => 1,
            _ => 2,
        }
    }

    pub fn usage(m: impl Into<String>) -> Self {
        CliError::Usage(m.into())
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Refused(m) | CliError::Failed(m) => f.write_str(m),
            CliError::Unreachable { url, reason } => write!(f, "cannot reach {url}: {reason}"),
        }
    }
}

impl std::error::Error for CliError {}
