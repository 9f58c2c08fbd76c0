//! DynamicResources: a node is feasible when the structured allocator finds devices for all
//! of the pod's ResourceClaims there (claims already allocated must be usable from the node;
//! claims from templates are the pod's own). The allocation itself is reserved when the pod
//! is assumed onto the node and released when it is forgotten (rollback, eviction).

use lockstep_dra::UnfitReason;
use lockstep_model::{NodeId, Pod};

use crate::framework::{CycleState, Plugin, PreFilter, Reason, Signature};
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
    fn sign(&self, _snap: &Snapshot, pod: &Pod, _sig: &mut Signature) -> bool {
        // Devices taken on one node can be visible from others (network-attached pools),
        // so pods with claims always get a full cycle.
        pod.resource_claims.is_empty()
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
        match dra.try_allocate(node, &state.dra.claims) {
            Ok(_) => true,
            Err(unfit) => {
                reasons.push(Reason::Dra(unfit.reason));
                false
            }
        }
    }
}
