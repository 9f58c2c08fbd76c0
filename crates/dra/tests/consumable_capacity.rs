//! Consumable capacity: devices with `allowMultipleAllocations` shared by several claims within
//! their capacity, with request policies (default, validValues, validRange).

mod common;

use common::*;
use lockstep_model::dra::{
    CapacityRange, CapacityRequestPolicy, Device, DeviceCapacity, ExactDeviceRequest,
};

fn shared_gpu(name: &str, policy: Option<CapacityRequestPolicy>) -> Device {
    let mut d = device(name, &[("model", s("A100"))]);
    d.allow_multiple_allocations = true;
    d.capacity.insert(
        "memory".into(),
        DeviceCapacity {
            value: 80 * GI,
            request_policy: policy,
        },
    );
    d
}

fn range_policy() -> CapacityRequestPolicy {
    CapacityRequestPolicy {
        default: Some(10 * GI),
        valid_values: vec![],
        valid_range: Some(CapacityRange {
            min: 10 * GI,
            max: Some(40 * GI),
            step: Some(10 * GI),
        }),
    }
}

fn asking(gi: Option<i64>) -> ExactDeviceRequest {
    let mut e = exact("gpu", 1);
    if let Some(gi) = gi {
        e.capacity_requests.insert("memory".into(), gi * GI);
    }
    e
}

/// A workload of one pod of each of `claims`' shapes.
fn one_pod_each(claims: &[lockstep_dra::ClaimRef]) -> Vec<lockstep_dra::TaskShape> {
    claims
        .iter()
        .map(|&c| lockstep_dra::TaskShape {
            claims: vec![c],
            weight: 1.0,
        })
        .collect()
}

/// One node, `node-a`, with two shared 80 Gi GPUs, `gpu-0` and `gpu-1`.
fn two_shared_gpus() -> World {
    let mut w = World::new();
    w.nodes.push(node("node-a", &[]));
    w.slices.push(slice_on(
        "gpus",
        "node-a",
        "node-a",
        vec![shared_gpu("gpu-0", None), shared_gpu("gpu-1", None)],
    ));
    w
}

fn world(devices: Vec<Device>, requests: Vec<(&str, ExactDeviceRequest)>) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = vec![slice_on("a", "node-a", "node-a", devices)];
    w.templates = requests
        .into_iter()
        .map(|(n, e)| template(n, vec![request("gpu", e)], vec![]))
        .collect();
    w
}

#[test]
fn one_gpu_is_shared_by_several_pods_within_its_memory() {
    let w = world(
        vec![shared_gpu("gpu-0", None)],
        vec![("t", asking(Some(20)))],
    );
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let t = template_ref(&st, "t");
    assert_eq!(st.max_replicas(&[t], n, 100), 4);
    let mut held = Vec::new();
    for _ in 0..4 {
        let a = st.try_allocate(n, &[t]).unwrap();
        assert_eq!(devices_of(&st, &a), ["gpu-0"]);
        st.reserve(&a);
        held.push(a);
    }
    assert!(st.try_allocate(n, &[t]).is_err());
    let r = st.allocation_result(n, &held[0].claims[0]);
    assert_eq!(
        r.devices[0].consumed_capacity,
        consumed(&[("memory", 20 * GI)])
    );
    assert!(r.devices[0].share_id.is_some());
    st.release(&held.pop().unwrap());
    assert!(st.try_allocate(n, &[t]).is_ok());
}

