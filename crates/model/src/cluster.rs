//! The whole cluster state that one scheduling run starts from.

use std::collections::BTreeMap;

use crate::labels::Labels;
use crate::node::Node;
use crate::pod::{Pod, PodDisruptionBudget, PriorityClass};
use crate::resources::ResourceNames;
use crate::workload::{CompositePodGroup, PodGroup, Workload};

/// An object of a kind the model routes but the engine does not act on yet (the DRA kinds);
/// kept so that front ends can report it.
#[derive(Debug, Clone)]
pub struct OtherObject {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The full object, as parsed, for the crates that will own the kind.
    pub raw: String,
}

/// The cluster as loaded: nodes sorted by name, pods in input order.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub resources: ResourceNames,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub priority_classes: Vec<PriorityClass>,
    pub pod_disruption_budgets: Vec<PodDisruptionBudget>,
    /// Namespace labels, from Namespace objects (for namespace selectors).
    pub namespaces: BTreeMap<String, Labels>,
    pub pod_groups: Vec<PodGroup>,
    pub composite_pod_groups: Vec<CompositePodGroup>,
    pub workloads: Vec<Workload>,
    pub other_objects: Vec<OtherObject>,
}
