//! The federation as the scheduler sees it: Karmada's objects validated, defaulted as
//! Karmada's webhooks default them, quantities parsed, and bindings ordered.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::api;

/// A resource amount in thousandths of its unit (`MilliValue()`), wide enough for any sum.
pub type Milli = i128;

/// Requests or free room per resource name, in milli-units.
pub type Amounts = BTreeMap<String, Milli>;

#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub provider: String,
    pub region: String,
    pub zones: Vec<String>,
    pub taints: Vec<Taint>,
    /// `Ready` condition True. A cluster that is not ready gets nothing new.
    pub ready: bool,
    /// (groupVersion, kind) pairs of `status.apiEnablements`.
    pub apis: BTreeSet<(String, String)>,
    /// `CompleteAPIEnablements` condition True: an API missing from the list is disabled
    /// rather than unknown.
    pub apis_complete: bool,
    pub summary: Option<Summary>,
    /// `spec.resourceModels`: grade -> minimum of each range, in milli-units.
    pub models: BTreeMap<i64, Amounts>,
}

#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub allocatable: Amounts,
    pub allocated: Amounts,
    pub allocating: Amounts,
    /// `allocatableModelings`: grade -> node count.
    pub modelings: BTreeMap<i64, i64>,
    /// allocatable − allocated − allocating, for each allocatable resource.
    pub free: Amounts,
    /// The pods allowed (allocatable − allocated − allocating pods, in whole pods).
    pub pods_free: Milli,
}

impl Summary {
    pub fn new(
        allocatable: Amounts,
        allocated: Amounts,
        allocating: Amounts,
        modelings: BTreeMap<i64, i64>,
    ) -> Summary {
        let get = |m: &Amounts, k: &str| m.get(k).copied().unwrap_or(0);
        let free = allocatable
            .iter()
            .map(|(k, v)| (k.clone(), v - get(&allocated, k) - get(&allocating, k)))
            .collect();
        let pods = get(&allocatable, "pods") - get(&allocated, "pods") - get(&allocating, "pods");
        Summary {
            allocatable,
            allocated,
            allocating,
            modelings,
            free,
            pods_free: crate::estimate::units_ceil(pods),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Duplicated,
    Aggregated,
    StaticWeight,
    DynamicWeight,
}

impl Strategy {
    pub fn is_divided(self) -> bool {
        self != Strategy::Duplicated
    }
}

/// One replica's needs (or one component set's, for multi-component bindings).
#[derive(Debug, Clone, Default)]
pub struct Requirements {
    pub requests: Amounts,
    pub node_claim: Option<api::NodeClaim>,
    pub claims: Vec<k8s_openapi::api::core::v1::PodResourceClaim>,
    pub priority_class_name: String,
}

/// One component of a multi-component binding.
#[derive(Debug, Clone, Default)]
pub struct Component {
    pub name: String,
    /// Replicas of the component in one set.
    pub replicas: i64,
    pub requirements: Requirements,
}

#[derive(Debug, Clone)]
pub struct Binding {
    /// `namespace/name` for a ResourceBinding, `name` for a ClusterResourceBinding.
    pub key: String,
    pub namespace: Option<String>,
    pub name: String,
    /// Where it was read, for messages.
    pub origin: String,
    /// `ResourceBinding` or `ClusterResourceBinding`.
    pub kind: String,
    /// `spec.resource`'s apiVersion and kind (for APIEnablement).
    pub resource_api_version: String,
    pub resource_kind: String,
    pub uid: String,
    pub replicas: i64,
    /// `None` when the binding has no replicaRequirements (nothing to count but pods).
    pub requirements: Option<Requirements>,
    /// Multi-component bindings: the components of one set.
    pub components: Vec<Component>,
    pub clusters: Vec<(String, i64)>,
    pub placement: api::Placement,
    pub strategy: Strategy,
    pub static_weights: Vec<api::StaticClusterWeight>,
    pub eviction_clusters: BTreeSet<String>,
    pub priority: i64,
    pub preempts: bool,
    pub creation: Option<i64>,
    pub fresh: bool,
    pub observed_affinity: String,
    /// Whether Karmada would schedule it in this run.
    pub needs_scheduling: bool,
    /// `suspension.scheduling: true`: not scheduled, and not preempted.
    pub suspended: bool,
    /// (groupVersion, kind) of `spec.resource`, as `Cluster::apis` holds them.
    pub gvk: (String, String),
    /// Pods and resources one replica (one component set) takes.
    pub unit_pods: i64,
    pub unit: Amounts,
    /// Karmada's permanent id of the binding (the `resourcebinding.karmada.io/permanent-id`
    /// or `clusterresourcebinding.karmada.io/permanent-id` label), which its pods on the
    /// members carry: how a member's estimator knows them.
    pub permanent_id: Option<String>,
}

/// The labels Karmada puts its bindings' permanent ids in (also on their pods).
pub const PERMANENT_ID_LABELS: [&str; 2] = [
    "resourcebinding.karmada.io/permanent-id",
    "clusterresourcebinding.karmada.io/permanent-id",
];

impl Binding {
    pub fn assigned(&self, cluster: &str) -> i64 {
        self.clusters
            .iter()
            .filter(|(n, _)| n == cluster)
            .map(|(_, r)| *r)
            .sum()
    }
    pub fn targets(&self, cluster: &str) -> bool {
        self.clusters.iter().any(|(n, _)| n == cluster)
    }
    /// Pods and resources one replica (one component set) takes.
    pub fn unit_demand(&self) -> (i64, &Amounts) {
        (self.unit_pods, &self.unit)
    }

    /// Computes [`Binding::unit_demand`] from the requirements and components.
    pub fn demand(requirements: Option<&Requirements>, components: &[Component]) -> (i64, Amounts) {
        if !components.is_empty() {
            let mut pods = 0;
            let mut total = Amounts::new();
            for c in components {
                pods += c.replicas;
                for (k, v) in &c.requirements.requests {
                    *total.entry(k.clone()).or_default() += v * Milli::from(c.replicas);
                }
            }
            return (pods, total);
        }
        (
            1,
            requirements.map(|r| r.requests.clone()).unwrap_or_default(),
        )
    }

    /// Whether this is a workload (replicas or components to place).
    pub fn is_workload(&self) -> bool {
        self.replicas > 0 || !self.components.is_empty()
    }
}

/// The whole input.
#[derive(Debug, Clone, Default)]
pub struct Federation {
    /// Sorted by name.
    pub clusters: Vec<Cluster>,
    /// In input order.
    pub bindings: Vec<Binding>,
}

impl Federation {
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.clusters[i])
    }
}

/// Whether the toleration tolerates the taint (`ToleratesTaint` of `k8s.io/api/core/v1`).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    if let Some(key) = t.key.as_deref()
        && !key.is_empty()
        && key != taint.key
    {
        return false;
    }
    match t.operator.as_deref() {
        Some("Exists") => true,
        _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    }
}
