//! NodeResourcesFit: the pod's requests must fit into the node's free allocatable (every
//! requested resource, plus one pod slot); scores nodes by a configurable strategy
//! (LeastAllocated by default, MostAllocated, RequestedToCapacityRatio).

use lockstep_model::{NodeId, Pod, ResourceId};

use serde::Deserialize;

use crate::config::{
    ConfigError, Profile, ResourceWeight, ScoringStrategy, ScoringStrategyType, ShapePoint,
    check_resources, cpu_memory,
};
use crate::framework::{
    CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Rejections, Signature,
};
use crate::plugins::{Registration, args};
use crate::state::ClusterState;

pub static PLUGIN: Registration = Registration {
    name: "NodeResourcesFit",
    filter: true,
    score: true,
    default_filter: true,
    weight: 1,
    scored_by_default: true,
    build: |profile, names| Box::new(NodeResourcesFit::new(&profile.scoring_strategy, names)),
    configure,
};

/// `NodeResourcesFitArgs`: the fields lockstep reads (others are accepted and ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    #[serde(default)]
    scoring_strategy: Option<ScoringStrategySpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScoringStrategySpec {
    #[serde(default, rename = "type")]
    kind: ScoringStrategyType,
    #[serde(default)]
    resources: Option<Vec<ResourceWeight>>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<RequestedToCapacityRatioSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestedToCapacityRatioSpec {
    #[serde(default)]
    shape: Vec<ShapePoint>,
}

fn configure(value: &serde_json::Value, field: &str, p: &mut Profile) -> Result<(), ConfigError> {
    let Some(s) = args::<Args>(value, field)?.scoring_strategy else {
        return Ok(());
    };
    let resources = s.resources.unwrap_or_else(cpu_memory);
    check_resources(&resources, &format!("{field}.scoringStrategy.resources"))?;
    let shape = s
        .requested_to_capacity_ratio
        .map(|r| r.shape)
        .unwrap_or_default();
    if s.kind == ScoringStrategyType::RequestedToCapacityRatio {
        validate_shape(
            &shape,
            &format!("{field}.scoringStrategy.requestedToCapacityRatio.shape"),
        )?;
    }
    p.scoring_strategy = ScoringStrategy {
        kind: s.kind,
        resources,
        shape,
    };
    Ok(())
}

fn validate_shape(shape: &[ShapePoint], field: &str) -> Result<(), ConfigError> {
    if shape.is_empty() {
        return Err(ConfigError::Invalid {
            field: field.into(),
            problem: "RequestedToCapacityRatio needs at least one shape point".into(),
        });
    }
    for (i, pt) in shape.iter().enumerate() {
        if !(0..=100).contains(&pt.utilization) || !(0..=10).contains(&pt.score) {
            return Err(ConfigError::Invalid {
                field: format!("{field}[{i}]"),
                problem: "utilization must be 0..100 and score 0..10".into(),
            });
        }
        if i > 0 && pt.utilization <= shape[i - 1].utilization {
            return Err(ConfigError::Invalid {
                field: format!("{field}[{i}].utilization"),
                problem: "utilization values must be strictly increasing".into(),
            });
        }
    }
    Ok(())
}

static REJECTIONS: Rejections = Rejections {
    plugin: "NodeResourcesFit",
    message: |code, snap| match code {
        TOO_MANY_PODS_CODE => "Too many pods".into(),
        r => format!(
            "Insufficient {}",
            snap.cluster.resources.name(ResourceId((r - 1) as u16))
        ),
    },
    // A resource is unresolvable when the pod asks for more than the node's whole
    // allocatable.
    resolvable: |code, snap, pod, node| match code {
        TOO_MANY_PODS_CODE => true,
        r => {
            pod.requests.get(ResourceId((r - 1) as u16))
                <= snap.allocatable(node, ResourceId((r - 1) as u16))
        }
    },
};

const TOO_MANY_PODS_CODE: u32 = 0;

/// The node has no pod slot left.
pub const TOO_MANY_PODS: Reason = Reason {
    by: &REJECTIONS,
    code: TOO_MANY_PODS_CODE,
};

/// The node lacks free allocatable of `r`.
pub fn insufficient(r: ResourceId) -> Reason {
    Reason {
        by: &REJECTIONS,
        code: u32::from(r.0) + 1,
    }
}

/// Whether this plugin gave `reason`: the node is short of a resource or a pod slot.
pub fn is_shortage(reason: &Reason) -> bool {
    reason.is_from(&REJECTIONS)
}

/// kube-scheduler's `MaxCustomPriorityScore`: shape scores are on a 0..10 scale.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;
const MAX_UTILIZATION: i64 = 100;

pub struct NodeResourcesFit {
    strategy: Strategy,
    /// Scored resources (None: no node has it) and their weights.
    resources: Vec<(Option<ResourceId>, i64)>,
}

#[derive(Debug, Default)]
struct FitScoreState {
    /// The pod's request for each scored resource (non-zero defaults for cpu and memory).
    pod_requests: Vec<i64>,
}

/// A scoring strategy's score of one resource from its requested amount (the pod's included)
/// and capacity; shared with DynamicResources, which scores devices the same way.
#[derive(Debug, Clone)]
pub struct Strategy {
    pub kind: ScoringStrategyType,
    /// (utilization 0..100, score 0..100) points, ascending.
    shape: Vec<(i64, i64)>,
}

impl Strategy {
    pub fn new(strategy: &ScoringStrategy) -> Self {
        Strategy {
            kind: strategy.kind,
            shape: strategy
                .shape
                .iter()
                .map(|p| {
                    (
                        p.utilization,
                        p.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
                    )
                })
                .collect(),
        }
    }

    #[inline]
    pub fn resource_score(&self, requested: i64, capacity: i64) -> i64 {
        match self.kind {
            ScoringStrategyType::LeastAllocated => {
                if capacity == 0 || requested > capacity {
                    0
                } else {
                    quotient((capacity - requested) * MAX_NODE_SCORE, capacity)
                }
            }
            ScoringStrategyType::MostAllocated => {
                if capacity == 0 {
                    0
                } else {
                    quotient(requested.min(capacity) * MAX_NODE_SCORE, capacity)
                }
            }
            ScoringStrategyType::RequestedToCapacityRatio => {
                if capacity == 0 || requested > capacity {
                    self.broken_linear(MAX_UTILIZATION)
                } else {
                    self.broken_linear(quotient(requested * MAX_UTILIZATION, capacity))
                }
            }
        }
    }

    fn broken_linear(&self, p: i64) -> i64 {
        let s = &self.shape;
        for i in 0..s.len() {
            if p <= s[i].0 {
                if i == 0 {
                    return s[0].1;
                }
                return s[i - 1].1
                    + (s[i].1 - s[i - 1].1) * (p - s[i - 1].0) / (s[i].0 - s[i - 1].0);
            }
        }
        s.last().map_or(0, |x| x.1)
    }
}

/// `a / b` truncated, as integer division gives it. A 64-bit integer division is slow (tens
/// of cycles; memory amounts do not fit the 32-bit one) and runs for every scored node, so
/// where it is exact the quotient comes from a floating-point division: for `0 <= a < 2^53`
/// and `0 < b < 2^53` both convert exactly and the rounded quotient `(a/b)(1+d)`, `|d| <=
/// 2^-53`, stays below the next integer (the true quotient is at least `1/b` under it and
/// `(a/b) 2^-53 < 1/b` when `a < 2^53`), so truncating it gives `a / b`.
#[inline]
fn quotient(a: i64, b: i64) -> i64 {
    const EXACT: i64 = 1 << 53;
    if (0..EXACT).contains(&a) && (1..EXACT).contains(&b) {
        (a as f64 / b as f64) as i64
    } else {
        a / b
    }
}

impl NodeResourcesFit {
    pub fn new(strategy: &ScoringStrategy, names: &lockstep_model::ResourceNames) -> Self {
        NodeResourcesFit {
            strategy: Strategy::new(strategy),
            resources: strategy
                .resources
                .iter()
                .map(|r| (names.get(&r.name), r.weight))
                .collect(),
        }
    }
}

/// The pod's request for `r` as scoring sees it: cpu and memory use the non-zero defaults.
fn scoring_request(pod: &Pod, r: ResourceId) -> i64 {
    match r {
        ResourceId::CPU => pod.non_zero_cpu,
        ResourceId::MEMORY => pod.non_zero_memory,
        _ => pod.requests.get(r),
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        "NodeResourcesFit"
    }
    fn sign(&self, _snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        sig.add(
            self.name(),
            &(&pod.requests, pod.non_zero_cpu, pod.non_zero_memory),
        );
        true
    }
    fn pre_filter(&self, _snap: &ClusterState, _pod: &Pod, _state: &mut CycleState) -> PreFilter {
        PreFilter::Run
    }
    fn filter(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        _state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let mut fits = true;
        if i64::from(snap.pod_count(node)) + 1 > snap.allocatable(node, ResourceId::PODS) {
            reasons.push(TOO_MANY_PODS);
            fits = false;
        }
        for (r, v) in pod.requests.iter() {
            if r == ResourceId::PODS {
                continue;
            }
            if v > 0 && v > snap.allocatable(node, r) - snap.requested(node, r) {
                reasons.push(insufficient(r));
                fits = false;
            }
        }
        fits
    }
    fn pre_score(
        &self,
        _snap: &ClusterState,
        pod: &Pod,
        state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        let reqs = &mut state.write::<FitScoreState>().pod_requests;
        reqs.clear();
        reqs.extend(
            self.resources
                .iter()
                .map(|(r, _)| r.map_or(0, |r| scoring_request(pod, r))),
        );
        !self.resources.is_empty()
    }
    fn score(&self, snap: &ClusterState, _pod: &Pod, state: &CycleState, node: NodeId) -> i64 {
        state
            .read::<FitScoreState>()
            .map_or(0, |fit| self.node_score(snap, fit, node))
    }
    fn score_nodes(
        &self,
        snap: &ClusterState,
        _pod: &Pod,
        state: &CycleState,
        nodes: &[NodeId],
        out: &mut Vec<i64>,
    ) {
        match state.read::<FitScoreState>() {
            Some(fit) => self.nodes_scores(snap, fit, nodes, out),
            None => out.extend(nodes.iter().map(|_| 0)),
        }
    }
}

impl NodeResourcesFit {
    /// [`node_score`](Self::node_score) of each of `nodes`, appended to `out`, computed a
    /// resource at a time over all the nodes and then their weighted means: the same integer
    /// arithmetic, but the divisions of different nodes do not wait on each other.
    fn nodes_scores(
        &self,
        snap: &ClusterState,
        fit: &FitScoreState,
        nodes: &[NodeId],
        out: &mut Vec<i64>,
    ) {
        let start = out.len();
        out.resize(start + nodes.len(), 0);
        let total = &mut out[start..];
        let mut weights = vec![0i64; nodes.len()];
        for (r, w, pod_req) in self.counted(fit) {
            match r {
                ResourceId::CPU => self.add_resource(snap, nodes, r, w, total, &mut weights, |n| {
                    snap.non_zero_requested(n)[0] + pod_req
                }),
                ResourceId::MEMORY => {
                    self.add_resource(snap, nodes, r, w, total, &mut weights, |n| {
                        snap.non_zero_requested(n)[1] + pod_req
                    })
                }
                _ => self.add_resource(snap, nodes, r, w, total, &mut weights, |n| {
                    snap.requested(n, r) + pod_req
                }),
            }
        }
        for (t, &w) in total.iter_mut().zip(&weights) {
            *t = self.mean(*t, w);
        }
    }

    /// Adds resource `r`'s weighted score on each of `nodes` (the requested amount, the pod's
    /// included, from `requested`) to `total`, and its weight to `weights` where the node has
    /// any of it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn add_resource(
        &self,
        snap: &ClusterState,
        nodes: &[NodeId],
        r: ResourceId,
        w: i64,
        total: &mut [i64],
        weights: &mut [i64],
        requested: impl Fn(NodeId) -> i64,
    ) {
        let score = |requested: i64, capacity: i64| match self.strategy.kind {
            ScoringStrategyType::LeastAllocated => {
                if requested > capacity {
                    0
                } else {
                    quotient((capacity - requested) * MAX_NODE_SCORE, capacity)
                }
            }
            _ => self.strategy.resource_score(requested, capacity),
        };
        for ((&node, t), weight) in nodes.iter().zip(total).zip(weights) {
            let capacity = snap.allocatable(node, r);
            if capacity == 0 {
                continue;
            }
            *t += score(requested(node), capacity) * w;
            *weight += w;
        }
    }

    /// The strategy's weighted score of `node` for the pod whose requests `fit` holds.
    #[inline(always)]
    fn node_score(&self, snap: &ClusterState, fit: &FitScoreState, node: NodeId) -> i64 {
        let nz = snap.non_zero_requested(node);
        let mut total = 0i64;
        let mut weights = 0i64;
        for (r, w, pod_req) in self.counted(fit) {
            let capacity = snap.allocatable(node, r);
            if capacity == 0 {
                continue;
            }
            let requested = match r {
                ResourceId::CPU => nz[0],
                ResourceId::MEMORY => nz[1],
                _ => snap.requested(node, r),
            } + pod_req;
            total += self.strategy.resource_score(requested, capacity) * w;
            weights += w;
        }
        self.mean(total, weights)
    }

    /// The scored resources that count for the pod whose requests `fit` holds, each with its
    /// weight and the pod's request: a scalar resource counts only when the pod asks for it.
    #[inline(always)]
    fn counted<'a>(
        &'a self,
        fit: &'a FitScoreState,
    ) -> impl Iterator<Item = (ResourceId, i64, i64)> + 'a {
        self.resources
            .iter()
            .zip(&fit.pod_requests)
            .filter_map(|(&(r, w), &pod_req)| {
                let r = r?;
                (r.0 <= ResourceId::PODS.0 || pod_req != 0).then_some((r, w, pod_req))
            })
    }

    /// The weighted mean of the resources' scores.
    #[inline(always)]
    fn mean(&self, total: i64, weights: i64) -> i64 {
        if weights == 0 {
            0
        } else if self.strategy.kind == ScoringStrategyType::RequestedToCapacityRatio {
            // kube-scheduler rounds here (math.Round of the weighted mean).
            quotient(total * 2 + weights, 2 * weights)
        } else {
            quotient(total, weights)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ResourceWeight, ShapePoint};

    fn plugin(kind: ScoringStrategyType) -> NodeResourcesFit {
        let names = lockstep_model::ResourceNames::default();
        NodeResourcesFit::new(
            &ScoringStrategy {
                kind,
                resources: vec![
                    ResourceWeight {
                        name: "cpu".into(),
                        weight: 1,
                    },
                    ResourceWeight {
                        name: "memory".into(),
                        weight: 1,
                    },
                ],
                shape: vec![
                    ShapePoint {
                        utilization: 0,
                        score: 0,
                    },
                    ShapePoint {
                        utilization: 100,
                        score: 10,
                    },
                ],
            },
            &names,
        )
    }

    #[test]
    fn least_allocated_prefers_empty() {
        let p = plugin(ScoringStrategyType::LeastAllocated);
        assert_eq!(p.strategy.resource_score(0, 4000), 100);
        assert_eq!(p.strategy.resource_score(1000, 4000), 75);
        assert_eq!(p.strategy.resource_score(5000, 4000), 0);
    }

    #[test]
    fn most_allocated_prefers_full() {
        let p = plugin(ScoringStrategyType::MostAllocated);
        assert_eq!(p.strategy.resource_score(1000, 4000), 25);
        assert_eq!(p.strategy.resource_score(5000, 4000), 100);
    }

    #[test]
    fn requested_to_capacity_ratio_follows_shape() {
        let p = plugin(ScoringStrategyType::RequestedToCapacityRatio);
        assert_eq!(p.strategy.resource_score(0, 4000), 0);
        assert_eq!(p.strategy.resource_score(2000, 4000), 50);
        assert_eq!(p.strategy.resource_score(4000, 4000), 100);
        assert_eq!(p.strategy.resource_score(8000, 4000), 100);
    }

    proptest::proptest! {
        /// The floating-point quotient is the integer one wherever it is used, at the edges
        /// of its range included.
        #[test]
        fn quotient_is_integer_division(
            b in proptest::prop_oneof![1i64..1000, 1i64..(1 << 40), ((1i64 << 53) - 1000)..(1i64 << 53), 1i64..i64::MAX],
            k in 0i64..200,
            r in 0i64..1000,
            big in (1i64 << 52)..(1i64 << 53),
        ) {
            // Around each multiple of b: just under, at and just over it.
            for a in [k.saturating_mul(b), k.saturating_mul(b).saturating_sub(1), k.saturating_mul(b).saturating_add(r), big, big - 1, (1 << 53) - 1, 1 << 53, i64::MAX] {
                proptest::prop_assert_eq!(quotient(a, b), a / b, "{} / {}", a, b);
            }
        }
    }

    #[test]
    fn quotient_near_whole_numbers() {
        // Quotients a hair under an integer, where a rounded division could reach it.
        for b in [3i64, 7, 34_359_738_368, (1 << 53) - 1, (1 << 46) + 1] {
            for k in [1i64, 99, 100] {
                let a = k * b - 1;
                if a < (1 << 53) {
                    assert_eq!(quotient(a, b), k - 1, "{a} / {b}");
                }
                assert_eq!(quotient(k * b, b), k);
            }
        }
        assert_eq!(quotient((1 << 53) - 1, (1 << 53) - 2), 1);
        assert_eq!(quotient((1 << 53) - 2, (1 << 53) - 1), 0);
    }
}
