//! DynamicResources: a node is feasible when the structured allocator finds devices for all
//! of the pod's ResourceClaims there (claims already allocated must be usable from the node;
//! claims from templates are the pod's own). The allocation itself is reserved when the pod
//! is assumed onto the node and released when it is forgotten (rollback, eviction).
//!
//! Score (not in the default profile, as kube-scheduler has none; enable it in `--config`):
//! the devices the pod's claims could use on the node, scored with the profile's
//! NodeResourcesFit strategy as one more resource: LeastAllocated prefers nodes whose devices
//! are least used after placing the pod (spreading), MostAllocated the most used (device
//! bin-packing: small pods fill partly used GPUs, whole GPUs and nodes stay free),
//! RequestedToCapacityRatio follows its shape. Devices count in [`lockstep_dra::DEVICE_UNITS`]
//! (a shared device by the share of its most used capacity), see [`lockstep_dra::DeviceLoad`].

use lockstep_dra::{FragmentMeasure, UnfitReason};
use lockstep_model::{NodeId, Pod, PodId};

use serde::Deserialize;

use crate::config::{ConfigError, DeviceScoring, Profile};
use crate::framework::{
    CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Rejections, Signature,
};
use crate::plugins::node_resources_fit::Strategy;
use crate::plugins::{Registration, args, device_choice};
use crate::state::{ClusterState, PodClaims, TaskShapes};

pub struct DynamicResources {
    pub strategy: Strategy,
    pub device_scoring: DeviceScoring,
}

pub static PLUGIN: Registration = Registration {
    name: "DynamicResources",
    filter: true,
    score: true,
    default_filter: true,
    weight: 1,
    scored_by_default: false,
    build: |profile, _| {
        Box::new(DynamicResources {
            strategy: Strategy::new(&profile.scoring_strategy),
            // The mode matters only where the score is enabled (it also turns batching off).
            device_scoring: device_choice(profile),
        })
    },
    configure,
};

/// `DynamicResourcesArgs`: lockstep's `deviceScoring` (other fields are accepted and
/// ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    #[serde(default)]
    device_scoring: Option<DeviceScoring>,
}

fn configure(value: &serde_json::Value, field: &str, p: &mut Profile) -> Result<(), ConfigError> {
    if let Some(d) = args::<Args>(value, field)?.device_scoring {
        p.device_scoring = d;
    }
    Ok(())
}

/// The allocator's reasons, by code.
const REASONS: [UnfitReason; 5] = [
    UnfitReason::CannotAllocateAllClaims,
    UnfitReason::ClaimNotAvailableOnNode,
    UnfitReason::DeviceClassNotFound,
    UnfitReason::ClaimNotFound,
    UnfitReason::SearchBoundExceeded,
];

static REJECTIONS: Rejections = Rejections {
    plugin: "DynamicResources",
    message: |code, _| REASONS[code as usize].message().into(),
    // kube-scheduler's filter answers UnschedulableAndUnresolvable for these.
    resolvable: |_, _, _, _| false,
};

/// The DynamicResources filter's reason: devices for the pod's claims cannot be had.
pub fn reason(r: UnfitReason) -> Reason {
    Reason {
        by: &REJECTIONS,
        code: REASONS.iter().position(|x| *x == r).unwrap_or(0) as u32,
    }
}

