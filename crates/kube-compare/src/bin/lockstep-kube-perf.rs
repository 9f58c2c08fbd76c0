//! `lockstep-kube-perf`: scheduler throughput on a real API server, the shape of
//! kube-scheduler's scheduler_perf SchedulingBasic scaled to a small machine.
//!
//! ```text
//! lockstep-kube-perf [--nodes 500] [--pods 2000] [--runs 3] [--concurrency 32]
//!                    [--scheduler kube|lockstep|both] [--lockstep-binary PATH]
//!                    [--gang-size N]
//! ```
//!
//! With `--gang-size N` the pods come in gangs: a PodGroup (scheduling.k8s.io/v1beta1,
//! `minCount` N) per N pods, created before its pods, each pod naming its group in
//! `spec.schedulingGroup` (kube-scheduler v1.37 with the Workload API gates, as testenv
//! runs it, schedules them with its GangScheduling plugin).
//!
//! Each run starts a fresh control plane (testenv/: etcd and kube-apiserver v1.37), with
//! either the real kube-scheduler v1.37 (client QPS and burst 5000) or `lockstep run`
//! (in this process, through the same API server, its client unthrottled; with
//! `--lockstep-binary`, that binary's `run` as a process of its own, whose memory is then
//! reported alone), creates the
//! nodes, then creates the pods (each asking for 100m CPU and 500Mi memory, as
//! SchedulingBasic's default pod does) with `--concurrency` requests in flight, and
//! measures from the first pod created to the last pod bound. Prints pods/s per run and
//! the median, per scheduler; with `both`, runs alternate so the machine's load falls on
//! both alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
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
    /// Which scheduler binds the pods.
    #[arg(long, value_enum, default_value = "both")]
    scheduler: Which,
    /// Pods per gang (a PodGroup with minCount this many); 0: single pods.
    #[arg(long, default_value_t = 0)]
    gang_size: usize,
    /// Run `lockstep run` from this binary as a process of its own (its resident memory is
    /// then reported alone) instead of in this process.
    #[arg(long, value_name = "PATH")]
    lockstep_binary: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum, Debug)]
enum Which {
    Kube,
    Lockstep,
    Both,
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

/// Pod `i` for `scheduler`; with `gang_size` > 0, a member of gang `i / gang_size`.
fn pod(i: usize, scheduler: &str, gang_size: usize) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "namespace": "default"},
        "spec": {"schedulerName": scheduler,
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    });
    if let Some(g) = i.checked_div(gang_size) {
        pod["spec"]["schedulingGroup"] = json!({"podGroupName": group_name(g)});
    }
    Ok(serde_json::from_value(pod)?)
}

fn group_name(g: usize) -> String {
    format!("gang-{g:05}")
}

/// The PodGroup of gang `g`: all its pods or none.
fn pod_group(g: usize, gang_size: usize) -> Result<PodGroup> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group_name(g), "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": gang_size}}}
    }))?)
}

/// Creates `n` objects with `concurrency` requests in flight.
async fn create_many<K>(
    api: &Api<K>,
    n: usize,
    concurrency: usize,
    make: impl Fn(usize) -> Result<K>,
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

/// The resident memory of this process now and at its peak (Linux), for the report.
fn memory() -> String {
    memory_of("self")
}

/// The resident memory of process `pid` (`self` for this one) now and at its peak.
fn memory_of(pid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or("?".to_string(), |kb| format!("{} MiB", kb / 1024))
    };
    format!("resident {}, peak {}", field("VmRSS:"), field("VmHWM:"))
}

/// Starts `binary run` against the control plane, its log in the system's temporary
/// directory.
fn spawn_lockstep(binary: &std::path::Path, kubeconfig: &std::path::Path) -> Result<Running> {
    let log =
        std::env::temp_dir().join(format!("lockstep-kube-perf-run-{}.log", std::process::id()));
    let file =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    eprintln!("  lockstep run as a process, log in {}", log.display());
    std::process::Command::new(binary)
        .args([
            "run",
            "--scheduler-name",
            "lockstep",
            "--bind-concurrency",
            "32",
        ])
        .arg("--metrics-address")
        .arg("127.0.0.1:0")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .spawn()
        .map(Running)
        .with_context(|| format!("cannot start {}", binary.display()))
}

