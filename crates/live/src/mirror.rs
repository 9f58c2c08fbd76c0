//! The engine's cluster state, kept equal to the watch caches object by object.
//!
//! A pass does not rebuild the cluster: the objects that changed since the last pass (the
//! caches note their keys) are converted one by one, with the same validation as a
//! manifest, and applied to the scheduler's [`ClusterState`] as adds, updates and deletes,
//! so a pass costs what changed, not the cluster's size. Decisions not yet visible in the
//! caches stay laid over the objects (a pod bound by lockstep keeps its node until the
//! watch shows the binding; a claim keeps the allocation written for it).
//!
//! Kinds whose objects are read together (Namespaces, PriorityClasses, Workloads,
//! CompositePodGroups, DeviceClasses, and a PodGroup whose parent changes: the group tree,
//! priorities and CEL are checked across objects) make the next pass rebuild the state from
//! the caches; they change rarely. So does the first pass, and a new resource name.
//!
//! An object that cannot be read or that the state refuses (a claim of an unknown class)
//! is left out — its previous version removed — and reported; the pods that need it are not
//! scheduled, everything else is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;

use kube::Resource;
use lockstep_engine::{
    Applied, Change, ChangeError, ClusterState, Key, Kind, Object, Options, Scheduler,
};
use lockstep_manifests::Converted;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Cache, Caches, Changed};
use crate::cycle::{self, Assumed};

/// What a [`Mirror`] keeps equal to the caches: the scheduler of `lockstep run`, or the
/// member of a live estimator.
pub trait Target: Sized {
    /// Builds it from every cached object; objects that cannot be read are left out and
    /// returned with why.
    fn build(
        values: Vec<(String, serde_json::Value)>,
        options: &Options,
    ) -> Result<(Self, Vec<(String, String)>), String>;
    fn state(&self) -> &ClusterState;
    fn apply(&mut self, change: Change) -> Result<Applied, ChangeError>;
}

impl Target for Scheduler {
    fn build(
        values: Vec<(String, serde_json::Value)>,
        options: &Options,
    ) -> Result<(Self, Vec<(String, String)>), String> {
        cycle::build(values, options)
    }
    fn state(&self) -> &ClusterState {
        Scheduler::state(self)
    }
    fn apply(&mut self, change: Change) -> Result<Applied, ChangeError> {
        Scheduler::apply(self, change)
    }
}

/// What the state a [`Target`] holds was built from. The target itself is the caller's
/// (`Option<T>`: `None` until the first sync), so a service can keep it under its own lock.
/// One mirror per [`Caches`]: a sync takes the caches' notes of what changed.
pub struct Mirror {
    options: Options,
    /// The resourceVersion of every object the state holds, by kind and key.
    versions: HashMap<(Kind, String), String>,
    /// Objects left out, by display name (`Pod ml/web`), with why.
    pub excluded: BTreeMap<String, String>,
    /// Pods to read again from the cache in the next pass whatever their version (a pass
    /// decided about them and the decision was not carried out as an assumed binding).
    resync: HashSet<String>,
}

/// What [`Mirror::sync`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Synced {
    /// The state was built again from every cached object (ids from before mean nothing).
    pub rebuilt: bool,
    /// Objects applied one by one (adds, updates and deletes).
    pub applied: usize,
    /// The pod slots those changes added, changed or emptied.
    pub pods: Vec<lockstep_model::PodId>,
}

/// A kind's objects converted one by one, in the order they are applied (nodes before the
/// pods bound to them, claims before the pods that use them).
#[derive(Debug, Clone, Copy)]
enum Alone {
    Node,
    ResourceSlice,
    ResourceClaimTemplate,
    ResourceClaim,
    PodDisruptionBudget,
    PodGroup,
    Pod,
}

impl Alone {
    const ALL: [Alone; 7] = [
        Alone::Node,
        Alone::ResourceSlice,
        Alone::ResourceClaimTemplate,
        Alone::ResourceClaim,
        Alone::PodDisruptionBudget,
        Alone::PodGroup,
        Alone::Pod,
    ];

