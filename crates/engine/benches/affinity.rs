//! scheduler_perf's inter-pod affinity, topology spread and node affinity shapes at their
//! upstream CI sizes (5000 nodes), in process, each with opportunistic batching off and on:
//! build the cluster once, then time building the cluster state + scheduling every pending
//! pod (the init pods are already running). Run with
//! `cargo bench -p lockstep-engine --bench affinity`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_engine::{Options, Scheduler};
use lockstep_model::{Cluster, WhenUnsatisfiable};
use lockstep_testkit::perf_shapes as shapes;

fn bench_shape(c: &mut Criterion, group_name: &str, label: &str, cluster: &Cluster) {
    let mut group = c.benchmark_group(group_name);
    group.sample_size(10);
    let pending = cluster
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count();
    group.throughput(Throughput::Elements(pending as u64));
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
                    assert_eq!(d.bindings.len(), pending);
                    d
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn pod_anti_affinity(c: &mut Criterion) {
    let cluster = shapes::pod_anti_affinity(5000, 1000, 2000);
    bench_shape(
        c,
        "SchedulingPodAntiAffinity",
        "5000Nodes_2000Pods",
        &cluster,
    );
}

fn pod_affinity(c: &mut Criterion) {
    let cluster = shapes::pod_affinity(5000, 5000, 5000);
    bench_shape(c, "SchedulingPodAffinity", "5000Nodes_5000Pods", &cluster);
}

fn preferred_pod_affinity(c: &mut Criterion) {
    let cluster = shapes::preferred_pod_affinity(5000, 5000, 5000);
    bench_shape(
        c,
        "SchedulingPreferredPodAffinity",
        "5000Nodes_5000Pods",
        &cluster,
    );
}

fn topology_spread(c: &mut Criterion) {
    let cluster = shapes::topology_spread(5000, 5000, 5000, WhenUnsatisfiable::DoNotSchedule);
    bench_shape(
        c,
        "SchedulingPodTopologySpread",
        "5000Nodes_5000Pods",
        &cluster,
    );
}

fn preferred_topology_spread(c: &mut Criterion) {
    let cluster = shapes::topology_spread(5000, 5000, 5000, WhenUnsatisfiable::ScheduleAnyway);
    bench_shape(
        c,
        "SchedulingPreferredTopologySpread",
        "5000Nodes_5000Pods",
        &cluster,
    );
}

fn node_affinity(c: &mut Criterion) {
    let cluster = shapes::node_affinity(5000, 5000, 10_000);
    bench_shape(c, "SchedulingNodeAffinity", "5000Nodes_10000Pods", &cluster);
}

criterion_group!(
    benches,
    pod_anti_affinity,
    pod_affinity,
    preferred_pod_affinity,
    topology_spread,
    preferred_topology_spread,
    node_affinity
);
criterion_main!(benches);