#[test]
fn requests_are_rounded_up_by_the_range_policy() {
    let w = world(
        vec![shared_gpu("gpu-0", Some(range_policy()))],
        vec![
            ("fifteen", asking(Some(15))),
            ("none", asking(None)),
            ("fifty", asking(Some(50))),
            ("two", asking(Some(2))),
        ],
    );
    let st = w.state();
    let n = node_id(&w, "node-a");
    // 15Gi rounds up to 20Gi: 4 fit.
    assert_eq!(st.max_replicas(&[template_ref(&st, "fifteen")], n, 100), 4);
    let a = st.try_allocate(n, &[template_ref(&st, "fifteen")]).unwrap();
    assert_eq!(
        st.allocation_result(n, &a.claims[0]).devices[0].consumed_capacity,
        consumed(&[("memory", 20 * GI)])
    );
    // No amount: the policy default, 10Gi: 8 fit.
    assert_eq!(st.max_replicas(&[template_ref(&st, "none")], n, 100), 8);
    // Above the range maximum: never.
    assert_eq!(st.max_replicas(&[template_ref(&st, "fifty")], n, 100), 0);
    // Below the minimum: rounded up to it.
    assert_eq!(st.max_replicas(&[template_ref(&st, "two")], n, 100), 8);
}

#[test]
fn valid_values_round_up_to_the_next_value() {
    let policy = CapacityRequestPolicy {
        default: None,
        valid_values: vec![10 * GI, 40 * GI, 80 * GI],
        valid_range: None,
    };
    let w = world(
        vec![shared_gpu("gpu-0", Some(policy))],
        vec![
            ("t", asking(Some(11))),
            ("huge", asking(Some(90))),
            ("none", asking(None)),
        ],
    );
    let st = w.state();
    let n = node_id(&w, "node-a");
    assert_eq!(st.max_replicas(&[template_ref(&st, "t")], n, 100), 2);
    assert_eq!(st.max_replicas(&[template_ref(&st, "huge")], n, 100), 0);
    // No amount and no default: the whole capacity.
    assert_eq!(st.max_replicas(&[template_ref(&st, "none")], n, 100), 1);
}

#[test]
fn a_request_for_a_capacity_the_device_lacks_does_not_match() {
    let mut e = exact("gpu", 1);
    e.capacity_requests.insert("bandwidth".into(), 1);
    let w = world(vec![shared_gpu("gpu-0", None)], vec![("t", e)]);
    let st = w.state();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
            .is_err()
    );
}

#[test]
fn qualified_capacity_names_work_too() {
    let mut e = exact("gpu", 1);
    e.capacity_requests
        .insert("gpu.example.com/memory".into(), 40 * GI);
    let w = world(vec![shared_gpu("gpu-0", None)], vec![("t", e)]);
    let st = w.state();
    assert_eq!(
        st.max_replicas(&[template_ref(&st, "t")], node_id(&w, "node-a"), 100),
        2
    );
}

#[test]
fn capacity_requests_on_an_exclusive_device_only_filter() {
    let plain = with_capacity(device("gpu-0", &[]), "memory", 16 * GI);
    let big = with_capacity(device("gpu-1", &[]), "memory", 80 * GI);
    let w = world(vec![plain, big], vec![("t", asking(Some(40)))]);
    let st = w.state();
    let n = node_id(&w, "node-a");
    let a = st.try_allocate(n, &[template_ref(&st, "t")]).unwrap();
    assert_eq!(devices_of(&st, &a), ["gpu-1"]);
    assert!(a.claims[0].devices[0].consumed_capacity.is_empty());
    assert_eq!(st.max_replicas(&[template_ref(&st, "t")], n, 100), 1);
}

#[test]
fn a_shared_device_can_serve_two_requests_of_one_claim() {
    let mut w = world(vec![shared_gpu("gpu-0", None)], vec![]);
    w.templates = vec![template(
        "t",
        vec![
            request("a", asking(Some(30))),
            request("b", asking(Some(30))),
        ],
        vec![],
    )];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["a=gpu-0", "b=gpu-0"]);
    w.templates = vec![template(
        "t",
        vec![
            request("a", asking(Some(50))),
            request("b", asking(Some(50))),
        ],
        vec![],
    )];
    let st = w.state();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
            .is_err()
    );
}

