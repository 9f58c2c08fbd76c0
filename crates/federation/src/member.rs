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
//! Replicas this run places are assumed onto nodes first-fit, in node name order, so later
//! estimates see them; evicting a binding removes its pods.

use std::collections::BTreeMap;

use lockstep_engine::Options;
use lockstep_manifests::Source;
use lockstep_model::{Cluster as KubeCluster, Pod, PodId, PodPhase};
use serde_json::json;

use crate::error::FederationError;
use crate::model::Binding;

pub const RB_NAMESPACE_LABEL: &str = "resourcebinding.karmada.io/namespace";
pub const RB_NAME_LABEL: &str = "resourcebinding.karmada.io/name";
pub const CRB_NAME_LABEL: &str = "clusterresourcebinding.karmada.io/name";

/// Where the binding shapes are said to come from in messages.
const SHAPES: &str = "replicaRequirements of the bindings";

#[derive(Debug, Clone)]
pub struct Member {
    pub cluster: String,
    /// The member's nodes, pods and other objects; pods of bindings are tagged in `owner`.
    base: KubeCluster,
    /// Per base pod: the binding index it belongs to.
    owner: Vec<Option<usize>>,
    /// Binding index -> its pod shape.
    shapes: BTreeMap<usize, Pod>,
    /// Binding index -> pods assumed by this run (on nodes).
    assumed: BTreeMap<usize, Vec<Pod>>,
    /// Binding index -> base pods evicted by this run.
    evicted: BTreeMap<usize, Vec<usize>>,
    /// Numbers assumed pods' names.
    serial: usize,
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
        let mut base = loaded.cluster;
        let mut by_shape: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, b) in bindings.iter().enumerate() {
            by_shape.insert(shape_name(b), i);
        }
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        for (i, b) in bindings.iter().enumerate() {
            by_key.insert(b.key.clone(), i);
        }
        let mut shapes = BTreeMap::new();
        let mut pods = Vec::new();
        let mut owner = Vec::new();
        // The shapes are the last pods loaded (the extra text comes last).
        let first_shape = base.pods.len().saturating_sub(bindings.len());
        for (i, pod) in std::mem::take(&mut base.pods).into_iter().enumerate() {
            if i >= first_shape
                && let Some(&b) = by_shape.get(&(pod.namespace.clone(), pod.name.clone()))
            {
                shapes.insert(b, pod);
                continue;
            }
            let key = match (
                pod.labels.get(RB_NAMESPACE_LABEL),
                pod.labels.get(RB_NAME_LABEL),
            ) {
                (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
                _ => pod.labels.get(CRB_NAME_LABEL).cloned(),
            };
            owner.push(
                key.and_then(|k| by_key.get(&k).copied())
                    .filter(|_| pod.is_bound()),
            );
            pods.push(pod);
        }
        base.pods = pods;
        // Fail now, naming the member, if the engine cannot be set up on it (DRA objects).
        lockstep_engine::Scheduler::new(&base, Options::default()).map_err(|e| {
            FederationError::Member {
                cluster: cluster.to_string(),
                message: e.to_string(),
            }
        })?;
        Ok(Member {
            cluster: cluster.to_string(),
            base,
            owner,
            shapes,
            assumed: BTreeMap::new(),
            evicted: BTreeMap::new(),
            serial: 0,
        })
    }

    /// The member as it stands, with `shape` (when given) appended as a pending pod.
    fn current(&self, shape: Option<usize>) -> KubeCluster {
        let mut c = self.base.clone();
        let evicted: std::collections::BTreeSet<usize> =
            self.evicted.values().flatten().copied().collect();
        if !evicted.is_empty() {
            c.pods = c
                .pods
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !evicted.contains(i))
                .map(|(_, p)| p)
                .collect();
        }
        for pods in self.assumed.values() {
            c.pods.extend(pods.iter().cloned());
        }
        if let Some(s) = shape.and_then(|b| self.shapes.get(&b)) {
            c.pods.push(s.clone());
        }
        c
    }

    /// Replicas of binding `b` that fit on each node now, by node index.
    fn per_node(&self, b: usize) -> Vec<(usize, u32)> {
        if !self.shapes.contains_key(&b) {
            return Vec::new();
        }
        let c = self.current(Some(b));
        let id = PodId((c.pods.len() - 1) as u32);
        match lockstep_engine::estimate(&c, Options::default(), id) {
            Ok(e) => e.per_node.iter().map(|(n, r)| (n.index(), *r)).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// How many more replicas of binding `b` fit.
    pub fn estimate(&self, b: usize) -> i64 {
        self.per_node(b).iter().map(|(_, r)| i64::from(*r)).sum()
    }

    /// Replicas binding `b` holds here now.
    pub fn held(&self, b: usize) -> i64 {
        let base = self
            .owner
            .iter()
            .enumerate()
            .filter(|(i, o)| **o == Some(b) && !self.evicted.get(&b).is_some_and(|e| e.contains(i)))
            .count();
        (base + self.assumed.get(&b).map_or(0, Vec::len)) as i64
    }

    /// Assumes `k` more replicas of binding `b`, first-fit onto nodes in name order (as
    /// many as fit).
    pub fn add(&mut self, b: usize, k: i64) {
        let Some(shape) = self.shapes.get(&b).cloned() else {
            return;
        };
        let mut want = k;
        let per_node = self.per_node(b);
        let list = self.assumed.entry(b).or_default();
        for (node, fit) in per_node {
            if want <= 0 {
                break;
            }
            let n = i64::from(fit).min(want);
            for _ in 0..n {
                let mut p = shape.clone();
                p.name = format!("{}-{}", shape.name, self.serial);
                self.serial += 1;
                p.node_name = Some(self.base.nodes[node].name.clone());
                p.phase = PodPhase::Running;
                list.push(p);
            }
            want -= n;
        }
    }

    /// Removes up to `k` replicas of binding `b` (assumed ones first).
    pub fn remove(&mut self, b: usize, k: i64) {
        let mut left = k;
        while left > 0 {
            if let Some(list) = self.assumed.get_mut(&b)
                && list.pop().is_some()
            {
                left -= 1;
                continue;
            }
            let evicted = self.evicted.entry(b).or_default();
            match (0..self.owner.len()).find(|i| self.owner[*i] == Some(b) && !evicted.contains(i))
            {
                Some(i) => {
                    evicted.push(i);
                    left -= 1;
                }
                None => break,
            }
        }
    }

    /// Removes every replica of binding `b`, returning them for [`Member::give_back`].
    pub fn take(&mut self, b: usize) -> Held {
        let assumed = self.assumed.remove(&b).unwrap_or_default();
        let evicted = self.evicted.entry(b).or_default();
        let mut newly = Vec::new();
        for i in 0..self.owner.len() {
            if self.owner[i] == Some(b) && !evicted.contains(&i) {
                evicted.push(i);
                newly.push(i);
            }
        }
        Held {
            assumed,
            evicted: newly,
        }
    }

    /// Undoes [`Member::take`].
    pub fn give_back(&mut self, b: usize, held: Held) {
        if !held.assumed.is_empty() {
            self.assumed.entry(b).or_default().extend(held.assumed);
        }
        if let Some(e) = self.evicted.get_mut(&b) {
            e.retain(|i| !held.evicted.contains(i));
        }
    }
}

/// Replicas [`Member::take`] removed.
#[derive(Debug, Clone)]
pub struct Held {
    assumed: Vec<Pod>,
    evicted: Vec<usize>,
}
