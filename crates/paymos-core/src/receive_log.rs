//! Which deliveries write their `receive` log line: `RECEIVE_LOG` (issue #27). A CPU profile
//! put the line at about 18 % of a duplicate's cost, and a duplicate's line says only that
//! the sender retried something already on record. Its count is kept either way: every
//! verified delivery, duplicates included, is counted under its secret (`signatures` in
//! `/admin/api/metrics`), and that count does not depend on this setting.
//!
//! The words name what is logged rather than why: `all`, or `except_duplicates` (every
//! refusal, every new delivery, every 5xx still writes its line, with the same fields). The
//! other way to make the log cheaper, sampling whole requests, is the platform's
//! (`[observability] head_sampling_rate`, docs/configuration.md), not a setting here.

use crate::setting::Choice;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiveLog {
    /// a line for every delivery (the default, and the behaviour before the setting)
    All,
    /// no line for a duplicate; every other delivery writes its line
    ExceptDuplicates,
}

/// `RECEIVE_LOG`: `all` when unset; an unknown word is `all`, and said (a warning in the
/// metrics, a `config` / `invalid_setting` line): a misspelt value keeps the full log rather
/// than losing lines.
pub const SETTING: Choice<ReceiveLog> = Choice {
    name: "RECEIVE_LOG",
    default: ReceiveLog::All,
    choices: &[
        ("all", ReceiveLog::All),
        ("except_duplicates", ReceiveLog::ExceptDuplicates),
    ],
};

impl ReceiveLog {
    /// Whether a delivery answered this way writes its line: `duplicate` only for a verified
    /// delivery already on record (a 200 `"duplicate":true`); a refusal or a failure is never
    /// a duplicate.
    pub fn writes(self, duplicate: bool) -> bool {
        match self {
            ReceiveLog::All => true,
            ReceiveLog::ExceptDuplicates => !duplicate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_all_and_every_delivery_writes() {
        let r = SETTING.read(None);
        assert_eq!(r.value, ReceiveLog::All);
        assert_eq!(r.warning, None);
        assert!(r.value.writes(false));
        assert!(r.value.writes(true));
    }

    #[test]
    fn except_duplicates_drops_only_the_duplicates_line() {
        let r = SETTING.read(Some("except_duplicates"));
        assert_eq!(r.warning, None);
        assert_eq!(r.value, ReceiveLog::ExceptDuplicates);
        assert!(r.value.writes(false), "a new delivery or a refusal");
        assert!(!r.value.writes(true), "a duplicate");
        assert_eq!(SETTING.read(Some("all")).value, ReceiveLog::All);
    }

    #[test]
    fn an_unknown_word_keeps_every_line_and_is_said() {
        for raw in ["changes", "none", "All", "except-duplicates"] {
            let r = SETTING.read(Some(raw));
            assert_eq!(r.value, ReceiveLog::All, "{raw}");
            assert_eq!(
                r.warning,
                Some(format!(
                    "RECEIVE_LOG is {raw:?}, which is not one of all, except_duplicates: the default all is used"
                ))
            );
        }
    }
}
