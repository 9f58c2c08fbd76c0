//! Watch caches of every kind the engine reads, kept current by kube-runtime watchers.
//!
//! Each kind the API server serves gets a watcher (list, then watch, re-listing after a
//! disconnect with kube-runtime's default backoff); every event wakes the scheduling loop
//! through one [`Notify`]. Kinds the server does not serve (an older cluster without the
//! Workload API, say) are left out and named once in the log.
//!
//! A cache keeps each object compactly: its JSON as the API server serves it (without
//! `managedFields`, which nothing reads) and its resourceVersion, not the typed object (a
//! typed Pod holds about 6 KB, its JSON about 1.1 KB: `examples/cache_footprint.rs`).
//! Readers get the JSON as a value ([`Cache::value`], what the engine's conversion reads)
//! or, for the few objects a write needs, the typed object ([`Cache::get`]); what the loop
//! asks of every pod on every pass is kept beside it ([`PodBrief`]). A re-list replaces the
//! whole set at once, as kube-runtime's store does.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::collections::HashMap;
use std::sync::RwLock;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
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

/// What the scheduling loop asks of every pod on every pass, kept beside its JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodBrief {
    /// The pod's schedulerName when it waits for a node (no node, not deleting, not
    /// finished).
    pub pending_for: Option<Box<str>>,
    /// It has scheduling gates.
    pub gated: bool,
    /// Its `status.nominatedNodeName`.
    pub nominated: Option<Box<str>>,
    /// The node it is leaving, when it is being deleted from one.
    pub leaving: Option<Box<str>>,
}

impl PodBrief {
    fn of(pod: &Pod) -> PodBrief {
        let spec = pod.spec.as_ref();
        let node = spec.and_then(|s| s.node_name.as_deref());
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let finished = matches!(phase, Some("Succeeded" | "Failed"));
        PodBrief {
            pending_for: (spec.is_some() && node.is_none() && !deleting && !finished).then(|| {
                spec.and_then(|s| s.scheduler_name.as_deref())
                    .unwrap_or("default-scheduler")
                    .into()
            }),
            gated: spec
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty()),
            nominated: pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .map(Into::into),
            leaving: node.filter(|_| deleting).map(Into::into),
        }
    }
}

/// One cached object.
struct Entry {
    version: Box<str>,
    json: Arc<[u8]>,
    /// For pods.
    brief: Option<PodBrief>,
}

/// A kind's objects by key, and the set a re-list is building.
#[derive(Default)]
struct Objects {
    by_key: HashMap<String, Entry>,
    relisting: Option<HashMap<String, Entry>>,
    ready: bool,
}

