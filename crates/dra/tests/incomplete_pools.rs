//! Pool generations and incomplete or invalid pools.

mod common;

use common::*;
use lockstep_model::dra::ResourcePool;

fn pool(generation: i64, count: i64) -> ResourcePool {
    ResourcePool {
        name: "node-a".into(),
        generation,
        resource_slice_count: count,
    }
}

fn world(slices: Vec<lockstep_model::dra::ResourceSlice>) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = slices;
    w.templates = vec![
        template("one", vec![request("gpu", exact("gpu", 1))], vec![]),
        template("all", vec![request("gpu", all("gpu"))], vec![]),
    ];
    w
}

fn sliced(
    name: &str,
    generation: i64,
    count: i64,
    devices: &[&str],
) -> lockstep_model::dra::ResourceSlice {
    let mut s = slice_on(
        name,
        "node-a",
        "node-a",
        devices.iter().map(|d| device(d, &[])).collect(),
    );
    s.pool = pool(generation, count);
    s
}

#[test]
fn only_the_newest_generation_counts() {
    let w = world(vec![
        sliced("old", 1, 1, &["old-0", "old-1"]),
        sliced("new", 2, 1, &["new-0"]),
    ]);
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "all")])
        .unwrap();
    assert_eq!(devices_of(&st, &a), ["new-0"]);
    assert_eq!(st.device_count(), 1);
}

#[test]
fn an_incomplete_pool_is_not_used() {
    let w = world(vec![sliced("part-1", 1, 2, &["gpu-0"])]);
    let st = w.state();
    let n = node_id(&w, "node-a");
    let e = st.try_allocate(n, &[template_ref(&st, "one")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot allocate all claims: resource pool gpu.example.com/node-a is currently being updated (1 of 2 slices of generation 1)"
    );
    let e = st.try_allocate(n, &[template_ref(&st, "all")]).unwrap_err();
    assert!(e.to_string().contains("is currently being updated"), "{e}");
}

#[test]
fn a_complete_pool_of_several_slices_is_used() {
    let w = world(vec![
        sliced("part-1", 1, 2, &["gpu-0"]),
        sliced("part-2", 1, 2, &["gpu-1"]),
    ]);
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "all")])
        .unwrap();
    assert_eq!(devices_of(&st, &a), ["gpu-0", "gpu-1"]);
}

#[test]
fn a_newer_generation_being_published_hides_the_old_one() {
    // Generation 2 has 1 of 2 slices: the pool is incomplete and generation 1 is obsolete.
    let w = world(vec![
        sliced("old-1", 1, 1, &["gpu-0"]),
        sliced("new-1", 2, 2, &["gpu-0"]),
    ]);
    let st = w.state();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "one")])
            .is_err()
    );
}

#[test]
fn duplicate_device_names_make_a_pool_invalid() {
    let w = world(vec![
        sliced("part-1", 1, 2, &["gpu-0"]),
        sliced("part-2", 1, 2, &["gpu-0"]),
    ]);
    let st = w.state();
    let n = node_id(&w, "node-a");
    assert!(st.try_allocate(n, &[template_ref(&st, "one")]).is_err());
    let e = st.try_allocate(n, &[template_ref(&st, "all")]).unwrap_err();
    assert!(e.to_string().contains("duplicate device name gpu-0"), "{e}");
}

#[test]
fn an_invalid_version_attribute_is_bad_input() {
    let mut s = sliced("s", 1, 1, &[]);
    s.devices = vec![device("gpu-0", &[("driverVersion", ver("1.2"))])];
    let w = world(vec![s]);
    let e = lockstep_dra::DraState::new(w.inputs())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ResourceSlice s: spec.devices[0].attributes[driverVersion].version"),
        "{e}"
    );
}
