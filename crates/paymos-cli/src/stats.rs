//! Latency percentiles (nearest-rank) for the load generator and the check's evidence.

use serde::Serialize;

/// The `p`-th percentile (0 < p ≤ 100) of already **sorted** samples, by the nearest-rank
/// method: the smallest sample with at least `p`% of the samples at or below it. `None` for
/// no samples.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// p50/p90/p99/max in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl LatencySummary {
    /// Summarises samples in any order; `None` when there are none.
    pub fn from_samples(mut samples: Vec<f64>) -> Option<Self> {
        samples.retain(|x| x.is_finite());
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(|a, b| a.total_cmp(b));
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        Some(LatencySummary {
            count: samples.len(),
            p50: r(percentile(&samples, 50.0)?),
            p90: r(percentile(&samples, 90.0)?),
            p99: r(percentile(&samples, 99.0)?),
            max: r(*samples.last()?),
            mean: r(samples.iter().sum::<f64>() / samples.len() as f64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 90.0), Some(90.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.1), Some(1.0));
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), Some(2.0));
        assert_eq!(percentile(&v, 51.0), Some(3.0));
        assert_eq!(percentile(&v, 99.0), Some(4.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, 0.0), Some(1.0));
    }

    #[test]
    fn summary_sorts_and_ignores_nan() {
        let s = LatencySummary::from_samples(vec![5.0, 1.0, f64::NAN, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.count, 5);
        assert_eq!(
            (s.p50, s.p90, s.p99, s.max, s.mean),
            (3.0, 5.0, 5.0, 5.0, 3.0)
        );
        assert!(LatencySummary::from_samples(vec![]).is_none());
        // 1000 samples: p99 is the 990th.
        let s = LatencySummary::from_samples((1..=1000).rev().map(f64::from).collect()).unwrap();
        assert_eq!((s.p50, s.p90, s.p99, s.max), (500.0, 900.0, 990.0, 1000.0));
    }
}
