//! The member cluster and exact counting with lockstep's engine.
//!
//! A request's replica requirements become pod shapes (pods of the cluster, pending),
//! converted by `lockstep-manifests` like any pod. Replicas are then placed one after
//! another, first-fit over the nodes in name order: a replica goes on a node only when
//! the engine's filters pass there (node selector and required affinity, taints and the
//! unschedulable taint, resources, pod count, DRA claims with every constraint) and the
//! node still has room once the replicas already placed are counted. Each replica's
//! resources are added to its node and its claims are allocated by the DRA allocator and
//! reserved, so later replicas, on this node or on any other node that reaches the same
//! devices, see them taken, as they would see real pods. Workloads already assumed in the
//! request are placed the same way first.
//!
//! Placed replicas are kept beside the cluster state (per-node added requests and pod counts,
//! and the DRA reservations) rather than as pods of it, so a request needs no pod per
//! replica. That is exact because nothing else the filters read changes when a replica
//! lands: replicas carry no labels, host ports or inter-pod terms of their own.
//!
//! The engine's cluster state is kept between requests; a request's shapes are added to it
//! as pending pods (and the previous request's shapes deleted) only when they differ from
//! the last request's, a change of a few microseconds. Every request leaves the state as it
//! found it: devices reserved for placed replicas are given back, and pods lifted for
//! SelectVictims are put back.

use lockstep_engine::state::PodClaims;
use lockstep_engine::{Change, ClusterState, Framework, Key, Kind, Object, Profile};
use lockstep_model::{Cluster, NodeId, Pod, PodId, ResourceId, ResourceList};

use crate::request::{RequestError, Requirements};

/// Labels that name the binding a pod belongs to (Karmada's permanent-id labels).
pub const PERMANENT_ID_LABELS: [&str; 2] = [
    "resourcebinding.karmada.io/permanent-id",
    "clusterresourcebinding.karmada.io/permanent-id",
];

/// A member cluster as the estimator answers for it.
pub struct Member {
    /// The member's objects and, as pending pods, the current request shapes.
    state: ClusterState,
    /// The shape pods in the state, in request order.
    shape_pods: Vec<(Key, PodId)>,
    /// What the shape pods were made from, and why each cannot be placed.
    shapes_key: String,
    unplaceable: Vec<Option<String>>,
    profile: Profile,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("pods", &self.state.cluster.pods.len())
            .finish_non_exhaustive()
    }
}

/// A failure that is not the request's fault.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EstimateError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("{0}")]
    Internal(String),
}

/// One component of a set, or one assumed workload's component: a shape and how many
/// replicas of it.
pub struct Part {
    pub requirements: Requirements,
    pub replicas: u64,
}

impl Member {
    /// Checks that the engine can be set up on the cluster (DRA objects resolve).
    pub fn new(cluster: Cluster) -> Result<Member, String> {
        let profile = Profile::default();
        Framework::new(&profile, &cluster.resources).map_err(|e| e.to_string())?;
        let state = ClusterState::from_cluster(cluster).map_err(|e| e.to_string())?;
        Ok(Member {
            state,
            shape_pods: Vec::new(),
            shapes_key: String::new(),
            unplaceable: Vec::new(),
            profile,
        })
    }

    /// The member's cluster state (with the last request's shape pods among the pods).
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// Applies a change of the cluster (a live member's watch event) to the state.
    pub fn apply(
        &mut self,
        change: Change,
    ) -> Result<lockstep_engine::Applied, lockstep_engine::ChangeError> {
        self.state.apply(change)
    }

    /// The member's objects (with the last request's shape pods among the pods).
    pub fn cluster(&self) -> Option<&Cluster> {
        Some(&self.state.cluster)
    }

