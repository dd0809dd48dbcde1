//! Numeric settings and settings that name one of a few choices (wrangler.toml vars,
//! `.dev.vars`). A value that does not parse, or lies outside what the setting can mean, is
//! never used silently: the value used instead and why
//! are said (interface §4: "says so … instead of failing silently"). A tolerance of `-5` used
//! as given would refuse every delivery with 401, which the sender reads as a bad signature.

use std::fmt::Display;
use std::str::FromStr;

/// What a value outside `min..=max` becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outside {
    /// the default: the value is not what the operator meant (a negative tolerance)
    Default,
    /// the nearest bound: the operator asked for more (or less) than can be done
    Nearest,
}

/// One numeric setting: its name, default and the values it may take.
#[derive(Debug, Clone, Copy)]
pub struct Numeric<T> {
    pub name: &'static str,
    pub default: T,
    pub min: T,
    pub max: T,
    pub outside: Outside,
}

/// A setting as read: the value to use, and why it is not the one given, if it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Read<T> {
    pub value: T,
    pub warning: Option<String>,
}

impl<T: FromStr + PartialOrd + Copy + Display> Numeric<T> {
    /// `raw` is the binding's text; unset or blank means the default, said nowhere.
    pub fn read(&self, raw: Option<&str>) -> Read<T> {
        let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
            return Read {
                value: self.default,
                warning: None,
            };
        };
        // a var, not a secret: quoted in the warning, cut short
        let shown: String = raw.chars().take(40).collect();
        // a negative integer is a number below an unsigned setting's range, not "not a number"
        let negative = raw
            .strip_prefix('-')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        match raw.parse::<T>().map_err(|_| negative) {
            // NaN fails both comparisons, so it is outside
            Ok(v) if v >= self.min && v <= self.max => Read {
                value: v,
                warning: None,
            },
            Ok(v) => self.outside(&shown, v < self.min),
            Err(true) => self.outside(&shown, true),
            Err(false) => Read {
                value: self.default,
                warning: Some(format!(
                    "{} is {shown:?}, which cannot be read as a number: the default {} is used",
                    self.name, self.default
                )),
            },
        }
    }

    /// A value outside the range (`below` it, or above): the default or the nearest bound,
    /// as the setting says, and said.
    fn outside(&self, shown: &str, below: bool) -> Read<T> {
        let value = match self.outside {
            Outside::Default => self.default,
            Outside::Nearest if below => self.min,
            Outside::Nearest => self.max,
        };
        Read {
            value,
            warning: Some(format!(
                "{} is {shown:?}, outside {} to {}: {value} is used",
                self.name, self.min, self.max
            )),
        }
    }
}

/// A setting that is one of a few words (`RECEIVE_LOG = "all"`): its name, its default and
/// every word it takes, each with the value it means.
#[derive(Debug, Clone, Copy)]
pub struct Choice<T: 'static> {
    pub name: &'static str,
    pub default: T,
    pub choices: &'static [(&'static str, T)],
}

