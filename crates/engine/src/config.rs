//! Scheduler configuration in the shape of a `KubeSchedulerConfiguration`
//! (`kubescheduler.config.k8s.io/v1`): plugins enabled/disabled per extension point, score
//! weights, NodeResourcesFit's scoring strategy, and `percentageOfNodesToScore`. The defaults
//! equal kube-scheduler's default profile.

use serde::Deserialize;
use thiserror::Error;

use crate::plugins::{IGNORED, REGISTRY, Registration, find};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("unknown plugin {name:?} in {place}; known plugins: {known}")]
    UnknownPlugin {
        name: String,
        place: String,
        known: String,
    },
    #[error("plugin {name:?} in {place} has no {point} extension point")]
    NoSuchExtensionPoint {
        name: String,
        place: String,
        point: &'static str,
    },
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum ScoringStrategyType {
    #[default]
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceWeight {
    pub name: String,
    #[serde(default = "one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapePoint {
    pub utilization: i64,
    pub score: i64,
}

/// NodeResourcesFit's scoring strategy, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoringStrategy {
    pub kind: ScoringStrategyType,
    pub resources: Vec<ResourceWeight>,
    pub shape: Vec<ShapePoint>,
}

pub(crate) fn cpu_memory() -> Vec<ResourceWeight> {
    vec![
        ResourceWeight {
            name: "cpu".into(),
            weight: 1,
        },
        ResourceWeight {
            name: "memory".into(),
            weight: 1,
        },
    ]
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: ScoringStrategyType::LeastAllocated,
            resources: cpu_memory(),
            shape: Vec::new(),
        }
    }
}

/// The effective profile: which plugins run at which point, with which weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub scheduler_name: String,
    /// Filter plugins in order.
    pub filters: Vec<String>,
    /// Score plugins in order, with weights.
    pub scores: Vec<(String, i64)>,
    pub scoring_strategy: ScoringStrategy,
    pub balanced_resources: Vec<ResourceWeight>,
    pub hard_pod_affinity_weight: i64,
    /// 0 means kube-scheduler's adaptive default.
    pub percentage_of_nodes_to_score: u32,
    /// lockstep's `gangPreemption` key, when the file sets it.
    pub gang_preemption: Option<crate::preemption::GangPreemption>,
    /// How the DynamicResources score (when enabled) scores devices.
    pub device_scoring: DeviceScoring,
    /// How a gang's pods are placed (lockstep's `gangPlacement` key).
    pub gang_placement: GangPlacement,
    /// Bound on the placements one whole-gang search tries (one search per topology domain
    /// tried; lockstep's `gangSearchSteps` key).
    pub gang_search_steps: u64,
}

/// How the group cycle places a gang's pods (lockstep's `gangPlacement` key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum GangPlacement {
    /// Pod by pod as kube-scheduler does, in a few pod orders; when none places the gang, a
    /// search over the pods' nodes and devices (see `gang_search`) looks for a placement
    /// that satisfies every pod at once.
    #[default]
    Search,
    /// Pod by pod only, in a few pod orders.
    PodByPod,
}

impl GangPlacement {
    pub fn as_str(self) -> &'static str {
        match self {
            GangPlacement::Search => "Search",
            GangPlacement::PodByPod => "PodByPod",
        }
    }
}

/// The default bound on the placements one whole-gang search tries.
pub const DEFAULT_GANG_SEARCH_STEPS: u64 = 2_000;
/// The largest `gangSearchSteps` accepted.
pub const MAX_GANG_SEARCH_STEPS: u64 = 10_000_000;

