//! Cycles on two cores (`Options::two_cores`): a scan over many nodes filters part of each
//! run of them on the helper thread, and a cycle with many feasible nodes scores part of them
//! there; every decision, score tie and message is the one of doing it all on one thread.

use lockstep_engine::{Decisions, Options, Scheduler};
use lockstep_model::{
    Cluster, InclusionPolicy, LabelSelector, NodeSelectorTerm, Operator, PodPhase, Requirement,
    TaintEffect, TopologySpreadConstraint, WhenUnsatisfiable,
};
use lockstep_testkit::{self as testkit, GI, perf_shapes};
use proptest::prelude::*;

/// The decisions (with score ties) and how many scans and cycles' scores were split.
fn run(cluster: &Cluster, split: bool, every_node: bool) -> (Decisions, (u64, u64)) {
    let mut options = Options {
        batching: false,
        record_ties: true,
        two_cores: split,
        ..Options::default()
    };
    if every_node {
        options.profile.percentage_of_nodes_to_score = 100;
    }
    let mut s = Scheduler::new(cluster, options).expect("default profile");
    let d = s.run();
    (d, s.split_cycles())
}

fn assert_same(cluster: &Cluster, every_node: bool) {
    let (split, (scans, scores)) = run(cluster, true, every_node);
    let (whole, whole_cycles) = run(cluster, false, every_node);
    assert!(scans > 0, "no scan was split");
    assert_eq!(whole_cycles, (0, 0));
    assert_eq!(split, whole);
    let _ = scores;
}

#[derive(Debug, Clone)]
struct NodeSpec {
    cpu: i64,
    mem_gi: i64,
    zone: u8,
    soft_taint: bool,
}

#[derive(Debug, Clone)]
struct PodSpec {
    cpu: i64,
    mem_mi: i64,
    /// Preferred node affinity to a zone, with a weight.
    prefers: Option<(u8, i32)>,
    /// A ScheduleAnyway zone spread over the pods of its app.
    spread: bool,
    app: u8,
    bound_to: Option<usize>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (1i64..=16, 1i64..=64, 0u8..5, proptest::bool::weighted(0.2)).prop_map(
        |(cpu, mem_gi, zone, soft_taint)| NodeSpec {
            cpu: cpu * 1000,
            mem_gi,
            zone,
            soft_taint,
        },
    )
}

fn pod_spec(nodes: usize) -> impl Strategy<Value = PodSpec> {
    (
        // Now and then a pod no node can hold: every node is filtered and the reasons of
        // both sides are added up.
        prop_oneof![9 => 0i64..=4000, 1 => 17000i64..=20000],
        0i64..=8000,
        proptest::option::weighted(0.3, (0u8..5, 1i32..=100)),
        proptest::bool::weighted(0.3),
        0u8..3,
        proptest::option::weighted(0.3, 0..nodes),
    )
        .prop_map(|(cpu, mem_mi, prefers, spread, app, bound_to)| PodSpec {
            cpu,
            mem_mi,
            prefers,
            spread,
            app,
            bound_to,
        })
}

fn build(nodes: &[NodeSpec], pods: &[PodSpec]) -> Cluster {
    let mut c = Cluster::default();
    for (i, n) in nodes.iter().enumerate() {
        let mut node = testkit::node(&mut c, &format!("n{i:03}"), n.cpu, n.mem_gi * GI, 20);
        node.labels.insert("zone".into(), format!("z{}", n.zone));
        if n.soft_taint {
            node.taints
                .push(testkit::taint("soft", "x", TaintEffect::PreferNoSchedule));
        }
        c.nodes.push(node);
    }
    for (i, p) in pods.iter().enumerate() {
        let mut pod = testkit::pod(&mut c, &format!("p{i:03}"), p.cpu, p.mem_mi * 1024 * 1024);
        pod.labels.insert("app".into(), format!("a{}", p.app));
        if let Some((zone, weight)) = p.prefers {
            pod.node_affinity.preferred.push((
                weight,
                NodeSelectorTerm {
                    match_expressions: vec![Requirement {
                        key: "zone".into(),
                        operator: Operator::In,
                        values: vec![format!("z{zone}")],
                    }],
                    match_fields: vec![],
                },
            ));
        }
        if p.spread {
            pod.topology_spread.push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
                selector: Some(LabelSelector {
                    match_labels: vec![("app".into(), format!("a{}", p.app))],
                    match_expressions: vec![],
                }),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
            });
        }
        if let Some(n) = p.bound_to {
            pod.node_name = Some(format!("n{n:03}"));
            pod.phase = PodPhase::Running;
        }
        c.pods.push(pod);
    }
    // A small pod first in the queue: at least one cycle with every free node feasible.
    let mut first = testkit::pod(&mut c, "first", 10, 10 * 1024 * 1024);
    first.priority = 1000;
    c.pods.push(first);
    testkit::finish(c)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every node is filtered and scored (percentageOfNodesToScore 100), so each scan and
    /// most cycles' scores are split; the scorers that normalize (TaintToleration,
    /// NodeAffinity, PodTopologySpread) see all of them at once.
    #[test]
    fn cycles_on_two_cores_decide_as_on_one(
        (nodes, pods) in proptest::collection::vec(node_spec(), 260..330)
            .prop_flat_map(|nodes| {
                let n = nodes.len();
                (Just(nodes), proptest::collection::vec(pod_spec(n), 0..100))
            })
    ) {
        let cluster = build(&nodes, &pods);
        let (split, (scans, scores)) = run(&cluster, true, true);
        let (whole, _) = run(&cluster, false, true);
        prop_assert!(scans > 0 && scores > 0);
        prop_assert_eq!(split, whole);
    }
}

#[test]
fn scheduler_perf_shapes_decide_as_on_one_core() {
    assert_same(&testkit::scheduling_basic(600, 300), false);
    assert_same(&testkit::resource_saturation(600, 700), false);
    assert_same(&testkit::host_port_conflict(600, 700), false);
    assert_same(&testkit::full_of_gangs(300, 40, true), false);
    assert_same(&perf_shapes::preferred_pod_affinity(600, 300, 200), false);
    assert_same(
        &perf_shapes::topology_spread(600, 300, 200, WhenUnsatisfiable::ScheduleAnyway),
        false,
    );
    assert_same(&perf_shapes::pod_anti_affinity(600, 300, 400), false);
}
