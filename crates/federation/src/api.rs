//! Karmada's objects as its API serves them, field names and all: `cluster.karmada.io/v1alpha1`
//! Cluster and `work.karmada.io/v1alpha2` ResourceBinding / ClusterResourceBinding (with the
//! `policy.karmada.io/v1alpha1` Placement they carry). There is no Rust crate for Karmada's
//! API, so these are our own serde types; Kubernetes types inside them (metadata, taints,
//! tolerations, selectors, conditions) are k8s-openapi's. Fields Karmada defines but the
//! scheduler never reads are kept as opaque JSON so they are accepted, not reported as
//! unknown. Two lockstep additions are marked: `spec.schedulePriority.preemptionPolicy` (the
//! binding preemption proposal) and `resourceClaimRefs` in `spec.replicaRequirements` and in
//! each component's `replicaRequirements` (the DRA proposal, read as a pod's
//! `spec.resourceClaims` entries).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, PodResourceClaim, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
use serde::Deserialize;
use serde_json::Value as Json;

pub const CLUSTER_API_VERSION: &str = "cluster.karmada.io/v1alpha1";
pub const WORK_API_VERSION: &str = "work.karmada.io/v1alpha2";

/// A resource name to quantity map (`corev1.ResourceList`).
pub type ResourceList = BTreeMap<String, Quantity>;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClusterSpec,
    #[serde(default)]
    pub status: ClusterStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub sync_mode: String,
    #[serde(default)]
    pub api_endpoint: String,
    pub secret_ref: Option<Json>,
    pub impersonator_secret_ref: Option<Json>,
    #[serde(default)]
    pub insecure_skip_tls_verification: bool,
    #[serde(default, rename = "proxyURL")]
    pub proxy_url: String,
    #[serde(default)]
    pub proxy_header: BTreeMap<String, String>,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub zone: String,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub resource_models: Vec<ResourceModel>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceModel {
    pub grade: i64,
    #[serde(default)]
    pub ranges: Vec<ResourceModelRange>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceModelRange {
    pub name: String,
    pub min: Quantity,
    pub max: Quantity,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    #[serde(default)]
    pub kubernetes_version: String,
    #[serde(default)]
    pub api_enablements: Vec<ApiEnablement>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    pub node_summary: Option<Json>,
    pub resource_summary: Option<ResourceSummary>,
    #[serde(default)]
    pub remedy_actions: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiEnablement {
    pub group_version: String,
    #[serde(default)]
    pub resources: Vec<ApiResource>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResource {
    pub name: String,
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSummary {
    #[serde(default)]
    pub allocatable: ResourceList,
    #[serde(default)]
    pub allocating: ResourceList,
    #[serde(default)]
    pub allocated: ResourceList,
    #[serde(default)]
    pub allocatable_modelings: Vec<AllocatableModeling>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatableModeling {
    pub grade: i64,
    pub count: i64,
}

/// A ResourceBinding (namespaced) or ClusterResourceBinding: the same shape.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: BindingSpec,
    #[serde(default)]
    pub status: BindingStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingSpec {
    #[serde(default)]
    pub resource: ObjectReference,
    #[serde(default)]
    pub propagate_deps: bool,
    pub replica_requirements: Option<ReplicaRequirements>,
    #[serde(default)]
    pub replicas: i64,
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub clusters: Vec<TargetCluster>,
    pub placement: Option<Placement>,
    #[serde(default)]
    pub graceful_eviction_tasks: Vec<GracefulEvictionTask>,
    #[serde(default)]
    pub required_by: Vec<Json>,
    #[serde(default)]
    pub scheduler_name: String,
    pub failover: Option<Json>,
    #[serde(default)]
    pub conflict_resolution: String,
    pub reschedule_triggered_at: Option<Time>,
    pub suspension: Option<Suspension>,
    pub preserve_resources_on_deletion: Option<bool>,
    pub schedule_priority: Option<SchedulePriority>,
    pub workload_affinity_groups: Option<Json>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub resource_version: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRequirements {
    pub node_claim: Option<NodeClaim>,
    #[serde(default)]
    pub resource_request: ResourceList,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub priority_class_name: String,
    /// lockstep's reading of the DRA proposal: the claims each replica's pod names, as
    /// `spec.resourceClaims` entries (`name` and `resourceClaimName` or
    /// `resourceClaimTemplateName`). Only `--member` clusters can count them.
    #[serde(default)]
    pub resource_claim_refs: Vec<PodResourceClaim>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaim {
    pub hard_node_affinity: Option<NodeSelector>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    pub name: String,
    #[serde(default)]
    pub replicas: i64,
    pub replica_requirements: Option<ComponentReplicaRequirements>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentReplicaRequirements {
    pub node_claim: Option<NodeClaim>,
    #[serde(default)]
    pub resource_request: ResourceList,
    #[serde(default)]
    pub priority_class_name: String,
    /// As [`ReplicaRequirements::resource_claim_refs`], for each replica of the component.
    #[serde(default)]
    pub resource_claim_refs: Vec<PodResourceClaim>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCluster {
    pub name: String,
    #[serde(default)]
    pub replicas: i64,
    #[serde(default)]
    pub components: Vec<Json>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GracefulEvictionTask {
    pub from_cluster: String,
    #[serde(default)]
    pub purge_mode: String,
    pub replicas: Option<i64>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub producer: String,
    pub grace_period_seconds: Option<i64>,
    pub suppress_deletion: Option<bool>,
    #[serde(default)]
    pub preserved_label_state: BTreeMap<String, String>,
    pub creation_timestamp: Option<Time>,
    #[serde(default)]
    pub clusters_before_failover: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    pub dispatching: Option<bool>,
    pub dispatching_on_clusters: Option<SuspendClusters>,
    pub scheduling: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuspendClusters {
    #[serde(default)]
    pub cluster_names: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulePriority {
    #[serde(default)]
    pub priority: i64,
    /// The binding preemption proposal: `PreemptLowerPriority` lets the binding preempt
    /// lower-priority bindings; `Never` (the default) does not.
    pub preemption_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub cluster_affinity: Option<ClusterAffinity>,
    #[serde(default)]
    pub cluster_affinities: Vec<ClusterAffinityTerm>,
    #[serde(default)]
    pub cluster_tolerations: Vec<Toleration>,
    #[serde(default)]
    pub spread_constraints: Vec<SpreadConstraint>,
    pub replica_scheduling: Option<ReplicaSchedulingStrategy>,
    pub workload_affinity: Option<Json>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinity {
    pub label_selector: Option<LabelSelector>,
    pub field_selector: Option<FieldSelector>,
    #[serde(default)]
    pub cluster_names: Vec<String>,
    #[serde(default, rename = "exclude")]
    pub exclude_clusters: Vec<String>,
}

/// A ClusterAffinity with a name (Karmada inlines the affinity's fields).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinityTerm {
    pub affinity_name: String,
    pub label_selector: Option<LabelSelector>,
    pub field_selector: Option<FieldSelector>,
    #[serde(default)]
    pub cluster_names: Vec<String>,
    #[serde(default, rename = "exclude")]
    pub exclude_clusters: Vec<String>,
    pub overflow_affinities: Option<Vec<Json>>,
}

impl ClusterAffinityTerm {
    pub fn affinity(&self) -> ClusterAffinity {
        ClusterAffinity {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            cluster_names: self.cluster_names.clone(),
            exclude_clusters: self.exclude_clusters.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FieldSelector {
    #[serde(default)]
    pub match_expressions: Vec<NodeSelectorRequirement>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraint {
    #[serde(default)]
    pub spread_by_field: String,
    #[serde(default)]
    pub spread_by_label: String,
    #[serde(default)]
    pub max_groups: i64,
    #[serde(default)]
    pub min_groups: i64,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSchedulingStrategy {
    #[serde(default)]
    pub replica_scheduling_type: String,
    #[serde(default)]
    pub replica_division_preference: String,
    pub weight_preference: Option<ClusterPreferences>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreferences {
    #[serde(default)]
    pub static_weight_list: Vec<StaticClusterWeight>,
    #[serde(default)]
    pub dynamic_weight: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StaticClusterWeight {
    pub target_cluster: ClusterAffinity,
    pub weight: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingStatus {
    #[serde(default)]
    pub scheduler_observed_generation: i64,
    #[serde(default, rename = "schedulerObservingAffinityName")]
    pub scheduler_observed_affinity_name: String,
    pub last_scheduled_time: Option<Time>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub aggregated_status: Vec<Json>,
}
