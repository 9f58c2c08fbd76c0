//! The indexed InterPodAffinity and PodTopologySpread against a direct scan of every pod on
//! every node (the plugins' definition): random clusters with pod labels, affinity terms of
//! every kind and spread constraints, then random changes (pods bound, forgotten and
//! deleted, node labels changed, nodes deleted). After each change every pending pod gets
//! the same Filter verdict and reasons, and the same raw Score, on every node.

use std::collections::{BTreeMap, HashMap};

use lockstep_engine::ClusterState;
use lockstep_engine::framework::{CycleState, Plugin, PreFilter, Reason};
use lockstep_engine::plugins::inter_pod_affinity::{self, InterPodAffinity, term_selects};
use lockstep_engine::plugins::node_affinity::required_matches;
use lockstep_engine::plugins::pod_topology_spread::{self, HOSTNAME_KEY, PodTopologySpread};
use lockstep_engine::state::{Change, Key, Object};
use lockstep_model::{
    Cluster, InclusionPolicy, LabelSelector, Labels, NodeId, NodeSelectorTerm, Operator, Pod,
    PodAffinityTerm, PodPhase, Requirement, TaintEffect, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use lockstep_testkit::{self as testkit, GI};
use proptest::prelude::*;

const KEYS: [&str; 3] = ["zone", "rack", HOSTNAME_KEY];

fn selector(kind: u8, a: u8, b: u8) -> Option<LabelSelector> {
    let v = |x: u8| format!("v{}", x % 3);
    let req = |key: &str, operator, values: Vec<String>| Requirement {
        key: key.into(),
        operator,
        values,
    };
    Some(match kind % 7 {
        0 => return None,
        1 => LabelSelector::default(),
        2 => LabelSelector {
            match_labels: vec![("app".into(), v(a))],
            match_expressions: vec![],
        },
        3 => LabelSelector {
            match_labels: vec![("app".into(), v(a)), ("tier".into(), v(b))],
            match_expressions: vec![],
        },
        4 => LabelSelector {
            match_labels: vec![],
            match_expressions: vec![req("app", Operator::In, vec![v(a), v(b)])],
        },
        5 => LabelSelector {
            match_labels: vec![],
            match_expressions: vec![req("tier", Operator::Exists, vec![])],
        },
        _ => LabelSelector {
            match_labels: vec![],
            match_expressions: vec![req("app", Operator::NotIn, vec![v(a)])],
        },
    })
}

fn term(bits: [u8; 5]) -> PodAffinityTerm {
    let [kind, a, b, ns, key] = bits;
    PodAffinityTerm {
        selector: selector(kind, a, b),
        namespaces: match ns % 4 {
            1 => vec!["a".into(), "b".into()],
            2 => vec!["b".into()],
            _ => vec![],
        },
        namespace_selector: match ns % 4 {
            3 => Some(LabelSelector {
                match_labels: vec![("team".into(), "x".into())],
                match_expressions: vec![],
            }),
            _ if ns % 9 == 0 => Some(LabelSelector::default()),
            _ => None,
        },
        topology_key: KEYS[key as usize % 3].into(),
    }
}

type Bits = Vec<u8>;

fn build(node_bits: &[Bits], pod_bits: &[Bits]) -> Cluster {
    let mut c = Cluster::default();
    c.namespaces
        .insert("a".into(), Labels::from([("team".into(), "x".into())]));
    c.namespaces.insert("b".into(), Labels::new());
    for (i, b) in node_bits.iter().enumerate() {
        let mut n = testkit::node(&mut c, &format!("n{i:02}"), 8000, 32 * GI, 20);
        if b[0] % 5 != 0 {
            n.labels.insert("zone".into(), format!("z{}", b[0] % 3));
        }
        if b[1] % 4 != 0 {
            n.labels.insert("rack".into(), format!("r{}", b[1] % 4));
        }
        if b[2] % 4 == 0 {
            n.taints
                .push(testkit::taint("dedicated", "x", TaintEffect::NoSchedule));
        }
        c.nodes.push(n);
    }
    let nodes = node_bits.len();
    for (i, b) in pod_bits.iter().enumerate() {
        let mut p = testkit::pod(&mut c, &format!("p{i:03}"), 100, GI / 8);
        p.namespace = if b[0] % 2 == 0 { "a" } else { "b" }.into();
        if b[1] % 4 != 0 {
            p.labels.insert("app".into(), format!("v{}", b[1] % 3));
        }
        if b[2] % 3 != 0 {
            p.labels.insert("tier".into(), format!("v{}", b[2] % 3));
        }
        p.terminating = b[3] % 11 == 0;
        let t = |k: usize| term([b[k], b[k + 1], b[k + 2], b[k + 3], b[k + 4]]);
        match b[4] % 6 {
            0 => p.pod_affinity.required.push(t(5)),
            1 => p.pod_anti_affinity.required.push(t(5)),
            2 => {
                p.pod_affinity
                    .preferred
                    .push((i32::from(b[10] % 5) + 1, t(5)));
                p.pod_anti_affinity.preferred.push((2, t(10)));
            }
            3 => {
                p.pod_affinity.required.push(t(5));
                p.pod_affinity.required.push(t(10));
            }
            _ => {}
        }
        if b[15] % 3 != 0 {
            let sel = selector(b[16], b[17], b[18]);
            p.topology_spread.push(TopologySpreadConstraint {
                max_skew: i32::from(b[19] % 3) + 1,
                topology_key: KEYS[b[20] as usize % 3].into(),
                when_unsatisfiable: if b[15] % 3 == 1 {
                    WhenUnsatisfiable::DoNotSchedule
                } else {
                    WhenUnsatisfiable::ScheduleAnyway
                },
                selector: sel,
                min_domains: (b[21] % 3 == 0).then_some(i32::from(b[21] % 5) + 1),
                node_affinity_policy: if b[22] % 2 == 0 {
                    InclusionPolicy::Honor
                } else {
                    InclusionPolicy::Ignore
                },
                node_taints_policy: if b[23] % 2 == 0 {
                    InclusionPolicy::Honor
                } else {
                    InclusionPolicy::Ignore
                },
            });
            if b[24] % 2 == 0 {
                let mut second = p.topology_spread[0].clone();
                second.topology_key = KEYS[(b[20] as usize + 1) % 3].into();
                p.topology_spread.push(second);
            }
        }
        if b[25] % 4 == 0 {
            p.node_affinity.required = Some(vec![NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "zone".into(),
                    operator: Operator::In,
                    values: vec![format!("z{}", b[25] % 3)],
                }],
                match_fields: vec![],
            }]);
        }
        if b[26] % 3 != 0 {
            p.node_name = Some(format!("n{:02}", b[27] as usize % nodes));
            p.phase = PodPhase::Running;
        }
        c.pods.push(p);
    }
    testkit::finish(c)
}

