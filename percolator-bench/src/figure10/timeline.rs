//! Throughput over time and what each fault did to it.
//!
//! Workers print cumulative `progress: processed=N` lines; the loader counts its own
//! acknowledgements. Both become per-bucket rates on the harness's clock. For each fault the
//! [`Dip`] says how far throughput fell and how long until it was back: the *baseline* is the
//! mean rate over the stretch before the fault; throughput has *recovered* at the start of the
//! first two consecutive buckets at or above [`RECOVERED`] of the baseline, and the dip is the
//! time from the fault to then (zero when no bucket fell below that level right after the fault).

use std::time::{Duration, Instant};

use serde::Serialize;

/// The share of the pre-fault baseline that counts as recovered.
pub const RECOVERED: f64 = 0.8;

/// Cumulative samples of one process incarnation: `(when, count so far)`.
pub type Samples = Vec<(Instant, u64)>;

/// Per-bucket rates (events per second) from several incarnations' cumulative samples: each
/// increase between consecutive samples of one incarnation lands in the bucket of the later
/// sample; a process's first sample counts from zero.
pub fn rates_from_cumulative(
    incarnations: &[Samples],
    origin: Instant,
    bucket: Duration,
    buckets: usize,
) -> Vec<f64> {
    let mut counts = vec![0u64; buckets];
    for samples in incarnations {
        let mut previous = 0u64;
        for &(at, total) in samples {
            if let Some(slot) = bucket_of(at, origin, bucket, buckets) {
                counts[slot] += total.saturating_sub(previous);
            }
            previous = previous.max(total);
        }
    }
    to_rates(&counts, bucket)
}

/// Per-bucket rates from individual event times.
pub fn rates_from_events(
    events: &[Instant],
    origin: Instant,
    bucket: Duration,
    buckets: usize,
) -> Vec<f64> {
    let mut counts = vec![0u64; buckets];
    for &at in events {
        if let Some(slot) = bucket_of(at, origin, bucket, buckets) {
            counts[slot] += 1;
        }
    }
    to_rates(&counts, bucket)
}

fn bucket_of(at: Instant, origin: Instant, bucket: Duration, buckets: usize) -> Option<usize> {
    let offset = at.checked_duration_since(origin)?;
    let slot = (offset.as_secs_f64() / bucket.as_secs_f64()) as usize;
    (slot < buckets).then_some(slot)
}

fn to_rates(counts: &[u64], bucket: Duration) -> Vec<f64> {
    let secs = bucket.as_secs_f64().max(1e-9);
    counts.iter().map(|&c| c as f64 / secs).collect()
}

/// What one fault did to a rate series.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dip {
    /// Mean rate over the stretch before the fault (events/s).
    pub baseline: f64,
    /// The lowest bucket from the fault until recovery, as a share of the baseline.
    pub lowest_share: f64,
    /// Seconds from the fault until throughput was back at [`RECOVERED`] of the baseline (0 when
    /// it never fell below); `None` when it had not recovered by the end of the window.
    pub recovered_after_secs: Option<f64>,
    /// Events short of the baseline between the fault and recovery (the work the fault cost).
    pub shortfall: f64,
}

/// The dip in `rates` after a fault at `fault_secs`, with the baseline taken over the
/// `baseline_secs` before it and recovery sought until `until_secs`.
pub fn dip(
    rates: &[f64],
    bucket: Duration,
    fault_secs: f64,
    baseline_secs: f64,
    until_secs: f64,
) -> Dip {
    let width = bucket.as_secs_f64().max(1e-9);
    let slot = |secs: f64| ((secs / width).floor().max(0.0) as usize).min(rates.len());
    let (fault, until) = (slot(fault_secs), slot(until_secs));
    let before = &rates[slot(fault_secs - baseline_secs)..fault];
    let baseline = if before.is_empty() {
        0.0
    } else {
        before.iter().sum::<f64>() / before.len() as f64
    };
    let floor = baseline * RECOVERED;
    let after = &rates[fault..until.max(fault)];
    // Recovered at the first two consecutive good buckets; right away if the first two are.
    let recovered = (0..after.len())
        .find(|&i| after[i] >= floor && after.get(i + 1).is_none_or(|&next| next >= floor));
    let dipped = &after[..recovered.unwrap_or(after.len())];
    let lowest = dipped.iter().copied().fold(f64::INFINITY, f64::min);
    Dip {
        baseline,
        lowest_share: if dipped.is_empty() || baseline <= 0.0 {
            1.0
        } else {
            lowest / baseline
        },
        recovered_after_secs: recovered.map(|i| i as f64 * width),
        shortfall: dipped
            .iter()
            .fold(0.0, |sum, r| sum + (baseline - r).max(0.0) * width),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_samples_become_rates_per_incarnation() {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        // One worker counts to 30 over the first second, a restarted one counts from 0 again.
        let first = vec![(at(100), 10), (at(600), 30)];
        let second = vec![(at(1_100), 5), (at(1_600), 25)];
        let rates = rates_from_cumulative(&[first, second], origin, Duration::from_millis(500), 4);
        assert_eq!(rates, vec![20.0, 40.0, 10.0, 40.0]);
    }

    #[test]
    fn events_land_in_their_buckets_and_late_ones_are_dropped() {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        let rates = rates_from_events(
            &[at(0), at(999), at(1_000), at(5_000)],
            origin,
            Duration::from_secs(1),
            2,
        );
        assert_eq!(rates, vec![2.0, 1.0]);
    }

    #[test]
    fn dip_measures_depth_recovery_and_shortfall() {
        // 1 s buckets: 100/s, a fault at 4 s, two slow seconds, then back.
        let rates = [100.0, 100.0, 100.0, 100.0, 10.0, 50.0, 90.0, 100.0, 100.0];
        let d = dip(&rates, Duration::from_secs(1), 4.0, 4.0, 9.0);
        assert_eq!(d.baseline, 100.0);
        assert!((d.lowest_share - 0.1).abs() < 1e-9);
        assert_eq!(d.recovered_after_secs, Some(2.0));
        assert!((d.shortfall - 140.0).abs() < 1e-9);
        // No dip at all.
        let flat = [100.0; 8];
        let d = dip(&flat, Duration::from_secs(1), 4.0, 4.0, 8.0);
        assert_eq!((d.recovered_after_secs, d.lowest_share), (Some(0.0), 1.0));
        // Never recovered within the window.
        let dead = [100.0, 100.0, 0.0, 0.0];
        assert_eq!(
            dip(&dead, Duration::from_secs(1), 2.0, 2.0, 4.0).recovered_after_secs,
            None
        );
        // A single good bucket amid the dip does not count as recovered.
        let flicker = [100.0, 100.0, 0.0, 100.0, 0.0, 100.0, 100.0];
        assert_eq!(
            dip(&flicker, Duration::from_secs(1), 2.0, 2.0, 7.0).recovered_after_secs,
            Some(3.0)
        );
    }
}