#[test]
fn a_shared_device_consumes_its_counters_once() {
    use lockstep_model::dra::{CounterSet, DeviceCounterConsumption};
    let mut shared = shared_gpu("gpu-0-shared", None);
    shared.consumes_counters = vec![DeviceCounterConsumption {
        counter_set: "gpu-0".into(),
        counters: [("slices".to_string(), 7)].into(),
    }];
    let mut exclusive = device("gpu-0-1g", &[]);
    exclusive.consumes_counters = vec![DeviceCounterConsumption {
        counter_set: "gpu-0".into(),
        counters: [("slices".to_string(), 1)].into(),
    }];
    let mut w = world(vec![shared, exclusive], vec![("share", asking(Some(10)))]);
    w.slices[0].shared_counters = vec![CounterSet {
        name: "gpu-0".into(),
        counters: [("slices".to_string(), 7)].into(),
    }];
    w.templates.push(template(
        "mig",
        vec![request(
            "gpu",
            selecting(exact("gpu", 1), &["!device.allowMultipleAllocations"]),
        )],
        vec![],
    ));
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let share = template_ref(&st, "share");
    // Many shares, one consumption of the counters.
    assert_eq!(st.max_replicas(&[share], n, 100), 8);
    let a = st.try_allocate(n, &[share]).unwrap();
    st.reserve(&a);
    assert!(st.try_allocate(n, &[template_ref(&st, "mig")]).is_err());
    st.release(&a);
    assert!(st.try_allocate(n, &[template_ref(&st, "mig")]).is_ok());
}

#[test]
fn all_mode_takes_shared_devices_with_room() {
    let mut e = all("gpu");
    e.capacity_requests.insert("memory".into(), 50 * GI);
    let w = world(
        vec![shared_gpu("gpu-0", None), shared_gpu("gpu-1", None)],
        vec![("half", asking(Some(40))), ("all", e)],
    );
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let a = st.try_allocate(n, &[template_ref(&st, "half")]).unwrap();
    st.reserve(&a);
    let b = st.try_allocate(n, &[template_ref(&st, "all")]).unwrap();
    assert_eq!(devices_of(&st, &b), ["gpu-1"]);
}

#[test]
fn capacity_consumed_by_claims_allocated_in_the_input_is_in_use() {
    use lockstep_model::dra::{AllocationResult, DeviceAllocation};
    let mut w = world(
        vec![shared_gpu("gpu-0", None)],
        vec![("thirty", asking(Some(30))), ("twenty", asking(Some(20)))],
    );
    let big = selecting(
        exact("gpu", 1),
        &["device.attributes['gpu.example.com'].model == 'H100'"],
    );
    let mut c = claim(
        "running",
        vec![first_available(
            "gpu",
            vec![("big", big), ("shared", asking(Some(60)))],
        )],
        vec![],
    );
    c.allocation = Some(AllocationResult {
        devices: vec![DeviceAllocation {
            request: "gpu/shared".into(),
            driver: DRIVER.into(),
            pool: "node-a".into(),
            device: "gpu-0".into(),
            consumed_capacity: consumed(&[("memory", 60 * GI)]),
            share_id: Some("5c6a0d7e-0000-4000-8000-000000000001".into()),
            ..DeviceAllocation::default()
        }],
        node_selector: None,
    });
    c.reserved_for = vec!["default/running-pod".into()];
    w.claims = vec![c];
    let st = w.state();
    let n = node_id(&w, "node-a");
    assert_eq!(st.max_replicas(&[template_ref(&st, "thirty")], n, 10), 0);
    assert_eq!(st.max_replicas(&[template_ref(&st, "twenty")], n, 10), 1);
    let running = st.allocation_of(n, &[claim_ref(&st, "running")]).unwrap();
    assert_eq!(picked(&st, &running), ["gpu/shared=gpu-0"]);
    let mut st = st;
    st.release(&running);
    assert_eq!(st.max_replicas(&[template_ref(&st, "twenty")], n, 10), 4);
}

