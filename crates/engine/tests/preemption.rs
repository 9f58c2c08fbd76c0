//! Preemption: kube-scheduler's pod preemption and gang-aware victim selection.

use lockstep_engine::{Decisions, GangPreemption, Options, schedule};
use lockstep_model::{
    Cluster, DisruptionMode, IntOrPercent, LabelSelector, PodDisruptionBudget, PreemptionPolicy,
};
use lockstep_testkit::{self as testkit, GI};

fn nodes(c: &mut Cluster, names: &[&str], cpu: i64) {
    for n in names {
        let node = testkit::node(c, n, cpu, 64 * GI, 110);
        c.nodes.push(node);
    }
}

fn evicted(c: &Cluster, d: &Decisions) -> Vec<String> {
    let mut v: Vec<String> = d
        .evictions
        .iter()
        .map(|e| c.pods[e.pod.index()].name.clone())
        .collect();
    v.sort();
    v
}

fn bound(c: &Cluster, d: &Decisions, prefix: &str) -> usize {
    d.bindings
        .iter()
        .filter(|(p, _)| c.pods[p.index()].name.starts_with(prefix))
        .count()
}

fn run(c: &Cluster, mode: GangPreemption) -> Decisions {
    schedule(
        c,
        Options {
            gang_preemption: mode,
            ..Options::default()
        },
    )
    .unwrap()
}

fn victim_gang(c: &mut Cluster, name: &str, priority: i32, placements: &[(&str, i64)]) {
    let mut g = testkit::gang(name, placements.len() as u32, None);
    g.priority = Some(priority);
    c.pod_groups.push(g);
    for (i, (node, cpu)) in placements.iter().enumerate() {
        let p = testkit::running(c, &format!("{name}-{i}"), node, *cpu, priority, Some(name));
        c.pods.push(p);
    }
}

fn preemptor_gang(c: &mut Cluster, name: &str, size: usize, cpu: i64, priority: i32) {
    let mut g = testkit::gang(name, size as u32, None);
    g.priority = Some(priority);
    c.pod_groups.push(g);
    testkit::members(c, name, size, cpu, GI);
}

#[test]
fn pod_preemption_picks_the_node_with_the_lowest_victim_priority() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    let v1 = testkit::running(&mut c, "mid", "a", 4000, 50, None);
    let v2 = testkit::running(&mut c, "low", "b", 4000, 10, None);
    c.pods.extend([v1, v2]);
    let mut p = testkit::pod(&mut c, "urgent", 2000, GI);
    p.priority = 100;
    c.pods.push(p);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert_eq!(evicted(&c, &d), vec!["low"]);
    assert_eq!(c.nodes[d.bindings[0].1.index()].name, "b");
    assert_eq!(
        d.evictions[0].reason,
        "preempted by pod default/urgent (priority 100)"
    );
}

#[test]
fn pod_preemption_reprieves_victims_it_does_not_need() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    for (name, prio) in [("v1", 1), ("v2", 2), ("v3", 3), ("v4", 4)] {
        let v = testkit::running(&mut c, name, "a", 1000, prio, None);
        c.pods.push(v);
    }
    let mut p = testkit::pod(&mut c, "urgent", 2000, GI);
    p.priority = 100;
    c.pods.push(p);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    // Reprieve from the most important down: v4, v3 stay; v2, v1 go.
    assert_eq!(evicted(&c, &d), vec!["v1", "v2"]);
}

#[test]
fn equal_or_higher_priority_is_never_a_victim_and_never_preempting_leaves_room() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    let v = testkit::running(&mut c, "peer", "a", 4000, 100, None);
    c.pods.push(v);
    let mut p = testkit::pod(&mut c, "same", 2000, GI);
    p.priority = 100;
    c.pods.push(p);
    let mut q = testkit::pod(&mut c, "polite", 2000, GI);
    q.priority = 1000;
    q.preemption_policy = PreemptionPolicy::Never;
    c.pods.push(q);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
    assert_eq!(d.unschedulable.len(), 2);
}

