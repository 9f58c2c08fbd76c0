//! `lockstep run`: the live scheduler of a real cluster (crate `lockstep-live`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use lockstep_engine::Options;

use crate::GangPreemption;

#[derive(Args)]
pub struct RunArgs {
    /// The kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// A KubeSchedulerConfiguration file (one profile): plugins, weights, args.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Pods whose spec.schedulerName is this are scheduled; all others are left alone.
    #[arg(long, value_name = "NAME", default_value = "lockstep")]
    scheduler_name: String,
    /// Where Prometheus metrics (/metrics) and health (/healthz, /readyz) are served.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:10259")]
    metrics_address: SocketAddr,
    /// Victim selection when a gang preempts.
    #[arg(long, value_enum, default_value = "minimal")]
    gang_preemption: GangPreemption,
    /// Turn off opportunistic batching.
    #[arg(long)]
    no_batching: bool,
    /// Bindings in flight at once.
    #[arg(long, value_name = "N", default_value_t = 16)]
    bind_concurrency: usize,
    /// Backoff of a pod that did not fit: first wait, in seconds (kube-scheduler's
    /// podInitialBackoffSeconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 1)]
    pod_initial_backoff_seconds: u64,
    /// Longest backoff, in seconds (kube-scheduler's podMaxBackoffSeconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pod_max_backoff_seconds: u64,
    /// Schedule only while holding a Lease, so that several replicas can run and one
    /// schedules at a time.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Name of the leader Lease.
    #[arg(long, value_name = "NAME", default_value = "lockstep")]
    leader_elect_resource_name: String,
    /// How long a lease lasts without renewal, in seconds: the longest a new leader waits
    /// after the old one died.
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    leader_elect_lease_duration: u64,
}

/// Runs until SIGTERM or Ctrl-C.
pub fn run(args: &RunArgs) -> Result<String> {
    anyhow::ensure!(
        args.pod_initial_backoff_seconds > 0
            && args.pod_max_backoff_seconds >= args.pod_initial_backoff_seconds,
        "--pod-initial-backoff-seconds must be at least 1 and at most --pod-max-backoff-seconds"
    );
    anyhow::ensure!(
        args.bind_concurrency > 0,
        "--bind-concurrency must be at least 1"
    );
    let profile = match &args.config {
        Some(path) => crate::config::load(path)?,
        None => lockstep_engine::Profile::default(),
    };
    let config = lockstep_live::Config {
        kubeconfig: args.kubeconfig.clone(),
        options: Options {
            profile,
            scheduler_names: vec![args.scheduler_name.clone()],
            batching: !args.no_batching,
            gang_preemption: args.gang_preemption.into(),
            ..Options::default()
        },
        metrics_address: Some(args.metrics_address),
        bind_concurrency: args.bind_concurrency,
        initial_backoff: Duration::from_secs(args.pod_initial_backoff_seconds),
        max_backoff: Duration::from_secs(args.pod_max_backoff_seconds),
        leader_election: args.leader_elect.then(|| lockstep_live::LeaderElection {
            namespace: args.leader_elect_resource_namespace.clone(),
            name: args.leader_elect_resource_name.clone(),
            identity: identity(),
            lease_duration: Duration::from_secs(args.leader_elect_lease_duration),
        }),
    };
    let runtime = crate::service_runtime()?;
    runtime.block_on(async {
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        };
        lockstep_live::run(config, shutdown).await
    })?;
    Ok(String::new())
}

/// This instance's identity in the leader Lease: the pod's name (`POD_NAME`, set by the
/// Deployment in deploy/) or the host's, with the process id.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "lockstep".into());
    format!("{host}_{}", std::process::id())
}
