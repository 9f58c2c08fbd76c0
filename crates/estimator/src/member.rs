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
//! Placed replicas are kept beside the snapshot (per-node added requests and pod counts,
//! and the DRA reservations) rather than as pods of it, so a request needs no pod per
//! replica. That is exact because nothing else the filters read changes when a replica
//! lands: replicas carry no labels, host ports or inter-pod terms of their own.
//!
//! The engine's snapshot of the cluster with the shape pods is kept between requests and
//! rebuilt only when a request's shapes differ from the last one's (the shapes must be pods
//! of the snapshot's cluster, and building the snapshot of a large DRA cluster costs far
//! more than counting on it). Every request leaves it as it found it: devices reserved for
//! placed replicas are given back, and pods lifted for SelectVictims are put back.

use lockstep_engine::Framework;
use lockstep_engine::Profile;
use lockstep_engine::snapshot::PodClaims;
use lockstep_model::{Cluster, NodeId, Pod, PodId, ResourceId, ResourceList};

use crate::request::{RequestError, Requirements};

/// Labels that name the binding a pod belongs to (Karmada's permanent-id labels).
pub const PERMANENT_ID_LABELS: [&str; 2] = [
    "resourcebinding.karmada.io/permanent-id",
    "clusterresourcebinding.karmada.io/permanent-id",
];

type Snap<'a> = lockstep_engine::Snapshot<'a>;

self_cell::self_cell!(
    /// The member's cluster with the current shape pods appended, and the engine's
    /// snapshot of it (built once per cluster and set of shapes).
    struct Prepared {
        owner: Cluster,
        #[not_covariant]
        dependent: Snap,
    }
);

/// A member cluster as the estimator answers for it.
pub struct Member {
    prepared: Option<Prepared>,
    /// Pods of the member itself (shape pods follow).
    base_len: usize,
    /// What the shape pods of `prepared` were made from, and why each cannot be placed.
    shapes_key: String,
    unplaceable: Vec<Option<String>>,
    profile: Profile,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("pods", &self.base_len)
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
        let base_len = cluster.pods.len();
        let prepared = Prepared::try_new(cluster, |c| lockstep_engine::Snapshot::new(c))
            .map_err(|e| e.to_string())?;
        Ok(Member {
            prepared: Some(prepared),
            base_len,
            shapes_key: String::new(),
            unplaceable: Vec::new(),
            profile,
        })
    }

    /// The member's cluster (without shape pods).
    pub fn cluster(&self) -> Option<&Cluster> {
        self.prepared.as_ref().map(|p| p.borrow_owner())
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
                (
                    format!("Pod {}/{name} (replica requirements)", r.namespace),
                    r.pod(&name),
                )
            })
            .collect();
        let loaded = lockstep_manifests::load_objects(values)
            .map_err(|e| RequestError(format!("the replica requirements: {e}")))?;
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
    /// pods (`PodId`s handed to `f` in the same order). The snapshot is rebuilt only when
    /// the shapes differ from the last request's; `f` leaves it as it found it (placed
    /// replicas are kept beside it and their devices are given back here).
    fn with<R>(
        &mut self,
        requirements: &[&Requirements],
        f: impl FnOnce(&mut Counter<'_, '_>, &[PodId]) -> R,
    ) -> Result<R, EstimateError> {
        let key = requirements
            .iter()
            .map(|r| format!("{:?} {}", r.priority_class_name, r.pod("replica")))
            .collect::<Vec<_>>()
            .join("\n");
        let Some(prepared) = self.prepared.take() else {
            return Err(EstimateError::Internal(
                "the member's snapshot was lost to an earlier failure".into(),
            ));
        };
        if key != self.shapes_key || self.unplaceable.len() != requirements.len() {
            let shapes = match self.shapes(prepared.borrow_owner(), requirements) {
                Ok(s) => s,
                Err(e) => {
                    self.prepared = Some(prepared);
                    return Err(e.into());
                }
            };
            let mut cluster = prepared.into_owner();
            cluster.pods.truncate(self.base_len);
            self.unplaceable = shapes.iter().map(|s| s.unplaceable.clone()).collect();
            cluster.pods.extend(shapes.into_iter().map(|s| s.pod));
            self.shapes_key.clear();
            match Prepared::try_new_or_recover(cluster, |c| lockstep_engine::Snapshot::new(c)) {
                Ok(p) => {
                    self.prepared = Some(p);
                    self.shapes_key = key;
                }
                Err((mut cluster, e)) => {
                    cluster.pods.truncate(self.base_len);
                    self.unplaceable.clear();
                    self.prepared =
                        Prepared::try_new(cluster, |c| lockstep_engine::Snapshot::new(c)).ok();
                    return Err(EstimateError::Internal(e.to_string()));
                }
            }
        } else {
            self.prepared = Some(prepared);
        }
        let ids: Vec<PodId> = (0..requirements.len())
            .map(|i| PodId((self.base_len + i) as u32))
            .collect();
        let base_len = self.base_len;
        let unplaceable = self.unplaceable.clone();
        let profile = &self.profile;
        let prepared = self.prepared.as_mut().expect("set above");
        prepared.with_dependent_mut(|cluster, snap| {
            let fw = Framework::new(profile, &cluster.resources)
                .map_err(|e| EstimateError::Internal(e.to_string()))?;
            let saved = snap.dra.clone();
            let mut counter = Counter::new(snap, fw, unplaceable, base_len);
            let r = f(&mut counter, &ids);
            counter.snap.dra = saved;
            Ok(r)
        })
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
            // The snapshot outlives the request: the victims go back too.
            c.restore(still_lifted);
            (true, victims)
        })
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

/// The snapshot plus the replicas placed so far.
pub struct Counter<'s, 'c> {
    snap: &'s mut lockstep_engine::Snapshot<'c>,
    fw: Framework,
    /// Requests of placed replicas, per node and resource (`node * width + resource`).
    extra: Vec<i64>,
    extra_pods: Vec<i64>,
    width: usize,
    /// Per shape (by `PodId` minus `first`): why no replica can be placed at all.
    unplaceable: Vec<Option<String>>,
    first: usize,
}

impl<'s, 'c> Counter<'s, 'c> {
    fn new(
        snap: &'s mut lockstep_engine::Snapshot<'c>,
        fw: Framework,
        unplaceable: Vec<Option<String>>,
        first: usize,
    ) -> Self {
        let n = snap.num_nodes();
        let width = snap.cluster.resources.len();
        Counter {
            extra: vec![0; n * width],
            extra_pods: vec![0; n],
            width,
            snap,
            fw,
            unplaceable,
            first,
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
        if let Some(why) = &self.unplaceable[shape.index() - self.first] {
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
            got += self.place_on(shape, NodeId(*cursor as u32), want - got);
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
        let cluster = self.snap.cluster;
        let mut pods: Vec<PodId> = (0..self.first)
            .map(|i| PodId(i as u32))
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