impl<T: Copy + PartialEq> Choice<T> {
    /// `raw` is the binding's text, trimmed and matched exactly (as `PAYMOS_MODE` is); unset or
    /// blank means the default, said nowhere. Any other word is the default, and said: a value
    /// the Worker cannot read must not stop it from doing its work.
    pub fn read(&self, raw: Option<&str>) -> Read<T> {
        let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
            return Read {
                value: self.default,
                warning: None,
            };
        };
        if let Some((_, value)) = self.choices.iter().find(|(word, _)| *word == raw) {
            return Read {
                value: *value,
                warning: None,
            };
        }
        let shown: String = raw.chars().take(40).collect();
        let words: Vec<&str> = self.choices.iter().map(|(word, _)| *word).collect();
        let default = self
            .choices
            .iter()
            .find(|(_, value)| *value == self.default)
            .map_or("", |(word, _)| *word);
        Read {
            value: self.default,
            warning: Some(format!(
                "{} is {shown:?}, which is not one of {}: the default {default} is used",
                self.name,
                words.join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOLERANCE: Numeric<i64> = Numeric {
        name: "PAYMOS_SIGNATURE_TOLERANCE_SECONDS",
        default: 300,
        min: 1,
        max: i64::MAX,
        outside: Outside::Default,
    };
    const TIMEOUT: Numeric<u64> = Numeric {
        name: "ORDER_SYSTEM_TIMEOUT_MS",
        default: 10_000,
        min: 100,
        max: 60_000,
        outside: Outside::Nearest,
    };
    const SCALE: Numeric<f64> = Numeric {
        name: "EFFECT_RETRY_SCALE",
        default: 1.0,
        min: f64::MIN_POSITIVE,
        max: 1e6,
        outside: Outside::Default,
    };

    #[test]
    fn unset_or_blank_is_the_default_without_a_word() {
        for raw in [None, Some(""), Some("  ")] {
            assert_eq!(
                TOLERANCE.read(raw),
                Read {
                    value: 300,
                    warning: None
                }
            );
        }
    }

    #[test]
    fn a_value_in_range_is_used_as_given() {
        assert_eq!(TOLERANCE.read(Some(" 60 ")).value, 60);
        assert_eq!(TOLERANCE.read(Some("1")).warning, None);
        assert_eq!(TIMEOUT.read(Some("60000")).value, 60_000);
        assert_eq!(SCALE.read(Some("0.0001")).value, 0.0001);
    }

    #[test]
    fn not_a_number_is_the_default_and_said() {
        let r = TOLERANCE.read(Some("abc"));
        assert_eq!(r.value, 300);
        assert_eq!(
            r.warning.as_deref(),
            Some(
                r#"PAYMOS_SIGNATURE_TOLERANCE_SECONDS is "abc", which cannot be read as a number: the default 300 is used"#
            )
        );
        assert_eq!(TOLERANCE.read(Some("300s")).value, 300);
        assert!(TOLERANCE.read(Some("300s")).warning.is_some());
    }

    #[test]
    fn outside_is_the_default_or_the_nearest_bound_and_said() {
        for raw in ["-5", "0"] {
            let r = TOLERANCE.read(Some(raw));
            assert_eq!(r.value, 300, "{raw}");
            let w = r.warning.unwrap();
            assert!(
                w.contains("outside 1 to 9223372036854775807: 300 is used"),
                "{w}"
            );
        }
        let r = TIMEOUT.read(Some("5"));
        assert_eq!(r.value, 100);
        assert!(r.warning.unwrap().ends_with("100 is used"));
        assert_eq!(TIMEOUT.read(Some("999999")).value, 60_000);
        // a negative integer is below an unsigned setting's range, not "not a number"
        let r = TIMEOUT.read(Some("-1"));
        assert_eq!(r.value, 100);
        assert!(r
            .warning
            .unwrap()
            .ends_with("outside 100 to 60000: 100 is used"));
        assert!(TIMEOUT
            .read(Some("-1.5"))
            .warning
            .unwrap()
            .contains("cannot be read"));
        assert!(TIMEOUT
            .read(Some("-"))
            .warning
            .unwrap()
            .contains("cannot be read"));
        for raw in ["0", "-1", "NaN", "inf"] {
            let r = SCALE.read(Some(raw));
            assert_eq!(r.value, 1.0, "{raw}");
            assert!(r.warning.is_some(), "{raw}");
        }
    }

    #[test]
    fn a_long_value_is_quoted_short() {
        // beyond i64: it does not parse
        let r = TOLERANCE.read(Some(&"9".repeat(500)));
        assert_eq!(r.value, 300);
        assert!(r.warning.unwrap().len() < 150);
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Level {
        Loud,
        Quiet,
    }
    const LEVEL: Choice<Level> = Choice {
        name: "LEVEL",
        default: Level::Loud,
        choices: &[("loud", Level::Loud), ("quiet", Level::Quiet)],
    };

    #[test]
    fn a_choice_unset_or_blank_is_the_default_without_a_word() {
        for raw in [None, Some(""), Some(" \t ")] {
            assert_eq!(
                LEVEL.read(raw),
                Read {
                    value: Level::Loud,
                    warning: None
                }
            );
        }
    }

    #[test]
    fn a_choice_named_is_used_trimmed() {
        for (raw, want) in [
            ("quiet", Level::Quiet),
            (" quiet\n", Level::Quiet),
            ("loud", Level::Loud),
        ] {
            assert_eq!(
                LEVEL.read(Some(raw)),
                Read {
                    value: want,
                    warning: None
                },
                "{raw:?}"
            );
        }
    }

    #[test]
    fn any_other_word_is_the_default_and_said() {
        let r = LEVEL.read(Some("QUIET"));
        assert_eq!(r.value, Level::Loud);
        assert_eq!(
            r.warning.as_deref(),
            Some(r#"LEVEL is "QUIET", which is not one of loud, quiet: the default loud is used"#)
        );
        for raw in ["quiet please", "1", "q"] {
            let r = LEVEL.read(Some(raw));
            assert_eq!(r.value, Level::Loud, "{raw}");
            assert!(r.warning.is_some(), "{raw}");
        }
        let long = LEVEL.read(Some(&"x".repeat(500)));
        assert!(long.warning.unwrap().len() < 150);
    }
}
