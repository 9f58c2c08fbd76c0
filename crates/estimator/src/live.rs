//! A live member cluster (`--kubeconfig`): the same kube-runtime watch caches as
//! `lockstep run` (`lockstep_live::cache`), applied to the member in place after every
//! change (`lockstep_live::mirror`), and
//! `GetUnschedulableReplicas` from the cached pods.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use lockstep_engine::{Change, ChangeError, ClusterState, Options};
use lockstep_live::cache::Caches;
use lockstep_live::cycle::Assumed;
use lockstep_live::mirror::{Mirror, Target};
use tonic::Status;

use crate::member::Member;
use crate::proto::pb;
use crate::service::{State, Unschedulable};

const SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// Events this close together are read in one go.
const DEBOUNCE: Duration = Duration::from_millis(20);

#[derive(Clone)]
pub struct Live {
    caches: Arc<Caches>,
    client: Client,
}

impl Live {
    /// Starts the watch caches and waits for their first lists.
    pub async fn start(client: Client) -> Result<Arc<Live>, String> {
        let caches = Caches::start(&client)
            .await
            .map_err(|e| format!("cannot start watching the cluster: {e}"))?;
        match tokio::time::timeout(SYNC_TIMEOUT, caches.ready()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(format!(
                    "the watch caches did not sync within {} s",
                    SYNC_TIMEOUT.as_secs()
                ));
            }
        }
        Ok(Arc::new(Live {
            caches: Arc::new(caches),
            client,
        }))
    }

    /// Keeps `state`'s member equal to the cluster: the objects each change touched are
    /// applied to its state in place (as `lockstep run` keeps its own; objects that cannot
    /// be read are left out and logged once; a cluster the engine cannot take keeps the
    /// previous member). Requests wait while a change is applied.
    pub async fn follow(self: Arc<Self>, state: Arc<State>) {
        let mut mirror = Some(Mirror::new(Options::default()));
        let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
        loop {
            let events = self.caches.signal.events();
            let m = mirror
                .take()
                .unwrap_or_else(|| Mirror::new(Options::default()));
            let (caches, st) = (self.caches.clone(), state.clone());
            let synced = tokio::task::spawn_blocking(move || {
                let mut m = m;
                let r = st.with_member_slot(|slot| m.sync(slot, &caches, &Assumed::default()));
                (m, r)
            })
            .await;
            match synced {
                Ok((m, r)) => {
                    match r {
                        Ok(_) => {
                            for (object, why) in &m.excluded {
                                if reported.insert((object.clone(), why.clone())) {
                                    tracing::warn!("{object} is left out of the estimates: {why}");
                                }
                            }
                        }
                        Err(e) => tracing::warn!("the cluster's state cannot be read: {e}"),
                    }
                    mirror = Some(m);
                }
                // A panic: the next round builds the member again.
                Err(e) => {
                    tracing::warn!("reading the cluster's state failed: {e}");
                    state.with_member_slot(|slot| *slot = None);
                }
            }
            if self.caches.signal.events() == events {
                self.caches.signal.changed().await;
            }
            tokio::time::sleep(DEBOUNCE).await;
        }
    }

    fn pods_owned_by(&self, namespace: &str, uids: &[String]) -> Vec<Arc<Pod>> {
        let prefix = format!("{namespace}/");
        self.caches
            .pods
            .all_where(|k| k.starts_with(&prefix))
            .into_iter()
            .filter(|p| {
                p.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && uids.contains(&o.uid))
            })
            .collect()
    }
}

fn api_error(e: kube::Error, what: &str) -> Status {
    match e {
        kube::Error::Api(s) if s.code == 404 => Status::not_found(format!("{what} not found")),
        e => Status::unavailable(format!("cannot read {what}: {e}")),
    }
}

