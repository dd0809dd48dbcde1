//! The provider's retry ladder (interface §2) scaled down for demos and tests:
//! `--time-scale 3600` turns the 16 h ladder into 16 s.

use std::time::Duration;

use paymos_core::{ATTEMPT_OFFSETS_SECONDS, ATTEMPT_TIMEOUT_SECONDS};

use crate::error::CliError;

/// The per-attempt timeout never drops below this, whatever the scale.
pub const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

/// A ladder: when each attempt starts (from the first) and how long each may take.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub offsets: Vec<Duration>,
    pub timeout: Duration,
}

/// Checks `--time-scale`: a finite number ≥ 1 (1 is real time).
pub fn validate_scale(scale: f64) -> Result<f64, CliError> {
    if scale.is_finite() && scale >= 1.0 {
        Ok(scale)
    } else {
        Err(CliError::usage(format!(
            "--time-scale {scale} must be a number ≥ 1 (1 = real time, 3600 = an hour per second)"
        )))
    }
}

/// The contract's ladder divided by `scale`; `ladder = false` is a single attempt.
pub fn schedule(scale: f64, ladder: bool) -> Schedule {
    let n = if ladder {
        ATTEMPT_OFFSETS_SECONDS.len()
    } else {
        1
    };
    let offsets = ATTEMPT_OFFSETS_SECONDS[..n]
        .iter()
        .map(|&s| Duration::from_secs_f64(s as f64 / scale))
        .collect();
    let timeout =
        Duration::from_secs_f64(ATTEMPT_TIMEOUT_SECONDS as f64 / scale).max(MIN_ATTEMPT_TIMEOUT);
    Schedule { offsets, timeout }
}

/// Human form of a duration: `0s`, `1.5s`, `3m`, `16h`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && (s % 3600.0).abs() < 1e-9 {
        format!("{}h", s as u64 / 3600)
    } else if s >= 60.0 && (s % 60.0).abs() < 1e-9 {
        format!("{}m", s as u64 / 60)
    } else if (s - s.round()).abs() < 1e-9 {
        format!("{}s", s.round() as u64)
    } else {
        format!("{s:.2}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_time_is_the_contract() {
        let s = schedule(1.0, true);
        assert_eq!(s.offsets.len(), 11);
        assert_eq!(s.offsets[1], Duration::from_secs(60));
        assert_eq!(s.offsets[10], Duration::from_secs(16 * 3600));
        assert_eq!(s.timeout, Duration::from_secs(10));
        let labels: Vec<String> = s.offsets.iter().map(|d| human(*d)).collect();
        assert_eq!(
            labels,
            ["0s", "1m", "3m", "7m", "15m", "30m", "1h", "2h", "4h", "8h", "16h"]
        );
    }

    #[test]
    fn scaled_by_3600() {
        let s = schedule(3600.0, true);
        let secs: Vec<f64> = s.offsets.iter().map(|d| d.as_secs_f64()).collect();
        let want = [
            0.0,
            60.0 / 3600.0,
            0.05,
            420.0 / 3600.0,
            0.25,
            0.5,
            1.0,
            2.0,
            4.0,
            8.0,
            16.0,
        ];
        for (g, w) in secs.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{secs:?}");
        }
        // 10 s / 3600 would be 2.8 ms: the floor is 1 s.
        assert_eq!(s.timeout, Duration::from_secs(1));
    }

    #[test]
    fn timeout_scales_until_the_floor() {
        assert_eq!(schedule(2.0, true).timeout, Duration::from_secs(5));
        assert_eq!(schedule(4.0, true).timeout, Duration::from_millis(2500));
        assert_eq!(schedule(10.0, true).timeout, Duration::from_secs(1));
        assert_eq!(schedule(100.0, true).timeout, Duration::from_secs(1));
    }

    #[test]
    fn single_attempt_without_ladder() {
        let s = schedule(3600.0, false);
        assert_eq!(s.offsets, vec![Duration::ZERO]);
    }

    #[test]
    fn scale_validation() {
        assert!(validate_scale(1.0).is_ok());
        assert!(validate_scale(3600.0).is_ok());
        for bad in [0.0, 0.5, -1.0, f64::NAN, f64::INFINITY] {
            assert!(validate_scale(bad).is_err(), "{bad}");
        }
        assert_eq!(human(Duration::from_millis(16_667)), "16.67s");
    }
}
