//! Gang scheduling through PodGroups and CompositePodGroups.

use lockstep_engine::{Decisions, Options, schedule};
use lockstep_model::{Cluster, CompositePodGroup, DisruptionMode, GroupPolicy, PreemptionPolicy};
use lockstep_testkit::{self as testkit, GI};

fn bound_nodes(c: &Cluster, d: &Decisions, prefix: &str) -> Vec<String> {
    d.bindings
        .iter()
        .filter(|(p, _)| c.pods[p.index()].name.starts_with(prefix))
        .map(|(_, n)| c.nodes[n.index()].name.clone())
        .collect()
}

fn nodes(c: &mut Cluster, names: &[&str], cpu: i64) {
    for n in names {
        let node = testkit::node(c, n, cpu, 64 * GI, 110);
        c.nodes.push(node);
    }
}

#[test]
fn gang_that_fits_is_bound_whole() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    c.pod_groups.push(testkit::gang("train", 4, None));
    testkit::members(&mut c, "train", 4, 2000, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(d.bindings.len(), 4);
    assert!(d.pod_groups[0].scheduled, "{:?}", d.pod_groups);
}

#[test]
fn gang_that_fits_partially_binds_nothing() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    c.pod_groups.push(testkit::gang("train", 5, None));
    testkit::members(&mut c, "train", 5, 2000, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert!(d.bindings.is_empty());
    assert_eq!(d.unschedulable.len(), 5);
    let msg = &d.pod_groups[0].message;
    assert!(
        msg.starts_with("gang default/train: 4 of minCount 5 pods fit"),
        "{msg}"
    );
    assert!(!d.pod_groups[0].scheduled);
}

#[test]
fn min_count_below_size_binds_the_extra_pods_that_fit() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    c.pod_groups.push(testkit::gang("train", 3, None));
    testkit::members(&mut c, "train", 5, 2000, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(d.bindings.len(), 4);
    assert_eq!(d.unschedulable.len(), 1);
    assert!(d.pod_groups[0].scheduled);
}

#[test]
fn group_waits_for_members_and_missing_group_waits() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 8000);
    c.pod_groups.push(testkit::gang("train", 4, None));
    testkit::members(&mut c, "train", 2, 100, GI);
    testkit::members(&mut c, "ghost", 1, 100, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert!(d.bindings.is_empty());
    assert_eq!(d.waiting.len(), 3);
    assert!(
        d.waiting
            .iter()
            .any(|(_, m)| m == "waiting for pod group default/train (2/4 pods present)")
    );
    assert!(
        d.waiting
            .iter()
            .any(|(_, m)| m == "waiting for pod group default/ghost (PodGroup does not exist)")
    );
}

#[test]
fn higher_priority_gang_wins_the_room() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    let mut low = testkit::gang("low", 2, None);
    low.priority = Some(10);
    let mut high = testkit::gang("high", 2, None);
    high.priority = Some(100);
    c.pod_groups.extend([low, high]);
    testkit::members(&mut c, "low", 2, 3000, GI);
    testkit::members(&mut c, "high", 2, 3000, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(bound_nodes(&c, &d, "high").len(), 2);
    assert!(bound_nodes(&c, &d, "low").is_empty());
}

