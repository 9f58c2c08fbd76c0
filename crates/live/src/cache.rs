//! Watch caches of every kind the engine reads, kept current by kube-runtime reflectors.
//!
//! Each kind the API server serves gets a reflector (list, then watch, re-listing after a
//! disconnect with kube-runtime's default backoff); every event wakes the scheduling loop
//! through one [`Notify`]. Kinds the server does not serve (an older cluster without the
//! Workload API, say) are left out and named once in the log.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Notify;

/// The objects of one kind that changed since they were last taken: their keys (as
/// [`key`] gives them), and whether the whole list was read
/// again (after a disconnect), which may have dropped objects without a delete event.
#[derive(Debug, Default)]
pub struct Changed {
    pub keys: std::collections::HashSet<String>,
    pub relisted: bool,
}

/// One kind's cache: its store, or `None` when the API server does not serve the kind.
pub struct Cache<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Option<Store<K>>,
    changed: Arc<std::sync::Mutex<Changed>>,
    /// The reflector's task, stopped when the cache is dropped.
    task: Option<tokio::task::AbortHandle>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Drop for Cache<K> {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn start(client: &Client, served: bool, signal: &Signal) -> Cache<K> {
        if !served {
            tracing::info!(
                kind = %K::kind(&()),
                "the API server does not serve {}/{}; lockstep runs without it",
                K::api_version(&()),
                K::kind(&())
            );
            return Cache {
                store: None,
                changed: Arc::default(),
                task: None,
            };
        }
        let (reader, writer) = reflector::store();
        let api: Api<K> = Api::all(client.clone());
        // managedFields are never read and are a large part of every object: dropped before
        // the store keeps it.
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|o| o.meta_mut().managed_fields = None),
        );
        let signal = signal.clone();
        let changed: Arc<std::sync::Mutex<Changed>> = Arc::default();
        let noted = changed.clone();
        let task = tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(e) => {
                        {
                            let mut c = noted.lock().expect("no holder panics");
                            match e {
                                watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                                    c.keys.insert(key(&o));
                                }
                                watcher::Event::InitDone => c.relisted = true,
                                watcher::Event::Init | watcher::Event::InitApply(_) => {}
                            }
                        }
                        signal.raise()
                    }
                    Err(e) => tracing::warn!(kind = %K::kind(&()), "watch: {e}"),
                }
            }
        });
        Cache {
            store: Some(reader),
            changed,
            task: Some(task.abort_handle()),
        }
    }

    async fn ready(&self) -> Result<(), String> {
        match &self.store {
            Some(s) => s
                .wait_until_ready()
                .await
                .map_err(|e| format!("{}: {e}", K::kind(&()))),
            None => Ok(()),
        }
    }

    /// Takes the record of what changed since the last call.
    pub fn take_changed(&self) -> Changed {
        std::mem::take(&mut *self.changed.lock().expect("no holder panics"))
    }

    /// The cached object of `key` (as [`key`] gives it).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        let store = self.store.as_ref()?;
        let r = match key.split_once('/') {
            Some(("", name)) => reflector::ObjectRef::new(name),
            Some((ns, name)) => reflector::ObjectRef::new(name).within(ns),
            None => reflector::ObjectRef::new(key),
        };
        store.get(&r)
    }

    /// One object as the API server serves it, named for messages (`Pod ml/web`).
    pub fn value_of(o: &K) -> Option<(String, Value)> {
        let name = match o.namespace() {
            Some(ns) => format!("{} {ns}/{}", K::kind(&()), o.name_any()),
            None => format!("{} {}", K::kind(&()), o.name_any()),
        };
        match serde_json::to_value(o) {
            Ok(v) => Some((name, v)),
            Err(e) => {
                tracing::warn!("{name}: cannot be read: {e}");
                None
            }
        }
    }

    /// Every cached object.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.store.as_ref().map(|s| s.state()).unwrap_or_default()
    }

    /// Every object as the API server serves it, each named `Kind namespace/name`
    /// (`Kind name` when cluster-scoped).
    fn values(&self, out: &mut Vec<(String, Value)>) {
        out.extend(self.all().iter().filter_map(|o| Self::value_of(o)));
    }
}

