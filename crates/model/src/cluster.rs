//! The whole cluster state that one scheduling run starts from.

use std::collections::BTreeMap;

use crate::dra::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use crate::labels::Labels;
use crate::node::Node;
use crate::pod::{Pod, PodDisruptionBudget, PriorityClass};
use crate::resources::ResourceNames;
use crate::workload::{CompositePodGroup, PodGroup, Workload};

/// The cluster as loaded: nodes sorted by name, pods and every other kind in input order.
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
    /// `resource.k8s.io/v1` DeviceClasses (cluster-scoped).
    pub device_classes: Vec<DeviceClass>,
    /// `resource.k8s.io/v1` ResourceSlices (cluster-scoped).
    pub resource_slices: Vec<ResourceSlice>,
    /// `resource.k8s.io/v1` ResourceClaims, with `status.allocation` for claims already
    /// allocated.
    pub resource_claims: Vec<ResourceClaim>,
    /// `resource.k8s.io/v1` ResourceClaimTemplates.
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
}
