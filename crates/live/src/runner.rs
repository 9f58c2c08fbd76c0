//! The scheduling loop of `lockstep run`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::events::{Recorder, Reporter};
use lockstep_engine::Options;

use crate::act::Writer;
use crate::backoff::Backoff;
use crate::cache::{Caches, key};
use crate::cycle::{Assumed, Pass};
use crate::metrics::{self, Metrics, QueueLabel};
use crate::mirror::Mirror;

/// How `lockstep run` is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// A kubeconfig file; `None`: `KUBECONFIG`, `~/.kube/config`, or the in-cluster service
    /// account, as kubectl finds them.
    pub kubeconfig: Option<PathBuf>,
    /// The engine's options; `scheduler_names` holds the one name whose pods are scheduled.
    pub options: Options,
    pub metrics_address: Option<SocketAddr>,
    /// Bindings in flight at once.
    pub bind_concurrency: usize,
    /// kube-scheduler's `podInitialBackoffSeconds` and `podMaxBackoffSeconds`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Schedule only while holding this lease (`--leader-elect`).
    pub leader_election: Option<crate::LeaderElection>,
}

impl Config {
    /// The one scheduler name this instance serves.
    pub fn scheduler_name(&self) -> &str {
        self.options
            .scheduler_names
            .first()
            .map_or("lockstep", String::as_str)
    }
}

/// Why `lockstep run` stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration or the cluster connection is wrong (exit 2).
    #[error("{0}")]
    Setup(String),
    /// The API server failed in a way lockstep cannot go on from.
    #[error("{0}")]
    Api(String),
}

/// How long to wait for the API server's first answer and the caches' first list.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// Events arriving this close together are handled in one pass.
const DEBOUNCE: Duration = Duration::from_millis(20);

async fn client(config: &Config) -> Result<Client, Error> {
    connect(config.kubeconfig.as_ref()).await
}

