//! Invariants over random clusters and random sequences of allocate / reserve / release:
//! no device is allocated twice (except shared devices within their capacity), and every
//! allocated device satisfies its class and request selectors, is reachable from the node and
//! respects the claim's constraints.

mod common;

use std::collections::HashMap;

use common::*;
use lockstep_dra::selector::{CelAttribute, CelDevice, CelEnvironment, CompiledExpression};
use lockstep_dra::{DraState, NodeAllocation};
use lockstep_model::NodeId;
use lockstep_model::dra::{
    AttributeValue, Device, DeviceCapacity, DeviceRequestKind, ExactDeviceRequest,
    ResourceClaimTemplate, SliceNodeScope,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct DeviceSpec {
    model_a: bool,
    numa: i64,
    memory_gi: i64,
    shared: bool,
}

#[derive(Debug, Clone)]
struct ShapeSpec {
    count: u32,
    class: usize,
    numa0: bool,
    capacity_gi: Option<i64>,
    same_numa: bool,
    two_requests: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Place { shape: usize, node: usize },
    Release { index: usize },
}

fn device_spec() -> impl Strategy<Value = DeviceSpec> {
    (
        any::<bool>(),
        0..2i64,
        prop::sample::select(vec![16i64, 40, 80]),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(model_a, numa, memory_gi, shared)| DeviceSpec {
            model_a,
            numa,
            memory_gi,
            shared,
        })
}

fn shape_spec() -> impl Strategy<Value = ShapeSpec> {
    (
        1..3u32,
        0..3usize,
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![10i64, 20, 40])),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(count, class, numa0, capacity_gi, same_numa, two_requests)| ShapeSpec {
                count,
                class,
                numa0,
                capacity_gi,
                same_numa,
                two_requests,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4usize, 0..3usize).prop_map(|(shape, node)| Op::Place { shape, node }),
        1 => (0..16usize).prop_map(|index| Op::Release { index }),
    ]
}

const CLASSES: [(&str, &str); 3] = [
    ("any", "device.driver == 'gpu.example.com'"),
    (
        "model-a",
        "device.attributes['gpu.example.com'].model == 'A'",
    ),
    (
        "big",
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0",
    ),
];

fn make_device(name: &str, d: &DeviceSpec) -> Device {
    let mut dev = device(
        name,
        &[
            ("model", s(if d.model_a { "A" } else { "B" })),
            ("numa", int(d.numa)),
        ],
    );
    dev.capacity.insert(
        "memory".into(),
        DeviceCapacity {
            value: d.memory_gi * GI,
            request_policy: None,
        },
    );
    dev.allow_multiple_allocations = d.shared;
    dev
}

fn make_shape(i: usize, s: &ShapeSpec) -> ResourceClaimTemplate {
    let mut e = exact(CLASSES[s.class].0, s.count);
    if s.numa0 {
        e.selectors
            .push("device.attributes['gpu.example.com'].numa == 0".into());
    }
    if let Some(gi) = s.capacity_gi {
        e.capacity_requests.insert("memory".into(), gi * GI);
    }
    let mut requests = vec![request("r0", e.clone())];
    if s.two_requests {
        requests.push(request("r1", e));
    }
    let constraints = if s.same_numa {
        vec![match_attr("gpu.example.com/numa", &[])]
    } else {
        vec![]
    };
    template(&format!("shape-{i}"), requests, constraints)
}

fn cel_device<'a>(d: &'a Device) -> CelDevice<'a> {
    CelDevice {
        driver: DRIVER,
        attributes: d
            .attributes
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    AttributeValue::Int(i) => CelAttribute::Int(*i),
                    AttributeValue::Bool(b) => CelAttribute::Bool(*b),
                    AttributeValue::String(s) => CelAttribute::String(s),
                    AttributeValue::Version(_) => unreachable!("no versions in this test"),
                };
                (DRIVER, k.as_str(), v)
            })
            .collect(),
        capacity: d
            .capacity
            .iter()
            .map(|(k, c)| (DRIVER, k.as_str(), c.value))
            .collect(),
        allow_multiple_allocations: d.allow_multiple_allocations,
    }
}