/// How the DynamicResources score scores a node's devices (lockstep's `deviceScoring` arg of
/// DynamicResources; kube-scheduler has no DRA score).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum DeviceScoring {
    /// As one more resource, with NodeResourcesFit's strategy (LeastAllocated spreads,
    /// MostAllocated packs).
    #[default]
    Strategy,
    /// Fragmentation gradient descent (the ATC'23 GPU fragmentation paper): the node whose
    /// expected device fragmentation, for a task drawn from the pods in the input, grows least.
    Fragmentation,
    /// Fragmentation gradient descent exactly as the paper's simulator scores it: a node
    /// scores `100 * sigmoid(-growth / 1000)` truncated to an integer (no normalisation, so
    /// many nodes tie and the first in name order wins); the workload is the most common
    /// (claims, cpu) shapes that make up 95% of the pods, memory is not looked at, and a
    /// task without devices counts every free device as a fragment. The device choice within
    /// a node follows the same integer score.
    FragmentationSigmoid,
    /// `FragmentationSigmoid`'s integer score and device choice, with two differences: a
    /// task's fragments on a node are the free device units left once as many copies of it
    /// as the node holds are placed (copies its devices hold, a shared device as many as fit
    /// in its free share, bounded by the copies its cpu holds), so a half-used GPU strands
    /// what a second half-GPU task cannot use and cpu that runs out strands the devices it
    /// leaves; and the workload is every (claims, cpu) shape of the pods, not only the most
    /// common 95%, each weighing its pods times the cube of the inverse of the share of a
    /// device it takes (a pod taking a fifth of a GPU weighs 125 times a whole-GPU pod: the
    /// small shares are what fills what larger ones leave of a device).
    FragmentationFit,
}

impl DeviceScoring {
    /// Any fragmentation score.
    pub fn is_fragmentation(self) -> bool {
        matches!(
            self,
            DeviceScoring::Fragmentation
                | DeviceScoring::FragmentationSigmoid
                | DeviceScoring::FragmentationFit
        )
    }

    /// The paper's integer score (not normalised), which also chooses a placed pod's devices
    /// among its allocations on the node.
    pub fn is_integer_fragmentation(self) -> bool {
        matches!(
            self,
            DeviceScoring::FragmentationSigmoid | DeviceScoring::FragmentationFit
        )
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            scheduler_name: "default-scheduler".into(),
            filters: REGISTRY
                .iter()
                .filter(|r| r.default_filter)
                .map(|r| r.name.to_string())
                .collect(),
            scores: REGISTRY
                .iter()
                .filter(|r| r.scored_by_default)
                .map(|r| (r.name.to_string(), r.weight))
                .collect(),
            scoring_strategy: ScoringStrategy::default(),
            balanced_resources: cpu_memory(),
            hard_pod_affinity_weight: 1,
            percentage_of_nodes_to_score: 0,
            gang_preemption: None,
            device_scoring: DeviceScoring::Strategy,
            gang_placement: GangPlacement::Search,
            gang_search_steps: DEFAULT_GANG_SEARCH_STEPS,
        }
    }
}

// ---- The file format -------------------------------------------------------------------

