//! The team's signing keys as a Worker isolate holds them (interface §11): for a token's
//! `kid` at `now`, whether to use a key held, wait for another request's fetch, fetch, or
//! refuse. The Worker makes the fetch and imports the keys (`src/access.rs`); the rules are
//! here, with `now` as a parameter, so that the hour a key is trusted can be tested.
//!
//! - The first fetch is at once. Any other, for a `kid` not held or after a failed fetch, is
//!   at most once a minute ([`REFETCH_INTERVAL_MS`]): a flood of tokens with made-up kids, or
//!   a team domain that is down, costs one fetch a minute.
//! - Keys older than an hour ([`MAX_AGE_MS`]) are fetched again when next used (a key the
//!   team removed stops being trusted); a failed refresh keeps the keys already held, and
//!   they are used until the next fetch may start.
//! - While a fetch is under way, other requests wait for it rather than start another, up to
//!   the fetch's timeout and a second (a fetch whose isolate lost it is not waited for ever).
//! - Keys for another team domain are forgotten.

use super::AccessError;

/// A fetch of the certs document gives up after this long.
pub const FETCH_TIMEOUT_MS: u64 = 5_000;
/// At most one fetch per this long after the last one, for an unknown `kid` or after a
/// failure; the first fetch is at once.
pub const REFETCH_INTERVAL_MS: u64 = 60_000;
/// Keys older than this are fetched again when next used (the old ones kept if that fails).
pub const MAX_AGE_MS: u64 = 3_600_000;
/// A fetch started longer ago than this is not waited for: its request is gone.
pub const FETCH_HELD_MS: u64 = FETCH_TIMEOUT_MS + 1_000;

/// The keys held for one team domain, `K` being what the Worker verifies with (a WebCrypto
/// `CryptoKey`).
#[derive(Debug, Clone)]
pub struct KeyCache<K> {
    /// the team domain the keys are for
    domain: String,
    /// `(kid, key)`
    keys: Vec<(String, K)>,
    /// when the keys were fetched (ms), `None` before the first successful fetch
    loaded_at: Option<u64>,
    /// when the last fetch started, successful or not
    last_fetch: Option<u64>,
    /// a fetch under way since (ms)
    fetching_since: Option<u64>,
    last_error: Option<String>,
}

impl<K> Default for KeyCache<K> {
    fn default() -> Self {
        KeyCache {
            domain: String::new(),
            keys: Vec::new(),
            loaded_at: None,
            last_fetch: None,
            fetching_since: None,
            last_error: None,
        }
    }
}

/// What a request does next for its token's `kid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<K> {
    Use(K),
    Refuse(AccessError),
    /// another request's fetch is under way: look again shortly
    Wait,
    /// fetch the keys, then [`KeyCache::settle`]
    Fetch,
}

impl<K: Clone> KeyCache<K> {
    /// The next step for `kid` under `team_domain` at `now` (ms). `Fetch` counts as the fetch
    /// started: its caller must [`settle`](Self::settle) it.
    pub fn step(&mut self, team_domain: &str, kid: &str, now: u64) -> Step<K> {
        if self.domain != team_domain {
            *self = KeyCache {
                domain: team_domain.to_string(),
                ..KeyCache::default()
            };
        }
        let known = self.key(kid);
        let fresh = self
            .loaded_at
            .is_some_and(|t| now.saturating_sub(t) < MAX_AGE_MS);
        if let (Some(key), true) = (&known, fresh) {
            return Step::Use(key.clone());
        }
        if self
            .fetching_since
            .is_some_and(|t| now.saturating_sub(t) < FETCH_HELD_MS)
        {
            return Step::Wait;
        }
        let may_fetch = self
            .last_fetch
            .is_none_or(|t| now.saturating_sub(t) >= REFETCH_INTERVAL_MS);
        if !may_fetch {
            return match known {
                Some(key) => Step::Use(key),
                None => Step::Refuse(self.without(kid)),
            };
        }
        self.fetching_since = Some(now);
        self.last_fetch = Some(now);
        Step::Fetch
    }

    /// A fetch's outcome at `now`: the keys replace those held, or, when it failed, those held
    /// stay. Then `kid`'s key, or the refusal.
    pub fn settle(
        &mut self,
        fetched: Result<Vec<(String, K)>, String>,
        kid: &str,
        now: u64,
    ) -> Result<K, AccessError> {
        self.fetching_since = None;
        match fetched {
            Ok(keys) => {
                self.keys = keys;
                self.loaded_at = Some(now);
                self.last_error = None;
            }
            Err(e) => self.last_error = Some(e),
        }
        self.key(kid).ok_or_else(|| self.without(kid))
    }

    fn key(&self, kid: &str) -> Option<K> {
        self.keys
            .iter()
            .find(|(k, _)| k == kid)
            .map(|(_, key)| key.clone())
    }