    /// Converts requirements into pods of this cluster (resource ids of this cluster; a
    /// resource no node has makes the shape unplaceable when it is requested).
    fn shapes(
        &self,
        cluster: &Cluster,
        requirements: &[&Requirements],
    ) -> Result<Vec<Shape>, RequestError> {
        let values: Vec<(String, serde_json::Value)> = requirements
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let name = format!("replica-shape-{i}");
                // Errors name the object: the request field the shape came from.
                (format!("{} (as a Pod)", place(r)), r.pod(&name))
            })
            .collect();
        let loaded = lockstep_manifests::load_objects(values).map_err(|e| {
            let m = e.to_string();
            if requirements.iter().any(|r| m.starts_with(place(r))) {
                RequestError(m)
            } else {
                let places: Vec<&str> = requirements.iter().map(|r| place(r)).collect();
                RequestError(format!("{}: {m}", places.join(" or ")))
            }
        })?;
        let names = &loaded.cluster.resources;
        let mut out = Vec::new();
        for (pod, r) in loaded.cluster.pods.into_iter().zip(requirements) {
            let mut pod = pod;
            let mut requests = ResourceList::new();
            let mut unplaceable = None;
            for (id, v) in pod.requests.iter() {
                let name = names.name(id);
                match cluster.resources.get(name) {
                    Some(here) => requests.set(here, v),
                    None if v > 0 => {
                        unplaceable = Some(format!("no node of the cluster has {name}"));
                    }
                    None => {}
                }
            }
            pod.requests = requests;
            pod.priority = r
                .priority_class_name
                .as_ref()
                .and_then(|c| cluster.priority_classes.iter().find(|p| &p.name == c))
                .map_or(0, |p| p.value);
            out.push(Shape { pod, unplaceable });
        }
        Ok(out)
    }

    /// Runs `f` on a counter over this cluster with `requirements` added as pending shape
    /// pods (`PodId`s handed to `f` in the same order). The shape pods change only when
    /// the shapes differ from the last request's; `f` leaves the state as it found it
    /// (placed replicas are kept beside it and their devices are given back here).
    fn with<R>(
        &mut self,
        requirements: &[&Requirements],
        f: impl FnOnce(&mut Counter<'_>, &[PodId]) -> R,
    ) -> Result<R, EstimateError> {
        let key = requirements
            .iter()
            .map(|r| format!("{:?} {}", r.priority_class_name, r.pod("replica")))
            .collect::<Vec<_>>()
            .join("\n");
        if key != self.shapes_key || self.unplaceable.len() != requirements.len() {
            let shapes = self.shapes(&self.state.cluster, requirements)?;
            for (key, _) in std::mem::take(&mut self.shape_pods) {
                self.state
                    .apply(Change::Delete(Kind::Pod, key))
                    .map_err(|e| EstimateError::Internal(e.to_string()))?;
            }
            self.shapes_key.clear();
            self.unplaceable = shapes.iter().map(|s| s.unplaceable.clone()).collect();
            for shape in shapes {
                let key = Key::namespaced(&shape.pod.namespace, &shape.pod.name);
                match self.state.apply(Change::Add(Object::Pod(shape.pod))) {
                    Ok(lockstep_engine::Applied::Pod(id)) => self.shape_pods.push((key, id)),
                    Ok(_) => unreachable!("adding a pod names the pod"),
                    Err(e) => {
                        self.unplaceable.clear();
                        return Err(EstimateError::Internal(e.to_string()));
                    }
                }
            }
            self.shapes_key = key;
        }
        let ids: Vec<PodId> = self.shape_pods.iter().map(|(_, id)| *id).collect();
        let unplaceable = self.unplaceable.clone();
        let fw = Framework::new(&self.profile, &self.state.cluster.resources)
            .map_err(|e| EstimateError::Internal(e.to_string()))?;
        let saved = self.state.dra.clone();
        let mut counter = Counter::new(&mut self.state, fw, unplaceable, ids.clone());
        let r = f(&mut counter, &ids);
        counter.snap.dra = saved;
        Ok(r)
    }

    /// How many replicas of `requirements` fit after `assumed` is placed.
    pub fn max_replicas(
        &mut self,
        requirements: &Requirements,
        assumed: &[Part],
    ) -> Result<u64, EstimateError> {
        let mut all: Vec<&Requirements> = assumed.iter().map(|p| &p.requirements).collect();
        all.push(requirements);
        self.with(&all, |c, ids| {
            c.place_assumed(assumed, &ids[..assumed.len()]);
            let shape = ids[assumed.len()];
            c.place(shape, i32::MAX as u64, &mut 0)
        })
    }

    /// How many whole sets of `components` fit after `assumed` is placed: every replica
    /// of every component of a set is placed before the next set is tried.
    pub fn max_sets(
        &mut self,
        components: &[Part],
        assumed: &[Part],
    ) -> Result<u64, EstimateError> {
        let mut all: Vec<&Requirements> = assumed.iter().map(|p| &p.requirements).collect();
        all.extend(components.iter().map(|p| &p.requirements));
        self.with(&all, |c, ids| {
            c.place_assumed(assumed, &ids[..assumed.len()]);
            let shapes = &ids[assumed.len()..];
            let mut cursors = vec![0usize; shapes.len()];
            let mut sets = 0u64;
            'sets: while sets < i32::MAX as u64 {
                for (i, part) in components.iter().enumerate() {
                    if part.replicas > 0
                        && c.place(shapes[i], part.replicas, &mut cursors[i]) < part.replicas
                    {
                        break 'sets;
                    }
                }
                sets += 1;
            }
            sets
        })
    }

    /// The binding preemption proposal's victim selection: every candidate's pods are
    /// removed; if `replicas` of the preemptor then fit, candidates are given back in
    /// order, each kept only if the preemptor still fits. Returns whether the preemptor
    /// fits at all and the candidates that must go, in request order.
    pub fn select_victims(
        &mut self,
        preemptor: &Requirements,
        replicas: u64,
        candidates: &[String],
    ) -> Result<(bool, Vec<String>), EstimateError> {
        self.with(&[preemptor], |c, ids| {
            let shape = ids[0];
            let mut seen = std::collections::BTreeSet::new();
            let mut lifted: Vec<(usize, Vec<Lifted>)> = Vec::new();
            for (i, id) in candidates.iter().enumerate() {
                if !seen.insert(id.as_str()) {
                    continue;
                }
                let pods = c.pods_of(id);
                let held = pods.into_iter().filter_map(|p| c.lift(p)).collect();
                lifted.push((i, held));
            }
            if c.count(shape, replicas) < replicas {
                for (_, held) in lifted {
                    c.restore(held);
                }
                return (false, Vec::new());
            }
            let mut victims = Vec::new();
            let mut still_lifted = Vec::new();
            for (i, held) in lifted {
                let pods: Vec<PodId> = held.iter().map(|h| h.pod).collect();
                c.restore(held);
                if c.count(shape, replicas) < replicas {
                    still_lifted.extend(pods.into_iter().filter_map(|p| c.lift(p)));
                    victims.push(candidates[i].clone());
                }
            }
            // The state outlives the request: the victims go back too.
            c.restore(still_lifted);
            (true, victims)
        })
    }
}

