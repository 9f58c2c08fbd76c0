//! Member clusters whose own manifests are given (`--member CLUSTER=PATH`): their replica
//! estimates are exact, node by node, with lockstep's engine (every filter, free resources,
//! pod slots and DRA devices), the accurate estimator's role in Karmada.
//!
//! Each binding becomes a pod shape: its `replicaRequirements` as a Pod (node selector,
//! required node affinity from `hardNodeAffinity`, tolerations, requests, and
//! `resourceClaimRefs` as `spec.resourceClaims`) in the binding's namespace (`default` for a
//! ClusterResourceBinding), loaded with the member's manifests so it is validated and may
//! name the member's claim templates. The member's pods are its state; a pod labelled
//! `resourcebinding.karmada.io/namespace` + `resourcebinding.karmada.io/name` (or
//! `clusterresourcebinding.karmada.io/name`) is one of that binding's replicas there.
//! Replicas this run places are added to the member's cluster state as running pods,
//! first-fit onto nodes in name order, so later estimates see them; evicting a binding
//! deletes its pods. The shapes are pending pods of the state. Each of these is a change of
//! the engine's `ClusterState`: nothing is rebuilt per estimate.

use std::collections::BTreeMap;

use lockstep_engine::{Change, ClusterState, Framework, Key, Kind, Object, Profile};
use lockstep_manifests::Source;
use lockstep_model::{Pod, PodId, PodPhase};
use serde_json::json;

use crate::error::FederationError;
use crate::model::Binding;

pub const RB_NAMESPACE_LABEL: &str = "resourcebinding.karmada.io/namespace";
pub const RB_NAME_LABEL: &str = "resourcebinding.karmada.io/name";
pub const CRB_NAME_LABEL: &str = "clusterresourcebinding.karmada.io/name";

/// Where the binding shapes are said to come from in messages.
const SHAPES: &str = "replicaRequirements of the bindings";

pub struct Member {
    pub cluster: String,
    /// The member's nodes, pods and other objects, the bindings' shapes as pending pods,
    /// and the replicas this run placed.
    state: ClusterState,
    framework: Framework,
    /// Binding index -> its shape pod in the state.
    shapes: BTreeMap<usize, PodId>,
    /// Binding index -> its replicas of the member's own manifests still there, in input
    /// order.
    base: BTreeMap<usize, Vec<Key>>,
    /// Binding index -> replicas this run placed.
    assumed: BTreeMap<usize, Vec<Key>>,
    /// Numbers assumed pods' names.
    serial: usize,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

fn pod_key(p: &Pod) -> Key {
    Key::namespaced(&p.namespace, &p.name)
}

fn shape_name(b: &Binding) -> (String, String) {
    match &b.namespace {
        Some(ns) => (ns.clone(), format!("rb.{}", b.name)),
        None => ("default".to_string(), format!("crb.{}", b.name)),
    }
}

/// The Pod a binding's replica is on a member.
fn shape_manifest(b: &Binding) -> serde_json::Value {
    let (namespace, name) = shape_name(b);
    let mut requests = serde_json::Map::new();
    let mut spec = serde_json::Map::new();
    if let Some(r) = &b.requirements {
        for (k, v) in &r.requests {
            requests.insert(k.clone(), json!(format!("{v}m")));
        }
        if let Some(nc) = &r.node_claim {
            if !nc.node_selector.is_empty() {
                spec.insert("nodeSelector".into(), json!(nc.node_selector));
            }
            if !nc.tolerations.is_empty() {
                spec.insert(
                    "tolerations".into(),
                    serde_json::to_value(&nc.tolerations).unwrap_or_default(),
                );
            }
            if let Some(a) = &nc.hard_node_affinity {
                spec.insert(
                    "affinity".into(),
                    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                        serde_json::to_value(a).unwrap_or_default()}}),
                );
            }
        }
        if !r.claims.is_empty() {
            spec.insert(
                "resourceClaims".into(),
                serde_json::to_value(&r.claims).unwrap_or_default(),
            );
        }
        // priorityClassName is left out: a replica estimate does not depend on priority,
        // and the member's manifests need not define the class.
    }
    let mut container = json!({"name": "replica", "image": "replica"});
    if !requests.is_empty() {
        container["resources"] = json!({"requests": requests});
    }
    if let Some(r) = &b.requirements
        && !r.claims.is_empty()
    {
        let claims: Vec<_> = r.claims.iter().map(|c| json!({"name": c.name})).collect();
        container["resources"]["claims"] = json!(claims);
    }
    spec.insert("containers".into(), json!([container]));
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

