//! Partitionable devices: devices consume counters from counter sets shared in their pool.

mod common;

use common::*;
use lockstep_model::dra::{CounterSet, Device, DeviceCounterConsumption, ResourcePool};

fn consuming(name: &str, profile: &str, memory_gi: i64, slices: i64) -> Device {
    let mut d = device(name, &[("profile", s(profile))]);
    d.consumes_counters = vec![DeviceCounterConsumption {
        counter_set: "gpu-0".into(),
        counters: [
            ("memory".to_string(), memory_gi * GI),
            ("slices".to_string(), slices),
        ]
        .into(),
    }];
    d
}

fn counters() -> CounterSet {
    CounterSet {
        name: "gpu-0".into(),
        counters: [("memory".to_string(), 80 * GI), ("slices".to_string(), 7)].into(),
    }
}

fn partitions() -> Vec<Device> {
    vec![
        consuming("gpu-0", "whole", 80, 7),
        consuming("gpu-0-3g-0", "3g", 40, 3),
        consuming("gpu-0-3g-1", "3g", 40, 3),
        consuming("gpu-0-1g-0", "1g", 10, 1),
    ]
}

fn world(split_slices: bool) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    if split_slices {
        // Counters in one slice, devices in another of the same pool.
        let pool = ResourcePool {
            name: "node-a".into(),
            generation: 3,
            resource_slice_count: 2,
        };
        let mut counter_slice = slice_on("a-counters", "node-a", "node-a", vec![]);
        counter_slice.shared_counters = vec![counters()];
        counter_slice.pool = pool.clone();
        let mut devices = slice_on("a-devices", "node-a", "node-a", partitions());
        devices.pool = pool;
        w.slices = vec![counter_slice, devices];
    } else {
        let mut s = slice_on("a", "node-a", "node-a", partitions());
        s.shared_counters = vec![counters()];
        w.slices = vec![s];
    }
    let profile = |p: &str| {
        template(
            p,
            vec![request(
                "gpu",
                selecting(
                    exact("gpu", 1),
                    &[&format!(
                        "device.attributes['gpu.example.com'].profile == '{p}'"
                    )],
                ),
            )],
            vec![],
        )
    };
    w.templates = vec![profile("whole"), profile("3g"), profile("1g")];
    w
}

#[test]
fn the_whole_device_uses_up_the_partitions() {
    for split in [false, true] {
        let w = world(split);
        let mut st = w.state();
        let n = node_id(&w, "node-a");
        let whole = st.try_allocate(n, &[template_ref(&st, "whole")]).unwrap();
        st.reserve(&whole);
        assert!(
            st.try_allocate(n, &[template_ref(&st, "3g")]).is_err(),
            "split={split}"
        );
        assert!(
            st.try_allocate(n, &[template_ref(&st, "1g")]).is_err(),
            "split={split}"
        );
        st.release(&whole);
        assert!(
            st.try_allocate(n, &[template_ref(&st, "1g")]).is_ok(),
            "split={split}"
        );
    }
}

#[test]
fn partitions_share_the_counters() {
    let w = world(false);
    let mut st = w.state();
    let n = node_id(&w, "node-a");
    let t3 = template_ref(&st, "3g");
    assert_eq!(st.max_replicas(&[t3], n, 10), 2);
    let a = st.try_allocate(n, &[t3]).unwrap();
    st.reserve(&a);
    let b = st.try_allocate(n, &[t3]).unwrap();
    st.reserve(&b);
    // 6 of 7 slices but all 80Gi of memory are used: no 1g partition is left.
    assert!(st.try_allocate(n, &[template_ref(&st, "1g")]).is_err());
    assert!(st.try_allocate(n, &[template_ref(&st, "whole")]).is_err());
    st.release(&b);
    // 3g + 1g fit together (50Gi, 4 slices).
    let one = st.try_allocate(n, &[template_ref(&st, "1g")]).unwrap();
    assert_eq!(devices_of(&st, &one), ["gpu-0-1g-0"]);
}

#[test]
fn counters_are_checked_within_one_pod_too() {
    let mut w = world(false);
    w.templates.push(template(
        "two-3g-and-1g",
        vec![
            request(
                "a",
                selecting(
                    exact("gpu", 2),
                    &["device.attributes['gpu.example.com'].profile == '3g'"],
                ),
            ),
            request(
                "b",
                selecting(
                    exact("gpu", 1),
                    &["device.attributes['gpu.example.com'].profile == '1g'"],
                ),
            ),
        ],
        vec![],
    ));
    let st = w.state();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "two-3g-and-1g")])
            .is_err()
    );
}

/// As the upstream allocator: a device that consumes a counter set (or a counter) no slice of
/// its pool defines makes the pool invalid, so none of its devices is allocated.
#[test]
fn consuming_an_undefined_counter_set_or_counter_makes_the_pool_invalid() {
    for split in [false, true] {
        for (set, counter) in [("gpu-9", "memory"), ("gpu-0", "watts")] {
            let mut w = world(split);
            let s = w.slices.iter_mut().find(|s| !s.devices.is_empty()).unwrap();
            s.devices[3].consumes_counters = vec![DeviceCounterConsumption {
                counter_set: set.into(),
                counters: [(counter.to_string(), 1)].into(),
            }];
            let st = w.state();
            let n = node_id(&w, "node-a");
            assert!(
                st.try_allocate(n, &[template_ref(&st, "whole")]).is_err(),
                "split={split} set={set} counter={counter}"
            );
        }
    }
}
