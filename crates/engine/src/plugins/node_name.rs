//! NodeName: a pod that names a node fits only there. In a `schedule` run a pod with
//! `spec.nodeName` is already running, so this filter matters only to front ends that hand the
//! engine a pending pod with a requested node.

use lockstep_model::{NodeId, Pod};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Rejections, Signature};
use crate::plugins::{Registration, no_args};
use crate::state::ClusterState;

pub struct NodeName;

pub static PLUGIN: Registration = Registration {
    name: "NodeName",
    filter: true,
    score: false,
    default_filter: true,
    weight: 1,
    scored_by_default: false,
    build: |_, _| Box::new(NodeName),
    configure: no_args,
};

static REJECTIONS: Rejections = Rejections {
    plugin: "NodeName",
    message: |_, _| "node(s) didn't match the requested node name".into(),
    resolvable: |_, _, _, _| false,
};

/// The node is not the one the pod names.
pub const MISMATCH: Reason = Reason {
    by: &REJECTIONS,
    code: 0,
};

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        "NodeName"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.node_name);
        true
    }
    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, _state: &mut CycleState) -> PreFilter {
        match &pod.node_name {
            Some(name) => PreFilter::RunOn(snap.node_id(name).into_iter().collect(), 2),
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
        match &pod.node_name {
            Some(n) if *n != snap.cluster.nodes[node.index()].name => {
                reasons.push(MISMATCH);
                false
            }
            _ => true,
        }
    }
}
