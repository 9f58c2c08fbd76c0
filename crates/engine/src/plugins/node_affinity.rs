//! NodeAffinity: `nodeSelector` and required node affinity as a filter; preferred node
//! affinity terms as a score (sum of matching weights, scaled to 0..100).

use lockstep_model::{NodeId, Pod};

use crate::framework::{
    CycleState, Plugin, PreFilter, Reason, Rejections, Signature, default_normalize,
};
use crate::plugins::{Registration, no_args};
use crate::state::ClusterState;

pub struct NodeAffinity;

pub static PLUGIN: Registration = Registration {
    name: "NodeAffinity",
    filter: true,
    score: true,
    default_filter: true,
    weight: 2,
    scored_by_default: true,
    build: |_, _| Box::new(NodeAffinity),
    configure: no_args,
};

static REJECTIONS: Rejections = Rejections {
    plugin: "NodeAffinity",
    message: |code, _| match code {
        MISMATCH_CODE => "node(s) didn't match Pod's node affinity/selector".into(),
        _ => "pod affinity terms conflict".into(),
    },
    resolvable: |_, _, _, _| false,
};

const MISMATCH_CODE: u32 = 0;

/// The node's labels or name do not satisfy the pod's nodeSelector or required affinity.
pub const MISMATCH: Reason = Reason {
    by: &REJECTIONS,
    code: MISMATCH_CODE,
};

/// The required terms name conflicting node names, so no node can match.
pub const CONFLICT: Reason = Reason {
    by: &REJECTIONS,
    code: 1,
};

/// Whether the node satisfies the pod's nodeSelector and required node affinity.
pub fn required_matches(snap: &ClusterState, pod: &Pod, node: NodeId) -> bool {
    let n = &snap.cluster.nodes[node.index()];
    pod.node_selector
        .iter()
        .all(|(k, v)| n.labels.get(k).is_some_and(|x| x == v))
        && pod
            .node_affinity
            .required
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| t.matches(&n.name, &n.labels)))
}

/// The node names every required term pins with `matchFields metadata.name In [...]`
/// (intersected within a term, united across terms); `None` when some term does not pin
/// names, so every node stays eligible.
fn node_names(
    terms: &[lockstep_model::NodeSelectorTerm],
) -> Option<std::collections::BTreeSet<&str>> {
    let mut all = std::collections::BTreeSet::new();
    for t in terms {
        let mut term: Option<std::collections::BTreeSet<&str>> = None;
        for r in &t.match_fields {
            if r.key == "metadata.name" && r.operator == lockstep_model::Operator::In {
                let s: std::collections::BTreeSet<&str> =
                    r.values.iter().map(String::as_str).collect();
                term = Some(match term {
                    None => s,
                    Some(prev) => prev.intersection(&s).copied().collect(),
                });
            }
        }
        all.extend(term?);
    }
    Some(all)
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        "NodeAffinity"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(
            self.name(),
            &(&pod.node_selector, &pod.node_affinity.required),
        );
        // Preferred terms are normalised by the best feasible node.
        pod.node_affinity.preferred.is_empty()
    }
    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, _state: &mut CycleState) -> PreFilter {
        match &pod.node_affinity.required {
            // Required affinity with no terms matches no node: the filter rejects each.
            Some(terms) if terms.is_empty() => PreFilter::Run,
            Some(terms) => match node_names(terms) {
                None => PreFilter::Run,
                Some(names) if names.is_empty() => PreFilter::RejectAll(CONFLICT, None),
                Some(names) => {
                    PreFilter::RunOn(names.iter().filter_map(|n| snap.node_id(n)).collect(), 1)
                }
            },
            None if !pod.node_selector.is_empty() => PreFilter::Run,
            None => PreFilter::Skip,
        }
    }
    fn filter(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        _state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        if required_matches(snap, pod, node) {
            true
        } else {
            reasons.push(MISMATCH);
            false
        }
    }
    fn pre_score(
        &self,
        _snap: &ClusterState,
        pod: &Pod,
        _state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        !pod.node_affinity.preferred.is_empty()
    }
    fn score(&self, snap: &ClusterState, pod: &Pod, _state: &CycleState, node: NodeId) -> i64 {
        let n = &snap.cluster.nodes[node.index()];
        pod.node_affinity
            .preferred
            .iter()
            .filter(|(_, t)| t.matches(&n.name, &n.labels))
            .map(|(w, _)| i64::from(*w))
            .sum()
    }
    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}
