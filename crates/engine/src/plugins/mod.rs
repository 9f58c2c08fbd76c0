//! The plugins, one file each, named as in kube-scheduler, and their registry.
//!
//! Everything about a plugin lives in its file: its [`Registration`] (name, extension
//! points, default weight, how it is built and how its `pluginConfig` args are read), its
//! per-cycle state type (kept in [`CycleState`](crate::framework::CycleState) by type) and its
//! rejection reasons ([`Rejections`](crate::framework::Rejections)). Adding a plugin is one
//! new file and one line in [`REGISTRY`].

pub mod balanced_allocation;
pub mod dynamic_resources;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod taint_toleration;

use lockstep_model::ResourceNames;
use serde::de::DeserializeOwned;

use crate::config::{ConfigError, Profile};
use crate::framework::Plugin;

/// What the framework and the configuration know of a plugin.
pub struct Registration {
    /// The kube-scheduler plugin name, as configuration files give it.
    pub name: &'static str,
    /// Whether the plugin has a Filter extension point.
    pub filter: bool,
    /// Whether the plugin has a Score extension point.
    pub score: bool,
    /// Whether the default profile runs its Filter.
    pub default_filter: bool,
    /// Its weight when scoring: in the default profile (`scored_by_default`) or when a
    /// configuration enables its score without a weight.
    pub weight: i64,
    /// Whether the default profile runs its Score.
    pub scored_by_default: bool,
    /// Creates the plugin for a profile.
    pub build: fn(&Profile, &ResourceNames) -> Box<dyn Plugin>,
    /// Reads the plugin's `pluginConfig` args into the profile; the `&str` is their place in
    /// the file for messages.
    pub configure: fn(&serde_json::Value, &str, &mut Profile) -> Result<(), ConfigError>,
}

/// The plugins lockstep runs. The order is the default profile's Filter order, which
/// decides the reason a node rejected by several filters reports (as in kube-scheduler).
pub static REGISTRY: &[&Registration] = &[
    &node_name::PLUGIN,
    &node_unschedulable::PLUGIN,
    &taint_toleration::PLUGIN,
    &node_affinity::PLUGIN,
    &node_ports::PLUGIN,
    &node_resources_fit::PLUGIN,
    &pod_topology_spread::PLUGIN,
    &inter_pod_affinity::PLUGIN,
    &dynamic_resources::PLUGIN,
    &balanced_allocation::PLUGIN,
];

/// Plugins of kube-scheduler's default profile that have no effect on the objects lockstep
/// reads (volumes, images, binding); accepted in configuration and ignored.
pub const IGNORED: &[&str] = &[
    "PrioritySort",
    "DefaultBinder",
    "DefaultPreemption",
    "ImageLocality",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "SchedulingGates",
];

/// The registered plugin named `name`.
pub fn find(name: &str) -> Option<&'static Registration> {
    REGISTRY.iter().copied().find(|r| r.name == name)
}

/// Creates the plugin named `name` for the profile (names were validated with the profile).
pub fn build(name: &str, profile: &Profile, names: &ResourceNames) -> Option<Box<dyn Plugin>> {
    find(name).map(|r| (r.build)(profile, names))
}

/// For plugins without args.
pub(crate) fn no_args(_: &serde_json::Value, _: &str, _: &mut Profile) -> Result<(), ConfigError> {
    Ok(())
}

/// A plugin's args read as its own type; an error names the field it is in, below `field`.
pub(crate) fn args<T: DeserializeOwned>(
    value: &serde_json::Value,
    field: &str,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::Invalid {
            field: if path == "." {
                field.to_string()
            } else {
                format!("{field}.{path}")
            },
            problem: e.into_inner().to_string(),
        }
    })
}

/// The DynamicResources score's mode: the profile's where the score is enabled (it also turns
/// batching off), else `Strategy`. It also says how placed pods choose their devices.
pub(crate) fn device_choice(profile: &crate::config::Profile) -> crate::config::DeviceScoring {
    if profile
        .scores
        .iter()
        .any(|(n, _)| n == dynamic_resources::PLUGIN.name)
    {
        profile.device_scoring
    } else {
        crate::config::DeviceScoring::Strategy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugin_is_registered_once_under_the_name_it_reports() {
        let profile = Profile::default();
        let names = ResourceNames::default();
        for (i, r) in REGISTRY.iter().enumerate() {
            assert!(
                REGISTRY[..i].iter().all(|q| q.name != r.name),
                "{} registered twice",
                r.name
            );
            let plugin = (r.build)(&profile, &names);
            assert_eq!(plugin.name(), r.name);
            assert!(r.filter || r.score, "{} has no extension point", r.name);
            assert!(!r.default_filter || r.filter, "{}", r.name);
            assert!(!r.scored_by_default || r.score, "{}", r.name);
            assert!(!IGNORED.contains(&r.name));
        }
    }
}
