//! Basics and backtracking: selectors of class and request, catalog order, several claims,
//! reserve/release, already allocated claims, admin access, estimation, results.

mod common;

use common::*;
use lockstep_dra::{ClaimRef, UnfitReason};
use lockstep_model::dra::AllocationResult;
use lockstep_model::dra::DeviceAllocation;

fn one_node(devices: Vec<lockstep_model::dra::Device>) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = vec![slice_on("node-a-gpus", "node-a", "node-a", devices)];
    w
}

#[test]
fn picks_the_first_matching_device_in_catalog_order() {
    let mut w = one_node(vec![
        gpu("gpu-0", "T4", 16, "pci0", 0),
        gpu("gpu-1", "A100", 80, "pci0", 0),
    ]);
    w.claims = vec![claim("c", vec![request("gpu", exact("gpu", 1))], vec![])];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[claim_ref(&st, "c")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["gpu=gpu-0"]);
    // Same input, same answer.
    let again = st
        .try_allocate(node_id(&w, "node-a"), &[claim_ref(&st, "c")])
        .unwrap();
    assert_eq!(a, again);
}

#[test]
fn class_and_request_selectors_must_both_hold() {
    let mut w = one_node(vec![
        gpu("gpu-0", "T4", 16, "pci0", 0),
        gpu("gpu-1", "A100", 40, "pci0", 0),
        gpu("gpu-2", "A100", 80, "pci0", 0),
    ]);
    w.classes.push(class(
        "big-gpu",
        &["device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"],
    ));
    w.claims = vec![claim(
        "c",
        vec![request(
            "gpu",
            selecting(
                exact("big-gpu", 1),
                &["device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('40Gi'))"],
            ),
        )],
        vec![],
    )];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[claim_ref(&st, "c")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["gpu=gpu-2"]);
}

#[test]
fn backtracks_within_a_claim() {
    // "any" would take gpu-0 first, leaving nothing for "model-a"; the search backtracks.
    let mut w = one_node(vec![
        gpu("gpu-0", "A", 16, "pci0", 0),
        gpu("gpu-1", "B", 16, "pci0", 0),
    ]);
    w.claims = vec![claim(
        "c",
        vec![
            request("any", exact("gpu", 1)),
            request(
                "model-a",
                selecting(
                    exact("gpu", 1),
                    &["device.attributes['gpu.example.com'].model == 'A'"],
                ),
            ),
        ],
        vec![],
    )];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[claim_ref(&st, "c")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["any=gpu-1", "model-a=gpu-0"]);
}

#[test]
fn backtracks_across_claims() {
    let mut w = one_node(vec![
        gpu("gpu-0", "A", 16, "pci0", 0),
        gpu("gpu-1", "B", 16, "pci0", 0),
    ]);
    w.claims = vec![
        claim("first", vec![request("gpu", exact("gpu", 1))], vec![]),
        claim(
            "second",
            vec![request(
                "gpu",
                selecting(
                    exact("gpu", 1),
                    &["device.attributes['gpu.example.com'].model == 'A'"],
                ),
            )],
            vec![],
        ),
    ];
    let st = w.state();
    let refs = [claim_ref(&st, "first"), claim_ref(&st, "second")];
    let a = st.try_allocate(node_id(&w, "node-a"), &refs).unwrap();
    assert_eq!(picked(&st, &a), ["gpu=gpu-1", "gpu=gpu-0"]);
}

#[test]
fn not_enough_devices_is_a_short_unfit_message() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.claims = vec![
        claim("c1", vec![request("gpu", exact("gpu", 1))], vec![]),
        claim("c2", vec![request("gpu", exact("gpu", 1))], vec![]),
    ];
    let st = w.state();
    let refs = [claim_ref(&st, "c1"), claim_ref(&st, "c2")];
    let e = st.try_allocate(node_id(&w, "node-a"), &refs).unwrap_err();
    assert_eq!(e.reason, UnfitReason::CannotAllocateAllClaims);
    assert_eq!(e.to_string(), "cannot allocate all claims");
}