#[derive(Debug, Default)]
struct DraFilterState {
    claims: Vec<lockstep_dra::ClaimRef>,
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        "DynamicResources"
    }
    fn pre_score(
        &self,
        snap: &ClusterState,
        _pod: &Pod,
        state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        match snap.claims(state.pod) {
            PodClaims::Refs(_) => snap.dra.is_some(),
            // Pods without claims strand devices too (by taking the cpu and memory that
            // device pods need): the fragmentation score places them as well.
            PodClaims::None => {
                self.device_scoring.is_fragmentation()
                    && snap.dra.is_some()
                    && !snap.task_shapes.shapes.is_empty()
            }
            PodClaims::Missing(_) => false,
        }
    }
    fn score(&self, snap: &ClusterState, pod: &Pod, state: &CycleState, node: NodeId) -> i64 {
        let Some(dra) = snap.dra.as_ref() else {
            return 0;
        };
        let refs: &[lockstep_dra::ClaimRef] = match snap.claims(state.pod) {
            PodClaims::Refs(refs) => refs,
            _ => &[],
        };
        if self.device_scoring.is_fragmentation() {
            // Raw: the fragmentation growth (milli device units), negated; normalised below.
            // The sigmoid variant's score is final (0..=100).
            return match least_fragmenting(snap, pod, state.pod, node, self.device_scoring, false) {
                Some((_, score)) => score,
                None => i64::MIN / 4,
            };
        }
        let load = dra.device_load(node, refs);
        if load.total == 0 {
            return 0;
        }
        self.strategy
            .resource_score(load.used + load.demand, load.total)
    }
    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], scores: &mut [i64]) {
        if self.device_scoring != DeviceScoring::Fragmentation {
            // The sigmoid variant is not normalised (as the paper's simulator).
            return;
        }
        // The node whose fragmentation grows least gets MAX_NODE_SCORE, the most 0.
        let (Some(&lo), Some(&hi)) = (scores.iter().min(), scores.iter().max()) else {
            return;
        };
        for s in scores.iter_mut() {
            *s = if hi == lo {
                MAX_NODE_SCORE
            } else {
                (*s - lo) * MAX_NODE_SCORE / (hi - lo)
            };
        }
    }
    fn sign(&self, snap: &ClusterState, pod: &Pod, sig: &mut Signature) -> bool {
        // The fragmentation score (which scores pods without claims too) is normalised over
        // the feasible nodes: it depends on them.
        if self.device_scoring.is_fragmentation() && snap.dra.is_some() {
            return false;
        }
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
    fn pre_filter(&self, snap: &ClusterState, _pod: &Pod, state: &mut CycleState) -> PreFilter {
        let pod = state.pod;
        let claims = &mut state.write::<DraFilterState>().claims;
        claims.clear();
        match snap.claims(pod) {
            PodClaims::None => PreFilter::Skip,
            PodClaims::Missing(m) => {
                PreFilter::RejectAll(reason(UnfitReason::ClaimNotFound), Some(m.clone()))
            }
            PodClaims::Refs(refs) => {
                // kube-scheduler checks every request's device class in PreFilter: a
                // missing class rejects the pod before any node is looked at.
                if let Some(m) = snap.dra.as_ref().and_then(|d| d.missing_class(refs)) {
                    return PreFilter::RejectAll(reason(UnfitReason::DeviceClassNotFound), Some(m));
                }
                claims.extend_from_slice(refs);
                PreFilter::Run
            }
        }
    }
    fn filter(
        &self,
        snap: &ClusterState,
        _pod: &Pod,
        state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let (Some(dra), Some(s)) = (snap.dra.as_ref(), state.read::<DraFilterState>()) else {
            return true;
        };
        match dra.fits(node, &s.claims) {
            Ok(()) => true,
            Err(unfit) => {
                reasons.push(reason(unfit.reason));
                false
            }
        }
    }
}