const NUMA0: &str = "device.attributes['gpu.example.com'].numa == 0";

struct Checker<'w> {
    world: &'w World,
    env: CelEnvironment,
    compiled: HashMap<&'static str, CompiledExpression>,
    devices: HashMap<(String, String), (&'w Device, &'w SliceNodeScope)>,
}

impl<'w> Checker<'w> {
    fn new(world: &'w World) -> Self {
        let mut devices = HashMap::new();
        for s in &world.slices {
            for d in &s.devices {
                devices.insert((s.pool.name.clone(), d.name.clone()), (d, &s.node_scope));
            }
        }
        let env = CelEnvironment::new();
        let compiled = CLASSES
            .iter()
            .map(|c| c.1)
            .chain([NUMA0])
            .map(|e| (e, env.compile(e).expect("fixture selectors compile")))
            .collect();
        Checker {
            world,
            env,
            compiled,
            devices,
        }
    }

    fn selects(&self, expr: &str, d: &Device) -> bool {
        self.env.evaluate(&self.compiled[expr], &cel_device(d)) == Ok(true)
    }

    /// Every device of `a` satisfies its class and request selectors, is reachable from the
    /// node and satisfies the claim's constraints.
    fn check_allocation(&self, st: &DraState, a: &NodeAllocation, shape: &ShapeSpec) {
        let node_name = &self.world.nodes[a.node.index()].name;
        for c in &a.claims {
            let mut numas = Vec::new();
            for d in c.devices.iter() {
                let (_, pool, name) = st.device_name(d.device);
                let (dev, scope) = self.devices[&(pool.to_string(), name.to_string())];
                match scope {
                    SliceNodeScope::NodeName(n) => {
                        assert_eq!(n, node_name, "device of another node")
                    }
                    SliceNodeScope::AllNodes => {}
                    other => panic!("unexpected scope {other:?}"),
                }
                assert!(
                    self.selects(CLASSES[shape.class].1, dev),
                    "class selector violated by {name}"
                );
                if shape.numa0 {
                    assert!(self.selects(NUMA0, dev));
                }
                if let Some(gi) = shape.capacity_gi {
                    assert!(dev.capacity["memory"].value >= gi * GI);
                }
                numas.push(dev.attributes["numa"].clone());
            }
            let want = shape.count as usize * if shape.two_requests { 2 } else { 1 };
            assert_eq!(c.devices.len(), want);
            if shape.same_numa {
                assert!(
                    numas.windows(2).all(|w| w[0] == w[1]),
                    "matchAttribute violated: {numas:?}"
                );
            }
        }
    }

    /// No exclusive device is held twice; shared devices stay within their memory.
    fn check_usage(&self, st: &DraState, held: &[(NodeAllocation, usize)]) {
        let mut exclusive: HashMap<u32, usize> = HashMap::new();
        let mut shared: HashMap<u32, i64> = HashMap::new();
        for (a, _) in held {
            for c in &a.claims {
                for d in c.devices.iter() {
                    let (_, pool, name) = st.device_name(d.device);
                    let (dev, _) = self.devices[&(pool.to_string(), name.to_string())];
                    if dev.allow_multiple_allocations {
                        *shared.entry(d.device.0).or_default() += d.consumed_capacity[0];
                    } else {
                        *exclusive.entry(d.device.0).or_default() += 1;
                    }
                }
            }
        }
        for (id, n) in exclusive {
            assert!(n <= 1, "device {id} allocated {n} times");
        }
        for (id, used) in shared {
            let (_, pool, name) = st.device_name(lockstep_dra::DeviceId(id));
            let (dev, _) = self.devices[&(pool.to_string(), name.to_string())];
            assert!(
                used <= dev.capacity["memory"].value,
                "shared device {id} over capacity"
            );
        }
    }
}