/// Whether `pod` has been unschedulable (condition PodScheduled False, reason
/// Unschedulable) for longer than `threshold` at `now`.
pub fn unschedulable_for(pod: &Pod, threshold: Duration, now: Timestamp) -> bool {
    let Some(conditions) = pod.status.as_ref().and_then(|s| s.conditions.as_ref()) else {
        return false;
    };
    conditions.iter().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
            && c.last_transition_time.as_ref().is_some_and(|t| {
                let since = now.duration_since(t.0);
                since.as_secs_f64() > threshold.as_secs_f64()
            })
    })
}

impl Target for Member {
    fn build(
        values: Vec<(String, serde_json::Value)>,
        _options: &Options,
    ) -> Result<(Self, Vec<(String, String)>), String> {
        let (cluster, excluded) = lockstep_live::cycle::load_leaving_out(values)?;
        Member::new(cluster).map(|m| (m, excluded))
    }
    fn state(&self) -> &ClusterState {
        Member::state(self)
    }
    fn apply(&mut self, change: Change) -> Result<lockstep_engine::Applied, ChangeError> {
        Member::apply(self, change)
    }
}

#[tonic::async_trait]
impl Unschedulable for Live {
    async fn unschedulable(
        &self,
        resource: &pb::ObjectReference,
        threshold: Duration,
    ) -> Result<u64, Status> {
        let ns = resource.namespace.as_str();
        let what = format!("{} {}/{}", resource.kind, ns, resource.name);
        let owners: Vec<String> = match (resource.api_version.as_str(), resource.kind.as_str()) {
            ("apps/v1", "Deployment") => {
                let d = Api::<Deployment>::namespaced(self.client.clone(), ns)
                    .get(&resource.name)
                    .await
                    .map_err(|e| api_error(e, &what))?;
                let uid = d.uid().unwrap_or_default();
                let revision = d
                    .annotations()
                    .get("deployment.kubernetes.io/revision")
                    .cloned();
                let sets = Api::<ReplicaSet>::namespaced(self.client.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| api_error(e, &format!("the ReplicaSets of {what}")))?;
                let mut owned: Vec<ReplicaSet> = sets
                    .items
                    .into_iter()
                    .filter(|rs| rs.owner_references().iter().any(|o| o.uid == uid))
                    .collect();
                // The Deployment's current ReplicaSet: the one of its revision, else the
                // newest.
                owned.sort_by_key(|rs| rs.creation_timestamp().map(|t| t.0));
                let current = owned
                    .iter()
                    .find(|rs| {
                        revision.is_some()
                            && rs.annotations().get("deployment.kubernetes.io/revision")
                                == revision.as_ref()
                    })
                    .or(owned.last());
                current.and_then(|rs| rs.uid()).into_iter().collect()
            }
            ("apps/v1", "ReplicaSet") => vec![
                Api::<ReplicaSet>::namespaced(self.client.clone(), ns)
                    .get(&resource.name)
                    .await
                    .map_err(|e| api_error(e, &what))?
                    .uid()
                    .unwrap_or_default(),
            ],
            ("apps/v1", "StatefulSet") => vec![
                Api::<StatefulSet>::namespaced(self.client.clone(), ns)
                    .get(&resource.name)
                    .await
                    .map_err(|e| api_error(e, &what))?
                    .uid()
                    .unwrap_or_default(),
            ],
            ("batch/v1", "Job") => vec![
                Api::<Job>::namespaced(self.client.clone(), ns)
                    .get(&resource.name)
                    .await
                    .map_err(|e| api_error(e, &what))?
                    .uid()
                    .unwrap_or_default(),
            ],
            (v, k) => {
                return Err(Status::invalid_argument(format!(
                    "resource: {v} {k} is not supported; give an apps/v1 Deployment, \
                     ReplicaSet or StatefulSet, or a batch/v1 Job"
                )));
            }
        };
        let now = Timestamp::now();
        Ok(self
            .pods_owned_by(ns, &owners)
            .iter()
            .filter(|p| unschedulable_for(p, threshold, now))
            .count() as u64)
    }
}
