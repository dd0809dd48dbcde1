//! The sender's retry ladder (interface §2), used to size the sweeper and to
//! explain delivery timelines; the receiver never retries on the sender's behalf.

/// Offsets from the first attempt, in seconds, of the 11 attempts.
pub const ATTEMPT_OFFSETS_SECONDS: [u64; 11] =
    [0, 60, 180, 420, 900, 1800, 3600, 7200, 14400, 28800, 57600];

/// The sender gives up on an attempt after this long; the receiver must reply sooner.
pub const ATTEMPT_TIMEOUT_SECONDS: u64 = 10;

/// Number of attempts before the sender marks the event failed.
pub const MAX_ATTEMPTS: usize = ATTEMPT_OFFSETS_SECONDS.len();

/// Offset of attempt `attempt` (1-based, as in `X-Webhook-Attempt`); `None` outside 1..=11.
pub fn offset_of_attempt(attempt: usize) -> Option<u64> {
    attempt
        .checked_sub(1)
        .and_then(|i| ATTEMPT_OFFSETS_SECONDS.get(i).copied())
}

/// Longest delay the receiver's own queue consumer waits before retrying a delivery.
pub const MAX_CONSUMER_RETRY_DELAY_SECONDS: u32 = 15 * 60;

/// The receiver's own retry ladder for a delivery whose processing failed: `base` seconds
/// after the first failure, doubling with each further one, capped at 15 minutes.
pub fn consumer_retry_delay(base: u32, failures: i64) -> u32 {
    let exp = (failures.clamp(1, 16) - 1) as u32;
    base.saturating_mul(1u32 << exp)
        .min(MAX_CONSUMER_RETRY_DELAY_SECONDS)
}

/// The dispatcher's ladder for an effect the order system did not take (interface §7: retried
/// with growing delays for at least 16 hours, then dead): the delay after each failed attempt.
/// 12 retries, 16 h 18 min 40 s in all (58,720 s); each delay fits a queue's 12-hour delay limit.
pub const EFFECT_RETRY_DELAYS_SECONDS: [u32; 12] = [
    10, 30, 60, 120, 300, 600, 1200, 2400, 3600, 7200, 14400, 28800,
];

/// How long to wait after the `failed`-th failed attempt (1-based), `scale` compressing the
/// ladder (tests, demos; 1.0 in production); `None` once the ladder is spent: the effect is
/// dead.
pub fn effect_retry_delay(failed: u32, scale: f64) -> Option<u32> {
    let i = usize::try_from(failed.checked_sub(1)?).ok()?;
    let base = *EFFECT_RETRY_DELAYS_SECONDS.get(i)?;
    let scaled = (f64::from(base) * scale.clamp(0.0, 1.0)).round();
    Some(scaled as u32)
}

/// Longest wait between two looks of an effect waiting for an earlier one of its resource.
pub const MAX_WAIT_FOR_EARLIER_SECONDS: u32 = 3600;

