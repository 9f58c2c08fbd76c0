//! `lockstep-model`: the cluster as the lockstep engine sees it.
//!
//! Owns the plain data types (nodes, pods, resources as integer amounts, taints, selectors,
//! priority classes, disruption budgets) and exact Kubernetes quantity parsing. It performs no
//! I/O and knows nothing of YAML or of the Kubernetes API types: `lockstep-manifests` converts
//! into it, `lockstep-engine` reads from it.

pub mod builders;
pub mod cluster;
pub mod dra;
pub mod labels;
pub mod node;
pub mod pod;
pub mod quantity;
pub mod resources;
pub mod workload;

pub use cluster::Cluster;
pub use labels::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm, Operator, Requirement};
pub use node::{Node, NodeId, Taint, TaintEffect, Toleration, TolerationOperator};
pub use pod::{
    HostPort, InclusionPolicy, IntOrPercent, NodeAffinity, Pod, PodAffinity, PodAffinityTerm,
    PodDisruptionBudget, PodId, PodPhase, PodResourceClaim, PreemptionPolicy, PriorityClass,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
pub use quantity::{Quantity, QuantityError};
pub use resources::{ResourceId, ResourceList, ResourceNames};
pub use workload::{
    CompositePodGroup, DisruptionMode, GroupPolicy, PodGroup, PodGroupClaim, Workload,
};