impl Member {
    /// Loads the member's manifests with a pod shape for each binding.
    pub fn load(
        cluster: &str,
        sources: &[Source],
        bindings: &[Binding],
    ) -> Result<Member, FederationError> {
        let text = bindings
            .iter()
            .map(|b| shape_manifest(b).to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let loaded = lockstep_manifests::load_with_text(sources, SHAPES, &text).map_err(|e| {
            FederationError::Member {
                cluster: cluster.to_string(),
                message: e.to_string(),
            }
        })?;
        let base = loaded.cluster;
        let mut by_shape: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, b) in bindings.iter().enumerate() {
            by_shape.insert(shape_name(b), i);
        }
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        for (i, b) in bindings.iter().enumerate() {
            by_key.insert(b.key.clone(), i);
        }
        let mut shape_of: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut base_pods: BTreeMap<usize, Vec<Key>> = BTreeMap::new();
        // The shapes are the last pods loaded (the extra text comes last).
        let first_shape = base.pods.len().saturating_sub(bindings.len());
        for (i, pod) in base.pods.iter().enumerate() {
            if i >= first_shape
                && let Some(&b) = by_shape.get(&(pod.namespace.clone(), pod.name.clone()))
            {
                shape_of.insert((pod.namespace.clone(), pod.name.clone()), b);
                continue;
            }
            let key = match (
                pod.labels.get(RB_NAMESPACE_LABEL),
                pod.labels.get(RB_NAME_LABEL),
            ) {
                (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
                _ => pod.labels.get(CRB_NAME_LABEL).cloned(),
            };
            if let Some(b) = key.and_then(|k| by_key.get(&k).copied())
                && pod.is_bound()
            {
                base_pods.entry(b).or_default().push(pod_key(pod));
            }
        }
        let member_error = |message: String| FederationError::Member {
            cluster: cluster.to_string(),
            message,
        };
        let profile = Profile::default();
        let framework =
            Framework::new(&profile, &base.resources).map_err(|e| member_error(e.to_string()))?;
        // Fails now, naming the member, if the engine cannot be set up on it (DRA objects).
        let state = ClusterState::from_cluster(base)
            .map_err(|e| member_error(lockstep_engine::SetupError::from(e).to_string()))?;
        let shapes = shape_of
            .into_iter()
            .filter_map(|((ns, name), b)| Some((b, state.pod_id(&ns, &name)?)))
            .collect();
        Ok(Member {
            cluster: cluster.to_string(),
            state,
            framework,
            shapes,
            base: base_pods,
            assumed: BTreeMap::new(),
            serial: 0,
        })
    }

    /// Replicas of binding `b` that fit on each node now, in node name order.
    fn per_node(&mut self, b: usize) -> Vec<(String, u32)> {
        let Some(&shape) = self.shapes.get(&b) else {
            return Vec::new();
        };
        let e = lockstep_engine::estimate_on(&self.state, &mut self.framework, shape);
        e.per_node
            .iter()
            .map(|(n, r)| (self.state.node(*n).name.clone(), *r))
            .collect()
    }

    /// How many more replicas of binding `b` fit.
    pub fn estimate(&mut self, b: usize) -> i64 {
        let Some(&shape) = self.shapes.get(&b) else {
            return 0;
        };
        let e = lockstep_engine::estimate_on(&self.state, &mut self.framework, shape);
        i64::try_from(e.total).unwrap_or(i64::MAX)
    }

    /// Replicas binding `b` holds here now.
    pub fn held(&self, b: usize) -> i64 {
        let base = self.base.get(&b).map_or(0, Vec::len);
        (base + self.assumed.get(&b).map_or(0, Vec::len)) as i64
    }

    /// Applies a change this member's own bookkeeping made valid.
    fn change(&mut self, change: Change) {
        if let Err(e) = self.state.apply(change) {
            unreachable!("member {}: a replica change was refused: {e}", self.cluster);
        }
    }

    /// Deletes a pod of the state, returning its object.
    fn delete(&mut self, key: Key) -> Option<Pod> {
        let Some(Object::Pod(pod)) = self.state.object(Kind::Pod, &key) else {
            return None;
        };
        self.change(Change::Delete(Kind::Pod, key));
        Some(pod)
    }

    /// Assumes `k` more replicas of binding `b`, first-fit onto nodes in name order (as
    /// many as fit).
    pub fn add(&mut self, b: usize, k: i64) {
        let Some(&shape) = self.shapes.get(&b) else {
            return;
        };
        let shape = self.state.pod(shape).clone();
        let mut want = k;
        for (node, fit) in self.per_node(b) {
            if want <= 0 {
                break;
            }
            let n = i64::from(fit).min(want);
            for _ in 0..n {
                let mut p = shape.clone();
                p.name = format!("{}-{}", shape.name, self.serial);
                self.serial += 1;
                p.node_name = Some(node.clone());
                p.phase = PodPhase::Running;
                let key = pod_key(&p);
                self.change(Change::Add(Object::Pod(p)));
                self.assumed.entry(b).or_default().push(key);
            }
            want -= n;
        }
    }

    /// Removes up to `k` replicas of binding `b` (assumed ones first, then the member's own
    /// in input order).
    pub fn remove(&mut self, b: usize, k: i64) {
        for _ in 0..k {
            let key = match self.assumed.get_mut(&b).and_then(Vec::pop) {
                Some(key) => key,
                None => match self.base.get_mut(&b) {
                    Some(list) if !list.is_empty() => list.remove(0),
                    _ => break,
                },
            };
            self.delete(key);
        }
    }

    /// Removes every replica of binding `b`, returning them for [`Member::give_back`].
    pub fn take(&mut self, b: usize) -> Held {
        let assumed: Vec<Pod> = self
            .assumed
            .remove(&b)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|k| self.delete(k))
            .collect();
        let evicted: Vec<Pod> = self
            .base
            .remove(&b)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|k| self.delete(k))
            .collect();
        Held { assumed, evicted }
    }

    /// Undoes [`Member::take`].
    pub fn give_back(&mut self, b: usize, held: Held) {
        for (pods, list) in [
            (held.evicted, &mut self.base),
            (held.assumed, &mut self.assumed),
        ] {
            let keys: Vec<Key> = pods.iter().map(pod_key).collect();
            for p in pods {
                if let Err(e) = self.state.apply(Change::Add(Object::Pod(p))) {
                    unreachable!(
                        "member {}: a replica given back was refused: {e}",
                        self.cluster
                    );
                }
            }
            list.entry(b).or_default().extend(keys);
        }
    }
}

/// Replicas [`Member::take`] removed.
#[derive(Debug, Clone)]
pub struct Held {
    assumed: Vec<Pod>,
    evicted: Vec<Pod>,
}