#[test]
fn topology_chooses_the_tightest_rack_that_fits() {
    let mut c = Cluster::default();
    // rack-000: 4 nodes, rack-001: 2 nodes, rack-002: 1 node.
    for (rack, count) in [("r0", 4), ("r1", 2), ("r2", 1)] {
        for i in 0..count {
            let mut n = testkit::node(&mut c, &format!("{rack}-n{i}"), 4000, 64 * GI, 110);
            n.labels.insert("rack".into(), rack.into());
            c.nodes.push(n);
        }
    }
    c.pod_groups.push(testkit::gang("job", 4, Some("rack")));
    testkit::members(&mut c, "job", 4, 2000, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    let placed = bound_nodes(&c, &d, "job");
    assert_eq!(placed.len(), 4);
    assert!(placed.iter().all(|n| n.starts_with("r1-")), "{placed:?}");
    assert!(
        d.pod_groups[0].message.contains("rack=r1"),
        "{:?}",
        d.pod_groups
    );
}

#[test]
fn topology_failure_names_the_best_domain() {
    let mut c = Cluster::default();
    for (rack, count) in [("r0", 2), ("r1", 3)] {
        for i in 0..count {
            let mut n = testkit::node(&mut c, &format!("{rack}-n{i}"), 4000, 64 * GI, 110);
            n.labels.insert("rack".into(), rack.into());
            c.nodes.push(n);
        }
    }
    // 8 pods of 3 CPU need 8 nodes; no rack has them. Aggregate capacity prunes both racks.
    c.pod_groups.push(testkit::gang("job", 8, Some("rack")));
    testkit::members(&mut c, "job", 8, 3000, GI);
    // 3 pods of 3 CPU with minCount 3 would fit r1 only; 4 with minCount 4 fit nowhere but
    // r1 holds 3.
    c.pod_groups.push(testkit::gang("small", 4, Some("rack")));
    testkit::members(&mut c, "small", 4, 1500, GI);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    let job = d
        .pod_groups
        .iter()
        .find(|g| g.name == "default/job")
        .unwrap();
    assert!(
        job.message.contains("no domain of rack has room"),
        "{}",
        job.message
    );
    // 1.5 CPU pods: 2 per node, r1 holds 6: small fits in r0 (tightest with 4 CPU free x2).
    assert_eq!(bound_nodes(&c, &d, "small").len(), 4);
}

#[test]
fn heterogeneous_gang_where_greedy_order_fails() {
    // Two nodes of 4 CPU. Pods: two of 1 CPU, one of 4 CPU, one of 2 CPU (8 CPU in all).
    // In name order with LeastAllocated the small pods spread over both nodes and the 4-CPU
    // pod fits nowhere; hardest-first places 4 on one node, then 2+1+1 on the other.
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    c.pod_groups.push(testkit::gang("mix", 4, None));
    for (name, cpu) in [
        ("mix-a", 1000),
        ("mix-b", 1000),
        ("mix-c", 4000),
        ("mix-d", 2000),
    ] {
        let mut p = testkit::pod(&mut c, name, cpu, GI);
        p.pod_group = Some("mix".into());
        c.pods.push(p);
    }
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(d.bindings.len(), 4, "{d:?}");
}

#[test]
fn composite_children_share_a_zone_and_each_a_rack() {
    let mut c = Cluster::default();
    // zone-a: racks a1, a2 (2 nodes each); zone-b: rack b1 (3 nodes).
    for (zone, rack, count) in [("za", "a1", 2), ("za", "a2", 2), ("zb", "b1", 3)] {
        for i in 0..count {
            let mut n = testkit::node(&mut c, &format!("{rack}-n{i}"), 4000, 64 * GI, 110);
            n.labels.insert("zone".into(), zone.into());
            n.labels.insert("rack".into(), rack.into());
            c.nodes.push(n);
        }
    }
    c.composite_pod_groups.push(CompositePodGroup {
        namespace: "default".into(),
        name: "job".into(),
        policy: GroupPolicy::Gang { min: 2 },
        topology_key: Some("zone".into()),
        priority: None,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        disruption_mode: DisruptionMode::Single,
        parent: None,
        creation_timestamp: None,
    });
    for r in ["rep0", "rep1"] {
        let mut g = testkit::gang(r, 2, Some("rack"));
        g.parent = Some("job".into());
        c.pod_groups.push(g);
        testkit::members(&mut c, r, 2, 3000, GI);
    }
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    let rep0 = bound_nodes(&c, &d, "rep0");
    let rep1 = bound_nodes(&c, &d, "rep1");
    assert_eq!((rep0.len(), rep1.len()), (2, 2), "{d:?}");
    // zb has one rack of 3 nodes, so only zone za can hold two replicas in separate racks.
    let racks: Vec<&str> = rep0.iter().chain(&rep1).map(|n| &n[..2]).collect();
    assert!(racks.iter().all(|r| r.starts_with('a')), "{racks:?}");
    assert_eq!(
        rep0.iter()
            .map(|n| &n[..2])
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        1
    );
    assert_eq!(
        rep1.iter()
            .map(|n| &n[..2])
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        1
    );
}

#[test]
fn composite_all_or_nothing() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    c.composite_pod_groups.push(CompositePodGroup {
        namespace: "default".into(),
        name: "job".into(),
        policy: GroupPolicy::Gang { min: 2 },
        topology_key: None,
        priority: None,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        disruption_mode: DisruptionMode::Single,
        parent: None,
        creation_timestamp: None,
    });
    for r in ["rep0", "rep1"] {
        let mut g = testkit::gang(r, 2, None);
        g.parent = Some("job".into());
        c.pod_groups.push(g);
        testkit::members(&mut c, r, 2, 1500, GI);
    }
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    // One replica fits (3 of 4 CPU), two do not: nothing is bound.
    assert!(d.bindings.is_empty(), "{d:?}");
    assert!(d.pod_groups.iter().all(|g| !g.scheduled));
    assert!(
        d.pod_groups[0].message.contains("1 of minGroupCount 2"),
        "{:?}",
        d.pod_groups
    );
}

#[test]
fn a_pod_group_claim_from_a_template_is_one_claim_shared_by_its_pods() {
    // 4 nodes x 8 GPUs; a gang of 2 pods whose PodGroup claims 2 GPUs from a template that
    // both pods name: one allocation of 2 devices, both pods on its node.
    let mut c = testkit::dra_gpus(4, 0, 0);
    c.resource_claim_templates
        .push(lockstep_model::dra::ResourceClaimTemplate {
            name: "two".into(),
            ..c.resource_claim_templates[1].clone()
        });
    if let lockstep_model::dra::DeviceRequestKind::Exactly(e) =
        &mut c.resource_claim_templates[2].spec.requests[0].kind
    {
        e.allocation_mode = lockstep_model::dra::AllocationMode::ExactCount(2);
    }
    let mut g = testkit::gang("job", 2, None);
    g.resource_claims.push(lockstep_model::PodGroupClaim {
        name: "shared".into(),
        resource_claim_name: None,
        resource_claim_template_name: Some("two".into()),
    });
    c.pod_groups.push(g);
    testkit::members(&mut c, "job", 2, 1000, GI);
    for p in c.pods.iter_mut() {
        p.resource_claims.push(lockstep_model::PodResourceClaim {
            name: "shared".into(),
            resource_claim_name: None,
            resource_claim_template_name: Some("two".into()),
            generated_claim: None,
        });
    }
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(d.bindings.len(), 2, "{d:?}");
    assert_eq!(d.bindings[0].1, d.bindings[1].1);
    assert_eq!(d.allocations.len(), 2);
    assert!(
        d.allocations
            .iter()
            .all(|a| a.claim == "default/job-shared")
    );
    assert_eq!(d.allocations[0].devices, d.allocations[1].devices);
    assert_eq!(d.allocations[0].devices.len(), 2);
}
