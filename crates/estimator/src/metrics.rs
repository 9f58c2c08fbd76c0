//! Prometheus metrics of the estimator: requests by method and result, and latency.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The gRPC method (`MaxAvailableReplicas`, ...).
    pub method: &'static str,
    /// `ok`, or the gRPC code's name in snake case (`invalid_argument`, ...).
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: &'static str,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<MethodLabel, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("lockstep_estimator");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Estimator requests answered, by method and result",
            requests.clone(),
        );
        let latency = Family::<MethodLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 18))
        });
        registry.register(
            "request_duration_seconds",
            "Time to answer an estimator request, by method",
            latency.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            requests,
            latency,
        }
    }

    pub fn observe(&self, method: &'static str, result: &'static str, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels { method, result })
            .inc();
        self.latency
            .get_or_create(&MethodLabel { method })
            .observe(took.as_secs_f64());
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Ok(r) = self.registry.lock() {
            let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        }
        out
    }
}

/// The snake-case name of a gRPC code, for the `result` label.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "ok",
        Cancelled => "cancelled",
        Unknown => "unknown",
        InvalidArgument => "invalid_argument",
        DeadlineExceeded => "deadline_exceeded",
        NotFound => "not_found",
        AlreadyExists => "already_exists",
        PermissionDenied => "permission_denied",
        ResourceExhausted => "resource_exhausted",
        FailedPrecondition => "failed_precondition",
        Aborted => "aborted",
        OutOfRange => "out_of_range",
        Unimplemented => "unimplemented",
        Internal => "internal",
        Unavailable => "unavailable",
        DataLoss => "data_loss",
        Unauthenticated => "unauthenticated",
    }
}