#[test]
fn an_input_allocation_without_a_share_id_holds_a_shareable_device_whole() {
    use lockstep_model::dra::{AllocationResult, DeviceAllocation};
    // gpu-0 allows multiple allocations, but the claim in the input holds it without a
    // shareID (allocated while the device did not allow sharing, say): nobody else may use
    // it, whatever capacity is left. gpu-1 is free.
    let mut w = world(
        vec![shared_gpu("gpu-0", None), shared_gpu("gpu-1", None)],
        vec![("ten", asking(Some(10)))],
    );
    let mut c = claim("whole", vec![request("gpu", exact("gpu", 1))], vec![]);
    c.allocation = Some(AllocationResult {
        devices: vec![DeviceAllocation {
            request: "gpu".into(),
            driver: DRIVER.into(),
            pool: "node-a".into(),
            device: "gpu-0".into(),
            ..DeviceAllocation::default()
        }],
        node_selector: None,
    });
    c.reserved_for = vec!["default/running-pod".into()];
    w.claims = vec![c];
    let st = w.state();
    let n = node_id(&w, "node-a");
    let whole = st.allocation_of(n, &[claim_ref(&st, "whole")]).unwrap();
    assert_eq!(devices_of(&st, &whole), ["gpu-0"]);
    let gpu0 = whole.claims[0].devices[0].device;
    assert!(!whole.claims[0].devices[0].shared);
    assert!(st.device_in_use(gpu0));
    let a = st.try_allocate(n, &[template_ref(&st, "ten")]).unwrap();
    assert_eq!(devices_of(&st, &a), ["gpu-1"]);
    assert!(a.claims[0].devices[0].shared);
    // Only gpu-1 can be shared: 8 shares of 10Gi.
    assert_eq!(st.max_replicas(&[template_ref(&st, "ten")], n, 100), 8);

    // Released, gpu-0 is shareable again.
    let mut st = st;
    st.release(&whole);
    assert!(!st.device_in_use(gpu0));
    assert_eq!(st.max_replicas(&[template_ref(&st, "ten")], n, 100), 16);
}

#[test]
fn an_allocation_naming_an_unknown_request_is_bad_input() {
    use lockstep_model::dra::{AllocationResult, DeviceAllocation};
    let mut w = world(vec![shared_gpu("gpu-0", None)], vec![]);
    let mut c = claim("running", vec![request("gpu", asking(Some(10)))], vec![]);
    c.allocation = Some(AllocationResult {
        devices: vec![DeviceAllocation {
            request: "gpu/sub".into(),
            driver: DRIVER.into(),
            pool: "node-a".into(),
            device: "gpu-0".into(),
            ..DeviceAllocation::default()
        }],
        node_selector: None,
    });
    w.claims = vec![c];
    let e = lockstep_dra::DraState::new(w.inputs())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ResourceClaim default/running: status.allocation.devices.results[0].request"),
        "{e}"
    );
}

#[test]
fn device_load_counts_shares_by_their_most_used_capacity() {
    // Two shared GPUs and a NIC the GPU class does not select.
    let nic = device("nic-0", &[]);
    let mut w = world(
        vec![shared_gpu("gpu-0", None), shared_gpu("gpu-1", None), nic],
        vec![("quarter", asking(Some(20))), ("whole", exact("gpu", 2))],
    );
    w.classes[0].selectors = vec!["device.attributes['gpu.example.com'].model == 'A100'".into()];
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let (quarter, whole) = (template_ref(&st, "quarter"), template_ref(&st, "whole"));
    let load = st.device_load(n, &[quarter]);
    assert_eq!(
        (load.used, load.demand, load.total),
        (0, 250, 2000),
        "the NIC does not count; a quarter of a GPU is 250 units"
    );
    assert_eq!(st.device_load(n, &[whole]).demand, 2000);
    let a = st.try_allocate(n, &[quarter]).unwrap();
    st.reserve(&a);
    assert_eq!(st.device_load(n, &[quarter]).used, 250);
    st.release(&a);
    assert_eq!(st.device_load(n, &[quarter]).used, 0);
}

