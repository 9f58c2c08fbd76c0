//! The plugin framework: the extension points a plugin implements, the per-cycle state, and
//! the reasons a node is rejected.

use lockstep_model::{NodeId, Pod, PodId, ResourceId};

use crate::plugins::dynamic_resources::DraFilterState;
use crate::plugins::inter_pod_affinity::{AffinityFilterState, AffinityScoreState};
use crate::plugins::node_resources_fit::FitScoreState;
use crate::plugins::pod_topology_spread::{SpreadFilterState, SpreadScoreState};
use crate::state::ClusterState;

/// Why a node was rejected for a pod. Small and `Copy` so the filter loop never allocates;
/// turned into kube-scheduler's wording only for the final message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    NodeUnschedulable,
    NodeNameMismatch,
    /// A NoSchedule/NoExecute taint the pod does not tolerate.
    UntoleratedTaint,
    NodeAffinityMismatch,
    NodePortsConflict,
    Insufficient(ResourceId),
    TooManyPods,
    SpreadMissingLabel,
    SpreadConstraintsNotMatch,
    PodAffinityNotMatch,
    PodAntiAffinityNotMatch,
    ExistingPodsAntiAffinityNotMatch,
    /// Outside the node set a PreFilter narrowed the cycle to; bit 0 NodeAffinity, bit 1
    /// NodeName.
    NotInPreFilterResult(u8),
    /// Required node affinity terms name conflicting node names.
    NodeAffinityConflict,
    /// The DynamicResources filter: devices for the pod's claims cannot be had.
    Dra(lockstep_dra::UnfitReason),
}

impl Reason {
    /// kube-scheduler's text for the reason.
    pub fn message(&self, snap: &ClusterState) -> String {
        match self {
            Reason::NodeUnschedulable => "node(s) were unschedulable".into(),
            Reason::NodeNameMismatch => "node(s) didn't match the requested node name".into(),
            Reason::UntoleratedTaint => "node(s) had untolerated taint(s)".into(),
            Reason::NodeAffinityMismatch => {
                "node(s) didn't match Pod's node affinity/selector".into()
            }
            Reason::NodePortsConflict => {
                "node(s) didn't have free ports for the requested pod ports".into()
            }
            Reason::Insufficient(r) => format!("Insufficient {}", snap.cluster.resources.name(*r)),
            Reason::TooManyPods => "Too many pods".into(),
            Reason::SpreadMissingLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into()
            }
            Reason::SpreadConstraintsNotMatch => {
                "node(s) didn't match pod topology spread constraints".into()
            }
            Reason::PodAffinityNotMatch => "node(s) didn't match pod affinity rules".into(),
            Reason::PodAntiAffinityNotMatch => {
                "node(s) didn't match pod anti-affinity rules".into()
            }
            Reason::ExistingPodsAntiAffinityNotMatch => {
                "node(s) didn't satisfy existing pods anti-affinity rules".into()
            }
            Reason::NotInPreFilterResult(bits) => {
                let names: Vec<&str> = [(1u8, "NodeAffinity"), (2u8, "NodeName")]
                    .iter()
                    .filter(|(b, _)| bits & b != 0)
                    .map(|(_, n)| *n)
                    .collect();
                format!("node(s) didn't satisfy plugin(s) [{}]", names.join(" "))
            }
            Reason::NodeAffinityConflict => "pod affinity terms conflict".into(),
            Reason::Dra(r) => r.message().into(),
        }
    }

    /// Whether removing pods from `node` could cure this rejection of `pod`: kube-scheduler's
    /// `Unschedulable` status code, as opposed to `UnschedulableAndUnresolvable`. Preemption
    /// only looks at nodes rejected for such reasons. A resource is unresolvable when the
    /// pod asks for more than the node's whole allocatable.
    pub fn resolvable(&self, snap: &ClusterState, pod: &Pod, node: NodeId) -> bool {
        if let Reason::Insufficient(r) = self {
            return pod.requests.get(*r) <= snap.allocatable(node, *r);
        }
        match self {
            Reason::NodePortsConflict
            | Reason::Insufficient(_)
            | Reason::TooManyPods
            | Reason::SpreadConstraintsNotMatch
            | Reason::PodAntiAffinityNotMatch
            | Reason::ExistingPodsAntiAffinityNotMatch => true,
            Reason::NodeUnschedulable
            | Reason::NodeNameMismatch
            | Reason::UntoleratedTaint
            | Reason::NodeAffinityMismatch
            | Reason::SpreadMissingLabel
            | Reason::PodAffinityNotMatch
            | Reason::NotInPreFilterResult(_)
            | Reason::NodeAffinityConflict
            | Reason::Dra(_) => false,
        }
    }
}