/// One kind's cache: its objects, or `None` when the API server does not serve the kind.
pub struct Cache<K: Resource<DynamicType = ()> + Clone + 'static> {
    objects: Option<Arc<RwLock<Objects>>>,
    /// Raised when the first list is in.
    listed: Arc<Notify>,
    changed: Arc<std::sync::Mutex<Changed>>,
    /// The watcher's task, stopped when the cache is dropped.
    task: Option<tokio::task::AbortHandle>,
    kind: std::marker::PhantomData<fn() -> K>,
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
                objects: None,
                listed: Arc::default(),
                changed: Arc::default(),
                task: None,
                kind: std::marker::PhantomData,
            };
        }
        let api: Api<K> = Api::all(client.clone());
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        let signal = signal.clone();
        let objects: Arc<RwLock<Objects>> = Arc::default();
        let listed: Arc<Notify> = Arc::default();
        let changed: Arc<std::sync::Mutex<Changed>> = Arc::default();
        let (kept, noted, first) = (objects.clone(), changed.clone(), listed.clone());
        let task = tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(e) => {
                        keep(&kept, &noted, &first, e);
                        signal.raise()
                    }
                    Err(e) => tracing::warn!(kind = %K::kind(&()), "watch: {e}"),
                }
            }
        });
        Cache {
            objects: Some(objects),
            listed,
            changed,
            task: Some(task.abort_handle()),
            kind: std::marker::PhantomData,
        }
    }

    async fn ready(&self) -> Result<(), String> {
        let Some(objects) = &self.objects else {
            return Ok(());
        };
        loop {
            let listed = self.listed.notified();
            if objects.read().expect("no holder panics").ready {
                return Ok(());
            }
            listed.await;
        }
    }

    /// Takes the record of what changed since the last call.
    pub fn take_changed(&self) -> Changed {
        std::mem::take(&mut *self.changed.lock().expect("no holder panics"))
    }

    /// The cached object of `key` (as [`key`] gives it), typed: for the few objects a
    /// write needs (it is read from the kept JSON).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        let json = self.json(key)?;
        match serde_json::from_slice(&json) {
            Ok(o) => Some(Arc::new(o)),
            Err(e) => {
                tracing::warn!("{} {key}: cannot be read: {e}", K::kind(&()));
                None
            }
        }
    }

    fn json(&self, key: &str) -> Option<Arc<[u8]>> {
        let objects = self.objects.as_ref()?.read().expect("no holder panics");
        objects.by_key.get(key).map(|e| e.json.clone())
    }

    /// The resourceVersion of the cached object of `key`.
    pub fn version(&self, key: &str) -> Option<String> {
        let objects = self.objects.as_ref()?.read().expect("no holder panics");
        objects.by_key.get(key).map(|e| e.version.to_string())
    }

    /// The cached object of `key` as the API server serves it, named for messages
    /// (`Pod ml/web`; `Kind name` when cluster-scoped).
    pub fn value(&self, key: &str) -> Option<(String, Value)> {
        let json = self.json(key)?;
        let name = match key.strip_prefix('/') {
            Some(name) => format!("{} {name}", K::kind(&())),
            None => format!("{} {key}", K::kind(&())),
        };
        match serde_json::from_slice(&json) {
            Ok(v) => Some((name, v)),
            Err(e) => {
                tracing::warn!("{name}: cannot be read: {e}");
                None
            }
        }
    }

    /// The keys of every cached object.
    pub fn keys(&self) -> Vec<String> {
        self.objects.as_ref().map_or_else(Vec::new, |o| {
            o.read()
                .expect("no holder panics")
                .by_key
                .keys()
                .cloned()
                .collect()
        })
    }

    /// The cached objects whose keys `wanted` accepts, typed (read from the kept JSON: for
    /// small kinds or a narrow `wanted`).
    pub fn all_where(&self, mut wanted: impl FnMut(&str) -> bool) -> Vec<Arc<K>> {
        let keys: Vec<String> = self.keys().into_iter().filter(|k| wanted(k)).collect();
        keys.iter().filter_map(|k| self.get(k)).collect()
    }

    /// Every object as the API server serves it, each named `Kind namespace/name`
    /// (`Kind name` when cluster-scoped).
    fn values(&self, out: &mut Vec<(String, Value)>) {
        let mut keys = self.keys();
        keys.sort();
        out.extend(keys.iter().filter_map(|k| self.value(k)));
    }
}

impl Cache<Pod> {
    /// Calls `f` with every cached pod's key and [`PodBrief`].
    pub fn for_each_brief(&self, mut f: impl FnMut(&str, &PodBrief)) {
        let Some(objects) = &self.objects else {
            return;
        };
        for (k, e) in &objects.read().expect("no holder panics").by_key {
            if let Some(b) = &e.brief {
                f(k, b);
            }
        }
    }
}

/// Applies one watch event to a kind's objects and notes the keys it touched; a re-list
/// builds a new set and swaps it in whole when it is complete.
fn keep<K>(
    objects: &RwLock<Objects>,
    noted: &std::sync::Mutex<Changed>,
    listed: &Notify,
    event: watcher::Event<K>,
) where
    K: Resource<DynamicType = ()> + Serialize + 'static,
{
    let mut objects = objects.write().expect("no holder panics");
    let mut changed = noted.lock().expect("no holder panics");
    match event {
        watcher::Event::Apply(o) => {
            let k = key(&o);
            if let Some(e) = entry(o) {
                objects.by_key.insert(k.clone(), e);
            }
            changed.keys.insert(k);
        }
        watcher::Event::Delete(o) => {
            let k = key(&o);
            objects.by_key.remove(&k);
            changed.keys.insert(k);
        }
        watcher::Event::Init => objects.relisting = Some(HashMap::new()),
        watcher::Event::InitApply(o) => {
            let k = key(&o);
            if let (Some(e), Some(set)) = (entry(o), objects.relisting.as_mut()) {
                set.insert(k, e);
            }
        }
        watcher::Event::InitDone => {
            if let Some(set) = objects.relisting.take() {
                objects.by_key = set;
            }
            objects.ready = true;
            changed.relisted = true;
            listed.notify_waiters();
        }
    }
}

