//! Member clusters whose own manifests are given (`--member CLUSTER=PATH`): their replica
//! estimates are exact, node by node, with lockstep's engine (every filter, free resources,
//! pod slots and DRA devices), the accurate estimator's role in Karmada.
//!
//! Each binding becomes a pod shape: its `replicaRequirements` as a Pod (node selector,
//! required node affinity from `hardNodeAffinity`, tolerations, requests, and
//! `resourceClaimRefs` as `spec.resourceClaims`) in the binding's namespace (`default` for a
//! ClusterResourceBinding), loaded with the member's manifests so it is validated and may
//! name the member's claim templates; bindings whose requirements are the same in one
//! namespace share one shape pod. The member's pods are its state; a pod labelled
//! `resourcebinding.karmada.io/namespace` + `resourcebinding.karmada.io/name` (or
//! `clusterresourcebinding.karmada.io/name`) is one of that binding's replicas there.
//! Replicas this run places are added to the member's cluster state as running pods,
//! first-fit onto nodes in name order, so later estimates see them; evicting a binding
//! deletes its pods. The shapes are pending pods of the state. Each of these is a change of
//! the engine's `ClusterState`: nothing is rebuilt per estimate.
//!
//! A multi-component binding (`spec.components`: a job manager and its task managers, a
//! Ray head and its workers, a Volcano job's tasks) is a gang: its unit is a whole component
//! set, every replica of every component. It has one shape per component, and its sets are
//! counted by placing them one after another, each replica first-fit onto the nodes in name
//! order, until a set does not fit whole; the trial replicas are then taken off again. A
//! set's pods may sit on different nodes, but a set that fits only in part counts for
//! nothing.

use std::collections::{BTreeMap, HashMap, HashSet};

use lockstep_engine::{Change, ClusterState, Framework, Key, Kind, Object, Profile};
use lockstep_manifests::Source;
use lockstep_model::{Pod, PodId, PodPhase};
use serde_json::json;

use crate::error::FederationError;
use crate::model::{Binding, Requirements};

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
    /// Binding index -> its unit: a shape pod in the state and its replicas per unit for
    /// each part (one part of one replica, or one per component with the component's
    /// replicas).
    shapes: BTreeMap<usize, Vec<(PodId, i64)>>,
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

/// The namespace and name of the shape pod of binding `b`'s part `part` (component index, or
/// `None` for its replicaRequirements).
fn shape_name(b: &Binding, part: Option<usize>) -> (String, String) {
    let (namespace, name) = match &b.namespace {
        Some(ns) => (ns.clone(), format!("rb.{}", b.name)),
        None => ("default".to_string(), format!("crb.{}", b.name)),
    };
    match part {
        None => (namespace, name),
        Some(c) => (namespace, format!("{name}.c{c}")),
    }
}

/// The parts of a binding's unit: its replicaRequirements (one replica), or each component
/// with replicas (a whole set).
fn parts(b: &Binding) -> Vec<(Option<usize>, Option<&Requirements>, i64)> {
    if b.components.is_empty() {
        return vec![(None, b.requirements.as_ref(), 1)];
    }
    b.components
        .iter()
        .enumerate()
        .filter(|(_, c)| c.replicas > 0)
        .map(|(i, c)| (Some(i), Some(&c.requirements), c.replicas))
        .collect()
}

/// The shape pods of the bindings' units: one pod for each distinct part (namespace and
/// requirements), named after the first binding that has it.
struct Shapes {
    /// The pods' manifests, one JSON object a line.
    text: String,
    /// Every shape pod's namespace and name.
    names: HashSet<(String, String)>,
    /// Per binding (by index), its unit's parts: the shape pod and replicas per unit.
    units: Vec<Vec<((String, String), i64)>>,
}

