//! scheduler_perf shapes, in process, each with opportunistic batching off and on: build
//! the cluster once, then time building the cluster state + scheduling of every pending pod.
//! Run all with `cargo bench -p lockstep-engine`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_engine::{Options, Scheduler};
use lockstep_model::Cluster;
use lockstep_testkit as testkit;

fn bench_shape(
    c: &mut Criterion,
    group_name: &str,
    label: &str,
    cluster: &Cluster,
    expect_bound: usize,
) {
    let mut group = c.benchmark_group(group_name);
    group.sample_size(10);
    let pods = cluster.pods.len();
    group.throughput(Throughput::Elements(pods as u64));
    for batching in [false, true] {
        let id = BenchmarkId::new(
            label,
            if batching {
                "batching-on"
            } else {
                "batching-off"
            },
        );
        group.bench_with_input(id, cluster, |b, cluster| {
            // The cluster state takes its objects: each run gets a copy, made untimed.
            b.iter_batched(
                || cluster.clone(),
                |objects| {
                    let d = Scheduler::from_cluster(
                        objects,
                        Options {
                            batching,
                            ..Options::default()
                        },
                    )
                    .expect("default profile")
                    .run();
                    assert_eq!(d.bindings.len(), expect_bound);
                    d
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn scheduling_basic(c: &mut Criterion) {
    for pods in [10_000usize, 50_000] {
        let cluster = testkit::scheduling_basic(5000, pods);
        bench_shape(
            c,
            "SchedulingBasic",
            &format!("5000nodes_{pods}pods"),
            &cluster,
            pods,
        );
    }
}

fn resource_saturation(c: &mut Criterion) {
    let cluster = testkit::resource_saturation(20_000, 20_000);
    bench_shape(
        c,
        "ResourceSaturation",
        "20000nodes_20000pods",
        &cluster,
        20_000,
    );
}

fn host_port_conflict(c: &mut Criterion) {
    let cluster = testkit::host_port_conflict(5000, 5000);
    bench_shape(c, "HostPortConflict", "5000nodes_5000pods", &cluster, 5000);
}

criterion_group!(
    benches,
    scheduling_basic,
    resource_saturation,
    host_port_conflict
);
criterion_main!(benches);
