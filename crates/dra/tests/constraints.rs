//! `matchAttribute` and `distinctAttribute` on int, string, bool and version attributes.

mod common;

use common::*;
use lockstep_model::dra::AttributeValue;

fn node_with(devices: Vec<lockstep_model::dra::Device>) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = vec![slice_on("a", "node-a", "node-a", devices)];
    w
}

fn dev(name: &str, attr: &str, value: AttributeValue) -> lockstep_model::dra::Device {
    device(name, &[(attr, value)])
}

fn pick(
    w: &World,
    count: u32,
    constraint: lockstep_model::dra::DeviceConstraint,
) -> Option<Vec<String>> {
    let mut w = w.clone();
    w.templates = vec![template(
        "t",
        vec![request("gpu", exact("gpu", count))],
        vec![constraint],
    )];
    let st = w.state();
    st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .ok()
        .map(|a| devices_of(&st, &a))
}

#[test]
fn match_string_backtracks_to_a_group_with_one_value() {
    let w = node_with(vec![
        dev("gpu-0", "pcieRoot", s("pci0")),
        dev("gpu-1", "pcieRoot", s("pci1")),
        dev("gpu-2", "pcieRoot", s("pci1")),
    ]);
    assert_eq!(
        pick(&w, 2, match_attr("gpu.example.com/pcieRoot", &[])).unwrap(),
        ["gpu-1", "gpu-2"]
    );
    assert_eq!(
        pick(&w, 3, match_attr("gpu.example.com/pcieRoot", &[])),
        None
    );
}

#[test]
fn match_int_bool_and_version() {
    let ints = node_with(vec![
        dev("d0", "numa", int(0)),
        dev("d1", "numa", int(1)),
        dev("d2", "numa", int(1)),
    ]);
    assert_eq!(
        pick(&ints, 2, match_attr("gpu.example.com/numa", &[])).unwrap(),
        ["d1", "d2"]
    );
    let bools = node_with(vec![
        dev("d0", "mig", b(true)),
        dev("d1", "mig", b(false)),
        dev("d2", "mig", b(false)),
    ]);
    assert_eq!(
        pick(&bools, 2, match_attr("gpu.example.com/mig", &[])).unwrap(),
        ["d1", "d2"]
    );
    let versions = node_with(vec![
        dev("d0", "fw", ver("1.2.3")),
        dev("d1", "fw", ver("1.3.0")),
        dev("d2", "fw", ver("1.3.0")),
    ]);
    assert_eq!(
        pick(&versions, 2, match_attr("gpu.example.com/fw", &[])).unwrap(),
        ["d1", "d2"]
    );
}

#[test]
fn values_of_different_types_do_not_match() {
    let w = node_with(vec![dev("d0", "x", int(1)), dev("d1", "x", s("1"))]);
    assert_eq!(pick(&w, 2, match_attr("gpu.example.com/x", &[])), None);
}

#[test]
fn a_device_without_the_attribute_cannot_join() {
    let w = node_with(vec![
        device("d0", &[]),
        dev("d1", "numa", int(0)),
        dev("d2", "numa", int(0)),
    ]);
    assert_eq!(
        pick(&w, 2, match_attr("gpu.example.com/numa", &[])).unwrap(),
        ["d1", "d2"]
    );
    assert_eq!(
        pick(&w, 2, distinct_attr("gpu.example.com/numa", &[])),
        None
    );
}

#[test]
fn qualified_and_unqualified_attribute_names_are_the_same_attribute() {
    let w = node_with(vec![
        dev("d0", "gpu.example.com/numa", int(0)),
        dev("d1", "numa", int(0)),
    ]);
    assert_eq!(
        pick(&w, 2, match_attr("gpu.example.com/numa", &[])).unwrap(),
        ["d0", "d1"]
    );
    // Another domain is another attribute.
    let other = node_with(vec![
        dev("d0", "pci.example.com/root", s("r0")),
        dev("d1", "pci.example.com/root", s("r0")),
    ]);
    assert_eq!(
        pick(&other, 2, match_attr("pci.example.com/root", &[])).unwrap(),
        ["d0", "d1"]
    );
    assert_eq!(
        pick(&other, 2, match_attr("gpu.example.com/root", &[])),
        None
    );
}