// ---- The plugins' definition: every pod on every node, scanned. ----

fn bump(map: &mut HashMap<String, HashMap<String, i64>>, key: &str, value: &str, by: i64) {
    *map.entry(key.to_string())
        .or_default()
        .entry(value.to_string())
        .or_insert(0) += by;
}

fn affinity_filter(snap: &ClusterState, pod: &Pod) -> Option<Vec<Vec<Reason>>> {
    let req_aff = &pod.pod_affinity.required;
    let req_anti = &pod.pod_anti_affinity.required;
    if req_aff.is_empty() && req_anti.is_empty() && snap.bound_with_required_anti_affinity == 0 {
        return None;
    }
    let ns = &snap.cluster.namespaces;
    let mut existing_anti = HashMap::new();
    let mut affinity = vec![HashMap::<String, i64>::new(); req_aff.len()];
    let mut anti = vec![HashMap::<String, i64>::new(); req_anti.len()];
    let mut any = false;
    for &node in snap.nodes() {
        let labels = &snap.node(node).labels;
        for &pid in snap.pods_on(node) {
            let other = snap.pod(pid);
            for t in &other.pod_anti_affinity.required {
                if let Some(v) = labels.get(&t.topology_key)
                    && term_selects(t, &other.namespace, pod, ns)
                {
                    bump(&mut existing_anti, &t.topology_key, v, 1);
                }
            }
            if !req_aff.is_empty()
                && req_aff
                    .iter()
                    .all(|t| term_selects(t, &pod.namespace, other, ns))
            {
                for (i, t) in req_aff.iter().enumerate() {
                    if let Some(v) = labels.get(&t.topology_key) {
                        *affinity[i].entry(v.clone()).or_insert(0) += 1;
                        any = true;
                    }
                }
            }
            for (i, t) in req_anti.iter().enumerate() {
                if let Some(v) = labels.get(&t.topology_key)
                    && term_selects(t, &pod.namespace, other, ns)
                {
                    *anti[i].entry(v.clone()).or_insert(0) += 1;
                }
            }
        }
    }
    let self_ok = !any
        && req_aff
            .iter()
            .all(|t| term_selects(t, &pod.namespace, pod, ns));
    let verdict = |node: NodeId| -> Vec<Reason> {
        let labels = &snap.node(node).labels;
        if !req_aff.is_empty() {
            let mut all_keys = true;
            let mut exist = true;
            for (i, t) in req_aff.iter().enumerate() {
                match labels.get(&t.topology_key) {
                    Some(v) => exist &= affinity[i].get(v).copied().unwrap_or(0) > 0,
                    None => all_keys = false,
                }
            }
            if !all_keys || (!exist && !self_ok) {
                return vec![inter_pod_affinity::POD_AFFINITY_NOT_MATCH];
            }
        }
        for (i, t) in req_anti.iter().enumerate() {
            if let Some(v) = labels.get(&t.topology_key)
                && anti[i].get(v).is_some_and(|c| *c > 0)
            {
                return vec![inter_pod_affinity::POD_ANTI_AFFINITY_NOT_MATCH];
            }
        }
        for (key, values) in &existing_anti {
            if let Some(v) = labels.get(key)
                && values.get(v).is_some_and(|c| *c > 0)
            {
                return vec![inter_pod_affinity::EXISTING_PODS_ANTI_AFFINITY_NOT_MATCH];
            }
        }
        vec![]
    };
    Some(snap.nodes().iter().map(|&n| verdict(n)).collect())
}