impl Shapes {
    fn of(bindings: &[Binding]) -> Shapes {
        let mut text = String::new();
        let mut names = HashSet::new();
        // (namespace, the manifest without its name) -> the shape's name.
        let mut seen: HashMap<(String, String), String> = HashMap::new();
        let mut units = Vec::with_capacity(bindings.len());
        for b in bindings {
            let mut unit = Vec::new();
            for (part, requirements, per) in parts(b) {
                let (namespace, name) = shape_name(b, part);
                let mut manifest = shape_manifest((namespace.clone(), String::new()), requirements);
                let body = manifest.to_string();
                let name = seen
                    .entry((namespace.clone(), body))
                    .or_insert_with(|| {
                        manifest["metadata"]["name"] = json!(name);
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(&manifest.to_string());
                        names.insert((namespace.clone(), name.clone()));
                        name
                    })
                    .clone();
                unit.push(((namespace, name), per));
            }
            units.push(unit);
        }
        Shapes { text, names, units }
    }
}

/// The Pod of one part's replica.
fn shape_manifest(
    (namespace, name): (String, String),
    requirements: Option<&Requirements>,
) -> serde_json::Value {
    let mut requests = serde_json::Map::new();
    let mut spec = serde_json::Map::new();
    if let Some(r) = requirements {
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
    if let Some(r) = requirements
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
    /// Loads the member's manifests with the bindings' shape pods.
    pub fn load(
        cluster: &str,
        sources: &[Source],
        bindings: &[Binding],
    ) -> Result<Member, FederationError> {
        let shapes = Shapes::of(bindings);
        let loaded =
            lockstep_manifests::load_with_text(sources, SHAPES, &shapes.text).map_err(|e| {
                FederationError::Member {
                    cluster: cluster.to_string(),
                    message: e.to_string(),
                }
            })?;
        let base = loaded.cluster;
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        for (i, b) in bindings.iter().enumerate() {
            by_key.insert(b.key.clone(), i);
        }
        let mut base_pods: BTreeMap<usize, Vec<Key>> = BTreeMap::new();
        // The shapes are the last pods loaded (the extra text comes last).
        let first_shape = base.pods.len().saturating_sub(shapes.names.len());
        for (i, pod) in base.pods.iter().enumerate() {
            if i >= first_shape
                && shapes
                    .names
                    .contains(&(pod.namespace.clone(), pod.name.clone()))
            {
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
        let mut units: BTreeMap<usize, Vec<(PodId, i64)>> = BTreeMap::new();
        for (b, parts) in shapes.units.into_iter().enumerate() {
            let ids: Vec<(PodId, i64)> = parts
                .into_iter()
                .filter_map(|((ns, name), per)| Some((state.pod_id(&ns, &name)?, per)))
                .collect();
            if !ids.is_empty() {
                units.insert(b, ids);
            }
        }
        Ok(Member {
            cluster: cluster.to_string(),
            state,
            framework,
            shapes: units,
            base: base_pods,
            assumed: BTreeMap::new(),
            serial: 0,
        })
    }

    /// How many more units of binding `b` fit: replicas, or whole component sets.
    pub fn estimate(&mut self, b: usize) -> i64 {
        let Some(parts) = self.shapes.get(&b).cloned() else {
            return 0;
        };
        let fit = |m: &mut Member, shape: PodId| {
            lockstep_engine::estimate_on(&m.state, &mut m.framework, shape).total
        };
        if let [(shape, 1)] = parts[..] {
            return i64::try_from(fit(self, shape)).unwrap_or(i64::MAX);
        }
        // No more sets than each part's replicas fitting alone allow.
        let mut bound = u64::MAX;
        for &(shape, per) in &parts {
            bound = bound.min(fit(self, shape) / per.max(1) as u64);
        }
        // Then the sets placed one after another, and taken off again.
        let mark = self.assumed.get(&b).map_or(0, Vec::len);
        let mut sets = 0;
        while sets < bound && self.add_unit(b, &parts) {
            sets += 1;
        }
        let trial = self
            .assumed
            .get_mut(&b)
            .map(|list| list.split_off(mark.min(list.len())))
            .unwrap_or_default();
        for key in trial {
            self.delete(key);
        }
        i64::try_from(sets).unwrap_or(i64::MAX)
    }

    /// Places one unit of binding `b`, each part's replicas first-fit onto nodes in name
    /// order; returns whether the whole unit was placed (a part placed in part stays).
    fn add_unit(&mut self, b: usize, parts: &[(PodId, i64)]) -> bool {
        parts
            .iter()
            .all(|&(shape, per)| self.add_replicas(b, shape, per) == per)
    }

    /// Assumes up to `k` replicas of the shape for binding `b`, first-fit onto nodes in name
    /// order; returns how many were placed.
    fn add_replicas(&mut self, b: usize, shape: PodId, k: i64) -> i64 {
        let pod = self.state.pod(shape).clone();
        let mut want = k;
        let fits = lockstep_engine::estimate_on(&self.state, &mut self.framework, shape);
        for (node, fit) in fits.per_node {
            if want <= 0 {
                break;
            }
            let n = i64::from(fit).min(want);
            if n == 0 {
                continue;
            }
            let node = self.state.node(node).name.clone();
            for _ in 0..n {
                let mut p = pod.clone();
                p.name = format!("{}-{}", pod.name, self.serial);
                self.serial += 1;
                p.node_name = Some(node.clone());
                p.phase = PodPhase::Running;
                let key = pod_key(&p);
                self.change(Change::Add(Object::Pod(p)));
                self.assumed.entry(b).or_default().push(key);
            }
            want -= n;
        }
        k - want
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

    /// Assumes `k` more units of binding `b` (replicas, or whole component sets), first-fit
    /// onto nodes in name order (as many as fit).
    pub fn add(&mut self, b: usize, k: i64) {
        let Some(parts) = self.shapes.get(&b).cloned() else {
            return;
        };
        for _ in 0..k {
            if !self.add_unit(b, &parts) {
                break;
            }
        }
    }

    /// Removes up to `k` units of binding `b` (assumed replicas first, the latest first,
    /// then the member's own in input order).
    pub fn remove(&mut self, b: usize, k: i64) {
        let per: i64 = self
            .shapes
            .get(&b)
            .map_or(1, |parts| parts.iter().map(|(_, n)| n).sum());
        for _ in 0..k.saturating_mul(per) {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/federation/member-gang")
    }

    /// The member of `tests/federation/member-gang` and the indexes of ml/batch and ml/train.
    fn gpu_member() -> (Member, usize, usize) {
        let fed = crate::load::load(&[Source::Path(fixture().join("input.yaml"))])
            .expect("fixture loads")
            .federation;
        let index = |key: &str| fed.bindings.iter().position(|b| b.key == key).unwrap();
        let member = Member::load(
            "gpu",
            &[Source::Path(fixture().join("member"))],
            &fed.bindings,
        )
        .expect("member loads");
        (member, index("ml/batch"), index("ml/train"))
    }

    #[test]
    fn a_set_that_fits_in_part_counts_for_nothing_and_counting_changes_nothing() {
        let (mut m, batch, train) = gpu_member();
        // The head and two of three workers fit: no whole set.
        assert_eq!(m.estimate(train), 0);
        assert_eq!(m.estimate(train), 0);
        // batch's one-GPU replicas still fit on gpu-node-2's four GPUs.
        assert_eq!(m.estimate(batch), 4);
        let held = m.take(batch);
        assert_eq!(m.estimate(train), 1, "eight free GPUs hold one set of six");
        assert_eq!(m.estimate(train), 1, "the trial sets were taken off");
        m.add(train, 1);
        assert_eq!(m.estimate(train), 0);
        assert_eq!(m.estimate(batch), 2, "two GPUs are left");
        m.remove(train, 1);
        assert_eq!(m.estimate(train), 1, "removing a set removes all its pods");
        m.give_back(batch, held);
        assert_eq!(m.estimate(train), 0);
        assert_eq!(m.estimate(batch), 4);
    }
}
