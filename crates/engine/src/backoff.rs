//! The scheduling queue's clock: backoff of pods that did not fit, as kube-scheduler's
//! queue does it. A pod that failed waits `initial × 2^(attempts-1)` (capped at `max`;
//! kube-scheduler's `podInitialBackoffSeconds` / `podMaxBackoffSeconds`) before it is tried
//! again. Whether a change since could help it is [`Queue`](crate::Queue)'s to say; after
//! `max_unschedulable` without such a change it is tried anyway (kube-scheduler's
//! `podMaxInUnschedulablePodsDuration`). Never a hot loop. Pods are keyed by
//! `namespace/name`, so the entries outlive a rebuilt state; front ends on a wall clock
//! (`lockstep run`) use it, while `simulate` retries at the trace's events.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Entry {
    attempts: u32,
    failed_at: Instant,
}

/// Pods backing off, by `namespace/name`.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    max_unschedulable: Duration,
    entries: BTreeMap<String, Entry>,
}

impl Backoff {
    /// kube-scheduler's defaults: 1 s doubling to 10 s, retried after 5 min without change.
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            max_unschedulable: Duration::from_secs(300),
            entries: BTreeMap::new(),
        }
    }

    fn delay(&self, attempts: u32) -> Duration {
        let doubled = self
            .initial
            .saturating_mul(1u32 << attempts.saturating_sub(1).min(20));
        doubled.min(self.max)
    }

    /// Records that `pod` did not fit at `now`.
    pub fn failed(&mut self, pod: &str, now: Instant) {
        let attempts = self.entries.get(pod).map_or(0, |e| e.attempts) + 1;
        self.entries.insert(
            pod.to_string(),
            Entry {
                attempts,
                failed_at: now,
            },
        );
    }

    /// Forgets `pod` (it was placed, or is gone).
    pub fn clear(&mut self, pod: &str) {
        self.entries.remove(pod);
    }

    /// Keeps only the pods in `pending`.
    pub fn retain(&mut self, pending: &BTreeSet<String>) {
        self.entries.retain(|k, _| pending.contains(k));
    }

    /// The pods still backing off at `now`: not to be tried, whatever changed.
    pub fn held(&self, now: Instant) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.failed_at) < self.delay(e.attempts))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The pods that failed at least `max_unschedulable` ago: tried again even if no
    /// change could help them.
    pub fn flushed(&self, now: Instant) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.failed_at) >= self.max_unschedulable)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// When the next pod's backoff, or its time in the unschedulable pods, ends (a pass is
    /// due then).
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        self.entries
            .values()
            .flat_map(|e| {
                [
                    e.failed_at + self.delay(e.attempts),
                    e.failed_at + self.max_unschedulable,
                ]
            })
            .filter(|&t| t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum_then_five_minutes_flush() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        b.failed("ml/a", t0);
        assert!(b.held(t0).contains("ml/a"), "within 1 s");
        assert!(
            b.held(t0 + Duration::from_millis(1500)).is_empty(),
            "after 1 s"
        );
        assert!(b.flushed(t0 + Duration::from_secs(299)).is_empty());
        assert_eq!(b.flushed(t0 + Duration::from_secs(300)), ["ml/a"]);
        assert_eq!(b.next_due(t0), Some(t0 + Duration::from_secs(1)));
        assert_eq!(
            b.next_due(t0 + Duration::from_secs(2)),
            Some(t0 + Duration::from_secs(300)),
            "then the flush"
        );
        for _ in 0..9 {
            b.failed("ml/a", t0);
        }
        assert_eq!(
            b.next_due(t0),
            Some(t0 + Duration::from_secs(10)),
            "capped at 10 s"
        );
        b.clear("ml/a");
        assert!(b.held(t0).is_empty());
    }
}
