//! The gang preemption heuristic against the exhaustive optimum on random small clusters:
//! optimal in at least 95% of instances and never more than one extra victim unit.
//! (`cargo run --release -p lockstep-engine --example preemption_optimality` reports the
//! full distribution over more instances.)

use lockstep_engine::GangPreemption;
use lockstep_testkit::oracle::{Verdict, instance, judge};

fn check(mode: GangPreemption, instances: u64) {
    let mut optimal = 0;
    let mut counted = 0;
    for seed in 0..instances {
        let c = instance(seed);
        let v = judge(&c, mode);
        assert!(
            !matches!(v, Verdict::Missed),
            "seed {seed}: a victim set exists but none was found"
        );
        assert!(
            !matches!(v, Verdict::Inconsistent),
            "seed {seed}: placed although the oracle finds no victim set"
        );
        assert!(
            !matches!(v, Verdict::ExtraUnits(n) if n > 1),
            "seed {seed}: {v:?}"
        );
        if !matches!(v, Verdict::BothNone | Verdict::NoEvictionNeeded) {
            counted += 1;
            if v == Verdict::Optimal {
                optimal += 1;
            }
        }
    }
    assert!(
        counted > instances / 4,
        "too few instances needed preemption: {counted}"
    );
    assert!(
        optimal * 100 >= counted * 95,
        "{mode:?}: optimal in {optimal} of {counted}"
    );
}

#[test]
fn minimal_mode_is_near_optimal() {
    check(GangPreemption::Minimal, 300);
}

#[test]
fn atomic_mode_is_near_optimal() {
    check(GangPreemption::Atomic, 300);
}
