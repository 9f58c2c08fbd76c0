//! NodePorts: a pod's host ports must be free on the node.

use lockstep_model::{NodeId, Pod};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Signature};
use crate::state::ClusterState;

pub struct NodePorts;

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        "NodePorts"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.host_ports);
        true
    }
    fn filters(&self) -> bool {
        true
    }
    fn pre_filter(&self, _snap: &ClusterState, pod: &Pod, _state: &mut CycleState) -> PreFilter {
        if pod.host_ports.is_empty() {
            PreFilter::Skip
        } else {
            PreFilter::Run
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
        let used = snap.used_ports(node);
        if pod
            .host_ports
            .iter()
            .any(|p| used.iter().any(|u| u.conflicts(p)))
        {
            reasons.push(Reason::NodePortsConflict);
            return false;
        }
        true
    }
}
