//! Prometheus metrics and the health endpoints, served on `--metrics-address`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    pub queue: &'static str,
}

/// Every metric `lockstep run` exports.
pub struct Metrics {
    registry: Registry,
    /// Scheduling attempts by result: `scheduled`, `unschedulable`, `error`.
    pub attempts: Family<ResultLabel, Counter>,
    /// From a pod's creation to its binding, in seconds.
    pub e2e_latency: Histogram,
    /// One scheduling pass (conversion, engine), in seconds.
    pub pass_duration: Histogram,
    /// Pending pods by queue: `active` (tried in the last pass), `backoff`, `gated`.
    pub pending: Family<QueueLabel, Gauge>,
    /// Pods whose cycle reused the previous pod's scored nodes (opportunistic batching).
    pub batched: Counter,
    pub preemption_victims: Counter,
    pub bind_errors: Counter,
    /// Whole-gang placement searches by result: `placed`, `infeasible`, `exhausted` (the
    /// step bound `gangSearchSteps` was reached; the gang is reported unschedulable).
    pub gang_searches: Family<ResultLabel, Counter>,
    /// Objects left out of a pass because they cannot be read.
    pub bad_objects: Gauge,
    /// Events dropped because the queue of events to write was full.
    pub dropped_events: Counter,
    /// Times the engine's state was built again from every cached object.
    pub state_rebuilds: Counter,
    /// Objects applied to the engine's state one by one (adds, updates, deletes).
    pub state_changes: Counter,
    pub ready: AtomicBool,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("lockstep");
        let attempts = Family::<ResultLabel, Counter>::default();
        registry.register(
            "schedule_attempts",
            "Scheduling attempts by result",
            attempts.clone(),
        );
        let e2e_latency = Histogram::new(exponential_buckets(0.001, 2.0, 20));
        registry.register(
            "e2e_scheduling_duration_seconds",
            "From a pod's creation to its binding",
            e2e_latency.clone(),
        );
        let pass_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 20));
        registry.register(
            "scheduling_pass_duration_seconds",
            "One scheduling pass over the cluster",
            pass_duration.clone(),
        );
        let pending = Family::<QueueLabel, Gauge>::default();
        registry.register("pending_pods", "Pending pods by queue", pending.clone());
        let batched = Counter::default();
        registry.register(
            "batched_pods",
            "Pods placed with the previous pod's scored nodes",
            batched.clone(),
        );
        let preemption_victims = Counter::default();
        registry.register(
            "preemption_victims",
            "Pods evicted by preemption",
            preemption_victims.clone(),
        );
        let bind_errors = Counter::default();
        registry.register(
            "bind_errors",
            "Bindings the API server refused",
            bind_errors.clone(),
        );
        let gang_searches = Family::<ResultLabel, Counter>::default();
        registry.register(
            "gang_placement_searches",
            "Whole-gang placement searches by result",
            gang_searches.clone(),
        );
        let bad_objects = Gauge::default();
        registry.register(
            "unreadable_objects",
            "Objects left out of the last pass because they cannot be read",
            bad_objects.clone(),
        );
        let dropped_events = Counter::default();
        registry.register(
            "dropped_events",
            "Events dropped because the queue of events to write was full",
            dropped_events.clone(),
        );
        let state_rebuilds = Counter::default();
        registry.register(
            "state_rebuilds",
            "Times the cluster state was built again from every cached object",
            state_rebuilds.clone(),
        );
        let state_changes = Counter::default();
        registry.register(
            "state_changes",
            "Objects applied to the cluster state one by one",
            state_changes.clone(),
        );
        Metrics {
            registry,
            dropped_events,
            state_rebuilds,
            state_changes,
            attempts,
            e2e_latency,
            pass_duration,
            pending,
            batched,
            preemption_victims,
            bind_errors,
            gang_searches,
            bad_objects,
            ready: AtomicBool::new(false),
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Serves `GET /metrics`, `/healthz` (the process runs) and `/readyz` (the caches are
/// synced and passes run) on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    let m = metrics.clone();
    serve_with(
        listener,
        Arc::new(move || metrics.encode()),
        Arc::new(move || m.ready.load(Ordering::Relaxed)),
    )
    .await
}

/// The text of `/metrics`.
pub type Encode = Arc<dyn Fn() -> String + Send + Sync>;
/// Whether `/readyz` answers ok.
pub type Ready = Arc<dyn Fn() -> bool + Send + Sync>;

/// [`serve`] for any registry: `/metrics` is `encode()`, `/readyz` is ok while `ready()`.
pub async fn serve_with(listener: TcpListener, encode: Encode, ready: Ready) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let encode = encode.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let n = match tokio::time::timeout(
                std::time::Duration::from_secs(5),
                stream.read(&mut buf),
            )
            .await
            {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, content_type, body) = match path {
                "/metrics" => (
                    "200 OK",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    encode(),
                ),
                "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" if ready() => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "caches not synced yet\n".to_string(),
                ),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

/// Binds the metrics address; a clear error when it is taken.
pub async fn bind(address: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(address)
        .await
        .map_err(|e| format!("cannot listen on --metrics-address {address}: {e}"))
}
