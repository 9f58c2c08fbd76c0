//! Scheduling pods with DRA claims through the whole cycle (DynamicResources filter on every
//! candidate node): 1000 nodes x 8 GPUs, 8000 single-GPU pods with a CEL memory selector,
//! and 1000 four-GPU pods with matchAttribute on pcieRoot.
//! `cargo bench -p lockstep-engine --bench dra`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_engine::{Options, schedule};
use lockstep_testkit as testkit;

fn dra(c: &mut Criterion) {
    let mut group = c.benchmark_group("DRA");
    group.sample_size(10);
    let singles = testkit::dra_gpus(1000, 8000, 0);
    group.throughput(Throughput::Elements(8000));
    group.bench_function("1000nodes_8000pods_1gpu_cel_memory", |b| {
        b.iter(|| {
            let d = schedule(&singles, Options::default()).unwrap();
            assert_eq!(d.bindings.len(), 8000);
            d
        })
    });
    let quads = testkit::dra_gpus(1000, 0, 1000);
    group.throughput(Throughput::Elements(1000));
    group.bench_function("1000nodes_1000pods_4gpu_match_pcie_root", |b| {
        b.iter(|| {
            let d = schedule(&quads, Options::default()).unwrap();
            assert_eq!(d.bindings.len(), 1000);
            d
        })
    });
    group.finish();
}

criterion_group!(benches, dra);
criterion_main!(benches);
