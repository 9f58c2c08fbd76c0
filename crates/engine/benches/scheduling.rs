//! scheduler_perf shapes, in process, each with opportunistic batching off and on: build
//! the cluster once, then time building the cluster state + scheduling of every pending pod.
//! Run all with `cargo bench -p lockstep-engine`.

use criterion::{Criterion, criterion_group, criterion_main};
use lockstep_model::Cluster;
use lockstep_testkit as testkit;

mod common;

fn bench_shape(
    c: &mut Criterion,
    group_name: &str,
    label: &str,
    cluster: &Cluster,
    expect_bound: usize,
) {
    let pods = cluster.pods.len() as u64;
    common::bench_shape(c, group_name, label, cluster, pods, expect_bound);
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
