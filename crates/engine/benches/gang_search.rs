//! The whole-gang placement search beside pod-by-pod placement. Run with
//! `cargo bench -p lockstep-engine --bench gang_search`. Each run is one `Scheduler::run` on
//! a scheduler built untimed (the cluster state, with its compiled CEL selectors, is not
//! measured).
//!
//! - `dra_8pods_stranded_100nodes`: 8 heterogeneous pods with DRA claims on 100 nodes; two
//!   of them need the two model-a GPUs of one node, and first fit gives the NVLink one to the
//!   pod that does not need it, in every pod order: pod by pod fails, the search places it.
//! - `dra_8pods_fits_100nodes`: the same with that node's GPUs listed the other way round:
//!   pod by pod places it, the search is not asked.
//! - `dra_8pods_no_fit_100nodes`: the same with only the NVLink GPU on that node: neither
//!   places it, the search proves it.
//! - `identical_64pods_fits_1000nodes`: 64 pods of 3 CPU on 1000 nodes of 4 CPU.
//! - `identical_64pods_no_fit_1000nodes`: the same 64 pods where only 63 nodes have room.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lockstep_engine::{GangPlacement, Options, Scheduler};
use lockstep_model::Cluster;
use lockstep_testkit::placement::{Gpu, Instance, NodeSpec, PodSpec, Selector};

/// Node 50's GPUs in `dra_gang`.
#[derive(Clone, Copy)]
enum Node50 {
    /// A model-a NVLink GPU, then a plain model-a one: pod by pod strands `g-1`.
    Both,
    /// The same the other way round: first fit works.
    PlainFirst,
    /// Only the NVLink one: no placement.
    NvlinkOnly,
}

/// `dra_8pods_*`: 100 nodes of 64 CPU with two model-b GPUs each, but node 50 with model-a
/// GPUs (see `Node50`). Pods `g-0` (one model-a GPU) and
/// `g-1` (one model-a NVLink GPU) of 1 CPU, and `g-2`..`g-7` of 2-7 CPU with one or two
/// model-b GPUs; minCount 8.
fn dra_gang(node50: Node50) -> Cluster {
    let b = Gpu {
        model_a: false,
        nvlink: false,
    };
    let (a_nvlink, a_plain) = (
        Gpu {
            model_a: true,
            nvlink: true,
        },
        Gpu {
            model_a: true,
            nvlink: false,
        },
    );
    let nodes = (0..100)
        .map(|i| NodeSpec {
            cpu_milli: 64_000,
            memory_gi: 512,
            gpus: match (i, node50) {
                (50, Node50::Both) => vec![a_nvlink, a_plain],
                (50, Node50::PlainFirst) => vec![a_plain, a_nvlink],
                (50, Node50::NvlinkOnly) => vec![a_nvlink],
                _ => vec![b, b],
            },
            rack: None,
        })
        .collect();
    let mut pods = vec![
        PodSpec {
            cpu_milli: 1000,
            memory_gi: 1,
            devices: vec![Selector::ModelA],
        },
        PodSpec {
            cpu_milli: 1000,
            memory_gi: 1,
            devices: vec![Selector::ModelANvlink],
        },
    ];
    for k in 0..6 {
        pods.push(PodSpec {
            cpu_milli: 2000 + 1000 * k,
            memory_gi: 1,
            devices: vec![Selector::ModelB; 1 + (k as usize % 2)],
        });
    }
    Instance {
        nodes,
        running: Vec::new(),
        pods,
        min: 8,
        topology: false,
    }
    .cluster()
}

/// 64 pods of 3 CPU (minCount 64) on 1000 nodes, of 4 CPU, or with `fits` false of 2 CPU
/// but 63 (every 16th).
fn identical_gang(fits: bool) -> Cluster {
    let nodes = (0..1000)
        .map(|i| NodeSpec {
            cpu_milli: if fits || i % 16 == 0 { 4000 } else { 2000 },
            memory_gi: 32,
            gpus: Vec::new(),
            rack: None,
        })
        .collect::<Vec<_>>();
    debug_assert!(fits || nodes.iter().filter(|n| n.cpu_milli == 4000).count() < 64);
    Instance {
        nodes,
        running: Vec::new(),
        pods: vec![
            PodSpec {
                cpu_milli: 3000,
                memory_gi: 1,
                devices: Vec::new(),
            };
            64
        ],
        min: 64,
        topology: false,
    }
    .cluster()
}

fn scheduler(cluster: &Cluster, placement: GangPlacement) -> Scheduler {
    let mut options = Options {
        preemption: false,
        ..Options::default()
    };
    options.profile.gang_placement = placement;
    Scheduler::new(cluster, options).unwrap()
}

fn gang_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("GangSearch");
    group.sample_size(20);
    // (name, cluster, pods bound with Search, with PodByPod, whether Search searches)
    let cases = [
        (
            "dra_8pods_stranded_100nodes",
            dra_gang(Node50::Both),
            8,
            0,
            true,
        ),
        (
            "dra_8pods_fits_100nodes",
            dra_gang(Node50::PlainFirst),
            8,
            8,
            false,
        ),
        (
            "dra_8pods_no_fit_100nodes",
            dra_gang(Node50::NvlinkOnly),
            0,
            0,
            true,
        ),
        (
            "identical_64pods_fits_1000nodes",
            identical_gang(true),
            64,
            64,
            false,
        ),
        (
            "identical_64pods_no_fit_1000nodes",
            identical_gang(false),
            0,
            0,
            false,
        ),
    ];
    for (name, cluster, with_search, pod_by_pod, runs_search) in &cases {
        for (placement, bound) in [
            (GangPlacement::Search, with_search),
            (GangPlacement::PodByPod, pod_by_pod),
        ] {
            let mut s = scheduler(cluster, placement);
            assert_eq!(s.run().bindings.len(), *bound, "{name} {placement:?}");
            // The search runs only where pod by pod fails, and not for identical pods.
            let searches = u64::from(placement == GangPlacement::Search && *runs_search);
            assert_eq!(s.gang_search_counts().searches, searches, "{name}");
            group.bench_with_input(
                BenchmarkId::new(*name, placement.as_str()),
                cluster,
                |b, cluster| {
                    b.iter_batched(
                        || scheduler(cluster, placement),
                        |mut s| s.run(),
                        criterion::BatchSize::LargeInput,
                    )
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, gang_search);
criterion_main!(benches);
