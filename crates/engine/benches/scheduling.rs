//! scheduler_perf shapes, in process: build the cluster, then time snapshot + scheduling of
//! every pending pod. Run with `cargo bench -p lockstep-engine`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_engine::testkit;
use lockstep_engine::{Options, schedule};

fn scheduling_basic(c: &mut Criterion) {
    let mut group = c.benchmark_group("SchedulingBasic");
    group.sample_size(10);
    for (nodes, pods) in [(5000usize, 10_000usize), (5000, 50_000)] {
        let cluster = testkit::scheduling_basic(nodes, pods);
        group.throughput(Throughput::Elements(pods as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{nodes}nodes_{pods}pods")),
            &cluster,
            |b, cluster| {
                b.iter(|| {
                    let d = schedule(cluster, Options::default()).expect("default profile");
                    assert_eq!(d.bindings.len(), pods);
                    d
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, scheduling_basic);
criterion_main!(benches);
