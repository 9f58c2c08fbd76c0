//! Serving: the `Estimator` service and gRPC health checking on one address, Prometheus
//! metrics and `/healthz` / `/readyz` on another.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use crate::proto::service::estimator_server::EstimatorServer;
use crate::service::{Service, State};

/// Binds `address`; a clear message when it is taken.
pub async fn bind(address: std::net::SocketAddr, flag: &str) -> Result<TcpListener, String> {
    TcpListener::bind(address)
        .await
        .map_err(|e| format!("cannot listen on {flag} {address}: {e}"))
}

/// Serves until `shutdown` completes. The health service reports the `Estimator` service
/// (and the server as a whole, `""`) SERVING once the member is loaded.
pub async fn serve(
    state: Arc<State>,
    listener: TcpListener,
    metrics: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let service = EstimatorServer::new(Service {
        state: state.clone(),
    });
    let metrics_task = metrics.map(|l| {
        let encode_state = state.clone();
        let ready_state = state.clone();
        tokio::spawn(lockstep_live::metrics::serve_with(
            l,
            Arc::new(move || encode_state.metrics.encode()),
            Arc::new(move || ready_state.ready()),
        ))
    });
    let health_state = state.clone();
    let health_task = tokio::spawn(async move {
        loop {
            if health_state.ready() {
                reporter.set_serving::<EstimatorServer<Service>>().await;
                reporter
                    .set_service_status("", tonic_health::ServingStatus::Serving)
                    .await;
                return;
            }
            reporter.set_not_serving::<EstimatorServer<Service>>().await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    });
    let result = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await
        .map_err(|e| format!("the gRPC server stopped: {e}"));
    health_task.abort();
    if let Some(t) = metrics_task {
        t.abort();
    }
    result
}