#[test]
fn fragmentation_delta_prefers_filling_a_partly_used_gpu() {
    use lockstep_dra::FragmentMeasure::Devices;
    // Two nodes of two shared GPUs each; on node-a one GPU is half used.
    let mut w = World::new();
    for n in ["node-a", "node-b"] {
        w.nodes.push(node(n, &[]));
        w.slices.push(slice_on(
            &format!("{n}-gpus"),
            n,
            n,
            vec![shared_gpu("gpu-0", None), shared_gpu("gpu-1", None)],
        ));
    }
    w.templates = vec![
        template("half", vec![request("gpu", asking(Some(40)))], vec![]),
        template("whole", vec![request("gpu", exact("gpu", 1))], vec![]),
    ];
    let mut st = w.state();
    let (a, b) = (node_id(&w, "node-a"), node_id(&w, "node-b"));
    let (half, whole) = (template_ref(&st, "half"), template_ref(&st, "whole"));
    let first = st.try_allocate(a, &[half]).unwrap();
    st.reserve(&first);
    let shapes = one_pod_each(&[half, whole]);
    let mut fit = |_: usize| (i64::MAX, i64::MAX);
    // Another half on node-a fills its used GPU: the half-free GPU no whole-GPU task could
    // use is gone (fragmentation shrinks by 500 units for the whole-GPU half of the tasks).
    let on_a = st.try_allocate(a, &[half]).unwrap();
    assert_eq!(devices_of(&st, &on_a), ["gpu-0"]);
    assert_eq!(
        st.fragmentation_delta(&on_a, &shapes, 1, Devices, &[], &mut fit),
        -250.0
    );
    // On node-b it breaks a whole GPU: 500 more units whole-GPU tasks cannot use.
    let on_b = st.try_allocate(b, &[half]).unwrap();
    assert_eq!(
        st.fragmentation_delta(&on_b, &shapes, 1, Devices, &[], &mut fit),
        250.0
    );
    // A task that does not fit the node's cpu after the placement finds every free unit a
    // fragment.
    let mut no_room = |_: usize| (1, 0);
    assert!(st.fragmentation_delta(&on_a, &shapes, 1, Devices, &[1], &mut no_room) > 0.0);
}

#[test]
fn allocation_choices_offer_every_shared_gpu_and_fragmentation_picks_among_them() {
    use lockstep_dra::FragmentMeasure::Devices;
    // One node of two shared 80 Gi GPUs; gpu-1 is 70% used (56 Gi), gpu-0 is free.
    let mut w = two_shared_gpus();
    w.templates = vec![
        template("seventy", vec![request("gpu", asking(Some(56)))], vec![]),
        template("small", vec![request("gpu", asking(Some(24)))], vec![]),
        template("whole", vec![request("gpu", exact("gpu", 1))], vec![]),
    ];
    let mut st = w.state();
    let a = node_id(&w, "node-a");
    let (seventy, small, whole) = (
        template_ref(&st, "seventy"),
        template_ref(&st, "small"),
        template_ref(&st, "whole"),
    );
    let choices = st.allocation_choices(a, &[seventy]);
    assert_eq!(choices.len(), 2, "either free GPU");
    assert_eq!(devices_of(&st, &choices[0]), ["gpu-0"]);
    assert_eq!(devices_of(&st, &choices[1]), ["gpu-1"]);
    st.reserve(&choices[1]);
    // A whole GPU is no choice between shares: the first allocation only.
    assert_eq!(st.allocation_choices(a, &[whole]).len(), 1);
    // 24 Gi (300 units) fits both GPUs; first fit takes gpu-0.
    let choices = st.allocation_choices(a, &[small]);
    let picked: Vec<Vec<String>> = choices.iter().map(|c| devices_of(&st, c)).collect();
    assert_eq!(picked, [["gpu-0"], ["gpu-1"]]);
    // Tasks: the 300-unit one and a whole GPU, equally likely. Before: free 1000 (whole) and
    // 300; the small task can use both (0 fragments), the whole-GPU task not the 300 (300):
    // expected 150.
    let shapes = one_pod_each(&[small, whole]);
    let mut fit = |_: usize| (i64::MAX, i64::MAX);
    // On gpu-0: free 700 and 300, no whole GPU left: the whole-GPU task finds all 1000 units
    // fragments, the small one none: expected 500, growth 350.
    assert_eq!(
        st.fragmentation_delta(&choices[0], &shapes, 7, Devices, &[], &mut fit),
        350.0
    );
    // On gpu-1: free 1000 (whole) and 0: no fragments at all, growth -150.
    assert_eq!(
        st.fragmentation_delta(&choices[1], &shapes, 7, Devices, &[], &mut fit),
        -150.0
    );
}

