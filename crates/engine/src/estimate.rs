//! Replica estimation: how many more replicas of a pod shape fit on each node of the
//! cluster as it runs now (pending pods are not placed first). A node counts only when the
//! shape passes every filter there; the count is then bounded by free resources and pod
//! slots, by one when the shape uses host ports, and by the device allocator for its DRA
//! claims (found by allocating, not by an upper bound). Inter-pod constraints among the
//! replicas themselves (anti-affinity, spreading) are not modelled.

use lockstep_model::{NodeId, PodId, ResourceId};

use crate::cycle::Framework;
use crate::scheduler::{Options, Scheduler, SetupError};
use crate::state::{ClusterState, PodClaims};

/// The estimate for one pod shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    /// Replicas per node, for every node (0 where the shape does not fit).
    pub per_node: Vec<(NodeId, u32)>,
    pub total: u64,
}

/// Counts the replicas of `shape` (a pod of the cluster, not on any node) that fit.
pub fn estimate(
    cluster: &lockstep_model::Cluster,
    options: Options,
    shape: PodId,
) -> Result<Estimate, SetupError> {
    let mut s = Scheduler::new(cluster, options)?;
    Ok(estimate_on(&s.snapshot, &mut s.framework, shape))
}

/// As [`estimate`], on a cluster state kept by the caller (with the framework of its
/// profile): nodes in name order.
pub fn estimate_on(state: &ClusterState, framework: &mut Framework, shape: PodId) -> Estimate {
    let mut per_node = Vec::with_capacity(state.num_nodes());
    let mut total = 0u64;
    for &node in state.nodes() {
        let count = replicas_on(state, framework, shape, node);
        total += u64::from(count);
        per_node.push((node, count));
    }
    Estimate { per_node, total }
}

fn replicas_on(snap: &ClusterState, framework: &mut Framework, shape: PodId, node: NodeId) -> u32 {
    if !framework.fits_on(snap, shape, node) {
        return 0;
    }
    let pod = snap.pod(shape);
    let slots = snap.allocatable(node, ResourceId::PODS) - i64::from(snap.pod_count(node));
    let mut count = slots.max(0);
    for (r, v) in pod.requests.iter() {
        if v > 0 && r != ResourceId::PODS {
            let free = snap.allocatable(node, r) - snap.requested(node, r);
            count = count.min((free / v).max(0));
        }
    }
    if !pod.host_ports.is_empty() {
        count = count.min(1);
    }
    let mut count = u32::try_from(count).unwrap_or(u32::MAX);
    if let (PodClaims::Refs(refs), Some(dra)) = (snap.claims(shape), snap.dra.as_ref()) {
        count = dra.max_replicas(refs, node, count);
    }
    count
}
