//! Pods as the scheduler sees them: effective requests, constraints, identity.

use crate::labels::{LabelSelector, Labels, NodeSelectorTerm};
use crate::node::Toleration;
use crate::resources::ResourceList;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodId(pub u32);

impl PodId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreemptionPolicy {
    #[default]
    PreemptLowerPriority,
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    /// "TCP", "UDP" or "SCTP".
    pub protocol: String,
    /// Empty means all addresses (0.0.0.0).
    pub host_ip: String,
    pub port: i32,
}

impl HostPort {
    /// Two host ports conflict when protocol and port are equal and either address is the
    /// wildcard or both are equal (`HostPortInfo.CheckConflict`).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        fn wild(ip: &str) -> bool {
            ip.is_empty() || ip == "0.0.0.0" || ip == "::"
        }
        self.port == other.port
            && self.protocol == other.protocol
            && (wild(&self.host_ip) || wild(&other.host_ip) || self.host_ip == other.host_ip)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution`: terms ORed. `None`: no requirement.
    pub required: Option<Vec<NodeSelectorTerm>>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`: (weight, term).
    pub preferred: Vec<(i32, NodeSelectorTerm)>,
}

/// A `v1.PodAffinityTerm` with `matchLabelKeys`/`mismatchLabelKeys` already merged into the
/// selector, as the API server does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// `None` matches no pod, as a nil selector does in Kubernetes.
    pub selector: Option<LabelSelector>,
    pub namespaces: Vec<String>,
    /// `Some(empty)` selects every namespace.
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinity {
    pub required: Vec<PodAffinityTerm>,
    pub preferred: Vec<(i32, PodAffinityTerm)>,
}

impl PodAffinity {
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// `matchLabelKeys` already merged in. `None` matches no pod.
    pub selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    /// Default `Honor`.
    pub node_affinity_policy: InclusionPolicy,
    /// Default `Ignore`.
    pub node_taints_policy: InclusionPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    pub priority: i32,
    pub priority_class_name: Option<String>,
    pub preemption_policy: PreemptionPolicy,
    /// Seconds since the Unix epoch; `None` when the manifest has no creationTimestamp.
    pub creation_timestamp: Option<i64>,
    /// `status.startTime`, seconds since the Unix epoch: when the kubelet started the pod.
    /// `None` for a pod not started yet, which kube-scheduler takes as starting now (later
    /// than any pod that has a start time). Preemption breaks ties with it.
    pub start_time: Option<i64>,
    /// `spec.nodeName`: the node the pod runs on (or is bound to).
    pub node_name: Option<String>,
    /// `status.nominatedNodeName` of a pending pod: the node an earlier preemption made room
    /// on. The pod's cycle tries that node first and takes it when it passes every filter.
    pub nominated_node_name: Option<String>,
    pub scheduler_name: String,
    pub phase: PodPhase,
    /// Effective requests: max(sum of app and sidecar containers, each init container plus
    /// the sidecars started before it) plus overhead, as `resourcehelper.PodRequests` computes.
    pub requests: ResourceList,
    /// CPU (milli) and memory (bytes) requests where containers without a request count as
    /// 100m and 200Mi, for scoring (`NonZeroRequested`).
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    pub node_selector: Vec<(String, String)>,
    pub node_affinity: NodeAffinity,
    pub pod_affinity: PodAffinity,
    pub pod_anti_affinity: PodAffinity,
    pub tolerations: Vec<Toleration>,
    pub host_ports: Vec<HostPort>,
    pub topology_spread: Vec<TopologySpreadConstraint>,
    /// `spec.schedulingGroup.podGroupName`.
    pub pod_group: Option<String>,
    /// `spec.resourceClaims`: the DRA claims the pod uses.
    pub resource_claims: Vec<PodResourceClaim>,
    /// Set when the pod is being deleted; it still holds its resources.
    pub terminating: bool,
}

impl Pod {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
    /// Whether the pod holds resources on a node.
    pub fn is_bound(&self) -> bool {
        self.node_name.is_some() && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }
    /// Whether the pod is waiting for a node.
    pub fn is_pending(&self) -> bool {
        self.node_name.is_none() && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// One entry of a pod's `spec.resourceClaims`: exactly one of the two sources is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodResourceClaim {
    /// The name the pod's containers use.
    pub name: String,
    /// An existing ResourceClaim in the pod's namespace.
    pub resource_claim_name: Option<String>,
    /// A ResourceClaimTemplate in the pod's namespace: the pod gets a claim of its own.
    pub resource_claim_template_name: Option<String>,
    /// For a claim from a template: the ResourceClaim the claim controller made for this pod
    /// (`status.resourceClaimStatuses`), when the pod's status names one.
    pub generated_claim: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PriorityClass {
    pub name: String,
    pub value: i32,
    pub global_default: bool,
    pub preemption_policy: PreemptionPolicy,
}

/// `policy/v1` PodDisruptionBudget.
#[derive(Debug, Clone)]
pub struct PodDisruptionBudget {
    pub namespace: String,
    pub name: String,
    /// `None` matches no pod.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed` when present; otherwise computed from min/max.
    pub disruptions_allowed: Option<i32>,
    pub min_available: Option<IntOrPercent>,
    pub max_unavailable: Option<IntOrPercent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i32),
    Percent(i32),
}