    fn kind(self) -> Kind {
        match self {
            Alone::Node => Kind::Node,
            Alone::ResourceSlice => Kind::ResourceSlice,
            Alone::ResourceClaimTemplate => Kind::ResourceClaimTemplate,
            Alone::ResourceClaim => Kind::ResourceClaim,
            Alone::PodDisruptionBudget => Kind::PodDisruptionBudget,
            Alone::PodGroup => Kind::PodGroup,
            Alone::Pod => Kind::Pod,
        }
    }
}

fn engine_key(key: &str) -> Key {
    match key.split_once('/') {
        Some(("", name)) => Key::cluster(name),
        Some((ns, name)) => Key::namespaced(ns, name),
        None => Key::cluster(key),
    }
}

fn object(c: Converted) -> Object {
    match c {
        Converted::Node(o) => Object::Node(o),
        Converted::Pod(o) => Object::Pod(o),
        Converted::PodDisruptionBudget(o) => Object::PodDisruptionBudget(o),
        Converted::PodGroup(o) => Object::PodGroup(o),
        Converted::ResourceSlice(o) => Object::ResourceSlice(o),
        Converted::ResourceClaim(o) => Object::ResourceClaim(o),
        Converted::ResourceClaimTemplate(o) => Object::ResourceClaimTemplate(o),
    }
}

/// One incremental pass over a kind: what changed, then each object read or deleted.
struct Step<'a, T> {
    target: &'a mut T,
    versions: &'a mut HashMap<(Kind, String), String>,
    excluded: &'a mut BTreeMap<String, String>,
    assumed: &'a Assumed,
    applied: usize,
    pods: Vec<lockstep_model::PodId>,
    /// The state's resource names, which conversions intern new names into (any new one
    /// makes the state rebuilt, so one copy serves the whole sync).
    names: lockstep_model::ResourceNames,
    /// Set when an object needs the whole state rebuilt.
    rebuild: bool,
}

