//! Workload API shapes that k8s-openapi does not provide, or that lockstep reads more leniently
//! than the generated types do.
//!
//! - [`CompositePodGroup`]: k8s-openapi has no v1beta1 type for it (only v1alpha3, whose
//!   `workloadRef` is required). Both versions are read through this one struct, whose spec
//!   mirrors the PodGroup spec and reuses k8s-openapi's v1beta1 field types.
//! - [`GroupStatus`]: only `type` and `status` of each condition matter to the scheduler, so a
//!   hand-written status without `lastTransitionTime`, `reason` or `message` is accepted.
//!
//! Like the k8s-openapi types, these structs ignore fields they do not know; `crate::unknown`
//! reports them, except in a PodGroup's status, which is read leniently on purpose.

use k8s_openapi::api::scheduling::v1beta1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// `scheduling.k8s.io/{v1beta1,v1alpha3}` CompositePodGroup (KEP-6012), without its status.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompositePodGroup {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CompositePodGroupSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompositePodGroupSpec {
    #[serde(default)]
    pub scheduling_policy: api::CompositePodGroupSchedulingPolicy,
    pub scheduling_constraints: Option<api::CompositePodGroupSchedulingConstraints>,
    pub disruption_mode: Option<api::CompositeDisruptionMode>,
    pub parent_composite_pod_group_name: Option<String>,
    pub priority_class_name: Option<String>,
    pub priority: Option<i32>,
    pub preemption_policy: Option<String>,
    /// The Workload this group belongs to: an API field the scheduler does not need; read so
    /// that it is not reported as unknown.
    #[allow(dead_code)]
    pub workload_ref: Option<api::WorkloadReference>,
}

/// The `status` of a PodGroup, reduced to what the scheduler reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename = "PodGroupStatus")]
pub(crate) struct GroupStatus {
    pub conditions: Option<Vec<ConditionSummary>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename = "Condition")]
pub(crate) struct ConditionSummary {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

impl GroupStatus {
    /// Whether the condition `type_` is present with status `"True"`.
    pub(crate) fn is_true(&self, type_: &str) -> bool {
        self.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == type_ && c.status == "True")
    }
}
