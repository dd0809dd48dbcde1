//! Human-readable license codes for fulfilments.
//!
//! The caller draws the 16 random bytes (from `getrandom` in the worker); this
//! crate stays deterministic and free of RNG dependencies.

/// Crockford base32: no I, L, O, U, so codes survive being read aloud or retyped.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Encoded characters (130 bits ≥ 128) before grouping.
const CHARS: usize = 26;
const GROUP: usize = 5;

/// Length of a formatted code: 26 characters plus 5 dashes.
pub const LICENSE_CODE_LEN: usize = CHARS + (CHARS - 1) / GROUP;

/// 128 bits as 26 Crockford base32 characters (most significant first, so the
/// first character only carries 3 bits: `0`..`7`), dashed every 5:
/// `XXXXX-XXXXX-XXXXX-XXXXX-XXXXX-X`.
pub fn license_code(random: [u8; 16]) -> String {
    let n = u128::from_be_bytes(random);
    let mut out = String::with_capacity(LICENSE_CODE_LEN);
    for i in 0..CHARS {
        if i > 0 && i % GROUP == 0 {
            out.push('-');
        }
        let shift = 5 * (CHARS - 1 - i);
        out.push(ALPHABET[((n >> shift) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(code: &str) -> u128 {
        code.chars().filter(|c| *c != '-').fold(0u128, |acc, c| {
            let v = ALPHABET.iter().position(|&a| a as char == c).unwrap() as u128;
            (acc << 5) | v
        })
    }

    /// Deterministic pseudo-random bytes for tests (splitmix64).
    fn bytes(seed: u64) -> [u8; 16] {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&next().to_be_bytes());
        b[8..].copy_from_slice(&next().to_be_bytes());
        b
    }

    #[test]
    fn known_values() {
        assert_eq!(license_code([0; 16]), "00000-00000-00000-00000-00000-0");
        assert_eq!(license_code([0xff; 16]), "7ZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-Z");
        let mut one = [0u8; 16];
        one[15] = 1;
        assert_eq!(license_code(one), "00000-00000-00000-00000-00000-1");
        one[15] = 32;
        assert_eq!(license_code(one), "00000-00000-00000-00000-00001-0");
        let mut top = [0u8; 16];
        top[0] = 0x80;
        assert_eq!(license_code(top), "40000-00000-00000-00000-00000-0");
    }

    #[test]
    fn deterministic() {
        for s in 0..50 {
            assert_eq!(license_code(bytes(s)), license_code(bytes(s)));
        }
    }

    #[test]
    fn shape_and_alphabet() {
        for s in 0..500 {
            let c = license_code(bytes(s));
            assert_eq!(c.len(), LICENSE_CODE_LEN);
            assert_eq!(LICENSE_CODE_LEN, 31);
            let groups: Vec<&str> = c.split('-').collect();
            assert_eq!(
                groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
                [5, 5, 5, 5, 5, 1]
            );
            for ch in c.chars().filter(|c| *c != '-') {
                assert!(ALPHABET.contains(&(ch as u8)), "{ch}");
                assert!(!"ILOU".contains(ch));
            }
        }
    }

    #[test]
    fn lossless_so_distinct_inputs_give_distinct_codes() {
        let mut seen = std::collections::HashSet::new();
        for s in 0..2000 {
            let b = bytes(s);
            let c = license_code(b);
            assert_eq!(decode(&c), u128::from_be_bytes(b), "round trip");
            assert!(seen.insert(c));
        }
        // Single-bit differences are visible too.
        for bit in 0..128 {
            let b = (1u128 << bit).to_be_bytes();
            assert_ne!(license_code(b), license_code([0; 16]));
            assert_eq!(decode(&license_code(b)), 1u128 << bit);
        }
    }
}