fn affinity_score(snap: &ClusterState, pod: &Pod, hard: i64) -> Option<Vec<i64>> {
    let has_preferred =
        !pod.pod_affinity.preferred.is_empty() || !pod.pod_anti_affinity.preferred.is_empty();
    if !has_preferred && snap.bound_with_affinity == 0 {
        return None;
    }
    let ns = &snap.cluster.namespaces;
    let mut score = HashMap::new();
    for &node in snap.nodes() {
        let labels = &snap.node(node).labels;
        for &pid in snap.pods_on(node) {
            let other = snap.pod(pid);
            let mut add = |t: &PodAffinityTerm, owner: &Pod, target: &Pod, w: i64| {
                if let Some(v) = labels.get(&t.topology_key)
                    && term_selects(t, &owner.namespace, target, ns)
                {
                    bump(&mut score, &t.topology_key, v, w);
                }
            };
            for (w, t) in &pod.pod_affinity.preferred {
                add(t, pod, other, i64::from(*w));
            }
            for (w, t) in &pod.pod_anti_affinity.preferred {
                add(t, pod, other, -i64::from(*w));
            }
            if hard > 0 {
                for t in &other.pod_affinity.required {
                    add(t, other, pod, hard);
                }
            }
            for (w, t) in &other.pod_affinity.preferred {
                add(t, other, pod, i64::from(*w));
            }
            for (w, t) in &other.pod_anti_affinity.preferred {
                add(t, other, pod, -i64::from(*w));
            }
        }
    }
    if score.is_empty() {
        return None;
    }
    Some(
        snap.nodes()
            .iter()
            .map(|&n| {
                let labels = &snap.node(n).labels;
                score
                    .iter()
                    .filter_map(|(k, vals)| labels.get(k).and_then(|v| vals.get(v)))
                    .sum()
            })
            .collect(),
    )
}

fn selects(c: &TopologySpreadConstraint, pod: &Pod, other: &Pod) -> bool {
    !other.terminating
        && other.namespace == pod.namespace
        && c.selector
            .as_ref()
            .is_some_and(|s| s.matches(&other.labels))
}

fn on_node(snap: &ClusterState, c: &TopologySpreadConstraint, pod: &Pod, node: NodeId) -> i64 {
    snap.pods_on(node)
        .iter()
        .filter(|p| selects(c, pod, snap.pod(**p)))
        .count() as i64
}

