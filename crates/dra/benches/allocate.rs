//! DRA allocation throughput: 1000 nodes with 8 GPUs each (attributes model, pcieRoot, numa;
//! capacity memory), a DeviceClass with a CEL selector, and pods placed greedily node by node:
//! 8000 pods with one GPU of at least 40Gi, and 1000 pods with 4 GPUs on one PCIe root.
//!
//! `cold`: the state is new, so CEL runs once per (selector, device) during the run.
//! `warm`: the CEL results are already cached. `build_state`: compiling and indexing only.
//!
//! Run: `cargo bench -p lockstep-dra --bench allocate`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_dra::{ClaimRef, DraInputs, DraState};
use lockstep_model::dra::{
    AllocationMode, AttributeValue, ConstraintKind, Device, DeviceCapacity, DeviceClass,
    DeviceConstraint, DeviceRequest, DeviceRequestKind, ExactDeviceRequest, ResourceClaim,
    ResourceClaimSpec, ResourcePool, ResourceSlice, SliceNodeScope,
};
use lockstep_model::{Node, NodeId, ResourceList};

const NODES: usize = 1000;
const GPUS_PER_NODE: usize = 8;
const DRIVER: &str = "gpu.example.com";
const GI: i64 = 1 << 30;

struct Cluster {
    nodes: Vec<Node>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    claims: Vec<ResourceClaim>,
}

impl Cluster {
    fn inputs(&self) -> DraInputs<'_> {
        DraInputs {
            nodes: &self.nodes,
            classes: &self.classes,
            slices: &self.slices,
            claims: &self.claims,
            templates: &[],
        }
    }
}

fn gpu(i: usize) -> Device {
    let mut d = Device {
        name: format!("gpu-{i}"),
        ..Device::default()
    };
    let model = if i < 4 { "A100-80GB" } else { "A100-40GB" };
    d.attributes
        .insert("model".into(), AttributeValue::String(model.into()));
    d.attributes.insert(
        "pcieRoot".into(),
        AttributeValue::String(format!("pci-{}", i / 4)),
    );
    d.attributes
        .insert("numa".into(), AttributeValue::Int((i / 4) as i64));
    d.capacity.insert(
        "memory".into(),
        DeviceCapacity {
            value: if i < 4 { 80 * GI } else { 40 * GI },
            request_policy: None,
        },
    );
    d
}

fn cluster(claims: Vec<ResourceClaim>) -> Cluster {
    let nodes: Vec<Node> = (0..NODES)
        .map(|i| Node {
            name: format!("node-{i:04}"),
            labels: Default::default(),
            taints: Vec::new(),
            unschedulable: false,
            allocatable: ResourceList::new(),
        })
        .collect();
    let slices = nodes
        .iter()
        .map(|n| ResourceSlice {
            name: format!("{}-gpus", n.name),
            driver: DRIVER.into(),
            pool: ResourcePool {
                name: n.name.clone(),
                generation: 1,
                resource_slice_count: 1,
            },
            node_scope: SliceNodeScope::NodeName(n.name.clone()),
            devices: (0..GPUS_PER_NODE).map(gpu).collect(),
            shared_counters: Vec::new(),
        })
        .collect();
    let classes = vec![DeviceClass {
        name: "gpu".into(),
        selectors: vec![
            "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].model.startsWith('A100')"
                .into(),
        ],
        ..DeviceClass::default()
    }];
    Cluster {
        nodes,
        classes,
        slices,
        claims,
    }
}

fn claims(n: usize, count: u32, selectors: &[&str], same_root: bool) -> Vec<ResourceClaim> {
    (0..n)
        .map(|i| ResourceClaim {
            namespace: "bench".into(),
            name: format!("claim-{i}"),
            spec: ResourceClaimSpec {
                requests: vec![DeviceRequest {
                    name: "gpu".into(),
                    kind: DeviceRequestKind::Exactly(ExactDeviceRequest {
                        device_class_name: "gpu".into(),
                        selectors: selectors.iter().map(|s| s.to_string()).collect(),
                        allocation_mode: AllocationMode::ExactCount(count),
                        ..ExactDeviceRequest::default()
                    }),
                }],
                constraints: if same_root {
                    vec![DeviceConstraint {
                        requests: Vec::new(),
                        kind: ConstraintKind::MatchAttribute("gpu.example.com/pcieRoot".into()),
                    }]
                } else {
                    Vec::new()
                },
                config: Vec::new(),
            },
            allocation: None,
            reserved_for: Vec::new(),
        })
        .collect()
}

/// Places every claim on the first node (from the current one on) where it fits.
fn greedy(mut state: DraState, n: usize) -> usize {
    let mut node = 0usize;
    let mut placed = 0;
    for i in 0..n {
        let claim = [ClaimRef::Claim(lockstep_dra::ClaimId(i as u32))];
        while node < NODES {
            match state.try_allocate(NodeId(node as u32), &claim) {
                Ok(a) => {
                    state.reserve(&a);
                    placed += 1;
                    break;
                }
                Err(_) => node += 1,
            }
        }
    }
    placed
}

fn bench_shape(c: &mut Criterion, name: &str, cluster: &Cluster) {
    let n = cluster.claims.len();
    let fresh = || DraState::new(cluster.inputs()).expect("valid bench cluster");
    // Every pod must be placed, or the benchmark measures the wrong thing.
    assert_eq!(greedy(fresh(), n), n, "{name}: not every pod was placed");
    let warm = fresh();
    greedy(warm.clone(), n);

    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("cold", |b| {
        b.iter_batched(fresh, |s| black_box(greedy(s, n)), BatchSize::PerIteration)
    });
    group.bench_function("warm", |b| {
        b.iter_batched(
            || warm.clone(),
            |s| black_box(greedy(s, n)),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("build_state", |b| b.iter(|| black_box(fresh())));
    group.finish();
}

fn allocate(c: &mut Criterion) {
    let single = cluster(claims(
        NODES * GPUS_PER_NODE,
        1,
        &["device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"],
        false,
    ));
    bench_shape(c, "single_gpu_40gi_8000_pods", &single);
    let four = cluster(claims(NODES, 4, &[], true));
    bench_shape(c, "four_gpus_same_pcie_root_1000_pods", &four);
}

criterion_group!(benches, allocate);
criterion_main!(benches);