fn build_world(
    node_devices: &[Vec<DeviceSpec>],
    network: &[DeviceSpec],
    shapes: &[ShapeSpec],
) -> World {
    let mut w = World::new();
    w.classes = CLASSES.iter().map(|(n, e)| class(n, &[e])).collect();
    for (i, devs) in node_devices.iter().enumerate() {
        let name = format!("node-{i}");
        w.nodes.push(node(&name, &[]));
        w.slices.push(slice_on(
            &name,
            &name,
            &name,
            devs.iter()
                .enumerate()
                .map(|(j, d)| make_device(&format!("gpu-{j}"), d))
                .collect(),
        ));
    }
    if !network.is_empty() {
        w.slices.push(slice_scoped(
            "net",
            "net",
            SliceNodeScope::AllNodes,
            network
                .iter()
                .enumerate()
                .map(|(j, d)| make_device(&format!("net-{j}"), d))
                .collect(),
        ));
    }
    w.templates = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| make_shape(i, s))
        .collect();
    w
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn allocations_never_overlap_and_always_satisfy_their_selectors_and_fits_agrees(
        node_devices in prop::collection::vec(prop::collection::vec(device_spec(), 1..6), 1..4),
        network in prop::collection::vec(device_spec(), 0..3),
        shapes in prop::collection::vec(shape_spec(), 4),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let w = build_world(&node_devices, &network, &shapes);
        let checker = Checker::new(&w);
        let mut st = w.state();
        let mut held: Vec<(NodeAllocation, usize)> = Vec::new();
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Place { shape, node } => {
                    let node = NodeId((node % w.nodes.len()) as u32);
                    let t = lockstep_dra::ClaimRef::Template(lockstep_dra::TemplateId(shape as u32));
                    let found = st.try_allocate(node, &[t]);
                    // Remembered answers (from alike nodes) equal a search of this node: a
                    // step bound seen nowhere else keys the search afresh.
                    let mut uncached = st.clone();
                    uncached.set_limits(lockstep_dra::Limits { max_search_steps: 1_000_000 + step as u64 });
                    prop_assert_eq!(&found, &uncached.try_allocate(node, &[t]));
                    // The filter's yes/no question gets the same answer and reason.
                    prop_assert_eq!(
                        st.fits(node, &[t]).map_err(|e| e.reason),
                        found.as_ref().map(|_| ()).map_err(|e| e.reason)
                    );
                    if let Ok(a) = found {
                        checker.check_allocation(&st, &a, &shapes[shape]);
                        st.reserve(&a);
                        held.push((a, shape));
                    }
                }
                Op::Release { index } => {
                    if !held.is_empty() {
                        let (a, _) = held.remove(index % held.len());
                        st.release(&a);
                    }
                }
            }
            checker.check_usage(&st, &held);
        }
        // Releasing everything gives every device back: a fresh state agrees on every shape.
        for (a, _) in held.iter().rev() {
            st.release(a);
        }
        let fresh = w.state();
        for shape in 0..shapes.len() {
            let t = lockstep_dra::ClaimRef::Template(lockstep_dra::TemplateId(shape as u32));
            prop_assert_eq!(st.max_replicas_per_node(&[t], 64), fresh.max_replicas_per_node(&[t], 64));
        }
    }
}

#[test]
fn request_kinds_are_what_the_builders_make() {
    // Guards the helpers the property relies on.
    let t = make_shape(
        0,
        &ShapeSpec {
            count: 2,
            class: 0,
            numa0: true,
            capacity_gi: Some(10),
            same_numa: true,
            two_requests: false,
        },
    );
    let DeviceRequestKind::Exactly(ExactDeviceRequest {
        selectors,
        capacity_requests,
        ..
    }) = &t.spec.requests[0].kind
    else {
        panic!("exactly");
    };
    assert_eq!(selectors.len(), 1);
    assert_eq!(capacity_requests["memory"], 10 * GI);
}
