//! PodTopologySpread: `DoNotSchedule` constraints as a filter (skew of matching pods across
//! topology domains at most `maxSkew`, honouring `minDomains`, `nodeAffinityPolicy` and
//! `nodeTaintsPolicy`); `ScheduleAnyway` constraints as a score (fewer matching pods in the
//! node's domain scores higher).

use lockstep_model::{
    InclusionPolicy, NodeId, Pod, TaintEffect, TopologySpreadConstraint, WhenUnsatisfiable,
};

use crate::framework::{
    CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Rejections, Signature,
};
use crate::plugins::node_affinity::required_matches;
use crate::plugins::{Registration, no_args};
use crate::state::ClusterState;
use crate::topology::{NO_VALUE, PodTopology};

pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

pub struct PodTopologySpread;

pub static PLUGIN: Registration = Registration {
    name: "PodTopologySpread",
    filter: true,
    score: true,
    default_filter: true,
    weight: 2,
    scored_by_default: true,
    build: |_, _| Box::new(PodTopologySpread),
    configure: no_args,
};

static REJECTIONS: Rejections = Rejections {
    plugin: "PodTopologySpread",
    message: |code, _| match code {
        MISSING_LABEL_CODE => {
            "node(s) didn't match pod topology spread constraints (missing required label)".into()
        }
        _ => "node(s) didn't match pod topology spread constraints".into(),
    },
    // Removing matching pods can lower a domain's skew; it cannot give a node a label.
    resolvable: |code, _, _, _| code != MISSING_LABEL_CODE,
};

const MISSING_LABEL_CODE: u32 = 0;

/// The node lacks a constraint's topology key.
pub const MISSING_LABEL: Reason = Reason {
    by: &REJECTIONS,
    code: MISSING_LABEL_CODE,
};

/// Placing the pod on the node would exceed a constraint's maxSkew.
pub const CONSTRAINTS_NOT_MATCH: Reason = Reason {
    by: &REJECTIONS,
    code: 1,
};

/// Matching pods per domain of the selected constraints: per constraint, its key id, the
/// label classes of the state its selector matches, and the count per value id of its key
/// over eligible nodes (-1: no eligible node has the value, so it is not a domain).
#[derive(Debug, Default)]
struct Domains {
    keys: Vec<u32>,
    classes: Vec<Vec<u32>>,
    counts: Vec<Vec<i64>>,
    candidates: Vec<u32>,
}

#[derive(Debug, Default)]
struct SpreadFilterState {
    /// Indexes of the pod's DoNotSchedule constraints.
    constraints: Vec<usize>,
    domains: Domains,
    /// Per constraint: the global minimum used for the skew (0 below minDomains).
    min_match: Vec<i64>,
    /// Per constraint: whether the incoming pod matches its own selector.
    self_match: Vec<bool>,
}

#[derive(Debug, Default)]
struct SpreadScoreState {
    constraints: Vec<usize>,
    domains: Domains,
    weights: Vec<f64>,
    /// Feasible nodes lacking one of the constraints' topology keys (scored 0).
    ignored: Vec<NodeId>,
    seen: Vec<Vec<bool>>,
}

/// Whether the node counts for the constraint under its inclusion policies.
fn node_included(
    snap: &ClusterState,
    c: &TopologySpreadConstraint,
    pod: &Pod,
    node: NodeId,
) -> bool {
    if c.node_affinity_policy == InclusionPolicy::Honor && !required_matches(snap, pod, node) {
        return false;
    }
    if c.node_taints_policy == InclusionPolicy::Honor {
        let n = &snap.cluster.nodes[node.index()];
        let untolerated = n.taints.iter().any(|t| {
            t.effect != TaintEffect::PreferNoSchedule
                && !pod.tolerations.iter().any(|tol| tol.tolerates(t))
        });
        if untolerated {
            return false;
        }
    }
    true
}

/// Whether every node is included under the constraint's policies for this pod, without
/// looking at nodes.
fn all_included(snap: &ClusterState, c: &TopologySpreadConstraint, pod: &Pod) -> bool {
    (c.node_affinity_policy == InclusionPolicy::Ignore
        || (pod.node_selector.is_empty() && pod.node_affinity.required.is_none()))
        && (c.node_taints_policy == InclusionPolicy::Ignore || !snap.any_hard_taint)
}

