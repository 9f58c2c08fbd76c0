//! Scheduler policies a simulation runs under, and the `--compare` spec syntax.
//!
//! A policy is an engine [`Profile`] (with NodeResourcesFit's scoring strategy chosen) plus
//! the engine's run options: opportunistic batching, preemption on or off, and the gang
//! preemption mode.

pub use lockstep_engine::GangPreemption;
use lockstep_engine::config::{
    DeviceScoring, ResourceWeight, ScoringStrategy, ScoringStrategyType,
};
use lockstep_engine::{GangPlacement, Profile};

/// One configuration of the scheduler.
#[derive(Debug, Clone)]
pub struct Policy {
    /// How reports name it (the spec it was parsed from).
    pub name: String,
    pub profile: Profile,
    pub batching: bool,
    /// Pods and gangs that do not fit may preempt lower-priority pods.
    pub preemption: bool,
    pub gang_preemption: GangPreemption,
}

/// The scoring strategy's name as in a KubeSchedulerConfiguration.
pub fn strategy_name(kind: ScoringStrategyType) -> &'static str {
    match kind {
        ScoringStrategyType::LeastAllocated => "LeastAllocated",
        ScoringStrategyType::MostAllocated => "MostAllocated",
        ScoringStrategyType::RequestedToCapacityRatio => "RequestedToCapacityRatio",
    }
}

/// The compared set when `--compare` names none.
pub const DEFAULT_COMPARE: &[&str] = &[
    "least-allocated",
    "most-allocated",
    "most-allocated+gang-preemption=atomic",
    "most-allocated+no-batching",
];

impl Policy {
    /// The policy of `base` as is, with the engine's default options (batching on,
    /// preemption on, gang preemption `minimal`), named after its scoring strategy.
    pub fn from_profile(base: &Profile) -> Policy {
        let defaults = lockstep_engine::Options::default();
        Policy {
            name: kebab(strategy_name(base.scoring_strategy.kind)),
            profile: base.clone(),
            batching: defaults.batching,
            preemption: defaults.preemption,
            gang_preemption: defaults.gang_preemption,
        }
    }

    /// Parses a spec: terms joined by `+`, each one of `least-allocated`, `most-allocated`,
    /// `device-fragmentation` (fragmentation gradient descent: the DynamicResources score in
    /// its Fragmentation mode as the only score, as the paper's FGD policy), `fgd` (the same
    /// scored exactly as the paper's simulator does: its FragmentationSigmoid mode), `fgd-fit`
    /// (`fgd` counting a node's fragments in the copies of each task it holds, over every
    /// task shape: the FragmentationFit mode),
    /// `device-strategy` (DRA devices scored with the strategy), `gang-search` (the
    /// whole-gang search after the pod-by-pod orders), `pod-by-pod` (the simulations'
    /// default), `batching`, `no-batching`, `preemption`, `no-preemption`,
    /// `gang-preemption=off|minimal|atomic`. Terms not given keep the engine's defaults and
    /// `base`'s scoring strategy.
    pub fn parse(spec: &str, base: &Profile) -> Result<Policy, String> {
        let mut p = Policy::from_profile(base);
        p.name = spec.trim().to_string();
        if p.name.is_empty() {
            return Err("empty policy spec; expected e.g. most-allocated+no-batching".into());
        }
        for term in p.name.clone().split('+') {
            match term.trim() {
                "least-allocated" => {
                    p.profile.scoring_strategy.kind = ScoringStrategyType::LeastAllocated
                }
                "most-allocated" => {
                    p.profile.scoring_strategy.kind = ScoringStrategyType::MostAllocated
                }
                "device-fragmentation" => {
                    // As the paper's FGD policy: the fragmentation score alone decides.
                    p.profile.device_scoring = DeviceScoring::Fragmentation;
                    p.profile.scores = vec![("DynamicResources".into(), 1)];
                }
                "fgd" => {
                    // The paper's FGD as its simulator scores it (integer sigmoid score,
                    // typical tasks, ties to the first node in name order).
                    p.profile.device_scoring = DeviceScoring::FragmentationSigmoid;
                    p.profile.scores = vec![("DynamicResources".into(), 1)];
                    // Its scheduler config scores every feasible node.
                    p.profile.percentage_of_nodes_to_score = 100;
                }
                "fgd-fit" => {
                    // FGD's integer score with fragments counted in the copies of each
                    // task a node holds (its cpu included), over every task shape.
                    p.profile.device_scoring = DeviceScoring::FragmentationFit;
                    p.profile.scores = vec![("DynamicResources".into(), 1)];
                    p.profile.percentage_of_nodes_to_score = 100;
                }
                "device-strategy" => p.profile.device_scoring = DeviceScoring::Strategy,
                "gang-search" => p.profile.gang_placement = GangPlacement::Search,
                "pod-by-pod" => p.profile.gang_placement = GangPlacement::PodByPod,
                "batching" => p.batching = true,
                "no-batching" => p.batching = false,
                "preemption" => p.preemption = true,
                "no-preemption" => p.preemption = false,
                "gang-preemption=off" => p.gang_preemption = GangPreemption::Off,
                "gang-preemption=minimal" => p.gang_preemption = GangPreemption::Minimal,
                "gang-preemption=atomic" => p.gang_preemption = GangPreemption::Atomic,
                other => {
                    return Err(format!(
                        "policy spec {spec:?}: unknown term {other:?}; use least-allocated, \
                         most-allocated, device-fragmentation, fgd, fgd-fit, device-strategy, \
                         gang-search, pod-by-pod, batching, no-batching, preemption, \
                         no-preemption or \
                         gang-preemption=off|minimal|atomic, joined by +"
                    ));
                }
            }
        }
        Ok(p)
    }
}

