//! scheduler_perf's gang shapes, in process. Run with `cargo bench -p lockstep-engine --bench gang`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_engine::{Options, schedule};
use lockstep_model::Cluster;
use lockstep_testkit::{self as testkit, GI};

/// 5000 nodes (4 CPU) and `gangs` gangs of 3 pods (minCount 3) of 100m / 500Mi.
fn gangs_of_three(gangs: usize) -> Cluster {
    let mut c = testkit::scheduling_basic(5000, 0);
    for g in 0..gangs {
        let name = format!("gang-{g:05}");
        c.pod_groups.push(testkit::gang(&name, 3, None));
        testkit::members(&mut c, &name, 3, 100, 500 * 1024 * 1024);
    }
    c
}

/// 5000 nodes in 100 racks of 50 and one 1024-pod gang (1 CPU each) constrained to a rack.
fn rack_gang() -> Cluster {
    let mut c = Cluster::default();
    testkit::racks(&mut c, 100, 50);
    c.pod_groups.push(testkit::gang(
        "big",
        1024,
        Some("topology.kubernetes.io/rack"),
    ));
    testkit::members(&mut c, "big", 1024, 100, GI);
    testkit::finish(c)
}

fn gang(c: &mut Criterion) {
    let mut group = c.benchmark_group("Gang");
    group.sample_size(10);
    for gangs in [1000usize, 2000, 3000] {
        let cluster = gangs_of_three(gangs);
        // Throughput in group attempts: time per element is the mean time per attempt.
        group.throughput(Throughput::Elements(gangs as u64));
        group.bench_with_input(
            BenchmarkId::new("5000nodes_gangs_of_3", gangs),
            &cluster,
            |b, cluster| {
                b.iter(|| {
                    let d = schedule(cluster, Options::default()).unwrap();
                    assert_eq!(d.bindings.len(), gangs * 3);
                    d
                })
            },
        );
    }
    let cluster = rack_gang();
    group.throughput(Throughput::Elements(1));
    group.bench_function("1024pod_gang_rack_constraint_5000nodes_100racks", |b| {
        b.iter(|| {
            let d = schedule(&cluster, Options::default()).unwrap();
            assert_eq!(d.bindings.len(), 1024);
            d
        })
    });
    group.finish();
}

criterion_group!(benches, gang);
criterion_main!(benches);
