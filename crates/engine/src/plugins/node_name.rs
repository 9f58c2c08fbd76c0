//! NodeName: a pod that names a node fits only there. In a `schedule` run a pod with
//! `spec.nodeName` is already running, so this filter matters only to front ends that hand the
//! engine a pending pod with a requested node.

use lockstep_model::{NodeId, Pod};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Signature};
use crate::state::ClusterState;

pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        "NodeName"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.node_name);
        true
    }
    fn filters(&self) -> bool {
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
                reasons.push(Reason::NodeNameMismatch);
                false
            }
            _ => true,
        }
    }
}