/// When an effect that waits for an earlier effect of its resource (a revocation for its
/// fulfilment) is looked at again: a tenth of how long it has waited so far, at least the
/// ladder's first delay, at most an hour; `scale` as for the ladder. Waiting is not a failed
/// attempt: each look is a fresh queue message, so no number of looks makes it dead, and the
/// delay grows so that a wait of days (a dead fulfilment until an operator redelivers it)
/// costs a message an hour, not one every ten seconds.
pub fn wait_for_earlier_delay(waited_seconds: i64, scale: f64) -> u32 {
    let scale = scale.clamp(0.0, 1.0);
    let first = f64::from(EFFECT_RETRY_DELAYS_SECONDS[0]);
    let tenth = (waited_seconds.max(0) as f64) / 10.0;
    let delay = tenth.clamp(
        first * scale,
        f64::from(MAX_WAIT_FOR_EARLIER_SECONDS) * scale,
    );
    delay.round() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_for_an_earlier_effect_backs_off_to_an_hour() {
        assert_eq!(wait_for_earlier_delay(0, 1.0), 10);
        assert_eq!(
            wait_for_earlier_delay(-5, 1.0),
            10,
            "a clock skew is no wait"
        );
        assert_eq!(wait_for_earlier_delay(99, 1.0), 10);
        assert_eq!(wait_for_earlier_delay(600, 1.0), 60);
        assert_eq!(wait_for_earlier_delay(36_000, 1.0), 3600);
        assert_eq!(wait_for_earlier_delay(i64::MAX, 1.0), 3600);
        assert_eq!(wait_for_earlier_delay(36_000, 1.0 / 60.0), 60, "scaled");
        assert_eq!(wait_for_earlier_delay(0, 0.0), 0);
        assert_eq!(wait_for_earlier_delay(600, 7.0), 60, "never stretched");
    }

    #[test]
    fn effect_ladder_lasts_at_least_16_hours_then_ends() {
        let total: u32 = EFFECT_RETRY_DELAYS_SECONDS.iter().sum();
        assert!(total >= 16 * 3600, "{total}");
        assert!(
            EFFECT_RETRY_DELAYS_SECONDS.windows(2).all(|w| w[0] < w[1]),
            "growing"
        );
        assert!(EFFECT_RETRY_DELAYS_SECONDS.iter().all(|d| *d <= 12 * 3600));
        assert_eq!(effect_retry_delay(0, 1.0), None);
        assert_eq!(effect_retry_delay(1, 1.0), Some(10));
        assert_eq!(effect_retry_delay(12, 1.0), Some(28800));
        assert_eq!(effect_retry_delay(13, 1.0), None, "13 attempts, then dead");
        assert_eq!(effect_retry_delay(12, 0.001), Some(29));
        assert_eq!(effect_retry_delay(1, 0.0), Some(0));
        assert_eq!(effect_retry_delay(1, 7.0), Some(10), "never stretched");
    }

    #[test]
    fn consumer_retry_delay_doubles_and_is_capped() {
        assert_eq!(consumer_retry_delay(10, 1), 10);
        assert_eq!(consumer_retry_delay(10, 2), 20);
        assert_eq!(consumer_retry_delay(10, 3), 40);
        assert_eq!(consumer_retry_delay(10, 7), 640);
        assert_eq!(consumer_retry_delay(10, 8), 900);
        assert_eq!(consumer_retry_delay(10, i64::MAX), 900);
        assert_eq!(consumer_retry_delay(10, 0), 10);
        assert_eq!(consumer_retry_delay(0, 5), 0);
        assert_eq!(consumer_retry_delay(u32::MAX, 3), 900);
    }

    #[test]
    fn intervals_in_minutes() {
        let minutes: Vec<u64> = ATTEMPT_OFFSETS_SECONDS
            .windows(2)
            .map(|w| {
                assert_eq!((w[1] - w[0]) % 60, 0);
                (w[1] - w[0]) / 60
            })
            .collect();
        assert_eq!(minutes, [1, 2, 4, 8, 15, 30, 60, 120, 240, 480]);
    }

    #[test]
    fn offsets() {
        assert_eq!(MAX_ATTEMPTS, 11);
        assert_eq!(offset_of_attempt(0), None);
        assert_eq!(offset_of_attempt(1), Some(0));
        assert_eq!(offset_of_attempt(2), Some(60));
        assert_eq!(offset_of_attempt(4), Some(7 * 60));
        assert_eq!(offset_of_attempt(11), Some(16 * 3600));
        assert_eq!(offset_of_attempt(12), None);
        assert_eq!(offset_of_attempt(usize::MAX), None);
        assert_eq!(ATTEMPT_TIMEOUT_SECONDS, 10);
    }

    #[test]
    fn last_attempt_is_sixteen_hours_in() {
        assert_eq!(ATTEMPT_OFFSETS_SECONDS[10], 16 * 60 * 60);
        assert!(ATTEMPT_OFFSETS_SECONDS.windows(2).all(|w| w[0] < w[1]));
    }
}
