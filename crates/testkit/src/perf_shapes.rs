//! scheduler_perf's inter-pod affinity, topology spread and node affinity shapes
//! (`test/integration/scheduler_perf/affinity` and `topology_spreading`): nodes of 4 CPU /
//! 32Gi / 110 pods, `init` pods already running (bound round-robin, as the shape's first
//! `createPods` leaves them) and `measure` pending pods of the shape's template.

use lockstep_model::{
    Cluster, InclusionPolicy, LabelSelector, NodeSelectorTerm, Operator, Pod, PodAffinityTerm,
    PodPhase, Requirement, TopologySpreadConstraint, WhenUnsatisfiable,
};

use crate::{GI, finish, node, pod};

/// The run a shape is timed by: the cluster state built from `cluster`, then every pending
/// pod scheduled with the default profile.
pub fn schedule_all(cluster: Cluster, batching: bool) -> lockstep_engine::Decisions {
    lockstep_engine::Scheduler::from_cluster(
        cluster,
        lockstep_engine::Options {
            batching,
            ..lockstep_engine::Options::default()
        },
    )
    .expect("default profile")
    .run()
}

pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// `nodes` nodes, each labelled `topology.kubernetes.io/zone` with `zones[i % len]`.
fn nodes(c: &mut Cluster, nodes: usize, zones: &[&str]) {
    for i in 0..nodes {
        let mut n = node(c, &format!("node-{i:05}"), 4000, 32 * GI, 110);
        if !zones.is_empty() {
            n.labels
                .insert(ZONE_KEY.into(), zones[i % zones.len()].to_string());
        }
        c.nodes.push(n);
    }
}

/// The template's pod: 100m CPU and 500Mi, in `namespace`, then shaped by `f`.
fn add_pods(
    c: &mut Cluster,
    prefix: &str,
    count: usize,
    namespace: &str,
    bind_from: Option<usize>,
    f: &dyn Fn(&mut Pod),
) {
    let n_nodes = c.nodes.len();
    for i in 0..count {
        let mut p = pod(c, &format!("{prefix}-{i:06}"), 100, 500 * 1024 * 1024);
        p.namespace = namespace.into();
        f(&mut p);
        if let Some(start) = bind_from {
            p.node_name = Some(format!("node-{:05}", (start + i) % n_nodes));
            p.phase = PodPhase::Running;
        }
        c.pods.push(p);
    }
}

fn color(p: &mut Pod, value: &str) {
    p.labels.insert("color".into(), value.into());
}

/// A term selecting `color=value` in namespaces sched-0 and sched-1.
fn color_term(value: &str, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: Some(LabelSelector {
            match_labels: vec![("color".into(), value.into())],
            match_expressions: Vec::new(),
        }),
        namespaces: vec!["sched-0".into(), "sched-1".into()],
        namespace_selector: None,
        topology_key: topology_key.into(),
    }
}

/// `pod-with-pod-anti-affinity.yaml`: `color=green`, required anti-affinity to
/// `color=green` per hostname. SchedulingPodAntiAffinity/5000Nodes_2000Pods is
/// (5000, 1000, 2000).
pub fn pod_anti_affinity(n: usize, init: usize, measure: usize) -> Cluster {
    let mut c = Cluster::default();
    nodes(&mut c, n, &[]);
    let shape = |p: &mut Pod| {
        color(p, "green");
        p.pod_anti_affinity
            .required
            .push(color_term("green", HOSTNAME_KEY));
    };
    add_pods(&mut c, "init", init, "sched-0", Some(0), &shape);
    add_pods(&mut c, "pod", measure, "sched-1", None, &shape);
    finish(c)
}

/// `pod-with-pod-affinity.yaml`: `color=blue`, required affinity to `color=blue` per zone,
/// every node in `zone1`. SchedulingPodAffinity/5000Nodes_5000Pods is (5000, 5000, 5000).
pub fn pod_affinity(n: usize, init: usize, measure: usize) -> Cluster {
    let mut c = Cluster::default();
    nodes(&mut c, n, &["zone1"]);
    let shape = |p: &mut Pod| {
        color(p, "blue");
        p.pod_affinity.required.push(color_term("blue", ZONE_KEY));
    };
    add_pods(&mut c, "init", init, "sched-0", Some(0), &shape);
    add_pods(&mut c, "pod", measure, "sched-1", None, &shape);
    finish(c)
}

/// `pod-with-preferred-pod-affinity.yaml`: `color=red`, preferred affinity (weight 1) to
/// `color=red` per hostname. SchedulingPreferredPodAffinity/5000Nodes_5000Pods is
/// (5000, 5000, 5000).
pub fn preferred_pod_affinity(n: usize, init: usize, measure: usize) -> Cluster {
    let mut c = Cluster::default();
    nodes(&mut c, n, &[]);
    let shape = |p: &mut Pod| {
        color(p, "red");
        p.pod_affinity
            .preferred
            .push((1, color_term("red", HOSTNAME_KEY)));
    };
    add_pods(&mut c, "init", init, "sched-0", Some(0), &shape);
    add_pods(&mut c, "pod", measure, "sched-1", None, &shape);
    finish(c)
}

/// `pod-with-topology-spreading.yaml` (`when` DoNotSchedule) or
/// `pod-with-preferred-topology-spreading.yaml` (ScheduleAnyway): `color=blue`, maxSkew 5
/// over zones for `color=blue`; nodes in zones moon-1..3; the init pods are
/// `pod-default.yaml` (no labels). TopologySpreading/5000Nodes_5000Pods and
/// PreferredTopologySpreading/5000Nodes_5000Pods are (5000, 5000, 5000).
pub fn topology_spread(n: usize, init: usize, measure: usize, when: WhenUnsatisfiable) -> Cluster {
    let mut c = Cluster::default();
    nodes(&mut c, n, &["moon-1", "moon-2", "moon-3"]);
    add_pods(&mut c, "init", init, "default", Some(0), &|_| {});
    let shape = |p: &mut Pod| {
        color(p, "blue");
        p.topology_spread.push(TopologySpreadConstraint {
            max_skew: 5,
            topology_key: ZONE_KEY.into(),
            when_unsatisfiable: when,
            selector: Some(LabelSelector {
                match_labels: vec![("color".into(), "blue".into())],
                match_expressions: Vec::new(),
            }),
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        });
    };
    add_pods(&mut c, "pod", measure, "default", None, &shape);
    finish(c)
}

/// `pod-with-node-affinity.yaml`: required node affinity `zone In (zone1, zone2)`, every
/// node in `zone1`; init pods of the same template. SchedulingNodeAffinity/5000Nodes_10000Pods
/// is (5000, 5000, 10000).
pub fn node_affinity(n: usize, init: usize, measure: usize) -> Cluster {
    let mut c = Cluster::default();
    nodes(&mut c, n, &["zone1"]);
    let shape = |p: &mut Pod| {
        p.node_affinity.required = Some(vec![NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: ZONE_KEY.into(),
                operator: Operator::In,
                values: vec!["zone1".into(), "zone2".into()],
            }],
            match_fields: Vec::new(),
        }]);
    };
    add_pods(&mut c, "init", init, "default", Some(0), &shape);
    add_pods(&mut c, "pod", measure, "default", None, &shape);
    finish(c)
}