/// The score of the allocation among `pod`'s choices on `node` (with `FragmentationSigmoid`
/// see [`DraState::allocation_choices`](lockstep_dra::DraState::allocation_choices), else the
/// first allocation found) that makes the node's expected fragmentation grow least: with
/// `Fragmentation` the growth negated (milli device units), with `FragmentationSigmoid` the
/// paper's integer score; the first choice wins ties. `None` when the claims do not fit.
/// With `placed` (the pod's requests already count on the node: it is being assumed there)
/// the allocation comes with the score (none for a pod without claims); without it, only
/// the score, remembered for the node's alike nodes (see
/// [`DraState::remembered`](lockstep_dra::DraState::remembered)).
pub(crate) fn least_fragmenting(
    snap: &ClusterState,
    pod: &Pod,
    id: PodId,
    node: NodeId,
    mode: DeviceScoring,
    placed: bool,
) -> Option<(Option<lockstep_dra::NodeAllocation>, i64)> {
    let dra = snap.dra.as_ref()?;
    let refs: &[lockstep_dra::ClaimRef] = match snap.claims(id) {
        PodClaims::Refs(refs) => refs,
        _ => &[],
    };
    let sigmoid = mode.is_integer_fragmentation();
    let (tasks, measure) = match mode {
        DeviceScoring::FragmentationSigmoid => (&snap.typical_shapes, FragmentMeasure::Devices),
        DeviceScoring::FragmentationFit => (&snap.fit_shapes, FragmentMeasure::Copies),
        _ => (&snap.task_shapes, FragmentMeasure::Devices),
    };
    // The node's free resources (before the pod), then the pod's requests, of the resources
    // the shapes request: all a shape's fit depends on (the others stay 0, so nodes that
    // differ only in them share answers); then the workload and the mode, which the
    // remembered score depends on too.
    let width = snap.width;
    let mut inputs = vec![0i64; 2 * width + 2];
    inputs[2 * width] = tasks.id as i64;
    inputs[2 * width + 1] = mode as i64;
    for &id in &tasks.resources {
        let mut free = snap.allocatable(node, id) - snap.requested(node, id);
        if placed {
            free += pod.requests.get(id);
        }
        inputs[id.index()] = free;
        inputs[width + id.index()] = pod.requests.get(id);
    }
    let host_key = &inputs[..2 * width];
    let (free, asked) = host_key.split_at(width);
    // How many copies of shape `i` the node's resources hold before and after the pod.
    let mut host_fit = |i: usize| {
        if sigmoid && tasks.shapes[i].claims.is_empty() {
            // As the paper: every free device is a fragment for a task without devices.
            return (0, 0);
        }
        let req = &tasks.requests[i];
        let copies = |taken: bool| {
            req.iter()
                .filter(|&&(_, v)| v > 0)
                .map(|&(r, v)| {
                    let left = free[r.index()] - if taken { asked[r.index()] } else { 0 };
                    left.max(0) / v
                })
                .min()
                .unwrap_or(i64::MAX)
        };
        (copies(false), copies(true))
    };
    let score = |delta: f64| -> i64 {
        if sigmoid {
            (100.0 / (1.0 + (delta / 1000.0).exp())) as i64
        } else {
            -(delta * 1000.0).round() as i64
        }
    };
    let mut search = || {
        best_choice(
            dra,
            node,
            refs,
            sigmoid,
            (tasks, measure),
            host_key,
            &mut host_fit,
            &score,
        )
    };
    if placed {
        return search();
    }
    // The score alone: the same for every node of this one's class with its devices used
    // alike, given the same inputs.
    dra.remembered(node, refs, &inputs, || search().map(|(_, s)| s))
        .map(|s| (None, s))
}

/// [`least_fragmenting`]'s search: each allocation choice's fragmentation growth, the best
/// score and its allocation (none for a pod without claims); `None` when the claims do not
/// fit.
#[allow(clippy::too_many_arguments)]
fn best_choice(
    dra: &lockstep_dra::DraState,
    node: NodeId,
    refs: &[lockstep_dra::ClaimRef],
    sigmoid: bool,
    (tasks, measure): (&TaskShapes, FragmentMeasure),
    host_key: &[i64],
    host_fit: &mut dyn FnMut(usize) -> (i64, i64),
    score: &dyn Fn(f64) -> i64,
) -> Option<(Option<lockstep_dra::NodeAllocation>, i64)> {
    let choices = if refs.is_empty() {
        vec![lockstep_dra::NodeAllocation {
            node,
            claims: Vec::new(),
        }]
    } else if sigmoid {
        dra.allocation_choices(node, refs)
    } else {
        // The first allocation only: choosing among the devices by growth was slower (35 s
        // against 9 s on openb) and allocated no more there.
        dra.try_allocate(node, refs).into_iter().collect()
    };
    let mut best: Option<(Option<lockstep_dra::NodeAllocation>, i64)> = None;
    for a in choices {
        let delta =
            dra.fragmentation_delta(&a, &tasks.shapes, tasks.id, measure, host_key, host_fit);
        let s = score(delta);
        if best.as_ref().is_none_or(|b| s > b.1) {
            best = Some(((!refs.is_empty()).then_some(a), s));
        }
    }
    best
}