#[test]
fn a_node_without_devices_is_unfit() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.nodes.push(node("node-b", &[]));
    w.claims = vec![claim("c", vec![request("gpu", exact("gpu", 1))], vec![])];
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-b"), &[claim_ref(&st, "c")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::CannotAllocateAllClaims);
}

#[test]
fn reserve_takes_devices_and_release_gives_them_back() {
    let mut w = one_node(vec![
        gpu("gpu-0", "A", 16, "pci0", 0),
        gpu("gpu-1", "A", 16, "pci0", 0),
    ]);
    w.templates = vec![template(
        "one",
        vec![request("gpu", exact("gpu", 1))],
        vec![],
    )];
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let t = template_ref(&st, "one");
    let a1 = st.try_allocate(n, &[t]).unwrap();
    // try_allocate does not mutate.
    assert_eq!(st.try_allocate(n, &[t]).unwrap(), a1);
    st.reserve(&a1);
    let a2 = st.try_allocate(n, &[t]).unwrap();
    assert_eq!(devices_of(&st, &a2), ["gpu-1"]);
    st.reserve(&a2);
    assert!(st.try_allocate(n, &[t]).is_err());
    st.release(&a1);
    assert_eq!(
        devices_of(&st, &st.try_allocate(n, &[t]).unwrap()),
        ["gpu-0"]
    );
    st.release(&a2);
    assert_eq!(st.max_replicas(&[t], n, 10), 2);
}

#[test]
fn unknown_device_class_is_reported() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.claims = vec![claim("c", vec![request("gpu", exact("nope", 1))], vec![])];
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-a"), &[claim_ref(&st, "c")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::DeviceClassNotFound);
    assert!(
        e.to_string().contains("device class nope does not exist"),
        "{e}"
    );
}

fn allocated_on_node_a(w: &mut World) {
    let mut c = claim("shared", vec![request("gpu", exact("gpu", 1))], vec![]);
    c.allocation = Some(AllocationResult {
        devices: vec![DeviceAllocation {
            request: "gpu".into(),
            driver: DRIVER.into(),
            pool: "node-a".into(),
            device: "gpu-0".into(),
            ..DeviceAllocation::default()
        }],
        node_selector: Some(lockstep_model::NodeSelector {
            terms: vec![lockstep_model::NodeSelectorTerm {
                match_expressions: vec![],
                match_fields: vec![lockstep_model::Requirement {
                    key: "metadata.name".into(),
                    operator: lockstep_model::Operator::In,
                    values: vec!["node-a".into()],
                }],
            }],
        }),
    });
    c.reserved_for = vec!["default/running".into()];
    w.claims.push(c);
}

#[test]
fn an_allocated_claim_pins_its_users_to_its_nodes_and_holds_its_devices() {
    let mut w = one_node(vec![
        gpu("gpu-0", "A", 16, "pci0", 0),
        gpu("gpu-1", "A", 16, "pci0", 0),
    ]);
    w.nodes.push(node("node-b", &[]));
    w.slices.push(slice_on(
        "node-b-gpus",
        "node-b",
        "node-b",
        vec![gpu("gpu-0", "A", 16, "pci0", 0)],
    ));
    allocated_on_node_a(&mut w);
    w.templates = vec![template(
        "one",
        vec![request("gpu", exact("gpu", 1))],
        vec![],
    )];
    let st = w.state();
    let shared = claim_ref(&st, "shared");
    let e = st
        .try_allocate(node_id(&w, "node-b"), &[shared])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::ClaimNotAvailableOnNode);
    assert_eq!(e.message(), "resourceclaim not available on the node");
    let a = st.try_allocate(node_id(&w, "node-a"), &[shared]).unwrap();
    assert!(a.claims[0].already_allocated);
    assert_eq!(devices_of(&st, &a), ["gpu-0"]);
    // gpu-0 on node-a is in use: a new claim gets gpu-1 there.
    let t = template_ref(&st, "one");
    assert_eq!(
        devices_of(&st, &st.try_allocate(node_id(&w, "node-a"), &[t]).unwrap()),
        ["gpu-1"]
    );
    assert_eq!(st.max_replicas(&[t], node_id(&w, "node-a"), 10), 1);
}

