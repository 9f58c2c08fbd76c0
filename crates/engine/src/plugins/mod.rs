//! The plugins, one file each, named as in kube-scheduler.

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

use crate::config::Profile;
use crate::framework::Plugin;

/// Creates the plugin named `name` for the profile (names were validated with the profile).
pub fn build(name: &str, profile: &Profile, names: &ResourceNames) -> Option<Box<dyn Plugin>> {
    Some(match name {
        "NodeUnschedulable" => Box::new(node_unschedulable::NodeUnschedulable),
        "NodeName" => Box::new(node_name::NodeName),
        "TaintToleration" => Box::new(taint_toleration::TaintToleration),
        "NodeAffinity" => Box::new(node_affinity::NodeAffinity),
        "NodePorts" => Box::new(node_ports::NodePorts),
        "NodeResourcesFit" => Box::new(node_resources_fit::NodeResourcesFit::new(
            &profile.scoring_strategy,
            names,
        )),
        "NodeResourcesBalancedAllocation" => Box::new(
            balanced_allocation::BalancedAllocation::new(&profile.balanced_resources, names),
        ),
        "PodTopologySpread" => Box::new(pod_topology_spread::PodTopologySpread),
        "DynamicResources" => Box::new(dynamic_resources::DynamicResources {
            strategy: node_resources_fit::Strategy::new(&profile.scoring_strategy),
            // The mode matters only where the score is enabled (it also turns batching off).
            device_scoring: device_choice(profile),
        }),
        "InterPodAffinity" => Box::new(inter_pod_affinity::InterPodAffinity {
            hard_pod_affinity_weight: profile.hard_pod_affinity_weight,
        }),
        _ => return None,
    })
}

/// The DynamicResources score's mode: the profile's where the score is enabled (it also turns
/// batching off), else `Strategy`. It also says how placed pods choose their devices.
pub(crate) fn device_choice(profile: &crate::config::Profile) -> crate::config::DeviceScoring {
    if profile.scores.iter().any(|(n, _)| n == "DynamicResources") {
        profile.device_scoring
    } else {
        crate::config::DeviceScoring::Strategy
    }
}
