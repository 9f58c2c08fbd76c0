//! TaintToleration: filters nodes with an untolerated NoSchedule/NoExecute taint; scores
//! nodes by how few PreferNoSchedule taints the pod does not tolerate.

use lockstep_model::{NodeId, Pod, TaintEffect};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Signature, default_normalize};
use crate::snapshot::Snapshot;

pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        "TaintToleration"
    }
    fn sign(&self, snap: &Snapshot, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.tolerations);
        // The PreferNoSchedule score is normalised by the worst feasible node: it depends
        // on the other nodes.
        !snap.any_prefer_no_schedule_taint
    }
    fn filters(&self) -> bool {
        true
    }
    fn scores(&self) -> bool {
        true
    }
    fn pre_filter(&self, snap: &Snapshot, _pod: &Pod, _state: &mut CycleState) -> PreFilter {
        if snap.any_hard_taint {
            PreFilter::Run
        } else {
            PreFilter::Skip
        }
    }
    fn filter(
        &self,
        snap: &Snapshot,
        pod: &Pod,
        _state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let taints = &snap.cluster.nodes[node.index()].taints;
        for (i, t) in taints.iter().enumerate() {
            if t.effect == TaintEffect::PreferNoSchedule {
                continue;
            }
            if !pod.tolerations.iter().any(|tol| tol.tolerates(t)) {
                reasons.push(Reason::UntoleratedTaint(
                    snap.node_taint_ids[node.index()][i],
                ));
                return false;
            }
        }
        true
    }
    fn pre_score(
        &self,
        snap: &Snapshot,
        _pod: &Pod,
        _state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        // With no PreferNoSchedule taint anywhere every node scores the same.
        snap.any_prefer_no_schedule_taint
    }
    fn score(&self, snap: &Snapshot, pod: &Pod, _state: &CycleState, node: NodeId) -> i64 {
        snap.cluster.nodes[node.index()]
            .taints
            .iter()
            .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
            .filter(|t| {
                !pod.tolerations.iter().any(|tol| {
                    (tol.effect.is_none() || tol.effect == Some(TaintEffect::PreferNoSchedule))
                        && tol.tolerates(t)
                })
            })
            .count() as i64
    }
    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], scores: &mut [i64]) {
        default_normalize(scores, true);
    }
}
