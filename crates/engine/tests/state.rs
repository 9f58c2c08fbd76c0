//! The cluster state changed in place: bad changes are refused and change nothing, ids stay
//! stable, a deleted node's pods come back with it, stale ids are detected.

use lockstep_engine::{Applied, Change, ChangeError, ClusterState, Key, Kind, Object};
use lockstep_model::dra::DeviceClass;
use lockstep_model::{Cluster, PodPhase, ResourceId};
use lockstep_testkit::{self as testkit, GI};

/// Two nodes `a` and `b`, a pod `p` bound to `a` and a pending pod `q`.
fn small() -> (ClusterState, Cluster) {
    let mut c = Cluster::default();
    for name in ["a", "b"] {
        let n = testkit::node(&mut c, name, 4000, 8 * GI, 10);
        c.nodes.push(n);
    }
    let mut p = testkit::pod(&mut c, "p", 1000, GI);
    p.node_name = Some("a".into());
    p.phase = PodPhase::Running;
    c.pods.push(p);
    let q = testkit::pod(&mut c, "q", 1000, GI);
    c.pods.push(q);
    let c = testkit::finish(c);
    (ClusterState::new(&c).unwrap(), c)
}

fn pod_key(name: &str) -> Key {
    Key::namespaced("default", name)
}

/// Applies a change that must be refused, and checks the state did not move.
fn refused(state: &mut ClusterState, change: Change) -> ChangeError {
    let before = state.describe();
    let err = state.apply(change).expect_err("the change is refused");
    assert_eq!(
        before,
        state.describe(),
        "a refused change changed the state"
    );
    err
}

#[test]
fn a_second_add_of_the_same_object_is_refused() {
    let (mut s, mut c) = small();
    let again = testkit::node(&mut c, "a", 1000, GI, 10);
    let err = refused(&mut s, Change::Add(Object::Node(again)));
    assert_eq!(
        err.to_string(),
        "Node a already exists; send an update, or delete it first"
    );
    let q = testkit::pod(&mut c, "q", 1, 1);
    assert!(matches!(
        refused(&mut s, Change::Add(Object::Pod(q))),
        ChangeError::Duplicate {
            kind: Kind::Pod,
            ..
        }
    ));
}

#[test]
fn deleting_or_updating_what_is_not_there_is_refused() {
    let (mut s, mut c) = small();
    let err = refused(&mut s, Change::Delete(Kind::Pod, pod_key("nope")));
    assert_eq!(
        err.to_string(),
        "Pod default/nope does not exist; add it first"
    );
    let ghost = testkit::node(&mut c, "ghost", 1000, GI, 10);
    refused(&mut s, Change::Update(Object::Node(ghost)));
    refused(
        &mut s,
        Change::Delete(Kind::DeviceClass, Key::cluster("gpu")),
    );
}

#[test]
fn binds_need_a_pending_pod_and_a_node_that_exists() {
    let (mut s, _) = small();
    let err = refused(
        &mut s,
        Change::Bind {
            pod: pod_key("q"),
            node: "z".into(),
        },
    );
    assert_eq!(
        err.to_string(),
        "pod default/q cannot be bound to node z: the node does not exist"
    );
    assert!(matches!(
        refused(
            &mut s,
            Change::Bind {
                pod: pod_key("p"),
                node: "b".into(),
            }
        ),
        ChangeError::AlreadyBound { .. }
    ));
    let applied = s
        .apply(Change::Bind {
            pod: pod_key("q"),
            node: "b".into(),
        })
        .unwrap();
    let Applied::Pod(q) = applied else {
        panic!("a bind names the pod")
    };
    let b = s.node_id("b").unwrap();
    assert_eq!(s.node_of(q), Some(b));
    assert_eq!(s.requested(b, ResourceId::CPU), 1000);
}

