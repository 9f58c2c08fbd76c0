//! InterPodAffinity: required pod affinity and anti-affinity of the incoming pod, and the
//! required anti-affinity of pods already running, as a filter (checked in that order, as
//! kube-scheduler does); preferred terms (both ways)
//! and existing pods' required affinity (weighted by `hardPodAffinityWeight`) as a score.

use std::collections::{BTreeMap, HashMap};

use lockstep_model::{Labels, NodeId, Pod, PodAffinityTerm};

use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Signature};
use crate::state::ClusterState;

pub struct InterPodAffinity {
    pub hard_pod_affinity_weight: i64,
}

/// Counts per topology key, then per value.
type TopologyCounts = HashMap<String, HashMap<String, i64>>;

#[derive(Debug, Default)]
pub struct AffinityFilterState {
    /// Domains where an existing pod's required anti-affinity matches the incoming pod.
    existing_anti: TopologyCounts,
    /// Per required affinity term, the count per value of the term's topology key of existing
    /// pods that match all the required affinity terms (a pod matching only some counts for
    /// none, as in kube-scheduler).
    affinity: Vec<HashMap<String, i64>>,
    /// Per required anti-affinity term, the count per value of existing pods matching it.
    anti: Vec<HashMap<String, i64>>,
    /// No existing pod matching all affinity terms was counted in any domain, and the pod
    /// matches all its own terms: the first pod of a collection may go anywhere.
    self_affinity_ok: bool,
}

#[derive(Debug, Default)]
pub struct AffinityScoreState {
    topology_score: TopologyCounts,
}

/// Whether `term`, declared by a pod in namespace `owner_ns`, selects `other`.
pub fn term_selects(
    term: &PodAffinityTerm,
    owner_ns: &str,
    other: &Pod,
    namespaces: &BTreeMap<String, Labels>,
) -> bool {
    let ns_ok = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
        other.namespace == owner_ns
    } else {
        term.namespaces.contains(&other.namespace)
            || term.namespace_selector.as_ref().is_some_and(|sel| {
                sel.is_empty()
                    || namespaces
                        .get(&other.namespace)
                        .is_some_and(|labels| sel.matches(labels))
            })
    };
    ns_ok
        && term
            .selector
            .as_ref()
            .is_some_and(|s| s.matches(&other.labels))
}