fn kebab(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The profile simulations start from: the engine's default, with GPUs scored beside cpu and
/// memory so that LeastAllocated spreads and MostAllocated packs them: `nvidia.com/gpu` by
/// NodeResourcesFit (weight 1) and DRA devices by the DynamicResources score (weight 1, the
/// same strategy). Scored resources or score plugins the profile configured are left alone.
pub fn gpu_aware(mut profile: Profile) -> Profile {
    // Gangs pod by pod unless the policy term `gang-search` asks for the whole-gang search:
    // a simulation retries failing gangs after every completion, and with preemption each
    // retry evaluates many victim sets.
    if profile.gang_placement == GangPlacement::Search {
        profile.gang_placement = GangPlacement::PodByPod;
    }
    if profile.scoring_strategy.resources == ScoringStrategy::default().resources {
        profile.scoring_strategy.resources.push(ResourceWeight {
            name: crate::trace::GPU.into(),
            weight: 1,
        });
    }
    if profile.scores == Profile::default().scores {
        profile.scores.push(("DynamicResources".into(), 1));
    }
    profile
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_terms() {
        let base = Profile::default();
        let p = Policy::parse(
            "most-allocated+no-batching+no-preemption+gang-preemption=atomic",
            &base,
        )
        .expect("valid spec");
        assert_eq!(
            p.profile.scoring_strategy.kind,
            ScoringStrategyType::MostAllocated
        );
        assert!(!p.batching);
        assert!(!p.preemption);
        assert_eq!(p.gang_preemption, GangPreemption::Atomic);
        let err = Policy::parse("fastest", &base).expect_err("unknown term");
        assert!(err.contains("unknown term \"fastest\""), "{err}");
        assert_eq!(Policy::from_profile(&base).name, "least-allocated");
        let fgd = Policy::parse("device-fragmentation", &gpu_aware(base.clone())).expect("spec");
        assert_eq!(fgd.profile.device_scoring, DeviceScoring::Fragmentation);
        assert_eq!(fgd.profile.scores, [("DynamicResources".to_string(), 1)]);
        let fit = Policy::parse("fgd-fit", &gpu_aware(base.clone())).expect("spec");
        assert_eq!(fit.profile.device_scoring, DeviceScoring::FragmentationFit);
        assert_eq!(fit.profile.percentage_of_nodes_to_score, 100);
    }

    #[test]
    fn gpu_is_scored_unless_configured() {
        let p = gpu_aware(Profile::default());
        assert_eq!(p.scoring_strategy.resources.len(), 3);
        assert!(p.scores.contains(&("DynamicResources".to_string(), 1)));
        let again = gpu_aware(p.clone());
        assert_eq!(again.scoring_strategy.resources.len(), 3);
        assert_eq!(again.scores.len(), p.scores.len());
    }
}
