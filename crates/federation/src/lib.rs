//! `lockstep-federation`: multi-cluster placement of Karmada ResourceBindings.
//!
//! Owns Karmada's objects (Cluster, ResourceBinding, ClusterResourceBinding; `api.rs`),
//! their validation and defaults (`load.rs`), Karmada's scheduling semantics (filters and
//! the ClusterLocality score in `filter.rs`, replica estimation from resource summaries and
//! resource models in `estimate.rs`, spread constraints in `spread.rs`, replica division in
//! `divide.rs`), exact estimation for member clusters whose manifests are known, through
//! lockstep's engine (`member.rs`), binding preemption (`preempt.rs`) and the run that ties
//! them together (`schedule.rs`). It is deterministic: clusters are kept in name order,
//! bindings in priority, creation and name order, and every tie has a stated rule.
//!
//! It must not print, exit or panic on bad input (errors are [`FederationError`] naming the
//! file, the object and the field), and it does not format output: the CLI does.

pub mod api;
pub mod divide;
pub mod error;
pub mod estimate;
pub mod filter;
pub mod load;
pub mod member;
pub mod model;
pub mod preempt;
pub mod schedule;
pub mod spread;

pub use error::FederationError;
pub use load::{Loaded, load, load_str};
pub use schedule::{
    Decisions, Members, Options, ReplicaEstimator, load_members, schedule, schedule_with,
};