/// A `lockstep run` process, killed if the run ends without stopping it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Stops a `lockstep run` process with SIGTERM, as a kubelet would, waiting at most 10 s
/// before killing it.
fn stop_child(child: &mut std::process::Child) -> Result<()> {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// Pods not bound yet (`spec.nodeName` empty), counted by the API server.
async fn unbound(pods: &Api<Pod>) -> Result<usize> {
    let list = pods
        .list_metadata(&ListParams::default().fields("spec.nodeName="))
        .await?;
    Ok(list.items.len())
}

async fn run_once(args: &Args, which: Which) -> Result<f64> {
    let plane = ControlPlane::start(Options {
        kube_scheduler: which == Which::Kube,
        ..Options::default()
    })?;
    let client = plane.client().await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut child = match (&args.lockstep_binary, which) {
        (Some(binary), Which::Lockstep) => Some(spawn_lockstep(binary, plane.kubeconfig())?),
        _ => None,
    };
    let live = (which == Which::Lockstep && child.is_none()).then(|| {
        let config = lockstep_live::Config {
            kubeconfig: Some(plane.kubeconfig().to_path_buf()),
            options: lockstep_engine::Options {
                scheduler_names: vec!["lockstep".into()],
                ..lockstep_engine::Options::default()
            },
            metrics_address: None,
            bind_concurrency: 32,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            leader_election: None,
        };
        tokio::spawn(lockstep_live::run(config, async {
            let _ = stopped.await;
        }))
    });
    let nodes: Api<Node> = Api::all(client.clone());
    create_many(&nodes, args.nodes, args.concurrency, node).await?;
    // Let kube-scheduler's informers see every node before the clock starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    if let Some(gangs) = args.pods.checked_div(args.gang_size) {
        let groups: Api<PodGroup> = Api::namespaced(client.clone(), "default");
        create_many(&groups, gangs, args.concurrency, |g| {
            pod_group(g, args.gang_size)
        })
        .await?;
    }
    let scheduler = if which == Which::Kube {
        "default-scheduler"
    } else {
        "lockstep"
    };
    let make = |i| pod(i, scheduler, args.gang_size);
    create_many(&pods, args.pods, args.concurrency, make).await?;
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
    if let Some(task) = live {
        let _ = stop.send(());
        task.await??;
    }
    if let Some(child) = &mut child {
        eprintln!(
            "  the lockstep run process: {}",
            memory_of(&child.0.id().to_string())
        );
        stop_child(&mut child.0)?;
    } else if which == Which::Lockstep {
        // `lockstep run` runs in this process: its caches, state and client are what this
        // process holds beyond the test harness.
        eprintln!("  this process (lockstep run in it): {}", memory());
    }
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
    // `RUST_LOG=lockstep_live=info` shows each pass of `lockstep run` on stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    anyhow::ensure!(
        args.runs > 0 && args.nodes > 0 && args.pods > 0,
        "--runs, --nodes and --pods must be positive"
    );
    anyhow::ensure!(
        args.gang_size == 0 || args.pods % args.gang_size == 0,
        "--pods {} is not a whole number of gangs of --gang-size {}",
        args.pods,
        args.gang_size
    );
    anyhow::ensure!(
        args.pods <= args.nodes * 40,
        "{} pods of 100m CPU do not fit on {} nodes of 4 CPU; use at most {} pods",
        args.pods,
        args.nodes,
        args.nodes * 40
    );
    let order: Vec<Which> = match args.scheduler {
        Which::Both => vec![Which::Kube, Which::Lockstep],
        one => vec![one],
    };
    let mut rates: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for r in 0..args.runs {
        for &which in &order {
            let name = if which == Which::Kube {
                "kube-scheduler v1.37.2"
            } else {
                "lockstep run"
            };
            eprintln!(
                "run {} of {}, {name}: {} nodes, {} pods",
                r + 1,
                args.runs,
                args.nodes,
                args.pods
            );
            if let Some(gangs) = args.pods.checked_div(args.gang_size) {
                eprintln!(
                    "  in {gangs} gangs of {} (a PodGroup each, created first)",
                    args.gang_size
                );
            }
            rates
                .entry(name)
                .or_default()
                .push(run_once(&args, which).await?);
        }
    }
    for (name, list) in &mut rates {
        list.sort_by(f64::total_cmp);
        let median = list[list.len() / 2];
        println!(
            "{name}, {} nodes, {} pods: median {:.0} pods/s over {} runs (each: {})",
            args.nodes,
            args.pods,
            median,
            list.len(),
            list.iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let (Some(kube), Some(lockstep)) = (
        rates.get("kube-scheduler v1.37.2").map(|l| l[l.len() / 2]),
        rates.get("lockstep run").map(|l| l[l.len() / 2]),
    ) {
        println!("lockstep run / kube-scheduler: {:.2}x", lockstep / kube);
    }
    Ok(())
}
