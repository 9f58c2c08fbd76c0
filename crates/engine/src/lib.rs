//! `lockstep-engine`: the scheduling engine.
//!
//! Owns the plugin framework (extension points, per-cycle state, configuration in the shape
//! of a KubeSchedulerConfiguration profile), the plugins under `plugins/` (one file each,
//! named as in kube-scheduler), the snapshot the cycle runs against (with device allocations
//! through `lockstep-dra`), the pod cycle with opportunistic batching, gang scheduling over
//! the PodGroup tree, preemption, replica estimation and the `Scheduler` facade. It is pure
//! and deterministic: no I/O, no clocks, no randomness, and it never sees Kubernetes API
//! types (front ends convert through `lockstep-model`).

pub mod backoff;
pub mod config;
pub mod cycle;
pub mod estimate;
pub mod framework;
pub mod gang_search;
pub mod group;
mod group_cycle;
mod helper;
pub mod plugins;
pub mod preemption;
pub mod queue;
pub mod scheduler;
pub mod state;
pub mod topology;

pub use config::{GangPlacement, KubeSchedulerConfiguration, Profile};
pub use cycle::{FitError, Framework};
pub use estimate::{Estimate, estimate, estimate_on};
pub use gang_search::GangSearchCounts;
pub use preemption::{Eviction, GangPreemption};
pub use queue::{ChangeLog, Queue};
pub use scheduler::{
    AllocatedDevice, ClaimDevices, Decisions, GroupStatus, Options, Scheduler, SetupError, schedule,
};
pub use state::{
    Applied, Change, ChangeError, ClusterState, Key, Kind, Object, PodHandle, cluster_of,
    objects_of,
};
