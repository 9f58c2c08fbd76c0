//! PodTopologySpread: `DoNotSchedule` constraints as a filter (skew of matching pods across
//! topology domains at most `maxSkew`, honouring `minDomains`, `nodeAffinityPolicy` and
//! `nodeTaintsPolicy`); `ScheduleAnyway` constraints as a score (fewer matching pods in the
//! node's domain scores higher).

use std::collections::HashMap;

use lockstep_model::{
    InclusionPolicy, NodeId, Pod, TaintEffect, TopologySpreadConstraint, WhenUnsatisfiable,
};

use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Signature};
use crate::plugins::node_affinity::required_matches;
use crate::state::ClusterState;

pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

pub struct PodTopologySpread;

#[derive(Debug, Default)]
pub struct SpreadFilterState {
    /// Indexes of the pod's DoNotSchedule constraints.
    constraints: Vec<usize>,
    /// Per constraint: matching pods per topology value, over eligible nodes.
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: the global minimum used for the skew (0 below minDomains).
    min_match: Vec<i64>,
    /// Per constraint: whether the incoming pod matches its own selector.
    self_match: Vec<bool>,
}

#[derive(Debug, Default)]
pub struct SpreadScoreState {
    constraints: Vec<usize>,
    counts: Vec<HashMap<String, i64>>,
    weights: Vec<f64>,
    /// Feasible nodes lacking one of the constraints' topology keys (scored 0).
    ignored: Vec<NodeId>,
}

fn constraint_selects(c: &TopologySpreadConstraint, pod: &Pod, other: &Pod) -> bool {
    !other.terminating
        && other.namespace == pod.namespace
        && c.selector
            .as_ref()
            .is_some_and(|s| s.matches(&other.labels))
}

fn count_on_node(
    snap: &ClusterState,
    c: &TopologySpreadConstraint,
    pod: &Pod,
    node: NodeId,
) -> i64 {
    snap.pods_on(node)
        .iter()
        .filter(|p| constraint_selects(c, pod, snap.pod(**p)))
        .count() as i64
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

fn has_all_keys(snap: &ClusterState, pod: &Pod, idx: &[usize], node: NodeId) -> bool {
    let labels = &snap.cluster.nodes[node.index()].labels;
    idx.iter()
        .all(|&i| labels.contains_key(&pod.topology_spread[i].topology_key))
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        "PodTopologySpread"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, _sig: &mut Signature) -> bool {
        // Spreading depends on pods on every node.
        pod.topology_spread.is_empty()
    }
    fn filters(&self) -> bool {
        true
    }
    fn scores(&self) -> bool {
        true
    }

    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, state: &mut CycleState) -> PreFilter {
        let s = &mut state.spread_filter;
        select(pod, WhenUnsatisfiable::DoNotSchedule, &mut s.constraints);
        if s.constraints.is_empty() {
            return PreFilter::Skip;
        }
        s.counts = vec![HashMap::new(); s.constraints.len()];
        for &node in snap.nodes() {
            let n = node.index();
            if !has_all_keys(snap, pod, &s.constraints, node) {
                continue;
            }
            let labels = &snap.cluster.nodes[n].labels;
            for (k, &ci) in s.constraints.iter().enumerate() {
                let c = &pod.topology_spread[ci];
                if !node_included(snap, c, pod, node) {
                    continue;
                }
                let value = &labels[&c.topology_key];
                let cnt = count_on_node(snap, c, pod, node);
                *s.counts[k].entry(value.clone()).or_insert(0) += cnt;
            }
        }
        s.min_match.clear();
        s.self_match.clear();
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            let domains = s.counts[k].len() as i64;
            let mut min = s.counts[k].values().copied().min().unwrap_or(0);
            if c.min_domains.is_some_and(|m| domains < i64::from(m)) {
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
        let s = &state.spread_filter;
        let labels = &snap.cluster.nodes[node.index()].labels;
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            let Some(value) = labels.get(&c.topology_key) else {
                reasons.push(Reason::SpreadMissingLabel);
                return false;
            };
            let matching = s.counts[k].get(value.as_str()).copied().unwrap_or(0);
            let skew = matching + i64::from(s.self_match[k]) - s.min_match[k];
            if skew > i64::from(c.max_skew) {
                reasons.push(Reason::SpreadConstraintsNotMatch);
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
        let s = &mut state.spread_score;
        select(pod, WhenUnsatisfiable::ScheduleAnyway, &mut s.constraints);
        if s.constraints.is_empty() {
            return false;
        }
        s.counts = vec![HashMap::new(); s.constraints.len()];
        s.ignored.clear();
        let mut sizes = vec![0usize; s.constraints.len()];
        for &node in feasible {
            if !has_all_keys(snap, pod, &s.constraints, node) {
                s.ignored.push(node);
                continue;
            }
            let labels = &snap.cluster.nodes[node.index()].labels;
            for (k, &ci) in s.constraints.iter().enumerate() {
                let c = &pod.topology_spread[ci];
                if c.topology_key == HOSTNAME_KEY {
                    continue;
                }
                let value = &labels[&c.topology_key];
                if !s.counts[k].contains_key(value.as_str()) {
                    s.counts[k].insert(value.clone(), 0);
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
        // Count matching pods over every node that has all keys and passes the policies.
        for &node in snap.nodes() {
            let n = node.index();
            if !has_all_keys(snap, pod, &s.constraints, node) {
                continue;
            }
            let labels = &snap.cluster.nodes[n].labels;
            for (k, &ci) in s.constraints.iter().enumerate() {
                let c = &pod.topology_spread[ci];
                if c.topology_key == HOSTNAME_KEY || !node_included(snap, c, pod, node) {
                    continue;
                }
                let value = labels[&c.topology_key].as_str();
                if s.counts[k].contains_key(value) {
                    let cnt = count_on_node(snap, c, pod, node);
                    *s.counts[k].get_mut(value).expect("present") += cnt;
                }
            }
        }
        true
    }

    fn score(&self, snap: &ClusterState, pod: &Pod, state: &CycleState, node: NodeId) -> i64 {
        let s = &state.spread_score;
        if s.ignored.contains(&node) {
            return 0;
        }
        let labels = &snap.cluster.nodes[node.index()].labels;
        let mut score = 0f64;
        for (k, &ci) in s.constraints.iter().enumerate() {
            let c = &pod.topology_spread[ci];
            if let Some(value) = labels.get(&c.topology_key) {
                let cnt = if c.topology_key == HOSTNAME_KEY {
                    count_on_node(snap, c, pod, node)
                } else {
                    s.counts[k].get(value.as_str()).copied().unwrap_or(0)
                };
                score += cnt as f64 * s.weights[k] + f64::from(c.max_skew - 1);
            }
        }
        score.round() as i64
    }

    fn normalize(&self, state: &CycleState, feasible: &[NodeId], scores: &mut [i64]) {
        let s = &state.spread_score;
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
