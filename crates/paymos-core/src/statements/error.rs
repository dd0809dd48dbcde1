//! What a failure to run the statements was, and where it happened. The Worker's D1 calls
//! (`src/sql`) return a [`DbError`]; its logs, its 503's log line and a delivery's
//! `last_error` show it, so an operator reads which statement failed and how. Defined here,
//! next to the statements' names, where it is tested natively; nothing here does I/O.

use super::{Bound, Statement};
use std::fmt;

/// The statements a database failure concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// One statement run on its own.
    Statement(&'static str),
    /// A batch (one transaction, all or nothing) that failed as a whole: its statements'
    /// names, in order.
    Batch(Vec<&'static str>),
    /// The statement at `index` (from 0) of a batch of `of` that ran: its rows.
    InBatch {
        name: &'static str,
        index: usize,
        of: usize,
    },
}

/// A batch's names are all listed up to this many; past it, the first one's and the count.
const LISTED: usize = 4;

impl Site {
    pub fn statement(s: &Statement) -> Site {
        Site::Statement(s.name)
    }

    pub fn of(b: &Bound<'_>) -> Site {
        Site::Statement(b.statement.name)
    }

    pub fn batch(bs: &[Bound<'_>]) -> Site {
        Site::Batch(bs.iter().map(|b| b.statement.name).collect())
    }

    /// The statement at `index` of a batch whose statements are `names`.
    pub fn in_batch(names: &[&'static str], index: usize) -> Site {
        Site::InBatch {
            name: names.get(index).copied().unwrap_or("?"),
            index,
            of: names.len(),
        }
    }

    /// The statement's name; a batch's first.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Site::Statement(n) | Site::InBatch { name: n, .. } => Some(n),
            Site::Batch(names) => names.first().copied(),
        }
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Statement(n) => f.write_str(n),
            Site::Batch(names) if names.is_empty() => f.write_str("an empty batch"),
            Site::Batch(names) if names.len() <= LISTED => {
                write!(f, "batch of {} [{}]", names.len(), names.join(", "))
            }
            Site::Batch(names) => write!(f, "batch of {} from {}", names.len(), names[0]),
            Site::InBatch { name, index, of } => {
                write!(f, "{name} (statement {} of {of} in a batch)", index + 1)
            }
        }
    }
}

/// A database failure: what kind, and where. Every kind is the database being unavailable
/// to the caller (503, or the queue's retry): the Worker maps it in `src/error.rs`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    /// No usable `DB` binding: no statement was tried.
    #[error("the DB binding is unusable: {0}")]
    Binding(String),
    /// D1 refused or could not run it: unreachable, overloaded, a constraint, a bind.
    #[error("{at}: the D1 call failed: {message}")]
    Call { at: Site, message: String },
    /// A row came back that does not read into its type.
    #[error("{at}: a row did not parse: {message}")]
    Row { at: Site, message: String },
    /// A row the statement must return is not there.
    #[error("{at}: a row expected and missing: {what}")]
    Missing { at: Site, what: &'static str },
    /// A row holds a value the receiver does not know.
    #[error("{at}: an unexpected value: {what}")]
    Unexpected { at: Site, what: String },
}

impl DbError {
    /// Where it happened; `None` for the binding.
    pub fn site(&self) -> Option<&Site> {
        match self {
            DbError::Binding(_) => None,
            DbError::Call { at, .. }
            | DbError::Row { at, .. }
            | DbError::Missing { at, .. }
            | DbError::Unexpected { at, .. } => Some(at),
        }
    }

    /// The statement it names (a batch's first), if any.
    pub fn statement(&self) -> Option<&'static str> {
        self.site().and_then(Site::name)
    }

    /// The kind, as one word.
    pub fn kind(&self) -> &'static str {
        match self {
            DbError::Binding(_) => "binding",
            DbError::Call { .. } => "call",
            DbError::Row { .. } => "row",
            DbError::Missing { .. } => "missing",
            DbError::Unexpected { .. } => "unexpected",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statements::{Arg, AUDIT_REPLAY, FLUSH_COUNT, LOAD_DELIVERY, RESET_FOR_REPLAY};

    fn flush() -> Bound<'static> {
        FLUSH_COUNT.bind(vec![
            Arg::text("b"),
            Arg::text("n"),
            Arg::text("l"),
            Arg::Int(1),
        ])
    }

    #[test]
    fn a_statement_failure_names_the_statement_and_the_kind() {
        let e = DbError::Call {
            at: Site::of(&LOAD_DELIVERY.bind(vec![Arg::text("evt_1")])),
            message: "D1_ERROR: overloaded".into(),
        };
        assert_eq!(
            e.to_string(),
            "LOAD_DELIVERY: the D1 call failed: D1_ERROR: overloaded"
        );
        assert_eq!(e.statement(), Some("LOAD_DELIVERY"));
        assert_eq!(e.kind(), "call");
    }

    #[test]
    fn a_short_batch_lists_its_statements_a_long_one_its_first_and_count() {
        let short = [RESET_FOR_REPLAY.bind(vec![Arg::text("evt_1")]), flush()];
        let e = DbError::Call {
            at: Site::batch(&short),
            message: "D1_ERROR: timeout".into(),
        };
        assert_eq!(
            e.to_string(),
            "batch of 2 [RESET_FOR_REPLAY, FLUSH_COUNT]: the D1 call failed: D1_ERROR: timeout"
        );
        assert_eq!(e.statement(), Some("RESET_FOR_REPLAY"));
        let long: Vec<Bound<'static>> = (0..12).map(|_| flush()).collect();
        assert_eq!(
            Site::batch(&long).to_string(),
            "batch of 12 from FLUSH_COUNT"
        );
        assert_eq!(Site::batch(&[]).to_string(), "an empty batch");
        assert_eq!(Site::batch(&[]).name(), None);
    }

    #[test]
    fn a_batch_statement_s_rows_name_it_and_its_place() {
        let names = [RESET_FOR_REPLAY.name, AUDIT_REPLAY.name];
        let e = DbError::Missing {
            at: Site::in_batch(&names, 1),
            what: "the audit row's outcome",
        };
        assert_eq!(
            e.to_string(),
            "AUDIT_REPLAY (statement 2 of 2 in a batch): a row expected and missing: \
             the audit row's outcome"
        );
        assert_eq!(e.kind(), "missing");
        let e = DbError::Row {
            at: Site::in_batch(&names, 0),
            message: "invalid type: string \"x\", expected i64".into(),
        };
        assert!(e
            .to_string()
            .starts_with("RESET_FOR_REPLAY (statement 1 of 2 in a batch): a row did not parse:"));
        // an index past the batch (a caller's slip) still says something readable
        assert_eq!(
            Site::in_batch(&names, 5).to_string(),
            "? (statement 6 of 2 in a batch)"
        );
    }

    #[test]
    fn the_binding_names_no_statement() {
        let e = DbError::Binding("no binding found for `DB`".into());
        assert_eq!(
            e.to_string(),
            "the DB binding is unusable: no binding found for `DB`"
        );
        assert_eq!(e.statement(), None);
        assert_eq!(e.site(), None);
        let e = DbError::Unexpected {
            at: Site::Statement("AUDIT_REDELIVER"),
            what: "a redelivery recorded as applied".into(),
        };
        assert_eq!(
            e.to_string(),
            "AUDIT_REDELIVER: an unexpected value: a redelivery recorded as applied"
        );
        assert_eq!(e.kind(), "unexpected");
    }
}
