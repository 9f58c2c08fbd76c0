//! NodeUnschedulable: rejects cordoned nodes unless the pod tolerates
//! `node.kubernetes.io/unschedulable:NoSchedule`.

use lockstep_model::{NodeId, Pod, Taint, TaintEffect, node::tolerated};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Rejections, Signature};
use crate::plugins::{Registration, no_args};
use crate::state::ClusterState;

pub struct NodeUnschedulable;

pub static PLUGIN: Registration = Registration {
    name: "NodeUnschedulable",
    filter: true,
    score: false,
    default_filter: true,
    weight: 1,
    scored_by_default: false,
    build: |_, _| Box::new(NodeUnschedulable),
    configure: no_args,
};

static REJECTIONS: Rejections = Rejections {
    plugin: "NodeUnschedulable",
    message: |_, _| "node(s) were unschedulable".into(),
    resolvable: |_, _, _, _| false,
};

/// The node is cordoned.
pub const UNSCHEDULABLE: Reason = Reason {
    by: &REJECTIONS,
    code: 0,
};

fn tolerates_unschedulable(pod: &Pod) -> bool {
    static TAINT: std::sync::LazyLock<Taint> = std::sync::LazyLock::new(|| Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    tolerated(&pod.tolerations, &TAINT)
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        "NodeUnschedulable"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &tolerates_unschedulable(pod));
        true
    }
    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, _state: &mut CycleState) -> PreFilter {
        if !snap.any_unschedulable_node || tolerates_unschedulable(pod) {
            PreFilter::Skip
        } else {
            PreFilter::Run
        }
    }
    fn filter(
        &self,
        snap: &ClusterState,
        _pod: &Pod,
        _state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        if snap.cluster.nodes[node.index()].unschedulable {
            reasons.push(UNSCHEDULABLE);
            return false;
        }
        true
    }
}
