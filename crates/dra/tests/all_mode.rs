//! `allocationMode: All`: every matching device on the node, all of them free.

mod common;

use common::*;
use lockstep_dra::UnfitReason;
use lockstep_model::dra::ResourcePool;

fn world() -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[]), node("node-b", &[])];
    w.slices = vec![
        slice_on(
            "a",
            "node-a",
            "node-a",
            vec![
                gpu("gpu-0", "A", 80, "pci0", 0),
                gpu("gpu-1", "B", 80, "pci0", 0),
                gpu("gpu-2", "A", 80, "pci1", 1),
            ],
        ),
        slice_on(
            "b",
            "node-b",
            "node-b",
            vec![gpu("gpu-0", "B", 80, "pci0", 0)],
        ),
    ];
    w.templates = vec![
        template(
            "all-a",
            vec![request(
                "gpus",
                selecting(
                    all("gpu"),
                    &["device.attributes['gpu.example.com'].model == 'A'"],
                ),
            )],
            vec![],
        ),
        template("one", vec![request("gpu", exact("gpu", 1))], vec![]),
    ];
    w
}

#[test]
fn takes_every_matching_device_of_the_node() {
    let w = world();
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "all-a")])
        .unwrap();
    assert_eq!(devices_of(&st, &a), ["gpu-0", "gpu-2"]);
}

#[test]
fn needs_at_least_one_device() {
    let w = world();
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-b"), &[template_ref(&st, "all-a")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::CannotAllocateAllClaims);
}

#[test]
fn fails_when_one_matching_device_is_in_use() {
    let w = world();
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let one = st.try_allocate(n, &[template_ref(&st, "one")]).unwrap();
    assert_eq!(devices_of(&st, &one), ["gpu-0"]);
    st.reserve(&one);
    assert!(st.try_allocate(n, &[template_ref(&st, "all-a")]).is_err());
    st.release(&one);
    assert!(st.try_allocate(n, &[template_ref(&st, "all-a")]).is_ok());
}

#[test]
fn a_later_request_cannot_use_what_all_took() {
    let mut w = world();
    w.templates.push(template(
        "all-then-a",
        vec![
            request(
                "all",
                selecting(
                    all("gpu"),
                    &["device.attributes['gpu.example.com'].model == 'A'"],
                ),
            ),
            request(
                "a",
                selecting(
                    exact("gpu", 1),
                    &["device.attributes['gpu.example.com'].model == 'A'"],
                ),
            ),
        ],
        vec![],
    ));
    let st = w.state();
    let e = st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "all-then-a")]);
    assert!(e.is_err());
}

#[test]
fn an_incomplete_pool_on_the_node_blocks_all() {
    let mut w = world();
    // A network pool still being published (1 of 2 slices), reachable from every node.
    let mut s = slice_scoped(
        "net-0",
        "net",
        lockstep_model::dra::SliceNodeScope::AllNodes,
        vec![gpu("net-gpu-0", "A", 80, "pci9", 0)],
    );
    s.pool = ResourcePool {
        name: "net".into(),
        generation: 1,
        resource_slice_count: 2,
    };
    w.slices.push(s);
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "all-a")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::CannotAllocateAllClaims);
    let detail = e.detail.unwrap();
    assert!(detail.contains("asks for all devices"), "{detail}");
    assert!(
        detail.contains("gpu.example.com/net is currently being updated"),
        "{detail}"
    );
    // ExactCount requests just skip the incomplete pool.
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "one")])
            .is_ok()
    );
}
