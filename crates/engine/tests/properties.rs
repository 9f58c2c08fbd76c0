//! Invariants over random clusters: no node over allocatable, taints and required node
//! affinity never violated, the same input gives the same decisions.

use lockstep_engine::{ClusterState, Options, schedule};
use lockstep_model::{
    Cluster, NodeSelectorTerm, Operator, Requirement, ResourceId, TaintEffect, Toleration,
    TolerationOperator,
};
use lockstep_testkit::{self as testkit, GI};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct NodeSpec {
    cpu: i64,
    mem_gi: i64,
    pods: i64,
    tainted: bool,
    zone: u8,
}

#[derive(Debug, Clone)]
struct PodSpec {
    cpu: i64,
    mem_mi: i64,
    priority: i32,
    tolerates: bool,
    zone: Option<u8>,
    bound_to: Option<usize>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        1i64..=8,
        1i64..=16,
        1i64..=6,
        proptest::bool::weighted(0.3),
        0u8..3,
    )
        .prop_map(|(cpu, mem_gi, pods, tainted, zone)| NodeSpec {
            cpu: cpu * 1000,
            mem_gi,
            pods,
            tainted,
            zone,
        })
}

fn pod_spec(nodes: usize) -> impl Strategy<Value = PodSpec> {
    (
        0i64..=3000,
        0i64..=6000,
        -2i32..=2,
        any::<bool>(),
        proptest::option::weighted(0.3, 0u8..3),
        proptest::option::weighted(0.2, 0..nodes),
    )
        .prop_map(
            |(cpu, mem_mi, priority, tolerates, zone, bound_to)| PodSpec {
                cpu,
                mem_mi,
                priority,
                tolerates,
                zone,
                bound_to,
            },
        )
}

fn build(nodes: &[NodeSpec], pods: &[PodSpec]) -> Cluster {
    let mut c = Cluster::default();
    for (i, n) in nodes.iter().enumerate() {
        let mut node = testkit::node(&mut c, &format!("n{i:02}"), n.cpu, n.mem_gi * GI, n.pods);
        node.labels.insert("zone".into(), format!("z{}", n.zone));
        if n.tainted {
            node.taints
                .push(testkit::taint("dedicated", "x", TaintEffect::NoSchedule));
        }
        c.nodes.push(node);
    }
    for (i, p) in pods.iter().enumerate() {
        let mut pod = testkit::pod(&mut c, &format!("p{i:03}"), p.cpu, p.mem_mi * 1024 * 1024);
        pod.priority = p.priority;
        if p.tolerates {
            pod.tolerations.push(Toleration {
                key: "dedicated".into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: None,
            });
        }
        if let Some(z) = p.zone {
            pod.node_affinity.required = Some(vec![NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "zone".into(),
                    operator: Operator::In,
                    values: vec![format!("z{z}")],
                }],
                match_fields: vec![],
            }]);
        }
        if let Some(n) = p.bound_to {
            pod.node_name = Some(format!("n{n:02}"));
            pod.phase = lockstep_model::PodPhase::Running;
        }
        c.pods.push(pod);
    }
    testkit::finish(c)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn decisions_respect_capacity_taints_affinity_and_are_deterministic(
        (nodes, pods) in proptest::collection::vec(node_spec(), 1..12)
            .prop_flat_map(|nodes| {
                let n = nodes.len();
                (Just(nodes), proptest::collection::vec(pod_spec(n), 0..40))
            })
    ) {
        let cluster = build(&nodes, &pods);
        let d = schedule(&cluster, Options::default()).unwrap();
        let again = schedule(&cluster, Options::default()).unwrap();
        prop_assert_eq!(&d, &again);

        // Replay evictions and bindings onto a fresh snapshot.
        let mut snap = ClusterState::new(&cluster).unwrap();
        for e in &d.evictions {
            prop_assert!(snap.node_of(e.pod).is_some(), "evicted a pod that was not running");
            snap.forget(e.pod);
        }
        for (pod, node) in &d.bindings {
            snap.assume(*pod, *node);
            let p = &cluster.pods[pod.index()];
            let n = &cluster.nodes[node.index()];
            // Every resource the pod asks for fits (a pod asking for none of a resource may
            // join a node that running pods already overcommit, as in kube-scheduler).
            for (r, v) in p.requests.iter() {
                if v > 0 {
                    prop_assert!(snap.requested(*node, r) <= snap.allocatable(*node, r),
                        "{} overcommits {} on {}", p.name, cluster.resources.name(r), n.name);
                }
            }
            prop_assert!(i64::from(snap.pod_count(*node)) <= snap.allocatable(*node, ResourceId::PODS));
            for t in &n.taints {
                if t.effect != TaintEffect::PreferNoSchedule {
                    prop_assert!(p.tolerations.iter().any(|tol| tol.tolerates(t)),
                        "{} placed on tainted {}", p.name, n.name);
                }
            }
            if let Some(terms) = &p.node_affinity.required {
                prop_assert!(terms.iter().any(|t| t.matches(&n.name, &n.labels)));
            }
        }
        // Preemption only takes pods of strictly lower priority than their preemptor.
        for e in &d.evictions {
            let victim = &cluster.pods[e.pod.index()];
            let preemptor = cluster.pods.iter().find(|p| p.key() == e.preemptor).unwrap();
            prop_assert!(victim.priority < preemptor.priority);
            prop_assert!(d.bindings.iter().any(|(p, _)| cluster.pods[p.index()].key() == e.preemptor),
                "a preemptor that evicted is bound");
        }
        // Every pending pod is accounted for exactly once.
        let pending = cluster.pods.iter().filter(|p| p.is_pending()).count();
        prop_assert_eq!(pending, d.bindings.len() + d.unschedulable.len() + d.waiting.len() + d.skipped.len());
    }
}
