//! Credentials kept out of what an admin write records (interface §11: an audit row's `detail`
//! never holds a secret or a token). An operator who pastes the admin token, a webhook secret
//! or an Access token into a reason (or an `order_ref`, amount, currency) would leave it in the
//! audit log, which the receiver never deletes, in the resource's history and in the `cause`
//! sent to the order system. So each occurrence is replaced by [`REDACTED`] in the command
//! itself, before anything is written, and the write goes on. Ids and event types are checked
//! shapes, not free text, and are left as they are.

use super::command::Command;

/// What a credential in an admin write's text becomes.
pub const REDACTED: &str = "[redacted]";

/// Credentials shorter than this are not looked for: a value that short (a development
/// token) would take ordinary words out of every reason, and protects nothing.
pub const MIN_CHARS: usize = 8;

/// Replaces every occurrence of each credential in `text` (the longest first, so that one
/// holding another is replaced whole).
pub fn redact(text: &mut String, credentials: &[&str]) {
    replace(text, &looked_for(credentials));
}

/// The credentials to look for, trimmed, long enough, the longest first.
fn looked_for<'a>(credentials: &[&'a str]) -> Vec<&'a str> {
    let mut looked_for: Vec<&str> = credentials
        .iter()
        .map(|c| c.trim())
        .filter(|c| c.chars().count() >= MIN_CHARS)
        .collect();
    looked_for.sort_by_key(|c| std::cmp::Reverse(c.len()));
    looked_for
}

fn replace(text: &mut String, looked_for: &[&str]) {
    for credential in looked_for {
        if text.contains(credential) {
            *text = text.replace(credential, REDACTED);
        }
    }
}

impl Command {
    /// Takes `credentials` out of the command's free text (nothing else holds any).
    pub fn redact(&mut self, credentials: &[&str]) {
        let looked_for = looked_for(credentials);
        match self {
            Command::Transition(t) => {
                replace(&mut t.reason, &looked_for);
                for field in [&mut t.order_ref, &mut t.amount, &mut t.currency]
                    .into_iter()
                    .flatten()
                {
                    replace(field, &looked_for);
                }
            }
            Command::DismissDelivery { reason, .. } | Command::DismissEffect { reason, .. } => {
                replace(reason, &looked_for)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::audit::Record;

    const TOKEN: &str = "test-admin-token-0123456789";
    const SECRET: &str = "whsec_test_new_6f1d2a9c";

    fn text(t: &str, credentials: &[&str]) -> String {
        let mut s = t.to_string();
        redact(&mut s, credentials);
        s
    }

    #[test]
    fn every_occurrence_of_each_credential_is_replaced() {
        assert_eq!(
            text(
                &format!("Bearer {TOKEN}, then {SECRET} and {TOKEN}"),
                &[SECRET, TOKEN]
            ),
            "Bearer [redacted], then [redacted] and [redacted]"
        );
        assert_eq!(text("marked paid by hand", &[TOKEN]), "marked paid by hand");
    }

    #[test]
    fn the_longest_first_and_short_ones_not_looked_for() {
        // a secret that holds another is replaced whole, not left half-shown
        assert_eq!(text("abcdefgh12", &["abcdefgh", "abcdefgh12"]), REDACTED);
        assert_eq!(text("a short pw", &["pw", "", "  "]), "a short pw");
        // MIN_CHARS itself is looked for, one less is not (docs/decisions.md)
        assert_eq!(text("pw abcdefgh", &["abcdefgh"]), "pw [redacted]");
        assert_eq!(text("pw abcdefg", &["abcdefg"]), "pw abcdefg");
        assert_eq!(
            text(" padded-secret ", &["  padded-secret\n"]),
            " [redacted] "
        );
    }

    #[test]
    fn a_write_records_no_credential_and_goes_on() {
        let body = format!(
            r#"{{"to":"paid","reason":"token {TOKEN}","order_ref":"{SECRET}","amount":"49.00","currency":"{TOKEN}"}}"#
        );
        let mut command =
            Command::parse("POST", "/resources/inv_1/transition", "", body.as_bytes()).unwrap();
        command.redact(&[TOKEN, SECRET]);
        let Command::Transition(t) = &command else {
            panic!("{command:?}")
        };
        assert_eq!(
            (
                t.reason.as_str(),
                t.order_ref.as_deref(),
                t.amount.as_deref(),
                t.currency.as_deref()
            ),
            (
                "token [redacted]",
                Some(REDACTED),
                Some("49.00"),
                Some(REDACTED)
            )
        );
        let detail = Record::of(&command, "token").unwrap().detail;
        assert!(
            !detail.contains(TOKEN) && !detail.contains(SECRET),
            "{detail}"
        );
        let mut dismiss = Command::parse(
            "POST",
            "/deliveries/evt_1/dismiss",
            "",
            format!(r#"{{"reason":"{TOKEN}"}}"#).as_bytes(),
        )
        .unwrap();
        dismiss.redact(&[TOKEN]);
        assert_eq!(
            dismiss,
            Command::DismissDelivery {
                event_id: "evt_1".into(),
                reason: REDACTED.into()
            }
        );
        let effect = "eff_0123456789abcdef0123456789abcdef";
        let mut dismiss = Command::parse(
            "POST",
            &format!("/effects/{effect}/dismiss"),
            "",
            format!(r#"{{"reason":"handled; {SECRET}"}}"#).as_bytes(),
        )
        .unwrap();
        dismiss.redact(&[SECRET]);
        let Command::DismissEffect { reason, .. } = &dismiss else {
            panic!("{dismiss:?}")
        };
        assert_eq!(reason, "handled; [redacted]");
    }
}