/// A `KubeSchedulerConfiguration` document. Fields lockstep does not use (leaderElection,
/// clientConnection, ...) are accepted and ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerConfiguration {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    pub profiles: Vec<ProfileSpec>,
    /// lockstep extension: victim selection for gangs (`off`, `minimal`, `atomic`).
    #[serde(default)]
    pub gang_preemption: Option<crate::preemption::GangPreemption>,
    /// lockstep extension: `Search` (default) or `PodByPod`.
    #[serde(default)]
    pub gang_placement: Option<GangPlacement>,
    /// lockstep extension: the bound on the placements one whole-gang search tries.
    #[serde(default)]
    pub gang_search_steps: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileSpec {
    #[serde(default)]
    pub scheduler_name: Option<String>,
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    pub plugins: Option<PluginsSpec>,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfigSpec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginsSpec {
    #[serde(default)]
    pub multi_point: PluginSet,
    #[serde(default)]
    pub filter: PluginSet,
    #[serde(default)]
    pub score: PluginSet,
    #[serde(default)]
    pub pre_filter: PluginSet,
    #[serde(default)]
    pub pre_score: PluginSet,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginRef {
    pub name: String,
    #[serde(default)]
    pub weight: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfigSpec {
    pub name: String,
    /// Read by the plugin's own args type (see [`Registration::configure`]).
    #[serde(default)]
    pub args: serde_json::Value,
}

/// The plugin named `name` (`None` for `*` and the plugins accepted and ignored), or an error
/// listing the known names.
fn check_name(name: &str, place: &str) -> Result<Option<&'static Registration>, ConfigError> {
    if name == "*" || IGNORED.contains(&name) {
        return Ok(None);
    }
    find(name)
        .map(Some)
        .ok_or_else(|| ConfigError::UnknownPlugin {
            name: name.into(),
            place: place.into(),
            known: REGISTRY
                .iter()
                .map(|r| r.name)
                .chain(IGNORED.iter().copied())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

fn apply_filters(list: &mut Vec<String>, set: &PluginSet, place: &str) -> Result<(), ConfigError> {
    for d in &set.disabled {
        check_name(&d.name, place)?;
        if d.name == "*" {
            list.clear();
        } else {
            list.retain(|n| *n != d.name);
        }
    }
    for e in &set.enabled {
        if let Some(plugin) = check_name(&e.name, place)? {
            if !plugin.filter {
                return Err(ConfigError::NoSuchExtensionPoint {
                    name: e.name.clone(),
                    place: place.into(),
                    point: "filter",
                });
            }
            if !list.contains(&e.name) {
                list.push(e.name.clone());
            }
        }
    }
    Ok(())
}

fn apply_scores(
    list: &mut Vec<(String, i64)>,
    set: &PluginSet,
    place: &str,
    multi_point: bool,
) -> Result<(), ConfigError> {
    for d in &set.disabled {
        check_name(&d.name, place)?;
        if d.name == "*" {
            list.clear();
        } else {
            list.retain(|(n, _)| *n != d.name);
        }
    }
    for e in &set.enabled {
        if let Some(plugin) = check_name(&e.name, place)? {
            if !plugin.score {
                if multi_point {
                    continue;
                }
                return Err(ConfigError::NoSuchExtensionPoint {
                    name: e.name.clone(),
                    place: place.into(),
                    point: "score",
                });
            }
            let default_weight = plugin.weight;
            let weight = match e.weight {
                Some(w) if w < 0 => {
                    return Err(ConfigError::Invalid {
                        field: format!("{place}.enabled[{}].weight", e.name),
                        problem: format!("weight {w} is negative; use a weight of 1 or more"),
                    });
                }
                Some(0) | None => default_weight,
                Some(w) => w,
            };
            match list.iter_mut().find(|(n, _)| *n == e.name) {
                Some(entry) => entry.1 = weight,
                None => list.push((e.name.clone(), weight)),
            }
        }
    }
    Ok(())
}

fn check_percentage(p: Option<u32>, field: &str) -> Result<Option<u32>, ConfigError> {
    match p {
        Some(v) if v > 100 => Err(ConfigError::Invalid {
            field: field.into(),
            problem: format!("{v} is not a percentage; use 0 (adaptive) to 100"),
        }),
        other => Ok(other),
    }
}

pub(crate) fn check_resources(list: &[ResourceWeight], field: &str) -> Result<(), ConfigError> {
    for (i, r) in list.iter().enumerate() {
        if !(1..=100).contains(&r.weight) {
            return Err(ConfigError::Invalid {
                field: format!("{field}[{i}].weight"),
                problem: format!("weight {} must be between 1 and 100", r.weight),
            });
        }
    }
    Ok(())
}

impl KubeSchedulerConfiguration {
    /// Resolves the configuration into the effective profile (the first profile; lockstep
    /// runs one profile).
    pub fn profile(&self) -> Result<Profile, ConfigError> {
        if let Some(kind) = &self.kind
            && kind != "KubeSchedulerConfiguration"
        {
            return Err(ConfigError::Invalid {
                field: "kind".into(),
                problem: format!("expected KubeSchedulerConfiguration, found {kind}"),
            });
        }
        if self.profiles.len() > 1 {
            return Err(ConfigError::Invalid {
                field: "profiles".into(),
                problem: format!(
                    "{} profiles given; lockstep runs one profile, so give exactly one",
                    self.profiles.len()
                ),
            });
        }
        let mut p = Profile {
            gang_preemption: self.gang_preemption,
            gang_placement: self.gang_placement.unwrap_or_default(),
            ..Profile::default()
        };
        if let Some(steps) = self.gang_search_steps {
            if !(1..=MAX_GANG_SEARCH_STEPS).contains(&steps) {
                return Err(ConfigError::Invalid {
                    field: "gangSearchSteps".into(),
                    problem: format!(
                        "{steps} is out of range; give a number of placements from 1 to {MAX_GANG_SEARCH_STEPS}"
                    ),
                });
            }
            p.gang_search_steps = steps;
        }
        if let Some(v) = check_percentage(
            self.percentage_of_nodes_to_score,
            "percentageOfNodesToScore",
        )? {
            p.percentage_of_nodes_to_score = v;
        }
        let Some(spec) = self.profiles.first() else {
            return Ok(p);
        };
        if let Some(name) = &spec.scheduler_name {
            p.scheduler_name = name.clone();
        }
        if let Some(v) = check_percentage(
            spec.percentage_of_nodes_to_score,
            "profiles[0].percentageOfNodesToScore",
        )? {
            p.percentage_of_nodes_to_score = v;
        }
        if let Some(plugins) = &spec.plugins {
            apply_plugins(&mut p, plugins)?;
        }
        apply_plugin_config(&mut p, &spec.plugin_config)?;
        Ok(p)
    }
}

/// The profile's `plugins`: extension points enabled and disabled, multiPoint first.
fn apply_plugins(p: &mut Profile, plugins: &PluginsSpec) -> Result<(), ConfigError> {
    apply_filters(
        &mut p.filters,
        &plugins.multi_point,
        "profiles[0].plugins.multiPoint",
    )?;
    apply_scores(
        &mut p.scores,
        &plugins.multi_point,
        "profiles[0].plugins.multiPoint",
        true,
    )?;
    apply_filters(
        &mut p.filters,
        &plugins.filter,
        "profiles[0].plugins.filter",
    )?;
    apply_scores(
        &mut p.scores,
        &plugins.score,
        "profiles[0].plugins.score",
        false,
    )?;
    for (set, place) in [
        (&plugins.pre_filter, "profiles[0].plugins.preFilter"),
        (&plugins.pre_score, "profiles[0].plugins.preScore"),
    ] {
        for r in set.enabled.iter().chain(&set.disabled) {
            check_name(&r.name, place)?;
        }
    }
    Ok(())
}

/// The profile's `pluginConfig`: each plugin reads its own args; a plugin configured twice
/// is an error.
fn apply_plugin_config(p: &mut Profile, list: &[PluginConfigSpec]) -> Result<(), ConfigError> {
    for (i, pc) in list.iter().enumerate() {
        let field = format!("profiles[0].pluginConfig[{i}]");
        let plugin = check_name(&pc.name, &field)?;
        if let Some(first) = list[..i].iter().position(|q| q.name == pc.name) {
            return Err(ConfigError::Invalid {
                field: format!("{field}.name"),
                problem: format!(
                    "{:?} is configured twice (also in profiles[0].pluginConfig[{first}]); \
                     merge the two entries into one",
                    pc.name
                ),
            });
        }
        if let Some(plugin) = plugin {
            (plugin.configure)(&pc.args, &format!("{field}.args"), p)?;
        }
    }
    Ok(())
}
