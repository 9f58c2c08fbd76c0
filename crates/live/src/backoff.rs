//! Backoff of pods that did not fit, as kube-scheduler's queue does it: a pod that failed
//! waits `initial × 2^(attempts-1)` (capped at `max`) before it is tried again, and is tried
//! again only if the cluster changed since it failed, or after `max_unschedulable` without
//! any change (kube-scheduler's `podMaxInUnschedulablePodsDuration`). Never a hot loop.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Entry {
    attempts: u32,
    failed_at: Instant,
    /// The watch event count when it failed.
    events_at: u64,
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

    /// Records that `pod` did not fit at `now`, when `events` watch events had been seen.
    pub fn failed(&mut self, pod: &str, now: Instant, events: u64) {
        let attempts = self.entries.get(pod).map_or(0, |e| e.attempts) + 1;
        self.entries.insert(
            pod.to_string(),
            Entry {
                attempts,
                failed_at: now,
                events_at: events,
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

    fn is_held(&self, e: &Entry, now: Instant, events: u64) -> bool {
        let waited = now.saturating_duration_since(e.failed_at);
        waited < self.delay(e.attempts)
            || (events == e.events_at && waited < self.max_unschedulable)
    }

    /// The pods not to try at `now`, `events` watch events having been seen.
    pub fn held(&self, now: Instant, events: u64) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|(_, e)| self.is_held(e, now, events))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// When the next held pod's backoff ends (a pass is due then, if the cluster changed).
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        self.entries
            .values()
            .map(|e| e.failed_at + self.delay(e.attempts))
            .filter(|&t| t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum_and_needs_a_change() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        b.failed("ml/a", t0, 7);
        assert!(b.held(t0, 8).contains("ml/a"), "within 1 s");
        assert!(
            b.held(t0 + Duration::from_millis(1500), 8).is_empty(),
            "after 1 s, with a change"
        );
        assert!(
            b.held(t0 + Duration::from_millis(1500), 7).contains("ml/a"),
            "no change since it failed"
        );
        assert!(
            b.held(t0 + Duration::from_secs(301), 7).is_empty(),
            "5 min without change"
        );
        for _ in 0..9 {
            b.failed("ml/a", t0, 7);
        }
        assert_eq!(
            b.next_due(t0),
            Some(t0 + Duration::from_secs(10)),
            "capped at 10 s"
        );
        b.clear("ml/a");
        assert!(b.held(t0, 8).is_empty());
    }
}