/// A client of the cluster `kubeconfig` names (`None`: `KUBECONFIG`, `~/.kube/config`, or
/// the in-cluster service account), checked by asking the API server's version.
pub async fn connect(kubeconfig: Option<&PathBuf>) -> Result<Client, Error> {
    let kube_config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                Error::Setup(format!(
                    "--kubeconfig {}: {e}; give a readable kubeconfig file",
                    path.display()
                ))
            })?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Setup(format!("--kubeconfig {}: {e}", path.display())))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            Error::Setup(format!(
                "no cluster configuration found ({e}); give --kubeconfig, set KUBECONFIG, \
                 or run inside a cluster"
            ))
        })?,
    };
    let url = kube_config.cluster_url.clone();
    let client = Client::try_from(kube_config)
        .map_err(|e| Error::Setup(format!("cannot set up a client for {url}: {e}")))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(v)) => {
            tracing::info!("connected to {url}: Kubernetes {}", v.git_version);
            Ok(client)
        }
        Ok(Err(e)) => Err(Error::Setup(format!(
            "cannot reach the API server at {url}: {e}; check the kubeconfig and that the server runs"
        ))),
        Err(_) => Err(Error::Setup(format!(
            "the API server at {url} did not answer within {} s; check the kubeconfig and the network",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// Pending pods this scheduler owns, and which of them cannot be tried now: gated pods,
/// and pods nominated to a node whose victims are still terminating.
fn pending(pods: &[Arc<Pod>], scheduler: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let terminating_on: BTreeSet<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let mut all = BTreeSet::new();
    let mut waiting = BTreeSet::new();
    for p in pods {
        let Some(spec) = &p.spec else { continue };
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if spec.node_name.is_some()
            || p.metadata.deletion_timestamp.is_some()
            || matches!(phase, Some("Succeeded" | "Failed"))
            || spec
                .scheduler_name
                .as_deref()
                .unwrap_or("default-scheduler")
                != scheduler
        {
            continue;
        }
        let k = key(&**p);
        let gated = spec
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| !g.is_empty());
        let nominated = p
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_ref())
            .is_some_and(|n| terminating_on.contains(n));
        if gated || nominated {
            waiting.insert(k.clone());
        }
        all.insert(k);
    }
    (all, waiting)
}

/// Drops assumptions the caches now show (or that no longer apply).
fn prune(assumed: &mut Assumed, caches: &Caches) {
    let pods: std::collections::BTreeMap<String, Arc<Pod>> = caches
        .pods
        .all()
        .into_iter()
        .map(|p| (key(&*p), p))
        .collect();
    assumed.bound.retain(|k, _| {
        pods.get(k)
            .is_some_and(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
    });
    let claims: std::collections::BTreeMap<String, bool> = caches
        .resource_claims
        .all()
        .into_iter()
        .map(|c| {
            let allocated = c.status.as_ref().is_some_and(|s| s.allocation.is_some());
            (key(&*c), allocated)
        })
        .collect();
    assumed
        .claims
        .retain(|k, _| claims.get(k).is_some_and(|allocated| !allocated));
}

/// One pass: the state brought up to the caches, then the pods `offered` scheduled.
fn plan(
    mirror: &mut Mirror,
    caches: &Caches,
    assumed: &Assumed,
    offered: &[String],
) -> Result<(Pass, crate::mirror::Synced), String> {
    let synced = mirror.sync(caches, assumed)?;
    let excluded: Vec<(String, String)> = mirror
        .excluded
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let scheduler = mirror.scheduler().expect("a synced mirror has a scheduler");
    let state = scheduler.state();
    let ids: Vec<lockstep_model::PodId> = offered
        .iter()
        .filter_map(|k| {
            let (ns, name) = k.split_once('/')?;
            state.pod_id(ns, name)
        })
        .filter(|&p| state.node_of(p).is_none())
        .collect();
    let (batched_before, _) = scheduler.cycle_counts();
    let g = scheduler.gang_search_counts();
    let decisions = scheduler.schedule(&ids);
    let (batched, _) = scheduler.cycle_counts();
    let h = scheduler.gang_search_counts();
    let pass = Pass {
        cluster: Arc::clone(&scheduler.snapshot.cluster),
        decisions,
        excluded,
        batched_cycles: batched - batched_before,
        gang_search: lockstep_engine::GangSearchCounts {
            searches: h.searches - g.searches,
            placed: h.placed - g.placed,
            exhausted: h.exhausted - g.exhausted,
            steps: h.steps - g.steps,
        },
    };
    Ok((pass, synced))
}

/// Runs the live scheduler until `shutdown` completes: then it stops taking pods, lets the
/// writes in flight finish, and returns.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let client = client(&config).await?;
    let metrics = Arc::new(Metrics::new());
    if let Some(address) = config.metrics_address {
        let listener = metrics::bind(address).await.map_err(Error::Setup)?;
        tokio::spawn(metrics::serve(listener, metrics.clone()));
    }
    let scheduler = config.scheduler_name().to_string();
    tokio::pin!(shutdown);
    let mut leadership = match &config.leader_election {
        Some(e) => {
            let acquired = tokio::select! {
                _ = &mut shutdown => return Ok(()),
                l = crate::leader::Leadership::acquire(&client, e) => l,
            };
            Some(acquired.map_err(Error::Api)?)
        }
        None => None,
    };
    let caches = Arc::new(
        Caches::start(&client)
            .await
            .map_err(|e| Error::Api(format!("discovering the API server's resources: {e}")))?,
    );
    match tokio::time::timeout(SYNC_TIMEOUT, caches.ready()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::Api(format!("watch caches: {e}"))),
        Err(_) => {
            return Err(Error::Api(format!(
                "the watch caches did not sync within {} s",
                SYNC_TIMEOUT.as_secs()
            )));
        }
    }
    metrics.ready.store(true, Ordering::Relaxed);
    tracing::info!("caches synced; scheduling pods with schedulerName {scheduler}");

    let writer = Writer {
        client: client.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: scheduler.clone(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
        scheduler_name: scheduler.clone(),
        concurrency: config.bind_concurrency,
        metrics: metrics.clone(),
    };
    let mut assumed = Assumed::default();
    let mut mirror = Some(Mirror::new(config.options.clone()));
    let mut backoff = Backoff::new(config.initial_backoff, config.max_backoff);
    let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
    let mut first = true;
    loop {
        if !first {
            let due = backoff
                .next_due(Instant::now())
                .map(tokio::time::Instant::from_std);
            tokio::select! {
                _ = &mut shutdown => break,
                _ = async {
                    match leadership.as_mut() {
                        Some(l) => l.lost().await,
                        None => std::future::pending().await,
                    }
                } => {
                    return Err(Error::Api("lost the leader lease; stopping".into()));
                }
                _ = caches.signal.changed() => {}
                _ = async {
                    match due {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
            tokio::time::sleep(DEBOUNCE).await;
        }
        first = false;
        let events = caches.signal.events();
        prune(&mut assumed, &caches);
        let pods = caches.pods.all();
        let (all_pending, waiting) = pending(&pods, &scheduler);
        backoff.retain(&all_pending);
        let mut held = backoff.held(Instant::now(), events);
        let backing_off = held.len();
        held.extend(waiting.iter().cloned());
        let pending_now: Vec<String> = all_pending
            .iter()
            .filter(|k| !held.contains(*k) && !assumed.bound.contains_key(*k))
            .cloned()
            .collect();
        metrics
            .pending
            .get_or_create(&QueueLabel { queue: "active" })
            .set(pending_now.len() as i64);
        metrics
            .pending
            .get_or_create(&QueueLabel { queue: "backoff" })
            .set(backing_off as i64);
        metrics
            .pending
            .get_or_create(&QueueLabel { queue: "waiting" })
            .set(waiting.len() as i64);
        if pending_now.is_empty() {
            continue;
        }
        let started = Instant::now();
        let mut m = mirror.take().expect("the mirror is back after every pass");
        let (c, a, offered) = (caches.clone(), assumed.clone(), pending_now.len());
        let (m, pass) = tokio::task::spawn_blocking(move || {
            let pass = plan(&mut m, &c, &a, &pending_now);
            (m, pass)
        })
        .await
        .map_err(|e| Error::Api(format!("a scheduling pass panicked: {e}")))?;
        mirror = Some(m);
        metrics
            .pass_duration
            .observe(started.elapsed().as_secs_f64());
        let pass = match pass {
            Ok((p, synced)) => {
                if synced.rebuilt {
                    metrics.state_rebuilds.inc();
                }
                metrics.state_changes.inc_by(synced.applied as u64);
                p
            }
            Err(e) => {
                tracing::error!("scheduling pass: {e}");
                continue;
            }
        };
        metrics.bad_objects.set(pass.excluded.len() as i64);
        metrics.batched.inc_by(pass.batched_cycles);
        let g = pass.gang_search;
        for (result, n) in [
            ("placed", g.placed),
            ("exhausted", g.exhausted),
            ("infeasible", g.searches - g.placed - g.exhausted),
        ] {
            metrics
                .gang_searches
                .get_or_create(&crate::metrics::ResultLabel { result })
                .inc_by(n);
        }
        for (object, why) in &pass.excluded {
            if reported.insert((object.clone(), why.clone())) {
                tracing::warn!("left out of scheduling: {why}");
                writer.unreadable(object, why).await;
            }
        }
        let outcome = writer.apply(&pass, &caches, &mut assumed).await;
        // Decisions not carried out as assumed bindings are read again from the cache: the
        // victims (still there until they are gone), the nominated preemptors, and the
        // pods whose writes failed.
        let victims = pass
            .decisions
            .evictions
            .iter()
            .map(|e| pass.cluster.pods[e.pod.index()].key());
        let again: Vec<String> = victims
            .chain(outcome.nominated.iter().cloned())
            .chain(outcome.failed.keys().cloned())
            .collect();
        drop(pass);
        if let Some(m) = mirror.as_mut() {
            m.resync(again);
        }
        let now = Instant::now();
        for k in outcome.unschedulable.iter().chain(outcome.failed.keys()) {
            backoff.failed(k, now, caches.signal.events());
        }
        for k in outcome.bound.keys() {
            backoff.clear(k);
        }
        tracing::info!(
            bound = outcome.bound.len(),
            unschedulable = outcome.unschedulable.len(),
            nominated = outcome.nominated.len(),
            failed = outcome.failed.len(),
            "pass over {} pending pods in {:.1} ms",
            offered,
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    tracing::info!("stopping: no new pods are taken; writes in flight have finished");
    if let Some(l) = leadership {
        l.release().await;
    }
    Ok(())
}
