//! NodeResourcesBalancedAllocation: prefers nodes whose resource usage fractions, with the
//! pod placed, are close to each other (1 - standard deviation of the fractions).

use lockstep_model::{NodeId, Pod, ResourceId, ResourceNames};

use crate::config::ResourceWeight;
use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, Signature};
use crate::snapshot::Snapshot;

pub struct BalancedAllocation {
    resources: Vec<Option<ResourceId>>,
}

impl BalancedAllocation {
    pub fn new(resources: &[ResourceWeight], names: &ResourceNames) -> Self {
        BalancedAllocation {
            resources: resources.iter().map(|r| names.get(&r.name)).collect(),
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        "NodeResourcesBalancedAllocation"
    }
    fn sign(&self, _snap: &Snapshot, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.requests);
        true
    }
    fn scores(&self) -> bool {
        true
    }
    fn pre_score(
        &self,
        _snap: &Snapshot,
        pod: &Pod,
        _state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        // Best-effort pods (no request for any scored resource) are not scored.
        self.resources
            .iter()
            .flatten()
            .any(|r| pod.requests.get(*r) > 0)
    }
    fn score(&self, snap: &Snapshot, pod: &Pod, _state: &CycleState, node: NodeId) -> i64 {
        // At most a handful of resources: keep the fractions on the stack.
        let mut fractions = [0f64; 8];
        let mut n = 0usize;
        let mut total = 0f64;
        for r in self.resources.iter().flatten() {
            let pod_req = pod.requests.get(*r);
            if r.0 > ResourceId::PODS.0 && pod_req == 0 {
                continue;
            }
            let capacity = snap.allocatable(node, *r);
            if capacity == 0 {
                continue;
            }
            let f = ((snap.requested(node, *r) + pod_req) as f64 / capacity as f64).min(1.0);
            if n < fractions.len() {
                fractions[n] = f;
                n += 1;
                total += f;
            }
        }
        let std = match n {
            0 | 1 => 0.0,
            2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
            _ => {
                let mean = total / n as f64;
                let var = fractions[..n]
                    .iter()
                    .map(|f| (f - mean) * (f - mean))
                    .sum::<f64>()
                    / n as f64;
                var.sqrt()
            }
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }
}