#[test]
fn pdb_protected_victims_are_avoided() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    let mut v1 = testkit::running(&mut c, "guarded", "a", 4000, 1, None);
    v1.labels.insert("app".into(), "db".into());
    let v2 = testkit::running(&mut c, "free", "b", 4000, 5, None);
    c.pods.extend([v1, v2]);
    c.pod_disruption_budgets.push(PodDisruptionBudget {
        namespace: "default".into(),
        name: "db".into(),
        selector: Some(LabelSelector {
            match_labels: vec![("app".into(), "db".into())],
            match_expressions: vec![],
        }),
        disruptions_allowed: None,
        min_available: Some(IntOrPercent::Int(1)),
        max_unavailable: None,
    });
    let mut p = testkit::pod(&mut c, "urgent", 2000, GI);
    p.priority = 100;
    c.pods.push(p);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    // Lower victim priority would pick "guarded", but it would violate the budget.
    assert_eq!(evicted(&c, &d), vec!["free"]);
}

/// 4 nodes of 4 CPU, all full: gang "big" (4 CPU on a and on b), gang "small" (four 1-CPU
/// pods on c) and a single pod "solo" (4 CPU on d), all priority 10. The preemptor needs two
/// pods of 1.5 CPU.
fn overage_cluster() -> Cluster {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b", "c", "d"], 4000);
    victim_gang(&mut c, "big", 10, &[("a", 4000), ("b", 4000)]);
    victim_gang(
        &mut c,
        "small",
        10,
        &[("c", 1000), ("c", 1000), ("c", 1000), ("c", 1000)],
    );
    let solo = testkit::running(&mut c, "solo", "d", 4000, 10, None);
    c.pods.push(solo);
    preemptor_gang(&mut c, "train", 2, 1500, 1000);
    testkit::finish(c)
}

#[test]
fn gang_prefers_one_victim_gang_with_the_least_overage() {
    // Every single unit suffices: one pod of "big" (4 CPU), "solo" (4 CPU), or three pods
    // of "small" (3 CPU, exactly the need). Minimal mode evicts the least: three of small.
    let c = overage_cluster();
    let d = run(&c, GangPreemption::Minimal);
    assert_eq!(bound(&c, &d, "train"), 2, "{d:?}");
    assert_eq!(evicted(&c, &d), vec!["small-1", "small-2", "small-3"]);
    assert_eq!(
        d.evictions[0].reason,
        "preempted by gang default/train (priority 1000) in minimal mode"
    );
    assert!(d.disrupted_groups.iter().any(|(g, _)| g == "default/small"));
}

#[test]
fn atomic_mode_evicts_the_chosen_gang_whole() {
    // Atomic: units go whole. "small" whole is 4 CPU and 4Gi, "big" whole 8 CPU and 2Gi,
    // "solo" 4 CPU and 1Gi: solo evicts the least.
    let c = overage_cluster();
    let d = run(&c, GangPreemption::Atomic);
    assert_eq!(bound(&c, &d, "train"), 2);
    assert_eq!(evicted(&c, &d), vec!["solo"]);
}

#[test]
fn equal_choices_are_broken_by_placement_score_then_name() {
    // "zeta" fills 4-CPU node a; "alpha" fills half of 8-CPU node b next to a pod of
    // higher priority. Both evict 4 CPU and 1Gi. The preemptor scores better on a
    // (LeastAllocated: 2 of 4 CPU free rather than 2 of 8), so zeta goes although alpha
    // sorts first.
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    nodes(&mut c, &["b"], 8000);
    let z = testkit::running(&mut c, "zeta", "a", 4000, 10, None);
    let keeper = testkit::running(&mut c, "keeper", "b", 4000, 5000, None);
    let a = testkit::running(&mut c, "alpha", "b", 4000, 10, None);
    c.pods.extend([z, keeper, a]);
    preemptor_gang(&mut c, "train", 1, 2000, 1000);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert_eq!(evicted(&c, &d), vec!["zeta"]);

    // Identical choices on identical nodes: the unit name decides.
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    let y = testkit::running(&mut c, "y", "a", 4000, 10, None);
    let x = testkit::running(&mut c, "x", "b", 4000, 10, None);
    c.pods.extend([y, x]);
    preemptor_gang(&mut c, "train", 1, 2000, 1000);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert_eq!(evicted(&c, &d), vec!["x"]);
}