fn included(snap: &ClusterState, c: &TopologySpreadConstraint, pod: &Pod, node: NodeId) -> bool {
    if c.node_affinity_policy == InclusionPolicy::Honor && !required_matches(snap, pod, node) {
        return false;
    }
    if c.node_taints_policy == InclusionPolicy::Honor {
        let untolerated = snap.node(node).taints.iter().any(|t| {
            t.effect != TaintEffect::PreferNoSchedule
                && !pod.tolerations.iter().any(|tol| tol.tolerates(t))
        });
        if untolerated {
            return false;
        }
    }
    true
}

fn all_keys(snap: &ClusterState, cs: &[&TopologySpreadConstraint], node: NodeId) -> bool {
    let labels = &snap.node(node).labels;
    cs.iter().all(|c| labels.contains_key(&c.topology_key))
}

fn spread_counts(
    snap: &ClusterState,
    pod: &Pod,
    cs: &[&TopologySpreadConstraint],
) -> Vec<BTreeMap<String, i64>> {
    let mut counts = vec![BTreeMap::new(); cs.len()];
    for &node in snap.nodes() {
        if !all_keys(snap, cs, node) {
            continue;
        }
        for (k, c) in cs.iter().enumerate() {
            if included(snap, c, pod, node) {
                let v = snap.node(node).labels[&c.topology_key].clone();
                *counts[k].entry(v).or_insert(0) += on_node(snap, c, pod, node);
            }
        }
    }
    counts
}

fn spread_filter(snap: &ClusterState, pod: &Pod) -> Option<Vec<Vec<Reason>>> {
    let cs: Vec<&TopologySpreadConstraint> = pod
        .topology_spread
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        .collect();
    if cs.is_empty() {
        return None;
    }
    let counts = spread_counts(snap, pod, &cs);
    let mins: Vec<i64> = cs
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let min = counts[k].values().copied().min().unwrap_or(0);
            if c.min_domains
                .is_some_and(|m| (counts[k].len() as i64) < i64::from(m))
            {
                0
            } else {
                min
            }
        })
        .collect();
    let verdict = |node: NodeId| -> Vec<Reason> {
        for (k, c) in cs.iter().enumerate() {
            let Some(v) = snap.node(node).labels.get(&c.topology_key) else {
                return vec![pod_topology_spread::MISSING_LABEL];
            };
            let self_match = c.selector.as_ref().is_some_and(|s| s.matches(&pod.labels));
            let skew = counts[k].get(v).copied().unwrap_or(0) + i64::from(self_match) - mins[k];
            if skew > i64::from(c.max_skew) {
                return vec![pod_topology_spread::CONSTRAINTS_NOT_MATCH];
            }
        }
        vec![]
    };
    Some(snap.nodes().iter().map(|&n| verdict(n)).collect())
}