#[test]
fn distinct_int_string_bool_version() {
    let ints = node_with(vec![
        dev("d0", "numa", int(0)),
        dev("d1", "numa", int(0)),
        dev("d2", "numa", int(1)),
    ]);
    assert_eq!(
        pick(&ints, 2, distinct_attr("gpu.example.com/numa", &[])).unwrap(),
        ["d0", "d2"]
    );
    assert_eq!(
        pick(&ints, 3, distinct_attr("gpu.example.com/numa", &[])),
        None
    );
    let strings = node_with(vec![
        dev("d0", "r", s("a")),
        dev("d1", "r", s("a")),
        dev("d2", "r", s("b")),
    ]);
    assert_eq!(
        pick(&strings, 2, distinct_attr("gpu.example.com/r", &[])).unwrap(),
        ["d0", "d2"]
    );
    let bools = node_with(vec![
        dev("d0", "m", b(true)),
        dev("d1", "m", b(true)),
        dev("d2", "m", b(false)),
    ]);
    assert_eq!(
        pick(&bools, 2, distinct_attr("gpu.example.com/m", &[])).unwrap(),
        ["d0", "d2"]
    );
    // 1.0.0 and 1.0.0+build have the same precedence: not distinct.
    let versions = node_with(vec![
        dev("d0", "v", ver("1.0.0")),
        dev("d1", "v", ver("1.0.0+build.1")),
        dev("d2", "v", ver("1.0.1")),
    ]);
    assert_eq!(
        pick(&versions, 2, distinct_attr("gpu.example.com/v", &[])).unwrap(),
        ["d0", "d2"]
    );
}

#[test]
fn constraints_span_requests_and_can_be_limited_to_some() {
    let mut w = node_with(vec![
        dev("d0", "numa", int(0)),
        dev("d1", "numa", int(1)),
        dev("d2", "numa", int(1)),
    ]);
    let two = |c: Vec<lockstep_model::dra::DeviceConstraint>| {
        template(
            "t",
            vec![
                request("a", exact("gpu", 1)),
                request("b", exact("gpu", 1)),
                request("c", exact("gpu", 1)),
            ],
            c,
        )
    };
    // a and b on one NUMA node, c anywhere.
    w.templates = vec![two(vec![match_attr("gpu.example.com/numa", &["a", "b"])])];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["a=d1", "b=d2", "c=d0"]);
    // All three on one NUMA node: impossible.
    w.templates = vec![two(vec![match_attr("gpu.example.com/numa", &[])])];
    let st = w.state();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
            .is_err()
    );
}

#[test]
fn constraints_of_one_claim_do_not_bind_another() {
    let mut w = node_with(vec![dev("d0", "numa", int(0)), dev("d1", "numa", int(1))]);
    w.templates = vec![template(
        "t",
        vec![request("gpu", exact("gpu", 1))],
        vec![match_attr("gpu.example.com/numa", &[])],
    )];
    let st = w.state();
    let t = template_ref(&st, "t");
    let a = st.try_allocate(node_id(&w, "node-a"), &[t, t]).unwrap();
    assert_eq!(devices_of(&st, &a), ["d0", "d1"]);
}

#[test]
fn a_constraint_naming_an_unknown_request_is_bad_input() {
    let mut w = node_with(vec![dev("d0", "numa", int(0))]);
    w.templates = vec![template(
        "t",
        vec![request("gpu", exact("gpu", 1))],
        vec![match_attr("gpu.example.com/numa", &["nope"])],
    )];
    let e = lockstep_dra::DraState::new(w.inputs()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("ResourceClaimTemplate default/t"), "{text}");
    assert!(
        text.contains("spec.spec.devices.constraints[0].requests[0]"),
        "{text}"
    );
}