#[test]
fn atomic_mode_evicts_across_nodes() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b", "c"], 4000);
    victim_gang(
        &mut c,
        "spread",
        10,
        &[("a", 4000), ("b", 4000), ("c", 4000)],
    );
    preemptor_gang(&mut c, "train", 1, 4000, 1000);
    let c = testkit::finish(c);
    let minimal = run(&c, GangPreemption::Minimal);
    // Equal pods are reprieved in name order, so the last one goes.
    assert_eq!(evicted(&c, &minimal), vec!["spread-2"]);
    let atomic = run(&c, GangPreemption::Atomic);
    assert_eq!(
        evicted(&c, &atomic),
        vec!["spread-0", "spread-1", "spread-2"]
    );
    assert!(atomic.evictions[0].reason.ends_with("in atomic mode"));
}

#[test]
fn disruption_mode_all_overrides_minimal() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    victim_gang(&mut c, "whole", 10, &[("a", 4000), ("b", 4000)]);
    c.pod_groups[0].disruption_mode = DisruptionMode::All;
    preemptor_gang(&mut c, "train", 1, 4000, 1000);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert_eq!(bound(&c, &d, "train"), 1);
    assert_eq!(evicted(&c, &d), vec!["whole-0", "whole-1"]);
    assert!(d.evictions[0].reason.contains("disruptionMode all"));
}

#[test]
fn greedy_fallback_when_no_single_gang_suffices() {
    // Each victim gang holds one node; the preemptor needs 3 nodes.
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b", "c", "d"], 4000);
    victim_gang(&mut c, "g1", 10, &[("a", 4000)]);
    victim_gang(&mut c, "g2", 10, &[("b", 4000)]);
    victim_gang(&mut c, "g3", 20, &[("c", 4000)]);
    victim_gang(&mut c, "g4", 10, &[("d", 4000)]);
    preemptor_gang(&mut c, "train", 3, 4000, 1000);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert_eq!(bound(&c, &d, "train"), 3);
    // Lowest priority first: g1, g2, g4 (priority 10) rather than g3 (priority 20).
    assert_eq!(evicted(&c, &d), vec!["g1-0", "g2-0", "g4-0"]);
}

#[test]
fn gang_that_cannot_fit_even_after_evicting_everything_evicts_nothing() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    victim_gang(&mut c, "g1", 10, &[("a", 4000), ("b", 4000)]);
    preemptor_gang(&mut c, "train", 3, 4000, 1000);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
    assert_eq!(bound(&c, &d, "train"), 0);
}

#[test]
fn gang_with_preemption_policy_never_waits() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    victim_gang(&mut c, "g1", 10, &[("a", 4000)]);
    preemptor_gang(&mut c, "train", 1, 4000, 1000);
    c.pod_groups[1].preemption_policy = PreemptionPolicy::Never;
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
}

#[test]
fn off_mode_ignores_gang_boundaries() {
    // Two victim gangs, each with one pod on node a and one on node b. The preemptor needs
    // node a. Off: the two pods on a go (two gangs touched, kube-scheduler's way); minimal
    // counts gangs and still needs both (they share the node), so both modes agree here, but
    // atomic takes both gangs whole.
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b"], 4000);
    victim_gang(&mut c, "g1", 10, &[("a", 2000), ("b", 2000)]);
    victim_gang(&mut c, "g2", 10, &[("a", 2000), ("b", 2000)]);
    preemptor_gang(&mut c, "train", 1, 4000, 1000);
    let c = testkit::finish(c);
    let off = run(&c, GangPreemption::Off);
    assert_eq!(evicted(&c, &off), vec!["g1-0", "g2-0"]);
    let atomic = run(&c, GangPreemption::Atomic);
    assert_eq!(evicted(&c, &atomic), vec!["g1-0", "g1-1", "g2-0", "g2-1"]);
}

/// The FailedScheduling message of the one unschedulable pod.
fn only_message(d: &Decisions) -> &str {
    assert_eq!(d.unschedulable.len(), 1, "{d:?}");
    &d.unschedulable[0].1
}

