//! The distribution of the gang preemption heuristic's results against the exhaustive
//! optimum, for BENCHMARKS.md:
//! `cargo run --release -p lockstep-engine --example preemption_optimality -- [INSTANCES]`

use std::collections::BTreeMap;

use lockstep_engine::GangPreemption;
use lockstep_testkit::oracle::{Verdict, instance, judge};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    for mode in [
        GangPreemption::Minimal,
        GangPreemption::Atomic,
        GangPreemption::Off,
    ] {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for seed in 0..n {
            let v = judge(&instance(seed), mode);
            *counts.entry(format!("{v:?}")).or_default() += 1;
        }
        let with_victims: u64 = counts
            .iter()
            .filter(|(k, _)| *k != "BothNone" && *k != "NoEvictionNeeded")
            .map(|(_, v)| v)
            .sum();
        let optimal = counts.get("Optimal").copied().unwrap_or(0);
        println!(
            "{}: {n} instances, {with_victims} that need evictions; optimal {optimal} ({:.2}%); {:?}",
            mode.as_str(),
            100.0 * optimal as f64 / with_victims.max(1) as f64,
            counts
        );
    }
    let _ = Verdict::Optimal;
}