impl<T: Target> Step<'_, T> {
    fn kind<K>(&mut self, alone: Alone, cache: &Cache<K>, changed: Changed, resync: &[String])
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
        K: Send + Sync + 'static,
    {
        let kind = alone.kind();
        let mut keys: std::collections::BTreeSet<String> = changed.keys.into_iter().collect();
        if changed.relisted {
            // A re-list may have dropped objects without delete events.
            keys.extend(cache.keys());
            keys.extend(
                self.versions
                    .keys()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, key)| key.clone()),
            );
        }
        keys.extend(resync.iter().cloned());
        for key in keys {
            let forced = resync.binary_search(&key).is_ok();
            self.one(alone, cache, &key, forced);
            if self.rebuild {
                return;
            }
        }
    }

    fn one<K>(&mut self, alone: Alone, cache: &Cache<K>, key: &str, forced: bool)
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
        K: Send + Sync + 'static,
    {
        let kind = alone.kind();
        let id = (kind, key.to_string());

        let Some(rv) = cache.version(key) else {
            if self.versions.remove(&id).is_some() {
                self.delete(kind, key);
            }
            self.excluded.retain(|name, _| !named(name, kind, key));
            return;
        };
        if !forced && self.versions.get(&id) == Some(&rv) {
            return;
        }
        let Some((name, mut value)) = cache.value(key) else {
            return;
        };
        // The version of the value read (it may be newer than the one looked at above).
        let rv = value
            .pointer("/metadata/resourceVersion")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string();
        cycle::overlay_one(kind.as_str(), key, &mut value, self.assumed);
        let state = self.target.state();
        let converted = lockstep_manifests::convert_object(
            &name,
            value,
            &mut self.names,
            &state.cluster.priority_classes,
        );
        if self.names.len() > state.cluster.resources.len() {
            // A new resource name: the plugins resolve names when they are built.
            self.rebuild = true;
            return;
        }
        let converted = match converted {
            Ok(Some((c, warnings))) => {
                for w in warnings {
                    tracing::debug!("{w}");
                }
                c
            }
            Ok(None) => return,
            Err(e) => {
                self.leave_out(id, name, e.to_string());
                return;
            }
        };
        if let Converted::PodGroup(g) = &converted
            && g.parent.is_some()
        {
            let before = state.object(Kind::PodGroup, &engine_key(key));
            let same_parent =
                matches!(&before, Some(Object::PodGroup(old)) if old.parent == g.parent);
            if !same_parent {
                self.rebuild = true;
                return;
            }
        }
        let held = self.versions.contains_key(&id);
        // A new version the engine reads the same (a status lockstep wrote, a heartbeat)
        // is not a change; a pod read again after a decision always is (its placement in
        // the state may differ from its object).
        let unchanged = held
            && !forced
            && match &converted {
                Converted::Pod(p) => state
                    .pod_id(&p.namespace, &p.name)
                    .is_some_and(|id| state.pod(id) == p),
                Converted::Node(n) => state.node_id(&n.name).is_some_and(|id| state.node(id) == n),
                _ => false,
            };
        if unchanged {
            self.versions.insert(id, rv);
            return;
        }
        let o = object(converted);
        let change = if held {
            Change::Update(o)
        } else {
            Change::Add(o)
        };
        match self.target.apply(change) {
            Ok(applied) => {
                if let Applied::Pod(p) = applied {
                    self.pods.push(p);
                }
                self.versions.insert(id, rv);
                self.excluded.remove(&name);
                self.applied += 1;
            }
            Err(e) => self.leave_out(id, name, e.to_string()),
        }
    }

    /// Deletes an object the state holds.
    fn delete(&mut self, kind: Kind, key: &str) {
        let key = engine_key(key);
        if kind == Kind::Pod
            && let Some(p) = self.target.state().pod_id(&key.namespace, &key.name)
        {
            self.pods.push(p);
        }
        if let Err(e) = self.target.apply(Change::Delete(kind, key.clone())) {
            tracing::warn!("{kind} {key}: deleting it from the state: {e}");
        }
        self.applied += 1;
    }

    /// Leaves an object out: its previous version is deleted from the state.
    fn leave_out(&mut self, id: (Kind, String), name: String, why: String) {
        if self.versions.remove(&id).is_some() {
            self.delete(id.0, &id.1);
        }
        self.excluded.insert(name, why);
    }
}

/// Whether the display name `name` (`Pod ml/web`, `Node n1`) is `kind`'s object `key`.
fn named(name: &str, kind: Kind, key: &str) -> bool {
    name.strip_prefix(kind.as_str())
        .and_then(|rest| rest.strip_prefix(' '))
        .is_some_and(|rest| rest == key.trim_start_matches('/'))
}

impl Mirror {
    pub fn new(options: Options) -> Mirror {
        Mirror {
            options,
            versions: HashMap::new(),
            excluded: BTreeMap::new(),
            resync: HashSet::new(),
        }
    }

    /// Reads these pods again in the next pass, whatever their version.
    pub fn resync(&mut self, pods: impl IntoIterator<Item = String>) {
        self.resync.extend(pods);
    }

