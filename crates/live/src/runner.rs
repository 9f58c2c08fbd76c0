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
use lockstep_engine::{Options, Queue, Scheduler};
use lockstep_model::PodId;

use crate::act::Writer;
use crate::cache::{Cache, Caches};
use crate::cycle::{Assumed, Pass};
use crate::metrics::{self, Metrics, QueueLabel};
use crate::mirror::Mirror;
use lockstep_engine::backoff::Backoff;

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
fn pending(pods: &Cache<Pod>, scheduler: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut terminating_on: BTreeSet<Box<str>> = BTreeSet::new();
    pods.for_each_brief(|_, b| {
        if let Some(n) = &b.leaving {
            terminating_on.insert(n.clone());
        }
    });
    let mut all = BTreeSet::new();
    let mut waiting = BTreeSet::new();
    pods.for_each_brief(|k, b| {
        if b.pending_for.as_deref() != Some(scheduler) {
            return;
        }
        let nominated = b
            .nominated
            .as_ref()
            .is_some_and(|n| terminating_on.contains(n));
        if b.gated || nominated {
            waiting.insert(k.to_string());
        }
        all.insert(k.to_string());
    });
    (all, waiting)
}

/// Drops assumptions the caches now show (or that no longer apply), looking up only the
/// assumed objects.
fn prune(assumed: &mut Assumed, caches: &Caches) {
    assumed.bound.retain(|k, _| {
        caches
            .pods
            .get(k)
            .is_some_and(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
    });
    assumed.claims.retain(|k, _| {
        caches
            .resource_claims
            .get(k)
            .is_some_and(|c| c.status.as_ref().is_none_or(|s| s.allocation.is_none()))
    });
}

/// The engine side of the loop: the state kept equal to the caches, the scheduler over it,
/// and the pods that did not fit, each parked until a change may help it.
struct Engine {
    mirror: Mirror,
    scheduler: Option<Scheduler>,
    queue: Queue,
}

/// What one pass did besides its decisions.
struct Round {
    synced: crate::mirror::Synced,
    /// Pods offered to the engine.
    offered: usize,
    /// Pods parked after the pass (no change since their attempt could help them).
    parked: usize,
    /// Bringing the state up to the caches, and the engine's decisions.
    sync_time: std::time::Duration,
    decide_time: std::time::Duration,
}

impl Engine {
    /// One pass: the state brought up to the caches, then the pending pods `candidates`
    /// that no parked attempt rules out scheduled (`flushed`: pods tried again whatever
    /// changed).
    fn pass(
        &mut self,
        caches: &Caches,
        assumed: &Assumed,
        candidates: &[String],
        flushed: &[String],
    ) -> Result<(Pass, Round), String> {
        let started = Instant::now();
        let synced = self.mirror.sync(&mut self.scheduler, caches, assumed)?;
        let sync_time = started.elapsed();
        let excluded: Vec<(String, String)> = self
            .mirror
            .excluded
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let scheduler = self
            .scheduler
            .as_mut()
            .expect("a synced mirror has a scheduler");
        if synced.rebuilt {
            self.queue = Queue::new();
        }
        let id_of = |state: &lockstep_engine::ClusterState, k: &str| {
            let (ns, name) = k.split_once('/')?;
            state.pod_id(ns, name)
        };
        // A pod whose object changed is a new attempt.
        for &p in &synced.pods {
            self.queue.remove(p);
        }
        for k in flushed {
            if let Some(p) = id_of(scheduler.state(), k) {
                self.queue.remove(p);
            }
        }
        self.queue.wake(scheduler);
        let state = scheduler.state();
        let ids: Vec<PodId> = candidates
            .iter()
            .filter_map(|k| id_of(state, k))
            .filter(|&p| state.node_of(p).is_none() && !self.queue.contains(p))
            .collect();
        let (batched_before, _) = scheduler.cycle_counts();
        let g = scheduler.gang_search_counts();
        let position = scheduler.change_position();
        let decided = Instant::now();
        let decisions = scheduler.schedule(&ids);
        let decide_time = decided.elapsed();
        let mut unproven: Vec<PodId> = scheduler.unproven_failures().to_vec();
        unproven.extend(decisions.waiting.iter().map(|(p, _)| *p));
        for &p in &ids {
            if scheduler.state().node_of(p).is_none() {
                self.queue
                    .park(scheduler, p, position, !unproven.contains(&p));
            }
        }
        let (batched, _) = scheduler.cycle_counts();
        let h = scheduler.gang_search_counts();
        let pass = Pass {
            cluster: Arc::clone(&scheduler.snapshot.cluster),
            decisions,
            excluded,
            batched_cycles: batched - batched_before,
            gang_search: h - g,
        };
        let round = Round {
            synced,
            offered: ids.len(),
            parked: self.queue.len(),
            sync_time,
            decide_time,
        };
        Ok((pass, round))
    }
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
        events: crate::events::Events::start(Recorder::new(
            client.clone(),
            Reporter {
                controller: scheduler.clone(),
                instance: std::env::var("POD_NAME").ok(),
            },
        )),
        scheduler_name: scheduler.clone(),
        concurrency: config.bind_concurrency,
        metrics: metrics.clone(),
    };
    let mut assumed = Assumed::default();
    let mut engine = Some(Engine {
        mirror: Mirror::new(config.options.clone()),
        scheduler: None,
        queue: Queue::new(),
    });
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
        prune(&mut assumed, &caches);
        let (all_pending, waiting) = pending(&caches.pods, &scheduler);
        backoff.retain(&all_pending);
        let now = Instant::now();
        let mut held = backoff.held(now);
        let flushed = backoff.flushed(now);
        let backing_off = held.len();
        held.extend(waiting.iter().cloned());
        let candidates: Vec<String> = all_pending
            .iter()
            .filter(|k| !held.contains(*k) && !assumed.bound.contains_key(*k))
            .cloned()
            .collect();
        metrics
            .pending
            .get_or_create(&QueueLabel { queue: "backoff" })
            .set(backing_off as i64);
        metrics
            .pending
            .get_or_create(&QueueLabel { queue: "waiting" })
            .set(waiting.len() as i64);
        if candidates.is_empty() {
            metrics
                .pending
                .get_or_create(&QueueLabel { queue: "active" })
                .set(0);
            continue;
        }
        let started = Instant::now();
        let mut e = engine.take().expect("the engine is back after every pass");
        let (c, a) = (caches.clone(), assumed.clone());
        let (e, pass) = tokio::task::spawn_blocking(move || {
            let pass = e.pass(&c, &a, &candidates, &flushed);
            (e, pass)
        })
        .await
        .map_err(|e| Error::Api(format!("a scheduling pass panicked: {e}")))?;
        engine = Some(e);
        metrics
            .pass_duration
            .observe(started.elapsed().as_secs_f64());
        let (pass, round) = match pass {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("scheduling pass: {e}");
                continue;
            }
        };
        if round.synced.rebuilt {
            metrics.state_rebuilds.inc();
        }
        metrics.state_changes.inc_by(round.synced.applied as u64);
        metrics
            .pending
            .get_or_create(&QueueLabel { queue: "active" })
            .set(round.offered as i64);
        metrics
            .pending
            .get_or_create(&QueueLabel {
                queue: "unschedulable",
            })
            .set(round.parked as i64);
        if round.offered == 0 {
            continue;
        }
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
        if let Some(e) = engine.as_mut() {
            e.mirror.resync(again);
        }
        let now = Instant::now();
        for k in outcome.unschedulable.iter().chain(outcome.failed.keys()) {
            backoff.failed(k, now);
        }
        for k in outcome.bound.keys() {
            backoff.clear(k);
        }
        tracing::info!(
            bound = outcome.bound.len(),
            unschedulable = outcome.unschedulable.len(),
            nominated = outcome.nominated.len(),
            failed = outcome.failed.len(),
            applied = round.synced.applied,
            rebuilt = round.synced.rebuilt,
            "pass over {} pending pods in {:.1} ms (state {:.1} ms, engine {:.1} ms, writes the rest)",
            round.offered,
            started.elapsed().as_secs_f64() * 1000.0,
            round.sync_time.as_secs_f64() * 1000.0,
            round.decide_time.as_secs_f64() * 1000.0,
        );
    }
    writer.events.close(Duration::from_secs(5)).await;
    tracing::info!("stopping: no new pods are taken; writes in flight have finished");
    if let Some(l) = leadership {
        l.release().await;
    }
    Ok(())
}
