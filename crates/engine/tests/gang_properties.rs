//! Invariants of gang scheduling over random clusters: a gang is never partly bound (among
//! the pods a run places, together with members already running), no node is over capacity.

use std::collections::HashMap;

use lockstep_engine::{ClusterState, Options, schedule};
use lockstep_model::{Cluster, GroupPolicy, NodeId, ResourceId};
use lockstep_testkit::{self as testkit, GI};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct GangSpec {
    size: usize,
    min: u32,
    cpu: i64,
    priority: i32,
    rack_constraint: bool,
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (1usize..6, 1u32..6, 1i64..=4, -1i32..=1, any::<bool>()).prop_map(
        |(size, min, cpu, priority, rack_constraint)| GangSpec {
            size,
            min,
            cpu: cpu * 500,
            priority,
            rack_constraint,
        },
    )
}

fn build(nodes: usize, racks: usize, gangs: &[GangSpec], singles: &[i64]) -> Cluster {
    let mut c = Cluster::default();
    for i in 0..nodes {
        let mut n = testkit::node(&mut c, &format!("n{i:02}"), 4000, 16 * GI, 110);
        n.labels.insert("rack".into(), format!("r{}", i % racks));
        c.nodes.push(n);
    }
    for (g, spec) in gangs.iter().enumerate() {
        let name = format!("g{g}");
        let mut pg = testkit::gang(&name, spec.min, spec.rack_constraint.then_some("rack"));
        pg.priority = Some(spec.priority);
        c.pod_groups.push(pg);
        testkit::members(&mut c, &name, spec.size, spec.cpu, GI);
    }
    for (i, cpu) in singles.iter().enumerate() {
        let p = testkit::pod(&mut c, &format!("single-{i}"), *cpu, GI);
        c.pods.push(p);
    }
    testkit::finish(c)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn gangs_are_all_or_nothing_and_capacity_holds(
        nodes in 1usize..8,
        racks in 1usize..4,
        gangs in proptest::collection::vec(gang_spec(), 0..6),
        singles in proptest::collection::vec(0i64..3000, 0..6),
    ) {
        let cluster = build(nodes, racks, &gangs, &singles);
        let d = schedule(&cluster, Options::default()).unwrap();
        prop_assert_eq!(&d, &schedule(&cluster, Options::default()).unwrap());

        let mut placed: HashMap<&str, usize> = HashMap::new();
        let mut racks_used: HashMap<&str, Vec<&str>> = HashMap::new();
        for (p, n) in &d.bindings {
            let pod = &cluster.pods[p.index()];
            if let Some(g) = &pod.pod_group {
                *placed.entry(g.as_str()).or_default() += 1;
                racks_used.entry(g.as_str()).or_default().push(&cluster.nodes[n.index()].labels["rack"]);
            }
        }
        for pg in &cluster.pod_groups {
            let n = placed.get(pg.name.as_str()).copied().unwrap_or(0);
            if let GroupPolicy::Gang { min } = pg.policy {
                prop_assert!(n == 0 || n >= min as usize, "{} placed {} of min {}", pg.name, n, min);
            }
            if pg.topology_key.is_some()
                && let Some(r) = racks_used.get(pg.name.as_str())
            {
                prop_assert!(r.iter().all(|x| *x == r[0]), "{} spans racks {:?}", pg.name, r);
            }
        }
        let mut snap = ClusterState::new(&cluster).unwrap();
        for (p, n) in &d.bindings {
            snap.assume(*p, *n);
        }
        for i in 0..cluster.nodes.len() {
            let n = NodeId(i as u32);
            prop_assert!(snap.requested(n, ResourceId::CPU) <= snap.allocatable(n, ResourceId::CPU));
        }
    }
}