#[test]
fn a_claim_that_cannot_be_allocated_is_reported_before_an_allocated_claim_elsewhere() {
    // kube-scheduler's DynamicResources runs the allocator before it rejects a node for an
    // allocated claim that is not available there.
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.nodes.push(node("node-b", &[]));
    w.slices.push(slice_on(
        "node-b-gpus",
        "node-b",
        "node-b",
        vec![gpu("gpu-0", "A", 16, "pci0", 0)],
    ));
    allocated_on_node_a(&mut w);
    w.templates = vec![
        template("one", vec![request("gpu", exact("gpu", 1))], vec![]),
        template("two", vec![request("gpu", exact("gpu", 2))], vec![]),
    ];
    let st = w.state();
    let b = node_id(&w, "node-b");
    let shared = claim_ref(&st, "shared");
    // node-b has one GPU: one more fits, so the allocated claim decides.
    let e = st
        .try_allocate(b, &[shared, template_ref(&st, "one")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::ClaimNotAvailableOnNode);
    // Two more do not fit: that is the reason, whichever claim comes first.
    for claims in [
        [shared, template_ref(&st, "two")],
        [template_ref(&st, "two"), shared],
    ] {
        assert_eq!(
            st.try_allocate(b, &claims).unwrap_err().reason,
            UnfitReason::CannotAllocateAllClaims
        );
        assert_eq!(
            st.fits(b, &claims).unwrap_err().reason,
            UnfitReason::CannotAllocateAllClaims
        );
    }
}

#[test]
fn evicting_the_last_user_of_an_allocated_claim_frees_its_devices() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    allocated_on_node_a(&mut w);
    w.templates = vec![template(
        "one",
        vec![request("gpu", exact("gpu", 1))],
        vec![],
    )];
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let t = template_ref(&st, "one");
    assert!(st.try_allocate(n, &[t]).is_err());
    let shared = claim_ref(&st, "shared");
    let running = st.allocation_of(n, &[shared]).expect("allocated");
    st.release(&running);
    let lockstep_dra::ClaimRef::Claim(id) = shared else {
        unreachable!()
    };
    assert!(!st.is_allocated(id));
    assert!(st.try_allocate(n, &[t]).is_ok());
    // Rolling the eviction back restores the allocation.
    st.reserve(&running);
    assert!(st.is_allocated(id));
    assert!(st.try_allocate(n, &[t]).is_err());
}

#[test]
fn a_claim_shared_by_pods_is_allocated_once_and_freed_with_its_last_user() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.nodes.push(node("node-b", &[]));
    w.slices.push(slice_on(
        "node-b-gpus",
        "node-b",
        "node-b",
        vec![gpu("gpu-0", "A", 16, "pci0", 0)],
    ));
    w.claims = vec![claim(
        "group",
        vec![request("gpu", exact("gpu", 1))],
        vec![],
    )];
    let mut st = w.state();
    let (a, b) = (node_id(&w, "node-a"), node_id(&w, "node-b"));
    let c = claim_ref(&st, "group");
    let p1 = st.try_allocate(b, &[c]).unwrap();
    assert!(!p1.claims[0].already_allocated);
    st.reserve(&p1);
    // The claim is now allocated on node-b's local GPU: node-a is out.
    assert_eq!(
        st.try_allocate(a, &[c]).unwrap_err().reason,
        UnfitReason::ClaimNotAvailableOnNode
    );
    let p2 = st.try_allocate(b, &[c]).unwrap();
    assert!(p2.claims[0].already_allocated);
    st.reserve(&p2);
    st.release(&p1);
    assert!(
        st.try_allocate(a, &[c]).is_err(),
        "still used by the second pod"
    );
    st.release(&p2);
    assert!(
        st.try_allocate(a, &[c]).is_ok(),
        "deallocated with its last user"
    );
    // Only shared claims: replicas are not limited by devices.
    assert_eq!(st.max_replicas(&[c], b, 7), 7);
    assert_eq!(st.max_replicas(&[], b, 3), 3);
}

