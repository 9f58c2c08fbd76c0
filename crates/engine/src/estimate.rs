//! Replica estimation: how many more replicas of a pod shape fit on each node of the
//! cluster as it runs now (pending pods are not placed first). A node counts only when the
//! shape passes every filter there; the count is then bounded by free resources and pod
//! slots, by one when the shape uses host ports, and by the device allocator for its DRA
//! claims (found by allocating, not by an upper bound). Inter-pod constraints among the
//! replicas themselves (anti-affinity, spreading) are not modelled.

use lockstep_model::{NodeId, PodId, ResourceId};

use crate::scheduler::{Options, Scheduler, SetupError};
use crate::state::PodClaims;

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
    let n = s.snapshot.num_nodes();
    let mut per_node = Vec::with_capacity(n);
    let mut total = 0u64;
    for i in 0..n {
        let node = s.snapshot.nodes()[i];
        let count = replicas_on(&mut s, shape, node);
        total += u64::from(count);
        per_node.push((node, count));
    }
    Ok(Estimate { per_node, total })
}

fn replicas_on(s: &mut Scheduler, shape: PodId, node: NodeId) -> u32 {
    if !s.framework.fits_on(&s.snapshot, shape, node) {
        return 0;
    }
    let snap = &s.snapshot;
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
