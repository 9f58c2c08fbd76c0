//! `lockstep-kube-perf`: scheduler throughput on a real API server, the shape of
//! kube-scheduler's scheduler_perf SchedulingBasic scaled to a small machine.
//!
//! ```text
//! lockstep-kube-perf [--nodes 500] [--pods 2000] [--runs 3] [--concurrency 32]
//! ```
//!
//! Each run starts a fresh control plane (testenv/: etcd, kube-apiserver and the real
//! kube-scheduler v1.37 with client QPS and burst 5000), creates the nodes, then creates
//! the pods (each asking for 100m CPU and 500Mi memory, as SchedulingBasic's default pod
//! does) with `--concurrency` requests in flight, and measures from the first pod created
//! to the last pod bound. Prints pods/s per run and the median.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use lockstep_testenv::{ControlPlane, Options};
use serde_json::json;
use tokio::sync::Semaphore;

#[derive(Parser)]
#[command(about = "kube-scheduler throughput on a real API server (SchedulingBasic shape)")]
struct Args {
    /// Nodes in the cluster (4 CPU, 32Gi memory, 110 pods each).
    #[arg(long, default_value_t = 500)]
    nodes: usize,
    /// Pods created and scheduled per run.
    #[arg(long, default_value_t = 2000)]
    pods: usize,
    /// Runs, each on a fresh control plane; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Create requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

fn node(i: usize) -> Result<Node> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i:05}"),
                     "labels": {"kubernetes.io/hostname": format!("node-{i:05}")}},
        "status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))?)
}

fn pod(i: usize) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "namespace": "default"},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    }))?)
}

/// Creates `n` objects with `concurrency` requests in flight.
async fn create_many<K>(
    api: &Api<K>,
    n: usize,
    concurrency: usize,
    make: fn(usize) -> Result<K>,
) -> Result<()>
where
    K: kube::Resource
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let permit = permits.clone().acquire_owned().await?;
        let api = api.clone();
        let object = make(i)?;
        tasks.spawn(async move {
            let r = api.create(&PostParams::default(), &object).await;
            drop(permit);
            r.map(|_| ())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r?.context("creating an object")?;
    }
    Ok(())
}

/// Pods not bound yet (`spec.nodeName` empty), counted by the API server.
async fn unbound(pods: &Api<Pod>) -> Result<usize> {
    let list = pods
        .list_metadata(&ListParams::default().fields("spec.nodeName="))
        .await?;
    Ok(list.items.len())
}

async fn run_once(args: &Args) -> Result<f64> {
    let plane = ControlPlane::start(Options {
        kube_scheduler: true,
        ..Options::default()
    })?;
    let client = plane.client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    create_many(&nodes, args.nodes, args.concurrency, node).await?;
    // Let kube-scheduler's informers see every node before the clock starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    create_many(&pods, args.pods, args.concurrency, pod).await?;
    let created = start.elapsed();
    let deadline = start + Duration::from_secs(args.timeout);
    loop {
        let left = unbound(&pods).await?;
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "{left} of {} pods still unbound after {} s\n{}",
                args.pods,
                args.timeout,
                plane.log_tail(20)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = start.elapsed();
    let rate = args.pods as f64 / all.as_secs_f64();
    eprintln!(
        "  {} pods created in {:.2} s, all bound after {:.2} s: {:.0} pods/s",
        args.pods,
        created.as_secs_f64(),
        all.as_secs_f64(),
        rate
    );
    Ok(rate)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.runs > 0 && args.nodes > 0 && args.pods > 0,
        "--runs, --nodes and --pods must be positive"
    );
    anyhow::ensure!(
        args.pods <= args.nodes * 40,
        "{} pods of 100m CPU do not fit on {} nodes of 4 CPU; use at most {} pods",
        args.pods,
        args.nodes,
        args.nodes * 40
    );
    let mut rates = Vec::new();
    for r in 0..args.runs {
        eprintln!(
            "run {} of {}: {} nodes, {} pods",
            r + 1,
            args.runs,
            args.nodes,
            args.pods
        );
        rates.push(run_once(&args).await?);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "kube-scheduler v1.37.2, {} nodes, {} pods: median {:.0} pods/s over {} runs (each: {})",
        args.nodes,
        args.pods,
        median,
        rates.len(),
        rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}
