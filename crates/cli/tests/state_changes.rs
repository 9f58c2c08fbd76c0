//! The engine's cluster state changed in place equals the state built from scratch from
//! the final objects, and decides the same; the same objects added in any order decide
//! byte-identically.
//!
//! The clusters come from `support/random_cluster.rs` (priorities and preemption, gangs with
//! rack and zone constraints, PodDisruptionBudgets, DRA devices and claims), loaded as
//! `lockstep schedule` loads them.

#[path = "support/random_cluster.rs"]
mod random_cluster;

use std::collections::BTreeMap;

use lockstep_engine::{
    Change, ClusterState, Decisions, Key, Kind, Object, Options, Scheduler, cluster_of, objects_of,
};
use lockstep_model::{Cluster, PodPhase, ResourceId};
use proptest::prelude::*;

/// A random cluster as the loader reads it.
fn random_cluster(bytes: &[u8]) -> Cluster {
    let (docs, _) = random_cluster::cluster(&mut random_cluster::Choices::new(bytes));
    let loaded = lockstep_manifests::load_str("cluster.yaml", &docs.join("---\n"))
        .expect("a generated cluster loads");
    loaded.cluster
}

/// Decisions with every id replaced by a name, in the order they were made.
fn named(s: &Scheduler, d: &Decisions) -> String {
    let st = s.state();
    let pod = |p: lockstep_model::PodId| st.pod(p).key();
    let node = |n: lockstep_model::NodeId| st.node(n).name.clone();
    let mut out = String::new();
    for (p, n) in &d.bindings {
        out += &format!("bind {} {}\n", pod(*p), node(*n));
    }
    for (p, m) in &d.unschedulable {
        out += &format!("unschedulable {} {m}\n", pod(*p));
    }
    for (p, m) in &d.waiting {
        out += &format!("waiting {} {m}\n", pod(*p));
    }
    for (p, m) in &d.skipped {
        out += &format!("skipped {} {m}\n", pod(*p));
    }
    for e in &d.evictions {
        out += &format!(
            "evict {} {} {} {}\n",
            pod(e.pod),
            node(e.node),
            e.preemptor,
            e.reason
        );
    }
    for a in &d.allocations {
        out += &format!(
            "allocate {} {} {} {:?}\n",
            pod(a.pod),
            a.claim,
            node(a.node),
            a.devices
        );
    }
    out += &format!("{:?}\n{:?}\n", d.pod_groups, d.disrupted_groups);
    out
}

/// The state's description and its decisions, by names.
fn outcome(state: ClusterState) -> (String, String) {
    let description = state.describe();
    let mut s = Scheduler::with_state(state, Options::default()).expect("scheduler");
    let d = s.run();
    (description, named(&s, &d))
}

fn key_of(o: &Object) -> (String, Key) {
    (o.kind().as_str().to_string(), o.key())
}

/// A small change to an object that keeps it valid: a pod or node gets a label, a node
/// also more CPU; other kinds are sent again as they are.
fn touched(o: &Object, n: u16) -> Object {
    let mut o = o.clone();
    match &mut o {
        Object::Pod(p) => {
            p.labels.insert("touched".into(), format!("v{n}"));
        }
        Object::Node(nd) => {
            nd.labels.insert("touched".into(), format!("v{n}"));
            let cpu = nd.allocatable.get(ResourceId::CPU);
            nd.allocatable.set(ResourceId::CPU, cpu + 1000);
        }
        _ => {}
    }
    o
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random adds, updates, deletes and binds, then: the state equals the one built from
    /// the final objects, and both decide alike.
    #[test]
    fn changes_in_place_equal_a_state_built_from_scratch(
        bytes in proptest::collection::vec(any::<u8>(), 0..160),
        ops in proptest::collection::vec((0u8..4, any::<u16>()), 0..60),
    ) {
        let (resources, all) = objects_of(random_cluster(&bytes));
        let mut state = ClusterState::empty(resources.clone());
        // What the state should hold.
        let mut present: BTreeMap<(String, Key), Object> = BTreeMap::new();
        for (op, n) in ops.iter().copied().chain(all.iter().enumerate().map(|(i, _)| (0u8, i as u16))) {
            let absent: Vec<&Object> = all.iter().filter(|o| !present.contains_key(&key_of(o))).collect();
            let change = match op {
                0 if !absent.is_empty() => Change::Add(absent[n as usize % absent.len()].clone()),
                1 if !present.is_empty() => {
                    let (k, _) = present.iter().nth(n as usize % present.len()).unwrap();
                    let o = &present[k];
                    Change::Delete(o.kind(), o.key())
                }
                2 if !present.is_empty() => {
                    let o = present.values().nth(n as usize % present.len()).unwrap();
                    Change::Update(touched(o, n))
                }
                3 => {
                    let pending: Vec<&lockstep_model::Pod> = present.values().filter_map(|o| match o {
                        Object::Pod(p) if p.node_name.is_none() && !matches!(p.phase, PodPhase::Succeeded | PodPhase::Failed) => Some(p),
                        _ => None,
                    }).collect();
                    let nodes: Vec<&str> = present.values().filter_map(|o| match o {
                        Object::Node(nd) => Some(nd.name.as_str()),
                        _ => None,
                    }).collect();
                    if pending.is_empty() || nodes.is_empty() {
                        continue;
                    }
                    let p = pending[n as usize % pending.len()];
                    Change::Bind {
                        pod: Key::namespaced(&p.namespace, &p.name),
                        node: nodes[(n as usize / 7) % nodes.len()].to_string(),
                    }
                }
                _ => continue,
            };
            let before = state.describe();
            match state.apply(change.clone()) {
                Ok(_) => match change {
                    Change::Add(o) | Change::Update(o) => {
                        present.insert(key_of(&o), o);
                    }
                    Change::Delete(kind, key) => {
                        present.remove(&(kind.as_str().to_string(), key));
                    }
                    Change::Bind { pod, node } => {
                        let k = (Kind::Pod.as_str().to_string(), pod);
                        if let Some(Object::Pod(p)) = present.get_mut(&k) {
                            p.node_name = Some(node);
                        }
                    }
                },
                // A rejected change (a device class a claim still needs, say) changes
                // nothing.
                Err(_) => prop_assert_eq!(before, state.describe()),
            }
        }
        let scratch = ClusterState::from_cluster(cluster_of(resources, present.into_values()))
            .expect("the final objects load");
        let (d1, r1) = outcome(state);
        let (d2, r2) = outcome(scratch);
        prop_assert_eq!(d1, d2);
        prop_assert_eq!(r1, r2);
    }

    /// The same objects added in any order give the same state and byte-identical
    /// decisions: ids follow arrival, and nothing decides by id.
    #[test]
    fn arrival_order_decides_nothing(
        bytes in proptest::collection::vec(any::<u8>(), 0..160),
        seed in any::<u64>(),
    ) {
        let (resources, objects) = objects_of(random_cluster(&bytes));
        let mut shuffled = objects.clone();
        // A Fisher-Yates shuffle from a small generator: the order is all that varies.
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let mut a = ClusterState::empty(resources.clone());
        a.apply_all(objects.into_iter().map(Change::Add)).expect("loads");
        let mut b = ClusterState::empty(resources);
        b.apply_all(shuffled.into_iter().map(Change::Add)).expect("loads");
        prop_assert_eq!(outcome(a), outcome(b));
    }
}
