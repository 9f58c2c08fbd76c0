//! The Kubernetes Workload API as the engine sees it (`scheduling.k8s.io` v1beta1, read the
//! same way from v1alpha3): PodGroups, CompositePodGroups and Workloads.

use crate::pod::PreemptionPolicy;

/// How the pods (or child groups) of a group are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Each member is placed on its own merits, within the group's constraints.
    Basic,
    /// All or nothing: at least `min` members (pods, or child groups) must fit together.
    Gang { min: u32 },
}

impl GroupPolicy {
    /// The members that must fit together: `min` for a gang, one otherwise.
    pub fn min_members(self) -> usize {
        match self {
            GroupPolicy::Gang { min } => min as usize,
            GroupPolicy::Basic => 1,
        }
    }
}

/// How a running group may be disrupted by preemption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DisruptionMode {
    /// Members may be evicted individually (subject to the gang preemption mode).
    #[default]
    Single,
    /// All members go together.
    All,
}

/// A claim shared by the pods of a PodGroup (kept for Dynamic Resource Allocation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupClaim {
    pub name: String,
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PodGroup {
    pub namespace: String,
    pub name: String,
    pub policy: GroupPolicy,
    /// The node label key whose one value must hold every pod of the group.
    pub topology_key: Option<String>,
    /// Resolved from `priority`, then `priorityClassName`; `None` when neither is set (the
    /// engine then uses the highest priority among the member pods).
    pub priority: Option<i32>,
    pub preemption_policy: PreemptionPolicy,
    pub disruption_mode: DisruptionMode,
    /// `parentCompositePodGroupName`, in the same namespace.
    pub parent: Option<String>,
    pub resource_claims: Vec<PodGroupClaim>,
    /// Seconds since the Unix epoch.
    pub creation_timestamp: Option<i64>,
    /// `PodGroupInitiallyScheduled` was already true in the manifest's status.
    pub initially_scheduled: bool,
}

#[derive(Debug, Clone)]
pub struct CompositePodGroup {
    pub namespace: String,
    pub name: String,
    /// `Gang { min }` is `minGroupCount` child groups.
    pub policy: GroupPolicy,
    pub topology_key: Option<String>,
    pub priority: Option<i32>,
    pub preemption_policy: PreemptionPolicy,
    pub disruption_mode: DisruptionMode,
    pub parent: Option<String>,
    pub creation_timestamp: Option<i64>,
}

/// A Workload: templates the PodGroups and CompositePodGroups a controller creates. The
/// engine schedules PodGroups, not templates; Workloads are validated and reported.
#[derive(Debug, Clone)]
pub struct Workload {
    pub namespace: String,
    pub name: String,
    pub pod_group_templates: Vec<String>,
    pub composite_pod_group_templates: Vec<String>,
}
