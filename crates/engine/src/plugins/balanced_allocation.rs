//! NodeResourcesBalancedAllocation: prefers nodes where placing the pod makes resource
//! usage fractions closer to each other. As kube-scheduler v1.37: the balance (1 - standard
//! deviation of the fractions) with the pod is compared with the balance without it, and the
//! score is `50 + (50 + with - without) / 2`.

use lockstep_model::{NodeId, Pod, ResourceId, ResourceNames};

use serde::Deserialize;

use crate::config::{ConfigError, Profile, ResourceWeight, check_resources};
use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, Signature};
use crate::plugins::{Registration, args};
use crate::state::ClusterState;

pub static PLUGIN: Registration = Registration {
    name: "NodeResourcesBalancedAllocation",
    filter: false,
    score: true,
    default_filter: false,
    weight: 1,
    scored_by_default: true,
    build: |profile, names| Box::new(BalancedAllocation::new(&profile.balanced_resources, names)),
    configure,
};

/// `NodeResourcesBalancedAllocationArgs`: the fields lockstep reads.
#[derive(Debug, Default, Deserialize)]
struct Args {
    #[serde(default)]
    resources: Option<Vec<ResourceWeight>>,
}

fn configure(value: &serde_json::Value, field: &str, p: &mut Profile) -> Result<(), ConfigError> {
    if let Some(r) = args::<Args>(value, field)?.resources {
        check_resources(&r, &format!("{field}.resources"))?;
        p.balanced_resources = r;
    }
    Ok(())
}

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
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(self.name(), &pod.requests);
        true
    }
    fn pre_score(
        &self,
        _snap: &ClusterState,
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
    fn score(&self, snap: &ClusterState, pod: &Pod, _state: &CycleState, node: NodeId) -> i64 {
        node_score(snap, &self.requests(pod), node)
    }
    fn score_nodes(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        _state: &CycleState,
        nodes: &[NodeId],
        out: &mut Vec<i64>,
    ) {
        let requests = self.requests(pod);
        out.extend(nodes.iter().map(|&n| node_score(snap, &requests, n)));
    }
}

impl BalancedAllocation {
    /// The scored resources that count for `pod` with its request for each: a scalar
    /// resource counts only when the pod asks for it.
    fn requests(&self, pod: &Pod) -> Vec<(ResourceId, i64)> {
        self.resources
            .iter()
            .flatten()
            .map(|&r| (r, pod.requests.get(r)))
            .filter(|&(r, pod_req)| r.0 <= ResourceId::PODS.0 || pod_req != 0)
            .collect()
    }
}

/// The score of `node` for a pod with `requests` (from [`BalancedAllocation::requests`]).
#[inline(always)]
fn node_score(snap: &ClusterState, requests: &[(ResourceId, i64)], node: NodeId) -> i64 {
    // At most a handful of resources: keep the fractions on the stack.
    let mut with_pod = [0f64; 8];
    let mut without_pod = [0f64; 8];
    let mut n = 0usize;
    for &(r, pod_req) in requests {
        let capacity = snap.allocatable(node, r);
        if capacity == 0 {
            continue;
        }
        let requested = snap.requested(node, r);
        if n < with_pod.len() {
            with_pod[n] = ((requested + pod_req) as f64 / capacity as f64).min(1.0);
            without_pod[n] = (requested as f64 / capacity as f64).min(1.0);
            n += 1;
        }
    }
    improvement_score(balance(&with_pod[..n]), balance(&without_pod[..n]))
}

/// How balanced usage fractions are: `(1 - standard deviation) * MAX_NODE_SCORE`,
/// truncated.
fn balance(fractions: &[f64]) -> i64 {
    let n = fractions.len();
    let std = match n {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        _ => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            let var = fractions
                .iter()
                .map(|f| (f - mean) * (f - mean))
                .sum::<f64>()
                / n as f64;
            var.sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// kube-scheduler's (v1.37) score from the balance with and without the pod: the
/// improvement the pod brings, mapped back into `[MAX/2, MAX]` (about 75 when the
/// pod changes little; towards 100 when it improves the balance, towards 50 when it
/// worsens it). Integer arithmetic as upstream (division truncates).
fn improvement_score(with_pod: i64, without_pod: i64) -> i64 {
    let half = MAX_NODE_SCORE / 2;
    half + (half + with_pod - without_pod) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_is_one_minus_the_standard_deviation() {
        assert_eq!(balance(&[]), 100);
        assert_eq!(balance(&[0.3]), 100);
        // |0.1875 - 0.8125| / 2 = 0.3125 -> 68.75, truncated.
        assert_eq!(balance(&[0.1875, 0.8125]), 68);
        // Three fractions: population standard deviation of 0.2, 0.4, 0.6 = 0.1633.
        assert_eq!(balance(&[0.2, 0.4, 0.6]), 83);
    }

    #[test]
    fn score_rewards_the_improvement_in_balance() {
        // An empty node made unbalanced (100 -> 68): 50 + (50 + 68 - 100) / 2 = 59.
        assert_eq!(improvement_score(68, 100), 59);
        // A slightly unbalanced node made worse (99 -> 88): 50 + 39 / 2 = 69.
        assert_eq!(improvement_score(88, 99), 69);
        // No change: 75; a perfect fix of the worst balance: 100; the reverse: 50.
        assert_eq!(improvement_score(80, 80), 75);
        assert_eq!(improvement_score(100, 50), 100);
        assert_eq!(improvement_score(50, 100), 50);
    }
}