#[test]
fn admin_access_does_not_consume_devices() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    let mut admin = exact("gpu", 1);
    admin.admin_access = true;
    w.templates = vec![
        template("one", vec![request("gpu", exact("gpu", 1))], vec![]),
        template("monitor", vec![request("gpu", admin)], vec![]),
    ];
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let one = st.try_allocate(n, &[template_ref(&st, "one")]).unwrap();
    st.reserve(&one);
    let monitor = st.try_allocate(n, &[template_ref(&st, "monitor")]).unwrap();
    assert_eq!(devices_of(&st, &monitor), ["gpu-0"]);
    assert!(monitor.claims[0].devices[0].admin_access);
    st.reserve(&monitor);
    st.release(&one);
    // The monitor holds nothing: the device is free again.
    assert!(st.try_allocate(n, &[template_ref(&st, "one")]).is_ok());
}

#[test]
fn admin_access_cannot_take_one_device_twice_in_a_claim() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    let mut admin = exact("gpu", 2);
    admin.admin_access = true;
    w.templates = vec![template("monitor", vec![request("gpu", admin)], vec![])];
    let st = w.state();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "monitor")])
            .is_err()
    );
}

#[test]
fn estimation_counts_replicas_by_allocating() {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[]), node("node-b", &[])];
    w.slices = vec![
        slice_on(
            "a",
            "node-a",
            "node-a",
            (0..8)
                .map(|i| gpu(&format!("gpu-{i}"), "A", 80, &format!("pci{}", i / 4), 0))
                .collect(),
        ),
        slice_on(
            "b",
            "node-b",
            "node-b",
            (0..3)
                .map(|i| gpu(&format!("gpu-{i}"), "A", 80, "pci0", 0))
                .collect(),
        ),
    ];
    w.templates = vec![
        template("three", vec![request("gpu", exact("gpu", 3))], vec![]),
        template(
            "four-same-root",
            vec![request("gpu", exact("gpu", 4))],
            vec![match_attr("gpu.example.com/pcieRoot", &[])],
        ),
    ];
    let st = w.state();
    let three = template_ref(&st, "three");
    // An upper bound by counting would say 8/3 = 2 on node-a; allocation agrees here...
    assert_eq!(st.max_replicas(&[three], node_id(&w, "node-a"), 100), 2);
    assert_eq!(st.max_replicas(&[three], node_id(&w, "node-a"), 1), 1);
    assert_eq!(st.max_replicas_per_node(&[three], 100), [2, 1]);
    // ...but with a constraint, only 2 groups of 4 on one root exist, and none on node-b.
    let four = template_ref(&st, "four-same-root");
    assert_eq!(st.max_replicas_per_node(&[four], 100), [2, 0]);
    // Two claims per replica.
    assert_eq!(st.max_replicas_per_node(&[three, three], 100), [1, 0]);
}

#[test]
fn allocation_results_name_devices_and_pin_local_devices_to_the_node() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.claims = vec![claim("c", vec![request("gpu", exact("gpu", 1))], vec![])];
    let st = w.state();
    let n = node_id(&w, "node-a");
    let a = st.try_allocate(n, &[claim_ref(&st, "c")]).unwrap();
    let r = st.allocation_result(n, &a.claims[0]);
    assert_eq!(r.devices.len(), 1);
    let d = &r.devices[0];
    assert_eq!(
        (
            d.request.as_str(),
            d.driver.as_str(),
            d.pool.as_str(),
            d.device.as_str()
        ),
        ("gpu", DRIVER, "node-a", "gpu-0")
    );
    assert_eq!(d.share_id, None);
    let sel = r.node_selector.expect("pinned to the node");
    assert_eq!(sel.terms[0].match_fields[0].key, "metadata.name");
    assert_eq!(sel.terms[0].match_fields[0].values, ["node-a"]);
}