/// Wakes the scheduling loop; counts the events seen, so a pass knows whether anything
/// changed since the previous one.
#[derive(Clone, Default)]
pub struct Signal {
    notify: Arc<Notify>,
    events: Arc<AtomicU64>,
}

impl Signal {
    fn raise(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.notify.notify_one();
    }

    /// Events seen so far.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Waits for the next event (returns at once if one came since the last wait).
    pub async fn changed(&self) {
        self.notify.notified().await;
    }
}

/// The watch caches of every kind the engine reads.
pub struct Caches {
    pub signal: Signal,
    pub namespaces: Cache<Namespace>,
    pub nodes: Cache<Node>,
    pub pods: Cache<Pod>,
    pub priority_classes: Cache<PriorityClass>,
    pub disruption_budgets: Cache<PodDisruptionBudget>,
    pub workloads: Cache<Workload>,
    pub pod_groups: Cache<PodGroup>,
    pub composite_pod_groups: Cache<CompositePodGroup>,
    pub device_classes: Cache<DeviceClass>,
    pub resource_slices: Cache<ResourceSlice>,
    pub resource_claims: Cache<ResourceClaim>,
    pub resource_claim_templates: Cache<ResourceClaimTemplate>,
}

/// Whether the API server serves `K` (its group version lists its plural).
async fn serves<K: Resource<DynamicType = ()>>(client: &Client) -> Result<bool, kube::Error> {
    let gv = K::api_version(&());
    let plural = K::plural(&());
    let list = if K::group(&()).is_empty() {
        client.list_core_api_resources(&gv).await
    } else {
        match client.list_api_group_resources(&gv).await {
            Ok(l) => Ok(l),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => Err(e),
        }
    }?;
    Ok(list.resources.iter().any(|r| r.name == plural))
}

impl Caches {
    /// Starts a reflector for every kind the API server serves.
    pub async fn start(client: &Client) -> Result<Caches, kube::Error> {
        let signal = Signal::default();
        macro_rules! cache {
            ($k:ty) => {
                Cache::<$k>::start(client, serves::<$k>(client).await?, &signal)
            };
        }
        Ok(Caches {
            namespaces: cache!(Namespace),
            nodes: cache!(Node),
            pods: cache!(Pod),
            priority_classes: cache!(PriorityClass),
            disruption_budgets: cache!(PodDisruptionBudget),
            workloads: cache!(Workload),
            pod_groups: cache!(PodGroup),
            composite_pod_groups: cache!(CompositePodGroup),
            device_classes: cache!(DeviceClass),
            resource_slices: cache!(ResourceSlice),
            resource_claims: cache!(ResourceClaim),
            resource_claim_templates: cache!(ResourceClaimTemplate),
            signal,
        })
    }

    /// Waits until every cache holds the API server's first full list.
    pub async fn ready(&self) -> Result<(), String> {
        self.namespaces.ready().await?;
        self.nodes.ready().await?;
        self.pods.ready().await?;
        self.priority_classes.ready().await?;
        self.disruption_budgets.ready().await?;
        self.workloads.ready().await?;
        self.pod_groups.ready().await?;
        self.composite_pod_groups.ready().await?;
        self.device_classes.ready().await?;
        self.resource_slices.ready().await?;
        self.resource_claims.ready().await?;
        self.resource_claim_templates.ready().await
    }

    /// Every cached object, named for messages (`Pod ml/web`).
    pub fn values(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        self.namespaces.values(&mut out);
        self.priority_classes.values(&mut out);
        self.nodes.values(&mut out);
        self.device_classes.values(&mut out);
        self.resource_slices.values(&mut out);
        self.workloads.values(&mut out);
        self.composite_pod_groups.values(&mut out);
        self.pod_groups.values(&mut out);
        self.disruption_budgets.values(&mut out);
        self.resource_claim_templates.values(&mut out);
        self.resource_claims.values(&mut out);
        self.pods.values(&mut out);
        out
    }
}

/// An object's `namespace/name` (`/name` when cluster-scoped).
pub fn key<K: ResourceExt>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}
