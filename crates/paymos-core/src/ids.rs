//! Paymos identifiers: `evt_` delivery ids and `inv_`/`wdr_`/`pcd_` resource ids.
//!
//! Every id is a prefix followed by 1 to 64 ASCII letters or digits (interface §1);
//! anything else is malformed.

use serde::Serialize;

/// Longest allowed id body (after the prefix).
const MAX_ID_BODY: usize = 64;

/// The three kinds of resource a Paymos event can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    Invoice,
    Withdrawal,
    Deposit,
}

impl ResourceKind {
    pub const ALL: [ResourceKind; 3] = [
        ResourceKind::Invoice,
        ResourceKind::Withdrawal,
        ResourceKind::Deposit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Invoice => "invoice",
            ResourceKind::Withdrawal => "withdrawal",
            ResourceKind::Deposit => "deposit",
        }
    }

    /// Id prefix of this kind's resources.
    pub fn prefix(self) -> &'static str {
        match self {
            ResourceKind::Invoice => "inv_",
            ResourceKind::Withdrawal => "wdr_",
            ResourceKind::Deposit => "pcd_",
        }
    }

    /// Maps an event category (the part of `type` before the dot) to its resource kind.
    pub fn from_category(category: &str) -> Option<Self> {
        Self::from_str_name(category)
    }

    /// Inverse of [`ResourceKind::as_str`] (e.g. for a stored `kind` column).
    pub fn from_str_name(name: &str) -> Option<Self> {
        match name {
            "invoice" => Some(ResourceKind::Invoice),
            "withdrawal" => Some(ResourceKind::Withdrawal),
            "deposit" => Some(ResourceKind::Deposit),
            _ => None,
        }
    }
}

/// True when `s` is `prefix` followed by 1..=64 ASCII alphanumerics.
fn has_valid_body(s: &str, prefix: &str) -> bool {
    match s.strip_prefix(prefix) {
        Some(rest) => {
            !rest.is_empty()
                && rest.len() <= MAX_ID_BODY
                && rest.bytes().all(|b| b.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// `evt_` + 1..=64 ASCII letters/digits.
pub fn is_valid_event_id(s: &str) -> bool {
    has_valid_body(s, "evt_")
}

/// The resource kind named by a well-formed resource id, or `None` if malformed.
pub fn resource_kind_of(id: &str) -> Option<ResourceKind> {
    ResourceKind::ALL
        .into_iter()
        .find(|k| has_valid_body(id, k.prefix()))
}

/// Whether a provider listing that returned `last` after the cursor `cursor` moved forward
/// (interface §6: a page whose last id is not after `starting_after` ends the walk). "After"
/// in byte order, or in natural order (runs of digits compared as numbers: `inv_100` after
/// `inv_99`), so that a listing ordered by an unpadded counter is not mistaken for a stuck
/// one; a page that repeats its cursor, or lists ids before it in both orders, is stuck.
pub fn listed_after(last: &str, cursor: &str) -> bool {
    last > cursor || natural_cmp(last, cursor) == std::cmp::Ordering::Greater
}

/// Compares runs of ASCII digits by their numeric value (leading zeros aside), everything else
/// byte by byte.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let run = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (run(a), run(b));
                // the digits without leading zeros: longer is larger, else digit by digit
                let zeros = |s: &[u8]| -> usize { s.iter().take_while(|c| **c == b'0').count() };
                let (da, db) = (&a[zeros(&a[..na])..na], &b[zeros(&b[..nb])..nb]);
                let by_value = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
                if by_value != Ordering::Equal {
                    return by_value;
                }
                (a, b) = (&a[na..], &b[nb..]);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                (a, b) = (&a[1..], &b[1..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_after_in_byte_or_natural_order() {
        // byte order: sorted random ids
        assert!(listed_after("inv_b7", "inv_a9"));
        assert!(listed_after("inv_10a", "inv_0ff"));
        // natural order: an unpadded counter
        assert!(listed_after("inv_100", "inv_99"));
        assert!(listed_after("inv_1000", "inv_999"));
        assert!(listed_after("inv_0100", "inv_99"));
        // stuck: the same id, or before it in both orders
        assert!(!listed_after("inv_99", "inv_99"));
        assert!(!listed_after("inv_007", "inv_7"));
        assert!(!listed_after("inv_a1", "inv_b1"));
        assert!(!listed_after("inv_5", "inv_50"));
        assert!(!listed_after("inv_", "inv_1"));
    }

    #[test]
    fn kind_names_and_prefixes() {
        assert_eq!(ResourceKind::Invoice.as_str(), "invoice");
        assert_eq!(ResourceKind::Withdrawal.as_str(), "withdrawal");
        assert_eq!(ResourceKind::Deposit.as_str(), "deposit");
        assert_eq!(ResourceKind::Invoice.prefix(), "inv_");
        assert_eq!(ResourceKind::Withdrawal.prefix(), "wdr_");
        assert_eq!(ResourceKind::Deposit.prefix(), "pcd_");
    }

    #[test]
    fn kind_round_trips() {
        for k in ResourceKind::ALL {
            assert_eq!(ResourceKind::from_category(k.as_str()), Some(k));
            assert_eq!(ResourceKind::from_str_name(k.as_str()), Some(k));
        }
        for bad in ["", "Invoice", "invoices", "inv", "payout", " invoice"] {
            assert_eq!(ResourceKind::from_category(bad), None, "{bad:?}");
            assert_eq!(ResourceKind::from_str_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn kind_serializes_lowercase() {
        assert_eq!(
            serde_json::to_string(&ResourceKind::Withdrawal).unwrap(),
            "\"withdrawal\""
        );
        assert_eq!(
            serde_json::to_string(&ResourceKind::ALL).unwrap(),
            r#"["invoice","withdrawal","deposit"]"#
        );
    }

    #[test]
    fn event_ids() {
        assert!(is_valid_event_id("evt_9Kq2xT4mLp"));
        assert!(is_valid_event_id("evt_a"));
        assert!(is_valid_event_id(&format!("evt_{}", "Z".repeat(64))));
        assert!(!is_valid_event_id(&format!("evt_{}", "Z".repeat(65))));
        for bad in [
            "",
            "evt_",
            "evt",
            "evt_ab-c",
            "evt_ab_c",
            "evt_ab c",
            "EVT_abc",
            "inv_abc",
            " evt_abc",
            "evt_abc\n",
            "evt_é",
            "evt_abc\0",
        ] {
            assert!(!is_valid_event_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn resource_ids() {
        assert_eq!(resource_kind_of("inv_7Hc3pQ"), Some(ResourceKind::Invoice));
        assert_eq!(resource_kind_of("wdr_1"), Some(ResourceKind::Withdrawal));
        assert_eq!(resource_kind_of("pcd_X9"), Some(ResourceKind::Deposit));
        assert_eq!(
            resource_kind_of(&format!("inv_{}", "a".repeat(64))),
            Some(ResourceKind::Invoice)
        );
        assert_eq!(resource_kind_of(&format!("inv_{}", "a".repeat(65))), None);
        for bad in [
            "", "inv_", "inv", "evt_abc", "INV_abc", "inv_a-b", "inv_a.b", "xyz_abc", "inv_ä",
            "wdr_ ", "pcd__x",
        ] {
            assert_eq!(resource_kind_of(bad), None, "{bad:?}");
        }
    }
}
