//! The run every scheduler_perf-style bench times: building the cluster state from a copy of
//! the cluster (made untimed) and scheduling every pending pod, with batching off and on.

use criterion::{BenchmarkId, Criterion, Throughput};
use lockstep_model::Cluster;

/// Benches `cluster` as `group_name/label/batching-{off,on}`, counting `elements` per run
/// and checking that `expect_bound` pods are bound.
pub fn bench_shape(
    c: &mut Criterion,
    group_name: &str,
    label: &str,
    cluster: &Cluster,
    elements: u64,
    expect_bound: usize,
) {
    let mut group = c.benchmark_group(group_name);
    group.sample_size(10);
    group.throughput(Throughput::Elements(elements));
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
                    let d = lockstep_testkit::perf_shapes::schedule_all(objects, batching);
                    assert_eq!(d.bindings.len(), expect_bound);
                    d
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}