fn spread_score(snap: &ClusterState, pod: &Pod, feasible: &[NodeId]) -> Option<Vec<i64>> {
    let cs: Vec<&TopologySpreadConstraint> = pod
        .topology_spread
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        .collect();
    if cs.is_empty() {
        return None;
    }
    let counts = spread_counts(snap, pod, &cs);
    let ignored: Vec<NodeId> = feasible
        .iter()
        .copied()
        .filter(|&n| !all_keys(snap, &cs, n))
        .collect();
    let weights: Vec<f64> = cs
        .iter()
        .map(|c| {
            let size = if c.topology_key == HOSTNAME_KEY {
                feasible.len() - ignored.len()
            } else {
                let mut values: Vec<&String> = feasible
                    .iter()
                    .filter(|n| !ignored.contains(n))
                    .map(|&n| &snap.node(n).labels[&c.topology_key])
                    .collect();
                values.sort();
                values.dedup();
                values.len()
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    Some(
        feasible
            .iter()
            .map(|&node| {
                if ignored.contains(&node) {
                    return 0;
                }
                let mut score = 0f64;
                for (k, c) in cs.iter().enumerate() {
                    let v = &snap.node(node).labels[&c.topology_key];
                    let cnt = if c.topology_key == HOSTNAME_KEY {
                        on_node(snap, c, pod, node)
                    } else {
                        counts[k].get(v).copied().unwrap_or(0)
                    };
                    score += cnt as f64 * weights[k] + f64::from(c.max_skew - 1);
                }
                score.round() as i64
            })
            .collect(),
    )
}

// ---- The plugins as the framework runs them. ----

fn run_filter(p: &dyn Plugin, snap: &ClusterState, pod: &Pod) -> Option<Vec<Vec<Reason>>> {
    let mut state = CycleState::default();
    match p.pre_filter(snap, pod, &mut state) {
        PreFilter::Skip => None,
        PreFilter::Run => Some(
            snap.nodes()
                .iter()
                .map(|&n| {
                    let mut reasons = Vec::new();
                    let ok = p.filter(snap, pod, &state, n, &mut reasons);
                    assert_eq!(ok, reasons.is_empty());
                    reasons
                })
                .collect(),
        ),
        other => panic!("unexpected {other:?}"),
    }
}

fn run_score(
    p: &dyn Plugin,
    snap: &ClusterState,
    pod: &Pod,
    feasible: &[NodeId],
) -> Option<Vec<i64>> {
    let mut state = CycleState::default();
    p.pre_score(snap, pod, &mut state, feasible).then(|| {
        feasible
            .iter()
            .map(|&n| p.score(snap, pod, &state, n))
            .collect()
    })
}

fn check(snap: &ClusterState) {
    let affinity = InterPodAffinity {
        hard_pod_affinity_weight: 1,
    };
    let spread = PodTopologySpread;
    let all: Vec<NodeId> = snap.nodes().to_vec();
    let some: Vec<NodeId> = all.iter().copied().step_by(2).collect();
    for id in snap.pod_ids() {
        if snap.node_of(id).is_some() {
            continue;
        }
        let pod = snap.pod(id);
        let name = &pod.name;
        assert_eq!(
            run_filter(&affinity, snap, pod),
            affinity_filter(snap, pod),
            "affinity filter {name}"
        );
        assert_eq!(
            run_score(&affinity, snap, pod, &all),
            affinity_score(snap, pod, 1),
            "affinity score {name}"
        );
        assert_eq!(
            run_filter(&spread, snap, pod),
            spread_filter(snap, pod),
            "spread filter {name}"
        );
        for feasible in [&all, &some] {
            assert_eq!(
                run_score(&spread, snap, pod, feasible),
                spread_score(snap, pod, feasible),
                "spread score {name}"
            );
        }
    }
}

fn bits(n: usize) -> impl Strategy<Value = Bits> {
    proptest::collection::vec(any::<u8>(), n)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn indexed_plugins_decide_as_a_scan_does(
        nodes in proptest::collection::vec(bits(3), 1..8),
        pods in proptest::collection::vec(bits(28), 1..24),
        steps in proptest::collection::vec((0u8..6, any::<u16>(), bits(3)), 0..10),
    ) {
        let mut state = ClusterState::from_cluster(build(&nodes, &pods)).expect("valid");
        check(&state);
        for (op, at, nb) in steps {
            let pods: Vec<_> = state.pod_ids().collect();
            let nodes: Vec<_> = state.nodes().to_vec();
            if nodes.is_empty() || pods.is_empty() {
                break;
            }
            let pod = pods[at as usize % pods.len()];
            let node = nodes[at as usize % nodes.len()];
            match op {
                // A pending pod placed, or a placed one taken off.
                0 | 1 => match state.node_of(pod) {
                    None => state.assume(pod, node),
                    Some(_) => {
                        state.forget(pod);
                    }
                },
                // A node's labels changed.
                2 | 3 => {
                    let mut n = state.node(node).clone();
                    let fresh = build(&[nb], &[]);
                    n.labels.retain(|k, _| k == HOSTNAME_KEY);
                    for (k, v) in &fresh.nodes[0].labels {
                        if k != HOSTNAME_KEY {
                            n.labels.insert(k.clone(), v.clone());
                        }
                    }
                    state.apply(Change::Update(Object::Node(n))).expect("update");
                }
                // A pod deleted.
                4 => {
                    let p = state.pod(pod);
                    let key = Key::namespaced(&p.namespace, &p.name);
                    state.apply(Change::Delete(lockstep_engine::state::Kind::Pod, key)).expect("delete");
                }
                // A node deleted.
                _ => {
                    let name = state.node(node).name.clone();
                    state
                        .apply(Change::Delete(lockstep_engine::state::Kind::Node, Key::cluster(name)))
                        .expect("delete");
                }
            }
            check(&state);
        }
    }
}