/// An object as a cache keeps it; `None` (logged) when it cannot be written as JSON.
fn entry<K: Resource<DynamicType = ()> + Serialize + 'static>(mut o: K) -> Option<Entry> {
    o.meta_mut().managed_fields = None;
    let version = o.meta().resource_version.clone().unwrap_or_default().into();
    let brief = (&o as &dyn std::any::Any)
        .downcast_ref::<Pod>()
        .map(PodBrief::of);
    match serde_json::to_vec(&o) {
        Ok(json) => Some(Entry {
            version,
            json: json.into(),
            brief,
        }),
        Err(e) => {
            tracing::warn!("{} {}: cannot be kept: {e}", K::kind(&()), key(&o));
            None
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pod(name: &str, node: Option<&str>, deleting: bool, gates: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name, "namespace": "ml", "resourceVersion": format!("rv-{name}"),
                "managedFields": [{"manager": "kubectl"}],
                "deletionTimestamp": deleting.then_some("2026-11-26T10:00:00Z"),
            },
            "spec": {
                "schedulerName": "lockstep", "nodeName": node,
                "schedulingGates": if gates { serde_json::json!([{"name": "wait"}]) } else { serde_json::json!([]) },
                "containers": [{"name": "c"}],
            },
            "status": {"nominatedNodeName": "n2"},
        }))
        .unwrap()
    }

    fn cache() -> (Cache<Pod>, Arc<RwLock<Objects>>) {
        let objects: Arc<RwLock<Objects>> = Arc::default();
        let cache = Cache {
            objects: Some(objects.clone()),
            listed: Arc::default(),
            changed: Arc::default(),
            task: None,
            kind: std::marker::PhantomData,
        };
        (cache, objects)
    }

    #[test]
    fn events_keep_compact_objects_and_a_relist_replaces_the_set_whole() {
        let (c, objects) = cache();
        let event = |e| keep(&objects, &c.changed, &c.listed, e);
        event(watcher::Event::Init);
        event(watcher::Event::InitApply(pod("a", None, false, true)));
        assert!(c.keys().is_empty(), "a list in progress is not visible");
        event(watcher::Event::InitDone);
        assert_eq!(c.keys(), ["ml/a"]);
        assert!(objects.read().unwrap().ready);

        event(watcher::Event::Apply(pod("b", Some("n1"), true, false)));
        let (name, value) = c.value("ml/b").unwrap();
        assert_eq!(name, "Pod ml/b");
        assert_eq!(value["spec"]["nodeName"], "n1");
        assert!(value["metadata"].get("managedFields").is_none());
        assert_eq!(c.version("ml/b").as_deref(), Some("rv-b"));
        let typed = c.get("ml/b").unwrap();
        assert_eq!(
            typed.spec.as_ref().unwrap().node_name.as_deref(),
            Some("n1")
        );

        let mut briefs = BTreeMap::new();
        c.for_each_brief(|k, b| {
            briefs.insert(k.to_string(), b.clone());
        });
        assert_eq!(briefs["ml/a"].pending_for.as_deref(), Some("lockstep"));
        assert!(briefs["ml/a"].gated);
        assert_eq!(briefs["ml/a"].nominated.as_deref(), Some("n2"));
        assert_eq!(briefs["ml/b"].pending_for, None);
        assert_eq!(briefs["ml/b"].leaving.as_deref(), Some("n1"));

        let changed = c.take_changed();
        assert!(changed.relisted);
        assert!(changed.keys.contains("ml/b"));

        // A re-list that no longer has `a` drops it without a delete event.
        event(watcher::Event::Init);
        event(watcher::Event::InitApply(pod("b", Some("n1"), true, false)));
        assert_eq!(
            c.keys().len(),
            2,
            "the old set serves until the list is complete"
        );
        event(watcher::Event::InitDone);
        assert_eq!(c.keys(), ["ml/b"]);
        event(watcher::Event::Delete(pod("b", Some("n1"), true, false)));
        assert!(c.keys().is_empty());
        assert!(c.get("ml/b").is_none());
    }
}
