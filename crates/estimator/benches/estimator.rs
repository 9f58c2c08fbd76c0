//! The estimator's answers on large members, through the library (a request's decoding
//! and gRPC transport are not in these numbers): MaxAvailableReplicas on 5000 nodes for a
//! CPU/memory shape and a DRA shape (8 GPUs per node, one GPU with a CEL memory selector
//! per replica), and SelectVictims with 100 candidate bindings over 1000 nodes. A member
//! keeps its snapshot while requests repeat a shape; the `_new_shape` cases alternate two
//! shapes, so every request rebuilds it.
//! `cargo bench -p lockstep-estimator --bench estimator`.

use criterion::{Criterion, criterion_group, criterion_main};
use lockstep_estimator::member::{Member, PERMANENT_ID_LABELS};
use lockstep_estimator::request::{ClaimRef, Requirements};
use lockstep_testkit as testkit;

fn requirements(pairs: &[(&str, &str)], claims: Vec<ClaimRef>) -> Requirements {
    Requirements {
        namespace: "default".into(),
        requests: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        claims,
        ..Requirements::default()
    }
}

/// 1000 nodes of 8 CPU, full: 100 bindings of 40 pods of 2 CPU, each binding on 10
/// consecutive nodes.
fn full_of_bindings() -> lockstep_model::Cluster {
    let mut c = lockstep_model::Cluster::default();
    for i in 0..1000 {
        let n = testkit::node(&mut c, &format!("node-{i:04}"), 8000, 64 * testkit::GI, 110);
        c.nodes.push(n);
    }
    for b in 0..100 {
        for k in 0..40 {
            let node = format!("node-{:04}", b * 10 + k / 4);
            let mut p = testkit::running(&mut c, &format!("b{b:03}-{k:02}"), &node, 2000, 0, None);
            p.labels.insert(
                PERMANENT_ID_LABELS[0].to_string(),
                format!("binding-{b:03}"),
            );
            c.pods.push(p);
        }
    }
    testkit::finish(c)
}

fn estimator(c: &mut Criterion) {
    let mut group = c.benchmark_group("estimator");
    group.sample_size(20);

    let mut cpu = Member::new(testkit::scheduling_basic(5000, 0)).unwrap();
    let shape = requirements(&[("cpu", "1"), ("memory", "2Gi")], vec![]);
    group.bench_function("max_available_replicas_5000nodes_cpu_memory", |b| {
        b.iter(|| {
            let n = cpu.max_replicas(&shape, &[]).unwrap();
            assert_eq!(n, 4 * 5000);
            n
        })
    });

    // Every other request with another shape: the snapshot is rebuilt each time.
    let other = requirements(&[("cpu", "1"), ("memory", "2049Mi")], vec![]);
    let mut flip = false;
    group.bench_function(
        "max_available_replicas_5000nodes_cpu_memory_new_shape",
        |b| {
            b.iter(|| {
                flip = !flip;
                let n = cpu
                    .max_replicas(if flip { &other } else { &shape }, &[])
                    .unwrap();
                assert_eq!(n, 4 * 5000);
                n
            })
        },
    );

    let mut gpus = Member::new(testkit::dra_gpus(5000, 0, 0)).unwrap();
    let shape = requirements(&[], vec![ClaimRef::Template("one-40gi".into())]);
    group.bench_function("max_available_replicas_5000nodes_8gpu_cel", |b| {
        b.iter(|| {
            let n = gpus.max_replicas(&shape, &[]).unwrap();
            assert_eq!(n, 8 * 5000);
            n
        })
    });

    let other = requirements(
        &[("cpu", "1m")],
        vec![ClaimRef::Template("one-40gi".into())],
    );
    let mut flip = false;
    group.bench_function("max_available_replicas_5000nodes_8gpu_cel_new_shape", |b| {
        b.iter(|| {
            flip = !flip;
            let n = gpus
                .max_replicas(if flip { &other } else { &shape }, &[])
                .unwrap();
            assert_eq!(n, 8 * 5000);
            n
        })
    });

    let mut full = Member::new(full_of_bindings()).unwrap();
    let candidates: Vec<String> = (0..100).map(|b| format!("binding-{b:03}")).collect();
    // 50 replicas of 8 CPU need 50 empty nodes: the last 5 candidates (50 nodes) go.
    let shape = requirements(&[("cpu", "8")], vec![]);
    group.bench_function("select_victims_100candidates_1000nodes", |b| {
        b.iter(|| {
            let (feasible, victims) = full.select_victims(&shape, 50, &candidates).unwrap();
            assert!(feasible);
            assert_eq!(victims, candidates[95..].to_vec());
            victims
        })
    });
    group.finish();
}

criterion_group!(benches, estimator);
criterion_main!(benches);
