//! Random Paymos ids (`evt_…`, `inv_…`, …) from the operating system's RNG.

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Length of the random part: 20 base-62 characters, about 119 bits.
pub const RANDOM_LEN: usize = 20;

/// `len` random ASCII letters and digits (unbiased: bytes ≥ 248 are redrawn).
pub fn random_alphanumeric(len: usize) -> String {
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut buf).expect("the operating system's RNG is available");
        for &b in &buf {
            if out.len() == len {
                break;
            }
            if b < 248 {
                out.push(ALPHABET[(b % 62) as usize] as char);
            }
        }
    }
    out
}

/// `prefix` followed by [`RANDOM_LEN`] random letters and digits, e.g. `evt_9Kq2…`.
pub fn random_id(prefix: &str) -> String {
    format!("{prefix}{}", random_alphanumeric(RANDOM_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_valid_and_distinct() {
        let a = random_id("evt_");
        let b = random_id("evt_");
        assert_ne!(a, b);
        assert!(paymos_core::is_valid_event_id(&a));
        assert_eq!(a.len(), 4 + RANDOM_LEN);
        assert_eq!(
            paymos_core::resource_kind_of(&random_id("inv_")),
            Some(paymos_core::ResourceKind::Invoice)
        );
        assert_eq!(random_alphanumeric(200).len(), 200);
        assert!(random_alphanumeric(200)
            .bytes()
            .all(|b| b.is_ascii_alphanumeric()));
    }
}