fn bump(map: &mut TopologyCounts, key: &str, value: &str, by: i64) {
    *map.entry(key.to_string())
        .or_default()
        .entry(value.to_string())
        .or_insert(0) += by;
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        "InterPodAffinity"
    }
    fn sign(&self, snap: &ClusterState, pod: &Pod, _sig: &mut Signature) -> bool {
        // Affinity depends on pods on other nodes, both the pod's terms and theirs.
        pod.pod_affinity.is_empty()
            && pod.pod_anti_affinity.is_empty()
            && snap.bound_with_affinity == 0
    }
    fn filters(&self) -> bool {
        true
    }
    fn scores(&self) -> bool {
        true
    }

    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, state: &mut CycleState) -> PreFilter {
        let req_aff = &pod.pod_affinity.required;
        let req_anti = &pod.pod_anti_affinity.required;
        if req_aff.is_empty() && req_anti.is_empty() && snap.bound_with_required_anti_affinity == 0
        {
            return PreFilter::Skip;
        }
        let s = &mut state.affinity_filter;
        s.existing_anti.clear();
        s.affinity = vec![HashMap::new(); req_aff.len()];
        s.anti = vec![HashMap::new(); req_anti.len()];
        let namespaces = &snap.cluster.namespaces;
        let mut any_affinity_match = false;
        for &node in snap.nodes() {
            let n = node.index();
            let labels = &snap.cluster.nodes[n].labels;
            for &pid in snap.pods_on(node) {
                let other = snap.pod(pid);
                for term in &other.pod_anti_affinity.required {
                    if let Some(v) = labels.get(&term.topology_key)
                        && term_selects(term, &other.namespace, pod, namespaces)
                    {
                        bump(&mut s.existing_anti, &term.topology_key, v, 1);
                    }
                }
                // An existing pod counts for the affinity terms only when it matches all of
                // them; it then counts in every term's domain its node has.
                if !req_aff.is_empty()
                    && req_aff
                        .iter()
                        .all(|t| term_selects(t, &pod.namespace, other, namespaces))
                {
                    for (i, term) in req_aff.iter().enumerate() {
                        if let Some(v) = labels.get(&term.topology_key) {
                            *s.affinity[i].entry(v.clone()).or_insert(0) += 1;
                            any_affinity_match = true;
                        }
                    }
                }
                for (i, term) in req_anti.iter().enumerate() {
                    if let Some(v) = labels.get(&term.topology_key)
                        && term_selects(term, &pod.namespace, other, namespaces)
                    {
                        *s.anti[i].entry(v.clone()).or_insert(0) += 1;
                    }
                }
            }
        }
        s.self_affinity_ok = !any_affinity_match
            && req_aff
                .iter()
                .all(|t| term_selects(t, &pod.namespace, pod, namespaces));
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
        let s = &state.affinity_filter;
        let labels = &snap.cluster.nodes[node.index()].labels;
        let req_aff = &pod.pod_affinity.required;
        if !req_aff.is_empty() {
            let mut all_keys = true;
            let mut pods_exist = true;
            for (i, term) in req_aff.iter().enumerate() {
                match labels.get(&term.topology_key) {
                    Some(v) => {
                        if s.affinity[i].get(v.as_str()).copied().unwrap_or(0) <= 0 {
                            pods_exist = false;
                        }
                    }
                    None => all_keys = false,
                }
            }
            if !all_keys || (!pods_exist && !s.self_affinity_ok) {
                reasons.push(Reason::PodAffinityNotMatch);
                return false;
            }
        }
        for (i, term) in pod.pod_anti_affinity.required.iter().enumerate() {
            if let Some(v) = labels.get(&term.topology_key)
                && s.anti[i].get(v.as_str()).is_some_and(|c| *c > 0)
            {
                reasons.push(Reason::PodAntiAffinityNotMatch);
                return false;
            }
        }
        for (key, values) in &s.existing_anti {
            if let Some(v) = labels.get(key)
                && values.get(v.as_str()).is_some_and(|c| *c > 0)
            {
                reasons.push(Reason::ExistingPodsAntiAffinityNotMatch);
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
        _feasible: &[NodeId],
    ) -> bool {
        let has_preferred =
            !pod.pod_affinity.preferred.is_empty() || !pod.pod_anti_affinity.preferred.is_empty();
        if !has_preferred && snap.bound_with_affinity == 0 {
            return false;
        }
        let s = &mut state.affinity_score;
        s.topology_score.clear();
        let namespaces = &snap.cluster.namespaces;
        for &node in snap.nodes() {
            let n = node.index();
            let labels = &snap.cluster.nodes[n].labels;
            for &pid in snap.pods_on(node) {
                let other = snap.pod(pid);
                let mut add = |term: &PodAffinityTerm, owner: &Pod, target: &Pod, w: i64| {
                    if let Some(v) = labels.get(&term.topology_key)
                        && term_selects(term, &owner.namespace, target, namespaces)
                    {
                        bump(&mut s.topology_score, &term.topology_key, v, w);
                    }
                };
                for (w, t) in &pod.pod_affinity.preferred {
                    add(t, pod, other, i64::from(*w));
                }
                for (w, t) in &pod.pod_anti_affinity.preferred {
                    add(t, pod, other, -i64::from(*w));
                }
                if self.hard_pod_affinity_weight > 0 {
                    for t in &other.pod_affinity.required {
                        add(t, other, pod, self.hard_pod_affinity_weight);
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
        !s.topology_score.is_empty()
    }

    fn score(&self, snap: &ClusterState, _pod: &Pod, state: &CycleState, node: NodeId) -> i64 {
        let labels = &snap.cluster.nodes[node.index()].labels;
        state
            .affinity_score
            .topology_score
            .iter()
            .filter_map(|(key, values)| labels.get(key).and_then(|v| values.get(v.as_str())))
            .sum()
    }

    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], scores: &mut [i64]) {
        let min = scores.iter().copied().min().unwrap_or(0);
        let max = scores.iter().copied().max().unwrap_or(0);
        let diff = max - min;
        for s in scores.iter_mut() {
            *s = if diff > 0 {
                (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
    }
}