#[test]
fn remembered_answers_are_shared_by_alike_nodes_and_only_by_them() {
    // Three nodes of the same class (two shared GPUs each); node-a's gpu-0 is half used.
    let mut w = World::new();
    for n in ["node-a", "node-b", "node-c"] {
        w.nodes.push(node(n, &[]));
        w.slices.push(slice_on(
            &format!("{n}-gpus"),
            n,
            n,
            vec![shared_gpu("gpu-0", None), shared_gpu("gpu-1", None)],
        ));
    }
    w.templates = vec![template(
        "half",
        vec![request("gpu", asking(Some(40)))],
        vec![],
    )];
    let mut st = w.state();
    let (a, b, c) = (
        node_id(&w, "node-a"),
        node_id(&w, "node-b"),
        node_id(&w, "node-c"),
    );
    let half = template_ref(&st, "half");
    let used = st.try_allocate(a, &[half]).unwrap();
    st.reserve(&used);
    let computed = std::cell::Cell::new(0);
    let ask = |st: &lockstep_dra::DraState, n, inputs: &[i64], answer: i64| {
        st.remembered(n, &[half], inputs, || {
            computed.set(computed.get() + 1);
            Some(answer)
        })
    };
    assert_eq!(ask(&st, b, &[1], 10), Some(10));
    // node-c is used as node-b is: the answer is node-b's, not computed again.
    assert_eq!(ask(&st, c, &[1], 20), Some(10));
    // Other inputs, or a node used differently, are asked anew.
    assert_eq!(ask(&st, c, &[2], 30), Some(30));
    assert_eq!(ask(&st, a, &[1], 40), Some(40));
    // Once node-b's usage changes it is no longer node-c's alike.
    let on_b = st.try_allocate(b, &[half]).unwrap();
    st.reserve(&on_b);
    assert_eq!(ask(&st, b, &[1], 50), Some(40), "now used as node-a is");
    st.release(&on_b);
    st.release(&used);
    assert_eq!(ask(&st, a, &[1], 60), Some(10), "now free as node-b was");
    assert_eq!(computed.get(), 3);
}

