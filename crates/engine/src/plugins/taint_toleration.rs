//! TaintToleration: filters nodes with an untolerated NoSchedule/NoExecute taint; scores
//! nodes by how few PreferNoSchedule taints the pod does not tolerate.

use lockstep_model::{NodeId, Pod, TaintEffect};

use crate::framework::{
    CycleState, Plugin, PreFilter, Reason, Rejections, Signature, default_normalize,
};
use crate::plugins::{Registration, no_args};
use crate::state::ClusterState;

pub struct TaintToleration;

pub static PLUGIN: Registration = Registration {
    name: "TaintToleration",
    filter: true,
    score: true,
    default_filter: true,
    weight: 3,
    scored_by_default: true,
    build: |_, _| Box::new(TaintToleration),
    configure: no_args,
};

static REJECTIONS: Rejections = Rejections {
    plugin: "TaintToleration",
    message: |_, _| "node(s) had untolerated taint(s)".into(),
    resolvable: |_, _, _, _| false,
};

/// A NoSchedule/NoExecute taint the pod does not tolerate.
pub const UNTOLERATED: Reason = Reason {
    by: &REJECTIONS,
    code: 0,
};

/// The per-cycle state: for each distinct taint set, whether some taint is untolerated.
#[derive(Debug, Default)]
struct Verdicts(Vec<bool>);

/// Whether `taints` hold a NoSchedule/NoExecute taint the pod does not tolerate.
fn any_untolerated(taints: &[lockstep_model::Taint], pod: &Pod) -> bool {
    taints.iter().any(|t| {
        t.effect != TaintEffect::PreferNoSchedule
            && !pod.tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        "TaintToleration"
    }
    fn sign(&self, snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.tolerations);
        // The PreferNoSchedule score is normalised by the worst feasible node: it depends
        // on the other nodes.
        !snap.any_prefer_no_schedule_taint
    }
    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, state: &mut CycleState) -> PreFilter {
        if !snap.any_hard_taint {
            return PreFilter::Skip;
        }
        // Judge each distinct taint set once; nodes look their set's verdict up.
        let verdicts = &mut state.write::<Verdicts>().0;
        verdicts.clear();
        verdicts.extend(
            snap.taint_sets
                .iter()
                .map(|taints| any_untolerated(taints, pod)),
        );
        PreFilter::Run
    }
    fn filter(
        &self,
        snap: &ClusterState,
        _pod: &Pod,
        state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let untolerated = state
            .read::<Verdicts>()
            .is_some_and(|v| v.0[snap.node_taint_set[node.index()] as usize]);
        if untolerated {
            reasons.push(UNTOLERATED);
            false
        } else {
            true
        }
    }
    fn pre_score(
        &self,
        snap: &ClusterState,
        _pod: &Pod,
        _state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        // With no PreferNoSchedule taint anywhere every node scores the same.
        snap.any_prefer_no_schedule_taint
    }
    fn score(&self, snap: &ClusterState, pod: &Pod, _state: &CycleState, node: NodeId) -> i64 {
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
