//! lockstep checked decision by decision against the real kube-scheduler v1.37.
//!
//! A case (a manifest set: a fixture, or a random small cluster from
//! [`generate`]) is loaded into a real kube-apiserver whose real kube-scheduler
//! runs the default profile ([`lockstep_testenv`]); its pending pods are created
//! one scheduling unit at a time in PrioritySort order; before each unit lockstep
//! schedules the same unit on the same state, and [`compare`] records, pod by pod,
//! whether both chose the same node (or nodes lockstep scores equal, which
//! kube-scheduler breaks at random), the same victims, and the same message.
//!
//! For tests and the fidelity report only: no product crate depends on it.

pub mod compare;
pub mod fixtures;
pub mod generate;
pub mod known;
pub mod summary;
