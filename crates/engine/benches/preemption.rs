//! Gang preemption: one 8-pod gang preempting on 5000 nodes full of low-priority pods from
//! 2000 gangs. `cargo bench -p lockstep-engine --bench preemption`. The decision's cost is the
//! difference between the run with the preemptor and the same run without it (snapshot
//! construction of 20,000 running pods dominates the latter).

use criterion::{Criterion, criterion_group, criterion_main};
use lockstep_engine::{Options, schedule};
use lockstep_testkit as testkit;

fn preemption(c: &mut Criterion) {
    let mut group = c.benchmark_group("Preemption");
    group.sample_size(20);
    let with = testkit::full_of_gangs(5000, 2000, true);
    let without = testkit::full_of_gangs(5000, 2000, false);
    group.bench_function("5000nodes_2000gangs_8pod_preemptor", |b| {
        b.iter(|| {
            let d = schedule(&with, Options::default()).unwrap();
            assert_eq!(d.bindings.len(), 8);
            d
        })
    });
    group.bench_function("5000nodes_2000gangs_no_preemptor_baseline", |b| {
        b.iter(|| schedule(&without, Options::default()).unwrap())
    });
    group.finish();
}

criterion_group!(benches, preemption);
criterion_main!(benches);