/// The indexes of the pod's constraints with the given `whenUnsatisfiable`.
fn select(pod: &Pod, when: WhenUnsatisfiable, out: &mut Vec<usize>) {
    out.clear();
    out.extend(
        pod.topology_spread
            .iter()
            .enumerate()
            .filter(|(_, c)| c.when_unsatisfiable == when)
            .map(|(i, _)| i),
    );
}

fn key_of(topo: &PodTopology, c: &TopologySpreadConstraint) -> u32 {
    topo.key_id(&c.topology_key).unwrap_or(NO_VALUE)
}

fn value_of(topo: &PodTopology, key: u32, node: NodeId) -> u32 {
    if key == NO_VALUE {
        NO_VALUE
    } else {
        topo.node_value(key, node)
    }
}

fn has_all_keys(topo: &PodTopology, keys: &[u32], node: NodeId) -> bool {
    keys.iter().all(|&k| value_of(topo, k, node) != NO_VALUE)
}

/// Pods of `classes` on `node`.
fn on_node(topo: &PodTopology, classes: &[u32], node: NodeId) -> i64 {
    classes
        .iter()
        .map(|&c| i64::from(topo.label_class(c).on_node(node)))
        .sum()
}

impl Domains {
    /// Finds the matching classes of the constraints `idx` and, except for hostname
    /// constraints when `skip_hostname`, counts their pods per domain over the nodes that
    /// have every constraint's key and pass the constraint's inclusion policies.
    fn build(&mut self, snap: &ClusterState, pod: &Pod, idx: &[usize], skip_hostname: bool) {
        let topo = &snap.topology;
        self.keys.clear();
        self.keys
            .extend(idx.iter().map(|&i| key_of(topo, &pod.topology_spread[i])));
        self.classes.resize_with(idx.len(), Vec::new);
        self.counts.resize_with(idx.len(), Vec::new);
        for (k, &i) in idx.iter().enumerate() {
            let c = &pod.topology_spread[i];
            let classes = &mut self.classes[k];
            classes.clear();
            if let Some(sel) = &c.selector {
                topo.candidate_classes(sel, &mut self.candidates);
                classes.extend(self.candidates.iter().copied().filter(|&id| {
                    let class = topo.label_class(id);
                    class.pods > 0
                        && !class.terminating
                        && class.namespace == pod.namespace
                        && sel.matches(&class.labels)
                }));
            }
            let counts = &mut self.counts[k];
            counts.clear();
            let key = self.keys[k];
            if key == NO_VALUE || (skip_hostname && c.topology_key == HOSTNAME_KEY) {
                continue;
            }
            counts.resize(topo.values(key), -1);
            let same_keys = self.keys.iter().all(|&x| x == key);
            if same_keys && all_included(snap, c, pod) {
                // Every node with the key is eligible: the domains are the key's values
                // that some node has, and the classes count per value already.
                for (v, n) in counts.iter_mut().enumerate() {
                    if topo.value_nodes(key, v as u32) > 0 {
                        *n = 0;
                    }
                }
                for &id in classes.iter() {
                    topo.label_class(id)
                        .by_key(key)
                        .for_each(|v, n| counts[v as usize] += i64::from(n));
                }
                continue;
            }
            for &node in snap.nodes() {
                if !has_all_keys(topo, &self.keys, node) || !node_included(snap, c, pod, node) {
                    continue;
                }
                let n = &mut counts[topo.node_value(key, node) as usize];
                *n = (*n).max(0) + on_node(topo, classes, node);
            }
        }
    }

