//! Network-attached pools: slices with `nodeSelector`, `allNodes` or per-device node selection,
//! reachable from several nodes.

mod common;

use common::*;
use lockstep_dra::UnfitReason;
use lockstep_model::dra::{DeviceNodeScope, SliceNodeScope};

fn world() -> World {
    let mut w = World::new();
    w.nodes = vec![
        node("node-a", &[("rack", "r1")]),
        node("node-b", &[("rack", "r1")]),
        node("node-c", &[("rack", "r2")]),
    ];
    w.slices = vec![slice_scoped(
        "rack-r1-nics",
        "rack-r1",
        SliceNodeScope::NodeSelector(selector_in("rack", &["r1"])),
        vec![device("nic-0", &[]), device("nic-1", &[])],
    )];
    w.claims = vec![claim("nic", vec![request("nic", exact("gpu", 1))], vec![])];
    w.templates = vec![template(
        "nic",
        vec![request("nic", exact("gpu", 1))],
        vec![],
    )];
    w
}

#[test]
fn devices_are_reachable_from_the_selected_nodes_only() {
    let w = world();
    let st = w.state();
    let t = template_ref(&st, "nic");
    assert_eq!(st.max_replicas_per_node(&[t], 10), [2, 2, 0]);
}

#[test]
fn a_device_taken_from_one_node_is_gone_for_the_others() {
    let w = world();
    let mut st = w.state();
    let t = template_ref(&st, "nic");
    let a = st.try_allocate(node_id(&w, "node-a"), &[t]).unwrap();
    st.reserve(&a);
    let b = st.try_allocate(node_id(&w, "node-b"), &[t]).unwrap();
    assert_eq!(devices_of(&st, &b), ["nic-1"]);
    st.reserve(&b);
    assert!(st.try_allocate(node_id(&w, "node-a"), &[t]).is_err());
}

#[test]
fn a_shared_claim_on_a_network_device_follows_the_slice_selector() {
    let w = world();
    let mut st = w.state();
    let c = claim_ref(&st, "nic");
    let a = st.try_allocate(node_id(&w, "node-a"), &[c]).unwrap();
    let result = st.allocation_result(node_id(&w, "node-a"), &a.claims[0]);
    let sel = result.node_selector.expect("restricted to the rack");
    assert_eq!(sel.terms[0].match_expressions[0].key, "rack");
    st.reserve(&a);
    // Another pod of the claim may run on any node of rack r1, not on r2.
    assert!(st.try_allocate(node_id(&w, "node-b"), &[c]).unwrap().claims[0].already_allocated);
    assert_eq!(
        st.try_allocate(node_id(&w, "node-c"), &[c])
            .unwrap_err()
            .reason,
        UnfitReason::ClaimNotAvailableOnNode
    );
}

#[test]
fn all_nodes_slices_reach_every_node_and_need_no_node_selector() {
    let mut w = world();
    w.slices = vec![slice_scoped(
        "fabric",
        "fabric",
        SliceNodeScope::AllNodes,
        vec![device("port-0", &[])],
    )];
    let mut st = w.state();
    let c = claim_ref(&st, "nic");
    assert_eq!(
        st.max_replicas_per_node(&[template_ref(&st, "nic")], 10),
        [1, 1, 1]
    );
    let a = st.try_allocate(node_id(&w, "node-c"), &[c]).unwrap();
    assert_eq!(
        st.allocation_result(node_id(&w, "node-c"), &a.claims[0])
            .node_selector,
        None
    );
    st.reserve(&a);
    assert!(st.try_allocate(node_id(&w, "node-a"), &[c]).is_ok());
}

#[test]
fn per_device_node_selection() {
    let mut w = world();
    let mut local = device("local-b", &[]);
    local.node_scope = Some(DeviceNodeScope::NodeName("node-b".into()));
    let mut rack2 = device("rack-r2", &[]);
    rack2.node_scope = Some(DeviceNodeScope::NodeSelector(selector_in("rack", &["r2"])));
    let mut everywhere = device("everywhere", &[]);
    everywhere.node_scope = Some(DeviceNodeScope::AllNodes);
    w.slices = vec![slice_scoped(
        "mixed",
        "mixed",
        SliceNodeScope::PerDeviceNodeSelection,
        vec![local, rack2, everywhere],
    )];
    let st = w.state();
    let t = template_ref(&st, "nic");
    assert_eq!(st.max_replicas_per_node(&[t], 10), [1, 2, 2]);
    let a = st.try_allocate(node_id(&w, "node-b"), &[t]).unwrap();
    assert_eq!(devices_of(&st, &a), ["local-b"]);
    let r = st.allocation_result(node_id(&w, "node-b"), &a.claims[0]);
    assert_eq!(
        r.node_selector.unwrap().terms[0].match_fields[0].values,
        ["node-b"]
    );
}

#[test]
fn a_device_that_binds_to_the_node_pins_the_claim() {
    let mut w = world();
    let mut d = device("port-0", &[]);
    d.binds_to_node = true;
    w.slices = vec![slice_scoped(
        "fabric",
        "fabric",
        SliceNodeScope::AllNodes,
        vec![d],
    )];
    let mut st = w.state();
    let c = claim_ref(&st, "nic");
    let a = st.try_allocate(node_id(&w, "node-a"), &[c]).unwrap();
    st.reserve(&a);
    assert!(st.try_allocate(node_id(&w, "node-b"), &[c]).is_err());
    assert!(st.try_allocate(node_id(&w, "node-a"), &[c]).is_ok());
}