/// Where a shape's requirements are in the request (`replicaRequirements` for
/// requirements made without a request).
fn place(r: &Requirements) -> &str {
    if r.place.is_empty() {
        "replicaRequirements"
    } else {
        &r.place
    }
}

struct Shape {
    pod: Pod,
    unplaceable: Option<String>,
}

/// A pod taken off its node for a trial, with the devices it held.
struct Lifted {
    pod: PodId,
    node: NodeId,
    allocation: Option<lockstep_dra::NodeAllocation>,
}

/// The cluster state plus the replicas placed so far.
pub struct Counter<'s> {
    snap: &'s mut ClusterState,
    fw: Framework,
    /// Requests of placed replicas, per node and resource (`node * width + resource`).
    extra: Vec<i64>,
    extra_pods: Vec<i64>,
    width: usize,
    /// Per shape (in the order of `shapes`): why no replica can be placed at all.
    unplaceable: Vec<Option<String>>,
    shapes: Vec<PodId>,
}

impl<'s> Counter<'s> {
    fn new(
        snap: &'s mut ClusterState,
        fw: Framework,
        unplaceable: Vec<Option<String>>,
        shapes: Vec<PodId>,
    ) -> Self {
        let n = snap.node_slots();
        let width = snap.cluster.resources.len();
        Counter {
            extra: vec![0; n * width],
            extra_pods: vec![0; n],
            width,
            snap,
            fw,
            unplaceable,
            shapes,
        }
    }

    /// Replicas of `shape` that `node` has room for, by filters, resources and pod slots
    /// (devices are not counted here).
    fn room(&mut self, shape: PodId, node: NodeId) -> u64 {
        if !self.fw.fits_on(self.snap, shape, node) {
            return 0;
        }
        let snap = &self.snap;
        let pod = snap.pod(shape);
        let slots = snap.allocatable(node, ResourceId::PODS)
            - i64::from(snap.pod_count(node))
            - self.extra_pods[node.index()];
        let mut room = slots.max(0);
        let base = node.index() * self.width;
        for (r, v) in pod.requests.iter() {
            if v > 0 && r != ResourceId::PODS {
                let free = snap.allocatable(node, r)
                    - snap.requested(node, r)
                    - self.extra[base + r.index()];
                room = room.min((free / v).max(0));
            }
        }
        if !pod.host_ports.is_empty() {
            room = room.min(1);
        }
        room as u64
    }

