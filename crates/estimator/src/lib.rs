//! `lockstep-estimator`: Karmada's scheduler-estimator gRPC service, answered exactly with
//! lockstep's engine.
//!
//! Owns the wire protocol (our own .proto files under `proto/`, wire-compatible with
//! karmada-scheduler-estimator: same package, service, methods, messages and field numbers,
//! plus the binding preemption proposal's `SelectVictims` and the DRA proposal's claim
//! references), the decoding of Karmada's protobuf-encoded Kubernetes values (`request.rs`),
//! and exact counting of replicas on a member cluster with `lockstep-engine` (`member.rs`).
//!
//! It never panics on a request: a request it cannot answer gets InvalidArgument with a
//! message naming the field.

pub mod client;
pub mod live;
pub mod member;
pub mod metrics;
pub mod request;
pub mod server;
pub mod service;

/// The generated protobuf messages and the tonic service.
pub mod proto {
    /// Karmada's estimator messages (`github.com.karmada_io.karmada.pkg.estimator.pb`).
    pub mod pb {
        tonic::include_proto!("github.com.karmada_io.karmada.pkg.estimator.pb");
    }
    /// Karmada's `Estimator` service (`github.com.karmada_io.karmada.pkg.estimator.service`).
    pub mod service {
        tonic::include_proto!("github.com.karmada_io.karmada.pkg.estimator.service");
    }
    /// The Kubernetes core/v1 messages carried as bytes.
    pub mod k8s {
        tonic::include_proto!("k8s.io.api.core.v1");
    }
    /// Kubernetes' `resource.Quantity`.
    pub mod quantity {
        tonic::include_proto!("k8s.io.apimachinery.pkg.api.resource");
    }
}