    /// Brings `target`'s state up to the caches (with `assumed` laid over them); builds it
    /// when it is `None`.
    pub fn sync<T: Target>(
        &mut self,
        target: &mut Option<T>,
        caches: &Caches,
        assumed: &Assumed,
    ) -> Result<Synced, String> {
        let changed = [
            caches.nodes.take_changed(),
            caches.resource_slices.take_changed(),
            caches.resource_claim_templates.take_changed(),
            caches.resource_claims.take_changed(),
            caches.disruption_budgets.take_changed(),
            caches.pod_groups.take_changed(),
            caches.pods.take_changed(),
        ];
        let together = [
            caches.namespaces.take_changed(),
            caches.priority_classes.take_changed(),
            caches.workloads.take_changed(),
            caches.composite_pod_groups.take_changed(),
            caches.device_classes.take_changed(),
        ];
        let mut resync: Vec<String> = std::mem::take(&mut self.resync).into_iter().collect();
        resync.sort_unstable();
        let any_together = together.iter().any(|c| c.relisted || !c.keys.is_empty());
        if target.is_none() || any_together {
            self.rebuild(target, caches, assumed)?;
            return Ok(Synced {
                rebuilt: true,
                ..Synced::default()
            });
        }
        let kept = target.as_mut().expect("checked above");
        let mut step = Step {
            names: kept.state().cluster.resources.clone(),
            target: kept,
            versions: &mut self.versions,
            excluded: &mut self.excluded,
            assumed,
            applied: 0,
            pods: Vec::new(),
            rebuild: false,
        };
        for (alone, changed) in Alone::ALL.into_iter().zip(changed) {
            let resync: &[String] = if matches!(alone, Alone::Pod) {
                &resync
            } else {
                &[]
            };
            match alone {
                Alone::Node => step.kind(alone, &caches.nodes, changed, resync),
                Alone::ResourceSlice => step.kind(alone, &caches.resource_slices, changed, resync),
                Alone::ResourceClaimTemplate => {
                    step.kind(alone, &caches.resource_claim_templates, changed, resync)
                }
                Alone::ResourceClaim => step.kind(alone, &caches.resource_claims, changed, resync),
                Alone::PodDisruptionBudget => {
                    step.kind(alone, &caches.disruption_budgets, changed, resync)
                }
                Alone::PodGroup => step.kind(alone, &caches.pod_groups, changed, resync),
                Alone::Pod => step.kind(alone, &caches.pods, changed, resync),
            }
            if step.rebuild {
                break;
            }
        }
        let (applied, rebuild, pods) = (step.applied, step.rebuild, step.pods);
        if rebuild {
            self.rebuild(target, caches, assumed)?;
            return Ok(Synced {
                rebuilt: true,
                ..Synced::default()
            });
        }
        Ok(Synced {
            rebuilt: false,
            applied,
            pods,
        })
    }

    /// Builds the state again from every cached object.
    fn rebuild<T: Target>(
        &mut self,
        target: &mut Option<T>,
        caches: &Caches,
        assumed: &Assumed,
    ) -> Result<(), String> {
        let mut values = caches.values();
        cycle::overlay(&mut values, assumed);
        // The versions of exactly the objects the state is built from: an object that
        // changes while it is built is noted and read in the next sync.
        let mut versions = HashMap::new();
        for (name, v) in &values {
            let kind = match v.get("kind").and_then(serde_json::Value::as_str) {
                Some("Node") => Kind::Node,
                Some("ResourceSlice") => Kind::ResourceSlice,
                Some("ResourceClaimTemplate") => Kind::ResourceClaimTemplate,
                Some("ResourceClaim") => Kind::ResourceClaim,
                Some("PodDisruptionBudget") => Kind::PodDisruptionBudget,
                Some("PodGroup") => Kind::PodGroup,
                Some("Pod") => Kind::Pod,
                _ => continue,
            };
            let text = |field: &str| {
                v.pointer(&format!("/metadata/{field}"))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let key = format!("{}/{}", text("namespace"), text("name"));
            versions.insert((kind, key), (name.clone(), text("resourceVersion")));
        }
        // On failure the previous target stays (it is the last state that could be built).
        let (built, excluded) = T::build(values, &self.options)?;
        *target = Some(built);
        self.excluded = excluded.into_iter().collect();
        self.versions = versions
            .into_iter()
            .filter(|(_, (name, _))| !self.excluded.contains_key(name))
            .map(|(id, (_, rv))| (id, rv))
            .collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_display_names() {
        assert_eq!(engine_key("ml/web"), Key::namespaced("ml", "web"));
        assert_eq!(engine_key("/n1"), Key::cluster("n1"));
        assert!(named("Pod ml/web", Kind::Pod, "ml/web"));
        assert!(named("Node n1", Kind::Node, "/n1"));
        assert!(!named("Pod ml/web", Kind::Node, "ml/web"));
        assert!(!named("Pod ml/webs", Kind::Pod, "ml/web"));
    }
}