    /// Places up to `want` replicas of `shape` on `node`, one after another; returns how
    /// many.
    fn place_on(&mut self, shape: PodId, node: NodeId, want: u64) -> u64 {
        let cap = self.room(shape, node).min(want);
        if cap == 0 {
            return 0;
        }
        let placed = match self.snap.claims(shape) {
            PodClaims::None => cap,
            PodClaims::Missing(_) => 0,
            PodClaims::Refs(refs) => {
                let refs = refs.clone();
                let mut n = 0;
                if let Some(dra) = self.snap.dra.as_mut() {
                    while n < cap {
                        match dra.try_allocate(node, &refs) {
                            Ok(a) => {
                                dra.reserve(&a);
                                n += 1;
                            }
                            Err(_) => break,
                        }
                    }
                }
                n
            }
        };
        let pod = self.snap.pod(shape);
        let base = node.index() * self.width;
        for (r, v) in pod.requests.iter() {
            self.extra[base + r.index()] += v * placed as i64;
        }
        self.extra_pods[node.index()] += placed as i64;
        placed
    }

    /// Places up to `want` replicas of `shape`, first-fit over the nodes from `*cursor`
    /// on; the cursor moves past nodes that have no room left for the shape (room only
    /// shrinks while replicas are placed).
    fn place(&mut self, shape: PodId, want: u64, cursor: &mut usize) -> u64 {
        let at = self.shapes.iter().position(|s| *s == shape);
        if let Some(why) = at.and_then(|i| self.unplaceable[i].as_ref()) {
            tracing::info!("0 replicas: {why}");
            return 0;
        }
        if let PodClaims::Missing(why) = self.snap.claims(shape) {
            tracing::info!("0 replicas: the replica's claims cannot be made: {why}");
            return 0;
        }
        let n = self.snap.num_nodes();
        let mut got = 0;
        while *cursor < n && got < want {
            let node = self.snap.nodes()[*cursor];
            got += self.place_on(shape, node, want - got);
            if got < want {
                *cursor += 1;
            }
        }
        got
    }

    fn place_assumed(&mut self, parts: &[Part], ids: &[PodId]) {
        for (part, id) in parts.iter().zip(ids) {
            self.place(*id, part.replicas, &mut 0);
        }
    }

    /// How many replicas of `shape` (up to `limit`) fit now; nothing stays placed.
    fn count(&mut self, shape: PodId, limit: u64) -> u64 {
        let saved = self.snap.dra.clone();
        let n = self.place(shape, limit, &mut 0);
        self.snap.dra = saved;
        self.extra.iter_mut().for_each(|v| *v = 0);
        self.extra_pods.iter_mut().for_each(|v| *v = 0);
        n
    }

    /// The bound pods of the binding whose permanent id is `id`, in name order.
    fn pods_of(&self, id: &str) -> Vec<PodId> {
        let cluster = std::sync::Arc::clone(&self.snap.cluster);
        let mut pods: Vec<PodId> = self
            .snap
            .pod_ids()
            .filter(|p| !self.shapes.contains(p))
            .filter(|p| self.snap.node_of(*p).is_some())
            .filter(|p| {
                let labels = &cluster.pods[p.index()].labels;
                PERMANENT_ID_LABELS
                    .iter()
                    .any(|l| labels.get(*l).is_some_and(|v| v == id))
            })
            .collect();
        pods.sort_by_key(|p| cluster.pods[p.index()].key());
        pods
    }

    fn lift(&mut self, pod: PodId) -> Option<Lifted> {
        let node = self.snap.node_of(pod)?;
        let allocation = self.snap.forget(pod);
        Some(Lifted {
            pod,
            node,
            allocation,
        })
    }

    fn restore(&mut self, held: Vec<Lifted>) {
        for h in held {
            self.snap.reassume(h.pod, h.node, h.allocation);
        }
    }
}