#[test]
fn a_device_class_whose_selector_does_not_compile_is_refused_whole() {
    let (mut s, _) = small();
    let good = DeviceClass {
        name: "gpu".into(),
        selectors: vec!["device.driver == \"gpu.example.com\"".into()],
        ..DeviceClass::default()
    };
    s.apply(Change::Add(Object::DeviceClass(good))).unwrap();
    let bad = DeviceClass {
        name: "gpu".into(),
        selectors: vec!["device.driver ==".into()],
        ..DeviceClass::default()
    };
    let err = refused(&mut s, Change::Update(Object::DeviceClass(bad)));
    assert!(err.to_string().contains("invalid CEL expression"), "{err}");
    // The good class is still there.
    match s.object(Kind::DeviceClass, &Key::cluster("gpu")) {
        Some(Object::DeviceClass(dc)) => assert_eq!(dc.selectors.len(), 1),
        other => panic!("the class is gone: {other:?}"),
    }
}

#[test]
fn ids_are_stable_and_a_reused_slot_makes_old_handles_stale() {
    let (mut s, mut c) = small();
    let b = s.node_id("b").unwrap();
    let p = s.pod_id("default", "p").unwrap();
    let handle = s.handle(p);
    s.apply(Change::Delete(Kind::Node, Key::cluster("a")))
        .unwrap();
    // Deleting a renumbers nothing.
    assert_eq!(s.node_id("b"), Some(b));
    assert_eq!(s.nodes(), &[b]);
    s.apply(Change::Delete(Kind::Pod, pod_key("p"))).unwrap();
    assert!(matches!(
        s.check_pod(handle),
        Err(ChangeError::Stale {
            kind: Kind::Pod,
            ..
        })
    ));
    // The freed slot is used again, for another pod: the old handle stays stale.
    let r = testkit::pod(&mut c, "r", 10, 10);
    let Applied::Pod(r) = s.apply(Change::Add(Object::Pod(r))).unwrap() else {
        panic!("an add names the pod")
    };
    assert_eq!(r, p);
    assert!(s.check_pod(handle).is_err());
    assert_eq!(s.check_pod(s.handle(r)), Ok(r));
}

#[test]
fn a_deleted_nodes_pods_hold_nothing_until_it_comes_back() {
    let (mut s, mut c) = small();
    let p = s.pod_id("default", "p").unwrap();
    s.apply(Change::Delete(Kind::Node, Key::cluster("a")))
        .unwrap();
    assert_eq!(s.node_of(p), None);
    assert_eq!(s.num_nodes(), 1);
    let a = testkit::node(&mut c, "a", 4000, 8 * GI, 10);
    let Applied::Node(a) = s.apply(Change::Add(Object::Node(a))).unwrap() else {
        panic!("an add names the node")
    };
    assert_eq!(s.node_of(p), Some(a));
    assert_eq!(s.requested(a, ResourceId::CPU), 1000);
    // Name order, whatever the arrival order.
    let names: Vec<&str> = s.nodes().iter().map(|n| s.node(*n).name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(s.rank(a), 0);
}

#[test]
fn a_resource_named_after_the_nodes_arrived_widens_every_row() {
    let (mut s, _) = small();
    let gpu = s.resources_mut().intern("example.com/gpu");
    let mut node = match s.object(Kind::Node, &Key::cluster("b")).unwrap() {
        Object::Node(n) => n,
        _ => unreachable!(),
    };
    node.allocatable.set(gpu, 4);
    s.apply(Change::Update(Object::Node(node))).unwrap();
    let b = s.node_id("b").unwrap();
    assert_eq!(s.allocatable(b, gpu), 4);
    // The other rows kept their values.
    let a = s.node_id("a").unwrap();
    assert_eq!(s.requested(a, ResourceId::CPU), 1000);
    assert_eq!(s.allocatable(a, ResourceId::CPU), 4000);
}

#[test]
fn updating_a_pod_moves_its_accounting() {
    let (mut s, mut c) = small();
    let mut p = testkit::pod(&mut c, "p", 3000, GI);
    p.node_name = Some("b".into());
    p.phase = PodPhase::Running;
    s.apply(Change::Update(Object::Pod(p.clone()))).unwrap();
    let (a, b) = (s.node_id("a").unwrap(), s.node_id("b").unwrap());
    assert_eq!(s.requested(a, ResourceId::CPU), 0);
    assert_eq!(s.requested(b, ResourceId::CPU), 3000);
    // It finishes: it holds nothing.
    p.phase = PodPhase::Succeeded;
    s.apply(Change::Update(Object::Pod(p))).unwrap();
    assert_eq!(s.requested(b, ResourceId::CPU), 0);
    assert_eq!(s.pod_count(b), 0);
}