    /// Matching pods of constraint `k` in the node's domain (0 when it is not a domain).
    fn count(&self, k: usize, value: u32) -> i64 {
        self.counts[k]
            .get(value as usize)
            .copied()
            .unwrap_or(0)
            .max(0)
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        "PodTopologySpread"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, _sig: &mut Signature) -> bool {
        // Spreading depends on pods on every node.
        pod.topology_spread.is_empty()
    }

    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, state: &mut CycleState) -> PreFilter {
        let s = state.write::<SpreadFilterState>();
        select(pod, WhenUnsatisfiable::DoNotSchedule, &mut s.constraints);
        if s.constraints.is_empty() {
            return PreFilter::Skip;
        }
        s.domains.build(snap, pod, &s.constraints, false);
        s.min_match.clear();
        s.self_match.clear();
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            let domains = s.domains.counts[k].iter().filter(|n| **n >= 0);
            let (count, min) = domains.fold((0i64, None::<i64>), |(count, min), &n| {
                (count + 1, Some(min.map_or(n, |m| m.min(n))))
            });
            let mut min = min.unwrap_or(0);
            if c.min_domains.is_some_and(|m| count < i64::from(m)) {
                min = 0;
            }
            s.min_match.push(min);
            s.self_match.push(
                c.selector
                    .as_ref()
                    .is_some_and(|sel| sel.matches(&pod.labels)),
            );
        }
        PreFilter::Run
    }

    fn filter(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let Some(s) = state.read::<SpreadFilterState>() else {
            return true;
        };
        let topo = &snap.topology;
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            let value = value_of(topo, s.domains.keys[k], node);
            if value == NO_VALUE {
                reasons.push(MISSING_LABEL);
                return false;
            }
            let matching = s.domains.count(k, value);
            let skew = matching + i64::from(s.self_match[k]) - s.min_match[k];
            if skew > i64::from(c.max_skew) {
                reasons.push(CONSTRAINTS_NOT_MATCH);
                return false;
            }
        }
        true
    }

    fn pre_score(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        state: &mut CycleState,
        feasible: &[NodeId],
    ) -> bool {
        let s = state.write::<SpreadScoreState>();
        select(pod, WhenUnsatisfiable::ScheduleAnyway, &mut s.constraints);
        if s.constraints.is_empty() {
            return false;
        }
        let topo = &snap.topology;
        s.domains.build(snap, pod, &s.constraints, true);
        s.ignored.clear();
        s.seen.resize_with(s.constraints.len(), Vec::new);
        let mut sizes = vec![0usize; s.constraints.len()];
        for (k, seen) in s.seen.iter_mut().enumerate() {
            seen.clear();
            let key = s.domains.keys[k];
            if key != NO_VALUE {
                seen.resize(topo.values(key), false);
            }
        }
        for &node in feasible {
            if !has_all_keys(topo, &s.domains.keys, node) {
                s.ignored.push(node);
                continue;
            }
            for (k, &ci) in s.constraints.iter().enumerate() {
                if pod.topology_spread[ci].topology_key == HOSTNAME_KEY {
                    continue;
                }
                let v = topo.node_value(s.domains.keys[k], node) as usize;
                if !s.seen[k][v] {
                    s.seen[k][v] = true;
                    sizes[k] += 1;
                }
            }
        }
        s.weights.clear();
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            let size = if c.topology_key == HOSTNAME_KEY {
                feasible.len() - s.ignored.len()
            } else {
                sizes[k]
            };
            s.weights.push(((size + 2) as f64).ln());
        }
        true
    }

    fn score(&self, snap: &ClusterState, pod: &Pod, state: &CycleState, node: NodeId) -> i64 {
        let Some(s) = state.read::<SpreadScoreState>() else {
            return 0;
        };
        if s.ignored.contains(&node) {
            return 0;
        }
        let topo = &snap.topology;
        let mut score = 0f64;
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            let value = value_of(topo, s.domains.keys[k], node);
            if value != NO_VALUE {
                let cnt = if c.topology_key == HOSTNAME_KEY {
                    on_node(topo, &s.domains.classes[k], node)
                } else {
                    s.domains.count(k, value)
                };
                score += cnt as f64 * s.weights[k] + f64::from(c.max_skew - 1);
            }
        }
        score.round() as i64
    }

    fn normalize(&self, state: &CycleState, feasible: &[NodeId], scores: &mut [i64]) {
        let Some(s) = state.read::<SpreadScoreState>() else {
            return;
        };
        let mut min = i64::MAX;
        let mut max = 0i64;
        for (i, node) in feasible.iter().enumerate() {
            if s.ignored.contains(node) {
                continue;
            }
            min = min.min(scores[i]);
            max = max.max(scores[i]);
        }
        for (i, node) in feasible.iter().enumerate() {
            if s.ignored.contains(node) {
                scores[i] = 0;
            } else if max == 0 {
                scores[i] = MAX_NODE_SCORE;
            } else {
                scores[i] = MAX_NODE_SCORE * (max + min - scores[i]) / max;
            }
        }
    }
}