#[test]
fn the_same_claim_twice_is_allocated_once() {
    let mut w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    w.claims = vec![claim("c", vec![request("gpu", exact("gpu", 1))], vec![])];
    let st = w.state();
    let c = claim_ref(&st, "c");
    let a = st.try_allocate(node_id(&w, "node-a"), &[c, c]).unwrap();
    assert_eq!(a.claims.len(), 1);
}

#[test]
fn unknown_references_are_unfit_not_panics() {
    let w = one_node(vec![gpu("gpu-0", "A", 16, "pci0", 0)]);
    let st = w.state();
    let e = st
        .try_allocate(
            node_id(&w, "node-a"),
            &[ClaimRef::Claim(lockstep_dra::ClaimId(9))],
        )
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::ClaimNotFound);
}

#[test]
fn the_state_can_be_shared_between_threads() {
    fn assert_traits<T: Send + Sync + Clone>() {}
    assert_traits::<lockstep_dra::DraState>();
    assert_traits::<lockstep_dra::NodeAllocation>();
}

#[test]
fn fits_answers_alike_nodes_by_their_own_usage() {
    // Three nodes with alike devices; a fourth with other models.
    let mut w = World::new();
    for n in ["node-a", "node-b", "node-c", "node-d"] {
        w.nodes.push(node(n, &[]));
        let model = if n == "node-d" { "T4" } else { "A100" };
        w.slices.push(slice_on(
            &format!("{n}-gpus"),
            n,
            n,
            vec![
                gpu("gpu-0", model, 80, "pci0", 0),
                gpu("gpu-1", model, 80, "pci0", 0),
            ],
        ));
    }
    w.templates = vec![template(
        "two-a100",
        vec![request(
            "gpu",
            selecting(
                exact("gpu", 2),
                &["device.attributes['gpu.example.com'].model == 'A100'"],
            ),
        )],
        vec![],
    )];
    let mut st = w.state();
    let t = template_ref(&st, "two-a100");
    let [a, b, c, d] = ["node-a", "node-b", "node-c", "node-d"].map(|n| node_id(&w, n));
    for n in [a, b, c] {
        assert!(st.fits(n, &[t]).is_ok());
    }
    assert_eq!(
        st.fits(d, &[t]).unwrap_err().reason,
        UnfitReason::CannotAllocateAllClaims
    );
    // Node b's devices taken: only b stops fitting, however often asked.
    let on_b = st.try_allocate(b, &[t]).unwrap();
    st.reserve(&on_b);
    for _ in 0..2 {
        assert!(st.fits(a, &[t]).is_ok());
        assert!(st.fits(b, &[t]).is_err());
        assert!(st.fits(c, &[t]).is_ok());
    }
    // An allocation on node c reuses what was found for a, with c's own devices.
    let on_c = st.try_allocate(c, &[t]).unwrap();
    assert_eq!(on_c.node, c);
    assert_eq!(devices_of(&st, &on_c), ["gpu-0", "gpu-1"]);
    let pools: Vec<&str> = on_c.claims[0]
        .devices
        .iter()
        .map(|d| st.device_name(d.device).1)
        .collect();
    assert_eq!(pools, ["node-c", "node-c"]);
    // A clone that gives them back answers for itself.
    let mut other = st.clone();
    other.release(&on_b);
    assert!(other.fits(b, &[t]).is_ok());
    assert!(st.fits(b, &[t]).is_err());
}
