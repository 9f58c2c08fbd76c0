//! `lockstep-live`: lockstep as the live scheduler of a real cluster (`lockstep run`).
//!
//! Owns the translation between a Kubernetes API server and the engine: watch caches of
//! every kind the engine reads ([`cache`]), the engine's cluster state kept equal to them by
//! applying each watched change in place with the same manifest conversion as `lockstep
//! schedule` ([`mirror`], [`cycle`]), the scheduling loop over the engine's queue (`run`),
//! and the writes that carry a decision out ([`act`], [`events`]): DRA allocations into
//! ResourceClaim status,
//! bindings through the `pods/binding` subresource, preemption (the `DisruptionTarget`
//! condition, deletion, the preemptor's `nominatedNodeName`), `PodScheduled=False` for pods
//! that fit nowhere, PodGroup conditions and Events. The engine's queue and its backoff
//! keep a pod that did not fit from being retried in a hot loop; [`metrics`] serves Prometheus metrics and health.
//!
//! It must not decide anything itself: every placement, victim and message comes from the
//! engine. A decision is assumed at once (the next pass sees the pod on its node) and
//! forgotten if the API server refuses it. One object the engine cannot read keeps only
//! the pods that depend on it from being scheduled.

pub mod act;
pub mod cache;
pub mod cycle;
pub mod events;
pub mod leader;
pub mod metrics;
pub mod mirror;
mod runner;

pub use leader::LeaderElection;
pub use runner::{Config, Error, connect, run};