#[test]
fn failed_preemption_names_why_each_node_cannot_help() {
    // The preemptor needs 3 of 4 CPUs.
    // a: a low-priority pod (1 CPU) runs beside a peer (2 CPU): without it 2 CPUs are free.
    // b: only a peer (3 CPU) runs there: nothing of lower priority to evict.
    // c: tainted, which evicting cannot cure. d: 2 CPUs in all, less than the request.
    let mut c = Cluster::default();
    nodes(&mut c, &["a", "b", "c"], 4000);
    nodes(&mut c, &["d"], 2000);
    c.nodes[2].taints.push(testkit::taint(
        "dedicated",
        "gpu",
        lockstep_model::TaintEffect::NoSchedule,
    ));
    for (name, node, cpu, priority) in [
        ("low", "a", 1000, 0),
        ("peer-a", "a", 2000, 100),
        ("peer-b", "b", 3000, 100),
    ] {
        let p = testkit::running(&mut c, name, node, cpu, priority, None);
        c.pods.push(p);
    }
    let mut big = testkit::pod(&mut c, "big", 3000, GI);
    big.priority = 100;
    c.pods.push(big);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
    assert_eq!(
        only_message(&d),
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient cpu. \
         preemption: 0/4 nodes are available: 1 Insufficient cpu, \
         1 No preemption victims found for incoming pod, \
         2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_pod_that_may_not_preempt_says_so() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    let low = testkit::running(&mut c, "low", "a", 3000, 0, None);
    c.pods.push(low);
    let mut polite = testkit::pod(&mut c, "polite", 2000, GI);
    polite.priority = 100;
    polite.preemption_policy = PreemptionPolicy::Never;
    c.pods.push(polite);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
    assert_eq!(
        only_message(&d),
        "0/1 nodes are available: 1 Insufficient cpu. \
         preemption: not eligible due to preemptionPolicy=Never."
    );
}

#[test]
fn without_preemption_the_message_has_no_preemption_part() {
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 1000);
    let big = testkit::pod(&mut c, "big", 2000, GI);
    c.pods.push(big);
    let c = testkit::finish(c);
    let d = schedule(
        &c,
        Options {
            preemption: false,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        only_message(&d),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
}

#[test]
fn a_rejection_that_outlasts_the_victims_is_named_in_the_preemption_part() {
    // a: a peer holds host port 8080 and a low-priority pod runs beside it; evicting the
    // low-priority pod leaves the port taken.
    let mut c = Cluster::default();
    nodes(&mut c, &["a"], 4000);
    let port = lockstep_model::HostPort {
        protocol: "TCP".into(),
        host_ip: String::new(),
        port: 8080,
    };
    let mut peer = testkit::running(&mut c, "peer", "a", 1000, 100, None);
    peer.host_ports.push(port.clone());
    c.pods.push(peer);
    let low = testkit::running(&mut c, "low", "a", 1000, 0, None);
    c.pods.push(low);
    let mut web = testkit::pod(&mut c, "web", 1000, GI);
    web.priority = 100;
    web.host_ports.push(port);
    c.pods.push(web);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
    assert_eq!(
        only_message(&d),
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. \
         preemption: 0/1 nodes are available: \
         1 node(s) didn't have free ports for the requested pod ports."
    );
}

#[test]
fn a_node_still_full_of_pods_without_its_victims_says_too_many_pods() {
    // Room for 3 pods and 4 running: three peers and a low-priority pod. Without the
    // low-priority pod 3 remain, so the pod is still one too many.
    let mut c = Cluster::default();
    let node = testkit::node(&mut c, "a", 8000, 64 * GI, 3);
    c.nodes.push(node);
    for (name, priority) in [
        ("peer-1", 100),
        ("peer-2", 100),
        ("peer-3", 100),
        ("low", 0),
    ] {
        let p = testkit::running(&mut c, name, "a", 100, priority, None);
        c.pods.push(p);
    }
    let mut web = testkit::pod(&mut c, "web", 100, GI);
    web.priority = 100;
    c.pods.push(web);
    let c = testkit::finish(c);
    let d = run(&c, GangPreemption::Minimal);
    assert!(d.evictions.is_empty());
    assert_eq!(
        only_message(&d),
        "0/1 nodes are available: 1 Too many pods. \
         preemption: 0/1 nodes are available: 1 Too many pods."
    );
}
