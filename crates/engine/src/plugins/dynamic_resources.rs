//! DynamicResources: a node is feasible when the structured allocator finds devices for all
//! of the pod's ResourceClaims there (claims already allocated must be usable from the node;
//! claims from templates are the pod's own). The allocation itself is reserved when the pod
//! is assumed onto the node and released when it is forgotten (rollback, eviction).
//!
//! Score (not in the default profile, as kube-scheduler has none; enable it in `--config`):
//! the share of the node's devices already in use, exclusively or shared, so pods with
//! claims pack onto nodes whose devices are busy and whole nodes stay free (device
//! bin-packing; with shareable GPUs, small pods fill partly used GPUs first).

use lockstep_dra::UnfitReason;
use lockstep_model::{NodeId, Pod};

use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Signature};
use crate::snapshot::{PodClaims, Snapshot};

pub struct DynamicResources;

#[derive(Debug, Default)]
pub struct DraFilterState {
    claims: Vec<lockstep_dra::ClaimRef>,
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        "DynamicResources"
    }
    fn filters(&self) -> bool {
        true
    }
    fn scores(&self) -> bool {
        true
    }
    fn pre_score(
        &self,
        snap: &Snapshot,
        _pod: &Pod,
        state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        snap.dra.is_some() && matches!(snap.claims(state.pod), PodClaims::Refs(_))
    }
    fn score(&self, snap: &Snapshot, _pod: &Pod, _state: &CycleState, node: NodeId) -> i64 {
        let Some(dra) = snap.dra.as_ref() else {
            return 0;
        };
        match dra.node_devices_in_use(node) {
            (_, 0) => 0,
            (used, total) => (used * MAX_NODE_SCORE as usize / total) as i64,
        }
    }
    fn sign(&self, snap: &Snapshot, pod: &Pod, sig: &mut Signature) -> bool {
        if pod.resource_claims.is_empty() {
            return true;
        }
        // A pod whose claims all come from templates takes devices of its own on its node
        // only; when every device is node-local, placing it changes no other node's verdict.
        // Shared claims and network-attached pools tie nodes together: full cycle.
        let own_claims_only = pod
            .resource_claims
            .iter()
            .all(|c| c.resource_claim_name.is_none());
        sig.add(self.name(), &pod.resource_claims);
        own_claims_only && snap.dra_node_local
    }
    fn pre_filter(&self, snap: &Snapshot, _pod: &Pod, state: &mut CycleState) -> PreFilter {
        state.dra.claims.clear();
        match snap.claims(state.pod) {
            PodClaims::None => PreFilter::Skip,
            PodClaims::Missing(_) => PreFilter::RejectAll(Reason::Dra(UnfitReason::ClaimNotFound)),
            PodClaims::Refs(refs) => {
                state.dra.claims.extend_from_slice(refs);
                PreFilter::Run
            }
        }
    }
    fn filter(
        &self,
        snap: &Snapshot,
        _pod: &Pod,
        state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let Some(dra) = snap.dra.as_ref() else {
            return true;
        };
        match dra.fits(node, &state.dra.claims) {
            Ok(()) => true,
            Err(unfit) => {
                reasons.push(Reason::Dra(unfit.reason));
                false
            }
        }
    }
}
