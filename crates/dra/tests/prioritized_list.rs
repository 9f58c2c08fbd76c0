//! `firstAvailable`: subrequests tried in order; the chosen one is named `request/subrequest`.

mod common;

use common::*;

fn world() -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = vec![slice_on(
        "a",
        "node-a",
        "node-a",
        vec![
            gpu("big-0", "A100", 80, "pci0", 0),
            gpu("small-0", "T4", 16, "pci0", 0),
            gpu("small-1", "T4", 16, "pci1", 1),
        ],
    )];
    let big = selecting(
        exact("gpu", 1),
        &["device.attributes['gpu.example.com'].model == 'A100'"],
    );
    let small = selecting(
        exact("gpu", 2),
        &["device.attributes['gpu.example.com'].model == 'T4'"],
    );
    w.templates = vec![template(
        "t",
        vec![first_available("gpu", vec![("big", big), ("small", small)])],
        vec![],
    )];
    w
}

#[test]
fn the_first_subrequest_wins_when_it_fits() {
    let w = world();
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["gpu/big=big-0"]);
    assert_eq!(
        st.allocation_result(node_id(&w, "node-a"), &a.claims[0])
            .devices[0]
            .request,
        "gpu/big"
    );
}

#[test]
fn later_subrequests_are_tried_in_order() {
    let w = world();
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let t = template_ref(&st, "t");
    let first = st.try_allocate(n, &[t]).unwrap();
    st.reserve(&first);
    let second = st.try_allocate(n, &[t]).unwrap();
    assert_eq!(
        picked(&st, &second),
        ["gpu/small=small-0", "gpu/small=small-1"]
    );
    st.reserve(&second);
    assert!(st.try_allocate(n, &[t]).is_err());
    assert_eq!(w.state().max_replicas(&[t], n, 10), 2);
}

#[test]
fn a_constraint_on_one_subrequest_applies_only_to_it() {
    let mut w = world();
    let big = selecting(
        exact("gpu", 1),
        &["device.attributes['gpu.example.com'].model == 'H100'"],
    );
    let small = selecting(
        exact("gpu", 2),
        &["device.attributes['gpu.example.com'].model == 'T4'"],
    );
    w.templates = vec![template(
        "t",
        vec![first_available("gpu", vec![("big", big), ("small", small)])],
        vec![match_attr("gpu.example.com/numa", &["gpu/small"])],
    )];
    let st = w.state();
    // The two T4s are on different NUMA nodes: no subrequest fits.
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
            .is_err()
    );
}

#[test]
fn a_later_request_can_make_an_earlier_one_fall_back() {
    let mut w = world();
    let big = selecting(
        exact("gpu", 1),
        &["device.attributes['gpu.example.com'].model == 'A100'"],
    );
    let any_one = exact("gpu", 1);
    w.templates = vec![template(
        "t",
        vec![
            first_available("first", vec![("big", big.clone()), ("any", any_one)]),
            request("needs-big", big),
        ],
        vec![],
    )];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["first/any=small-0", "needs-big=big-0"]);
}