    /// The refusal when the keys do not hold `kid` and may not be fetched now.
    fn without(&self, kid: &str) -> AccessError {
        if self.loaded_at.is_none() {
            AccessError::KeysUnavailable(
                self.last_error
                    .clone()
                    .unwrap_or_else(|| "not fetched yet".into()),
            )
        } else {
            AccessError::key_unknown(kid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEAM: &str = "https://team.cloudflareaccess.com";

    fn fetched(kids: &[&str]) -> Result<Vec<(String, u32)>, String> {
        Ok(kids
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), i as u32))
            .collect())
    }

    /// A cache that fetched `kids` at `at`.
    fn loaded(kids: &[&str], at: u64) -> KeyCache<u32> {
        let mut c = KeyCache::default();
        assert_eq!(
            c.step(TEAM, "a", at),
            Step::Fetch,
            "the first fetch is at once"
        );
        c.settle(fetched(kids), "a", at).ok();
        c
    }

    #[test]
    fn a_held_key_is_used_for_an_hour_then_fetched_again() {
        let mut c = loaded(&["a", "b"], 1_000);
        assert_eq!(c.step(TEAM, "b", 1_000 + MAX_AGE_MS - 1), Step::Use(1));
        assert_eq!(c.step(TEAM, "b", 1_000 + MAX_AGE_MS), Step::Fetch);
        // the team removed "b": it stops being trusted
        assert!(matches!(
            c.settle(fetched(&["a"]), "b", 1_000 + MAX_AGE_MS),
            Err(AccessError::KeyUnknown(_))
        ));
        assert_eq!(c.step(TEAM, "a", 1_000 + MAX_AGE_MS + 1), Step::Use(0));
    }

    #[test]
    fn an_unknown_kid_fetches_at_most_once_a_minute() {
        let mut c = loaded(&["a"], 0);
        assert!(matches!(
            c.step(TEAM, "new", 1),
            Step::Refuse(AccessError::KeyUnknown(_))
        ));
        let minute = REFETCH_INTERVAL_MS;
        assert!(matches!(c.step(TEAM, "new", minute - 1), Step::Refuse(_)));
        assert_eq!(c.step(TEAM, "new", minute), Step::Fetch);
        assert_eq!(c.settle(fetched(&["a", "new"]), "new", minute), Ok(1));
        // the next unknown kid waits for the next minute again
        assert!(matches!(c.step(TEAM, "other", minute + 1), Step::Refuse(_)));
    }

    #[test]
    fn a_failed_refresh_keeps_the_keys_held_until_the_next_fetch_may_start() {
        let mut c = loaded(&["a"], 0);
        assert_eq!(c.step(TEAM, "a", MAX_AGE_MS), Step::Fetch);
        assert_eq!(c.settle(Err("down".into()), "a", MAX_AGE_MS + 5), Ok(0));
        // stale now, and no fetch allowed within the minute: the held key serves
        assert_eq!(c.step(TEAM, "a", MAX_AGE_MS + 10), Step::Use(0));
        assert!(matches!(
            c.step(TEAM, "z", MAX_AGE_MS + 10),
            Step::Refuse(AccessError::KeyUnknown(_))
        ));
        assert_eq!(
            c.step(TEAM, "a", MAX_AGE_MS + REFETCH_INTERVAL_MS),
            Step::Fetch
        );
    }

    #[test]
    fn keys_never_read_refuse_with_the_fetch_error_and_retry_after_a_minute() {
        let mut c: KeyCache<u32> = KeyCache::default();
        assert_eq!(c.step(TEAM, "a", 0), Step::Fetch);
        let e = c.settle(Err("timed out".into()), "a", 5_000).unwrap_err();
        assert_eq!(e, AccessError::KeysUnavailable("timed out".into()));
        assert_eq!(c.step(TEAM, "a", 5_001), Step::Refuse(e));
        assert_eq!(c.step(TEAM, "a", REFETCH_INTERVAL_MS), Step::Fetch);
    }

    #[test]
    fn requests_wait_for_a_fetch_under_way_but_not_for_a_lost_one() {
        let mut c: KeyCache<u32> = KeyCache::default();
        assert_eq!(c.step(TEAM, "a", 0), Step::Fetch);
        assert_eq!(c.step(TEAM, "a", FETCH_HELD_MS - 1), Step::Wait);
        // its request never settled it (the isolate's request was cancelled); a minute has
        // not passed, so nothing may fetch: refused as never read
        assert!(matches!(
            c.step(TEAM, "a", FETCH_HELD_MS),
            Step::Refuse(AccessError::KeysUnavailable(_))
        ));
        assert_eq!(c.step(TEAM, "a", REFETCH_INTERVAL_MS), Step::Fetch);
    }

    #[test]
    fn another_team_domain_forgets_the_keys() {
        let mut c = loaded(&["a"], 0);
        assert_eq!(
            c.step("https://other.cloudflareaccess.com", "a", 1),
            Step::Fetch
        );
        assert_eq!(
            c.step(TEAM, "a", 2),
            Step::Fetch,
            "and back: nothing held for it either"
        );
    }
}
