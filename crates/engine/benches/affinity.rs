//! scheduler_perf's inter-pod affinity, topology spread and node affinity shapes at their
//! upstream CI sizes (5000 nodes), in process, each with opportunistic batching off and on:
//! build the cluster once, then time building the cluster state + scheduling every pending
//! pod (the init pods are already running). Run with
//! `cargo bench -p lockstep-engine --bench affinity`.

use criterion::{Criterion, criterion_group, criterion_main};
use lockstep_model::{Cluster, WhenUnsatisfiable};
use lockstep_testkit::perf_shapes as shapes;

mod common;

/// Benches a shape, counting and expecting every pending pod bound.
fn bench_shape(c: &mut Criterion, group_name: &str, label: &str, cluster: &Cluster) {
    let pending = cluster
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count();
    common::bench_shape(c, group_name, label, cluster, pending as u64, pending);
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