/// The outcome of a PreFilter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreFilter {
    /// Run this plugin's filter on every node.
    Run,
    /// Run this plugin's filter, and only on these nodes (kube-scheduler's
    /// `PreFilterResult.NodeNames`); the bit names the plugin in
    /// `Reason::NotInPreFilterResult`.
    RunOn(Vec<NodeId>, u8),
    /// The filter cannot reject any node for this pod: skip it this cycle.
    Skip,
    /// Every node is rejected for this reason; the message, when given, says more than the
    /// reason's text (it names the claim or request).
    RejectAll(Reason, Option<String>),
}

/// State computed once per pod and cycle by PreFilter/PreScore, read by Filter/Score.
/// One field per plugin that needs state, so no lookups by name and no boxing.
#[derive(Debug)]
pub struct CycleState {
    /// The pod this cycle is for.
    pub pod: PodId,
    pub spread_filter: SpreadFilterState,
    pub spread_score: SpreadScoreState,
    pub affinity_filter: AffinityFilterState,
    pub affinity_score: AffinityScoreState,
    pub fit_score: FitScoreState,
    pub dra: DraFilterState,
    /// TaintToleration's verdict for each taint set: whether some taint is untolerated.
    pub taint_verdicts: Vec<bool>,
}

/// A pod's scheduling signature: hashes of what each plugin depends on. Two pods with equal
/// signatures get the same Filter verdict and Score on every node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Signature(Vec<u64>);

impl Signature {
    pub fn clear(&mut self) {
        self.0.clear();
    }
    /// Adds one fragment: the plugin's name and the hashed part of the pod.
    pub fn add<T: std::hash::Hash + ?Sized>(&mut self, plugin: &str, part: &T) {
        use std::hash::{Hash, Hasher};
        let mut h = FragmentHasher::default();
        plugin.hash(&mut h);
        part.hash(&mut h);
        self.0.push(h.finish());
    }
}

/// A fast deterministic 64-bit hasher for signature fragments (multiply-rotate, as in
/// rustc's FxHasher); signatures are compared whole, fragment by fragment.
#[derive(Default)]
struct FragmentHasher(u64);

impl std::hash::Hasher for FragmentHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for CycleState {
    fn default() -> Self {
        CycleState {
            pod: PodId(0),
            spread_filter: Default::default(),
            spread_score: Default::default(),
            affinity_filter: Default::default(),
            affinity_score: Default::default(),
            fit_score: Default::default(),
            dra: Default::default(),
            taint_verdicts: Vec::new(),
        }
    }
}

/// The highest score a plugin gives a node after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;

/// A scheduling plugin. Every extension point has a default that does nothing, so a plugin
/// implements only the points it has. All methods take the snapshot read-only: the cycle
/// never changes cluster state until it assumes the chosen node.
pub trait Plugin: Send + Sync {
    /// The kube-scheduler plugin name (used in configuration).
    fn name(&self) -> &'static str;

    /// Whether the plugin has a Filter extension point.
    fn filters(&self) -> bool {
        false
    }
    /// Whether the plugin has a Score extension point.
    fn scores(&self) -> bool {
        false
    }

    fn pre_filter(&self, _snap: &ClusterState, _pod: &Pod, _state: &mut CycleState) -> PreFilter {
        PreFilter::Skip
    }

    /// Opportunistic batching: adds to `sig` everything of the pod this plugin's Filter and
    /// Score depend on, and returns true when the plugin's verdict and score on a node
    /// depend only on that node (so placing a pod elsewhere changes nothing here). Returns
    /// false when it cannot sign the pod; the pod then gets a full cycle.
    fn sign(&self, _snap: &ClusterState, _pod: &Pod, _sig: &mut Signature) -> bool {
        false
    }

    /// Returns false and pushes one or more reasons when the node cannot host the pod.
    /// Must not allocate.
    fn filter(
        &self,
        _snap: &ClusterState,
        _pod: &Pod,
        _state: &CycleState,
        _node: NodeId,
        _reasons: &mut Vec<Reason>,
    ) -> bool {
        true
    }

    /// Prepares scoring over the feasible nodes. Returns false to skip scoring this pod (the
    /// plugin then contributes 0 to every node).
    fn pre_score(
        &self,
        _snap: &ClusterState,
        _pod: &Pod,
        _state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        false
    }

    fn score(&self, _snap: &ClusterState, _pod: &Pod, _state: &CycleState, _node: NodeId) -> i64 {
        0
    }

    /// Maps raw scores (aligned with `feasible`) to 0..=MAX_NODE_SCORE.
    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], _scores: &mut [i64]) {}
}

/// `DefaultNormalizeScore`: scales so the largest score becomes MAX_NODE_SCORE; with `reverse`
/// the largest becomes 0.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let v = MAX_NODE_SCORE * *s / max;
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_scales_and_reverses() {
        let mut s = vec![0, 5, 10];
        default_normalize(&mut s, false);
        assert_eq!(s, vec![0, 50, 100]);
        let mut s = vec![0, 5, 10];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 50, 0]);
        let mut s = vec![0, 0];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 100]);
        let mut s = vec![0, 0];
        default_normalize(&mut s, false);
        assert_eq!(s, vec![0, 0]);
    }
}