#[test]
fn fragments_counted_in_copies_are_what_is_left_once_the_node_is_filled_with_the_task() {
    use lockstep_dra::FragmentMeasure::{Copies, Devices};
    // One node of two shared 80 Gi GPUs; gpu-1 is 70% used (56 Gi = 700 units), gpu-0 free.
    let mut w = two_shared_gpus();
    w.templates = vec![
        template("seventy", vec![request("gpu", asking(Some(56)))], vec![]),
        template("small", vec![request("gpu", asking(Some(24)))], vec![]),
        template("third", vec![request("gpu", asking(Some(24)))], vec![]),
        template("two", vec![request("gpu", exact("gpu", 2))], vec![]),
    ];
    let mut st = w.state();
    let a = node_id(&w, "node-a");
    let (seventy, small, third, two) = (
        template_ref(&st, "seventy"),
        template_ref(&st, "small"),
        template_ref(&st, "third"),
        template_ref(&st, "two"),
    );
    let used = st.allocation_choices(a, &[seventy]).remove(1);
    st.reserve(&used);
    let only = |claims| one_pod_each(&[claims]);
    let unbounded = |_: usize| (i64::MAX, i64::MAX);
    // A 300-unit pod on gpu-0 (free 1000 and 300 before; 700 and 300 after) or on gpu-1
    // (1000 and 0 after).
    let choices = st.allocation_choices(a, &[small]);
    let (on_0, on_1) = (&choices[0], &choices[1]);
    // The 700-unit task. Before: one copy fits (gpu-0), 1300 - 700 = 600 left. After on
    // gpu-0: one copy, 1000 - 700 = 300 left (growth -300); on gpu-1: one copy, 300 left
    // (-300). Counting devices instead: gpu-1's 300 units are a fragment before and after on
    // gpu-0 (growth 0), none after on gpu-1 (-300).
    let seventy_task = only(seventy);
    for (choice, copies, devices) in [(on_0, -300.0, 0.0), (on_1, -300.0, -300.0)] {
        let mut fit = unbounded;
        assert_eq!(
            st.fragmentation_delta(choice, &seventy_task, 1, Copies, &[], &mut fit),
            copies
        );
        assert_eq!(
            st.fragmentation_delta(choice, &seventy_task, 1, Devices, &[], &mut fit),
            devices
        );
    }
    // The 300-unit task: four copies before (three on gpu-0, one on gpu-1), 100 left; three
    // after either choice, 100 left: no growth. When the node's cpu holds two copies before
    // and one after: 1300 - 600 = 700 left before, 1000 - 300 = 700 after.
    let third_task = only(third);
    let mut cpu_bound = |_: usize| (2, 1);
    for choice in [on_0, on_1] {
        let mut fit = unbounded;
        assert_eq!(
            st.fragmentation_delta(choice, &third_task, 2, Copies, &[], &mut fit),
            0.0
        );
        assert_eq!(
            st.fragmentation_delta(choice, &third_task, 2, Copies, &[1], &mut cpu_bound),
            0.0
        );
    }
    // Two whole GPUs: no copy fits before (gpu-1 is in use), so every free unit is a
    // fragment before and after: the growth is the units the pod takes.
    let mut fit = unbounded;
    assert_eq!(
        st.fragmentation_delta(on_0, &only(two), 3, Copies, &[], &mut fit),
        -300.0
    );
    // Where the node's cpu holds no copy after the placement, every unit left is a fragment:
    // 300 left before the 700-unit task's copy (600), 1000 after: growth 400.
    let mut no_room = |_: usize| (1, 0);
    assert_eq!(
        st.fragmentation_delta(on_0, &seventy_task, 4, Copies, &[2], &mut no_room),
        400.0
    );
}

#[test]
fn counted_in_copies_a_task_weighs_by_the_cube_of_the_inverse_of_its_share() {
    use lockstep_dra::FragmentMeasure::{Copies, Devices};
    // One node of two free shared GPUs; a half-GPU pod goes on gpu-0.
    let mut w = two_shared_gpus();
    w.templates = vec![
        template("half", vec![request("gpu", asking(Some(40)))], vec![]),
        template("whole", vec![request("gpu", exact("gpu", 1))], vec![]),
    ];
    let st = w.state();
    let a = node_id(&w, "node-a");
    let (half, whole) = (template_ref(&st, "half"), template_ref(&st, "whole"));
    let on_0 = st.try_allocate(a, &[half]).unwrap();
    assert_eq!(devices_of(&st, &on_0), ["gpu-0"]);
    // One pod of each shape. Before, both tasks fill the node exactly (four halves, two
    // wholes); after, three halves still fill it, one whole leaves gpu-0's 500 units.
    let shapes = one_pod_each(&[half, whole]);
    let mut fit = |_: usize| (i64::MAX, i64::MAX);
    // The half-GPU task weighs (1000 / 500)^3 = 8 pods, the whole-GPU one 1: 500 / 9.
    let copies = st.fragmentation_delta(&on_0, &shapes, 1, Copies, &[], &mut fit);
    assert!((copies - 500.0 / 9.0).abs() < 1e-9, "{copies}");
    // Counting devices, the two weigh the same: 500 / 2.
    assert_eq!(
        st.fragmentation_delta(&on_0, &shapes, 1, Devices, &[], &mut fit),
        250.0
    );
}
