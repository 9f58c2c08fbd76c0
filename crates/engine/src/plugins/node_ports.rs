//! NodePorts: a pod's host ports must be free on the node.

use lockstep_model::{NodeId, Pod};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Rejections, Signature};
use crate::plugins::{Registration, no_args};
use crate::state::ClusterState;

pub struct NodePorts;

pub static PLUGIN: Registration = Registration {
    name: "NodePorts",
    filter: true,
    score: false,
    default_filter: true,
    weight: 1,
    scored_by_default: false,
    build: |_, _| Box::new(NodePorts),
    configure: no_args,
};

static REJECTIONS: Rejections = Rejections {
    plugin: "NodePorts",
    message: |_, _| "node(s) didn't have free ports for the requested pod ports".into(),
    // The pods holding the ports can be removed.
    resolvable: |_, _, _, _| true,
};

/// A requested host port is taken on the node.
pub const CONFLICT: Reason = Reason {
    by: &REJECTIONS,
    code: 0,
};

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        "NodePorts"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.host_ports);
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
            reasons.push(CONFLICT);
            return false;
        }
        true
    }
}
