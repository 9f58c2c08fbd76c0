//! Scheduler policies a simulation runs under, and the `--compare` spec syntax.
//!
//! A policy is an engine [`Profile`] (with NodeResourcesFit's scoring strategy chosen) plus
//! the options the engine is gaining: opportunistic batching and the gang preemption mode.
//! Those two are carried through to the report already; they change nothing until the
//! engine's `Options` accepts them.

use lockstep_engine::Profile;
use lockstep_engine::config::{ResourceWeight, ScoringStrategy, ScoringStrategyType};
use serde::Serialize;

/// Victim selection for gangs whose `disruptionMode` is `single`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GangPreemption {
    Off,
    Minimal,
    Atomic,
}

impl GangPreemption {
    pub fn as_str(self) -> &'static str {
        match self {
            GangPreemption::Off => "off",
            GangPreemption::Minimal => "minimal",
            GangPreemption::Atomic => "atomic",
        }
    }
}

/// One configuration of the scheduler.
#[derive(Debug, Clone)]
pub struct Policy {
    /// How reports name it (the spec it was parsed from).
    pub name: String,
    pub profile: Profile,
    pub batching: bool,
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
    "least-allocated+no-batching",
];

impl Policy {
    /// The policy of `base` as is: batching on, gang preemption `minimal` (the engine's
    /// defaults), named after its scoring strategy.
    pub fn from_profile(base: &Profile) -> Policy {
        Policy {
            name: kebab(strategy_name(base.scoring_strategy.kind)),
            profile: base.clone(),
            batching: true,
            gang_preemption: GangPreemption::Minimal,
        }
    }

    /// Parses a spec: terms joined by `+`, each one of `least-allocated`, `most-allocated`,
    /// `batching`, `no-batching`, `gang-preemption=off|minimal|atomic`. Terms not given keep
    /// `base`'s value.
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
                "batching" => p.batching = true,
                "no-batching" => p.batching = false,
                "gang-preemption=off" => p.gang_preemption = GangPreemption::Off,
                "gang-preemption=minimal" => p.gang_preemption = GangPreemption::Minimal,
                "gang-preemption=atomic" => p.gang_preemption = GangPreemption::Atomic,
                other => {
                    return Err(format!(
                        "policy spec {spec:?}: unknown term {other:?}; use least-allocated, \
                         most-allocated, batching, no-batching or \
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

/// The profile simulations start from: the engine's default, with `nvidia.com/gpu` scored by
/// NodeResourcesFit beside cpu and memory (weight 1) so that LeastAllocated spreads and
/// MostAllocated packs GPUs. A profile whose scored resources were configured is left alone.
pub fn gpu_aware(mut profile: Profile) -> Profile {
    if profile.scoring_strategy.resources == ScoringStrategy::default().resources {
        profile.scoring_strategy.resources.push(ResourceWeight {
            name: crate::trace::GPU.into(),
            weight: 1,
        });
    }
    profile
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_terms() {
        let base = Profile::default();
        let p = Policy::parse("most-allocated+no-batching+gang-preemption=atomic", &base)
            .expect("valid spec");
        assert_eq!(
            p.profile.scoring_strategy.kind,
            ScoringStrategyType::MostAllocated
        );
        assert!(!p.batching);
        assert_eq!(p.gang_preemption, GangPreemption::Atomic);
        let err = Policy::parse("fastest", &base).expect_err("unknown term");
        assert!(err.contains("unknown term \"fastest\""), "{err}");
        assert_eq!(Policy::from_profile(&base).name, "least-allocated");
    }

    #[test]
    fn gpu_is_scored_unless_configured() {
        let p = gpu_aware(Profile::default());
        assert_eq!(p.scoring_strategy.resources.len(), 3);
        let again = gpu_aware(p.clone());
        assert_eq!(again.scoring_strategy.resources.len(), 3);
    }
}
