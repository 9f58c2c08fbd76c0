//! `lockstep estimator`: Karmada's scheduler-estimator gRPC service for one member cluster
//! (crate `lockstep-estimator`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use clap::Args;
use lockstep_estimator::member::Member;
use lockstep_estimator::service::State;
use lockstep_manifests::Source;

#[derive(Args)]
pub struct EstimatorArgs {
    /// The member cluster's name: requests naming another cluster are refused.
    #[arg(long, value_name = "NAME")]
    cluster: String,
    /// The member's manifests (files, directories or - for stdin), read once.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "PATH",
        required_unless_present = "kubeconfig",
        conflicts_with = "kubeconfig"
    )]
    files: Vec<String>,
    /// The member's kubeconfig: answers come from its API server's watched state.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Where the gRPC service (and gRPC health checking) listens.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:10352")]
    address: SocketAddr,
    /// Where Prometheus metrics (/metrics) and health (/healthz, /readyz) are served.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:10351")]
    metrics_address: SocketAddr,
}

/// Serves until SIGTERM or Ctrl-C.
pub fn estimator(args: &EstimatorArgs) -> Result<String> {
    anyhow::ensure!(
        !args.cluster.is_empty(),
        "--cluster: empty; give the member cluster's name as karmada-scheduler names it"
    );
    let member = if args.files.is_empty() {
        None
    } else {
        let sources: Vec<Source> = args.files.iter().map(|f| Source::from_arg(f)).collect();
        let loaded = lockstep_manifests::load(&sources).map_err(|e| anyhow!("{e}"))?;
        for w in &loaded.warnings {
            eprintln!("{w}");
        }
        Some(Member::new(loaded.cluster).map_err(|e| anyhow!("the member's manifests: {e}"))?)
    };
    let runtime = crate::service_runtime()?;
    runtime.block_on(async {
        let listener = lockstep_estimator::server::bind(args.address, "--address")
            .await
            .map_err(|e| anyhow!(e))?;
        let metrics = lockstep_estimator::server::bind(args.metrics_address, "--metrics-address")
            .await
            .map_err(|e| anyhow!(e))?;
        let mut state = State::new(&args.cluster, member);
        let live = match &args.kubeconfig {
            Some(path) => {
                let client = lockstep_live::connect(Some(path))
                    .await
                    .map_err(|e| anyhow!("{e}"))?;
                Some(lockstep_estimator::live::Live::start(client).await.map_err(|e| anyhow!(e))?)
            }
            None => None,
        };
        if let Some(l) = &live {
            state.unschedulable = Some(l.clone());
        }
        let state = Arc::new(state);
        let follow = live.map(|l| tokio::spawn(l.follow(state.clone())));
        eprintln!(
            "lockstep estimator: cluster {} on {} (metrics on {})",
            args.cluster,
            listener.local_addr().map_or(args.address, |a| a),
            metrics.local_addr().map_or(args.metrics_address, |a| a),
        );
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        };
        let result = lockstep_estimator::server::serve(state, listener, Some(metrics), shutdown).await;
        if let Some(f) = follow {
            f.abort();
        }
        result.map_err(|e| anyhow!(e))
    })?;
    Ok(String::new())
}
