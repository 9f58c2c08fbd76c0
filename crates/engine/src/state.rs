//! [`ClusterState`]: the one cluster state every front end schedules against. It owns the
//! objects (nodes, pods, and every other kind the engine reads) and the indexes the plugins
//! need (per-node requested and allocatable vectors, pods per node, host ports, taint sets,
//! priorities, device bookkeeping), and it is changed in place by [`ClusterState::apply`].
//!
//! Ids are slots: a node's or a pod's id stays the same for the object's life, deleting one
//! renumbers nothing, and a freed slot is reused with its generation bumped, so a stale id
//! is detected ([`ClusterState::check_pod`]). Ids follow arrival order, so nothing that
//! decides compares ids: nodes are iterated in name order ([`ClusterState::nodes`]) and
//! ties between nodes go by [`ClusterState::rank`], the node's position in name order.
//!
//! A change updates every index in time proportional to the change, with two exceptions
//! stated where they happen: a change to a DRA object (or to a node or PodGroup while devices
//! are in use) rebuilds the device state, and the group tree is rebuilt by the scheduler on
//! the next pass after a pod or group change.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::topology::PodTopology;
use lockstep_dra::{ClaimRef, DraError, DraInputs, DraState, NodeAllocation};
use lockstep_model::dra::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use lockstep_model::{
    Cluster, CompositePodGroup, HostPort, Labels, Node, NodeId, Pod, PodDisruptionBudget, PodGroup,
    PodId, PodPhase, PriorityClass, ResourceId, ResourceNames, Taint, TaintEffect, Workload,
};

/// A pod's DRA claims, resolved against the state's devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodClaims {
    None,
    Refs(Vec<ClaimRef>),
    /// A claim the pod names does not exist (or cannot be made from its template): the
    /// kube-scheduler message.
    Missing(String),
}

/// One object of a kind the state holds. Objects are moved into the state, once each:
/// boxing the large ones would only add an allocation per pod.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Object {
    Node(Node),
    Pod(Pod),
    PriorityClass(PriorityClass),
    PodDisruptionBudget(PodDisruptionBudget),
    /// A Namespace's labels (namespace selectors read them).
    Namespace {
        name: String,
        labels: Labels,
    },
    Workload(Workload),
    PodGroup(PodGroup),
    CompositePodGroup(CompositePodGroup),
    DeviceClass(DeviceClass),
    ResourceSlice(ResourceSlice),
    ResourceClaim(ResourceClaim),
    ResourceClaimTemplate(ResourceClaimTemplate),
}

/// The kinds of [`Object`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Node,
    Pod,
    PriorityClass,
    PodDisruptionBudget,
    Namespace,
    Workload,
    PodGroup,
    CompositePodGroup,
    DeviceClass,
    ResourceSlice,
    ResourceClaim,
    ResourceClaimTemplate,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::PriorityClass => "PriorityClass",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::Namespace => "Namespace",
            Kind::Workload => "Workload",
            Kind::PodGroup => "PodGroup",
            Kind::CompositePodGroup => "CompositePodGroup",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object's identity: its namespace (empty for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn cluster(name: impl Into<String>) -> Key {
        Key {
            namespace: String::new(),
            name: name.into(),
        }
    }
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Key {
        Key {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Node(_) => Kind::Node,
            Object::Pod(_) => Kind::Pod,
            Object::PriorityClass(_) => Kind::PriorityClass,
            Object::PodDisruptionBudget(_) => Kind::PodDisruptionBudget,
            Object::Namespace { .. } => Kind::Namespace,
            Object::Workload(_) => Kind::Workload,
            Object::PodGroup(_) => Kind::PodGroup,
            Object::CompositePodGroup(_) => Kind::CompositePodGroup,
            Object::DeviceClass(_) => Kind::DeviceClass,
            Object::ResourceSlice(_) => Kind::ResourceSlice,
            Object::ResourceClaim(_) => Kind::ResourceClaim,
            Object::ResourceClaimTemplate(_) => Kind::ResourceClaimTemplate,
        }
    }

    /// The object's namespace (empty for cluster-scoped kinds) and name, borrowed.
    pub fn names(&self) -> (&str, &str) {
        match self {
            Object::Node(o) => ("", &o.name),
            Object::Pod(o) => (&o.namespace, &o.name),
            Object::PriorityClass(o) => ("", &o.name),
            Object::PodDisruptionBudget(o) => (&o.namespace, &o.name),
            Object::Namespace { name, .. } => ("", name),
            Object::Workload(o) => (&o.namespace, &o.name),
            Object::PodGroup(o) => (&o.namespace, &o.name),
            Object::CompositePodGroup(o) => (&o.namespace, &o.name),
            Object::DeviceClass(o) => ("", &o.name),
            Object::ResourceSlice(o) => ("", &o.name),
            Object::ResourceClaim(o) => (&o.namespace, &o.name),
            Object::ResourceClaimTemplate(o) => (&o.namespace, &o.name),
        }
    }

    pub fn key(&self) -> Key {
        match self {
            Object::Node(o) => Key::cluster(&o.name),
            Object::Pod(o) => Key::namespaced(&o.namespace, &o.name),
            Object::PriorityClass(o) => Key::cluster(&o.name),
            Object::PodDisruptionBudget(o) => Key::namespaced(&o.namespace, &o.name),
            Object::Namespace { name, .. } => Key::cluster(name),
            Object::Workload(o) => Key::namespaced(&o.namespace, &o.name),
            Object::PodGroup(o) => Key::namespaced(&o.namespace, &o.name),
            Object::CompositePodGroup(o) => Key::namespaced(&o.namespace, &o.name),
            Object::DeviceClass(o) => Key::cluster(&o.name),
            Object::ResourceSlice(o) => Key::cluster(&o.name),
            Object::ResourceClaim(o) => Key::namespaced(&o.namespace, &o.name),
            Object::ResourceClaimTemplate(o) => Key::namespaced(&o.namespace, &o.name),
        }
    }
}

/// One change to the state. Objects are in the state's resource names (intern new names
/// with [`ClusterState::resources_mut`] before building them).
#[derive(Debug, Clone)]
pub enum Change {
    /// A new object; an object of the kind and key must not exist.
    Add(Object),
    /// A new version of an existing object.
    Update(Object),
    Delete(Kind, Key),
    /// A pending pod is bound to a node (its `spec.nodeName` is set).
    Bind {
        pod: Key,
        node: String,
    },
}

/// Why a change was rejected. The state is as it was before the change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    #[error("{kind} {key} already exists; send an update, or delete it first")]
    Duplicate { kind: Kind, key: Key },
    #[error("{kind} {key} does not exist; add it first")]
    Missing { kind: Kind, key: Key },
    #[error("pod {pod} cannot be bound to node {node}: the node does not exist")]
    UnknownNode { pod: Key, node: String },
    #[error("pod {pod} is already on node {node}; a bound pod is not bound again")]
    AlreadyBound { pod: Key, node: String },
    #[error("pod {pod} has finished; a finished pod is not bound")]
    Finished { pod: Key },
    #[error("{kind} id {id} is stale: the object was deleted (generation {expected}, now {found})")]
    Stale {
        kind: Kind,
        id: u32,
        expected: u32,
        found: u32,
    },
    #[error(transparent)]
    Dra(#[from] DraError),
}

/// What a change touched, for callers that keep ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Node(NodeId),
    Pod(PodId),
    Other,
}

/// A pod id with the generation of its slot: [`ClusterState::check_pod`] tells whether it
/// still names the same pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodHandle {
    pub id: PodId,
    pub generation: u32,
}

/// The engine's cluster state.
pub struct ClusterState {
    /// The objects. Pods and nodes are slots indexed by id; a deleted slot holds a blank
    /// object (a node with no name, a finished pod in no group) until it is reused.
    pub cluster: Arc<Cluster>,
    /// Number of resource ids (the row width of the flat vectors).
    pub width: usize,
    allocatable: Vec<i64>,
    requested: Vec<i64>,
    /// Requested CPU (milli) and memory where unset requests count as kube-scheduler's
    /// defaults, for scoring.
    non_zero: Vec<[i64; 2]>,
    pod_count: Vec<u32>,
    ports: Vec<Vec<HostPort>>,
    pods_on_node: Vec<Vec<PodId>>,
    node_of: Vec<Option<NodeId>>,
    node_ids: HashMap<String, NodeId>,
    /// Live pods by namespace and name, hashed from the pod objects themselves (no copy of
    /// the names).
    pod_index: hashbrown::HashTable<PodId>,
    node_live: Vec<bool>,
    node_generation: Vec<u32>,
    free_nodes: Vec<NodeId>,
    pod_live: Vec<bool>,
    pod_generation: Vec<u32>,
    free_pods: Vec<PodId>,
    /// Live nodes in name order, and each node slot's position in it.
    order: Vec<NodeId>,
    rank: Vec<u32>,
    /// Bound pods whose node is not in the state, by node name: they hold nothing until
    /// the node arrives.
    orphans: HashMap<String, Vec<PodId>>,
    /// Bound pods added by `apply_all`, placed at its end.
    loaded_bound: Vec<PodId>,
    unschedulable_nodes: u32,
    hard_taint_nodes: u32,
    prefer_taint_nodes: u32,
    pub any_unschedulable_node: bool,
    pub any_hard_taint: bool,
    pub any_prefer_no_schedule_taint: bool,
    /// Nodes with the same taints (in the same order) share a taint set: TaintToleration
    /// judges each set once per pod. The set of each node slot, and each set's taints.
    pub node_taint_set: Vec<u32>,
    pub taint_sets: Vec<Vec<Taint>>,
    taint_set_ids: HashMap<Vec<Taint>, u32>,
    /// Bound pods that have any pod affinity or anti-affinity term.
    pub bound_with_affinity: usize,
    /// Bound pods that have required anti-affinity terms.
    pub bound_with_required_anti_affinity: usize,
    /// Placed pods by label set and affinity term, counted per topology domain.
    pub topology: PodTopology,
    /// Incremented by every change, `assume` and `forget`: state derived from the cluster
    /// state (the batching state) is valid only for the generation it was made at.
    pub generation: u64,
    /// Incremented by every change to pods or groups: the group tree is valid only for the
    /// revision it was built at.
    pub revision: u64,
    /// Devices, when the cluster uses Dynamic Resource Allocation.
    pub dra: Option<DraState>,
    /// Every device is local to one node (no network-attached pools): allocating on one
    /// node never changes what another node can allocate.
    pub dra_node_local: bool,
    /// Live pods that name claims (with DRA objects, they make the state keep devices).
    pods_with_claims: usize,
    /// Each pod's claims, indexed by pod.
    claims: Vec<PodClaims>,
    pub task_shapes: TaskShapes,
    /// The workload of the sigmoid fragmentation score: see [`typical_shapes`].
    pub typical_shapes: TaskShapes,
    /// The workload of the `FragmentationFit` score: every (claims, cpu) shape.
    pub fit_shapes: TaskShapes,
    /// How placed pods choose among the device allocations a node offers: with the paper's
    /// integer fragmentation score (`FragmentationSigmoid`, `FragmentationFit`), the one whose
    /// score is best; else the first found.
    pub device_choice: crate::config::DeviceScoring,
    shape_counts: BTreeMap<ShapeKey, u32>,
    shapes_dirty: bool,
    /// The device allocation each placed pod holds, indexed by pod.
    allocations: Vec<Option<NodeAllocation>>,
    /// How many placed pods have each priority (preemption looks for lower ones).
    priorities: BTreeMap<i32, u32>,
}

type ShapeKey = (Vec<ClaimRef>, Vec<(ResourceId, i64)>);

impl ClusterState {
    /// An empty state whose objects will use `resources`.
    pub fn empty(resources: ResourceNames) -> ClusterState {
        let width = resources.len();
        ClusterState {
            cluster: Arc::new(Cluster {
                resources,
                ..Cluster::default()
            }),
            width,
            allocatable: Vec::new(),
            requested: Vec::new(),
            non_zero: Vec::new(),
            pod_count: Vec::new(),
            ports: Vec::new(),
            pods_on_node: Vec::new(),
            node_of: Vec::new(),
            node_ids: HashMap::default(),
            pod_index: hashbrown::HashTable::new(),
            node_live: Vec::new(),
            node_generation: Vec::new(),
            free_nodes: Vec::new(),
            pod_live: Vec::new(),
            pod_generation: Vec::new(),
            free_pods: Vec::new(),
            order: Vec::new(),
            rank: Vec::new(),
            orphans: HashMap::default(),
            loaded_bound: Vec::new(),
            unschedulable_nodes: 0,
            hard_taint_nodes: 0,
            prefer_taint_nodes: 0,
            any_unschedulable_node: false,
            any_hard_taint: false,
            any_prefer_no_schedule_taint: false,
            node_taint_set: Vec::new(),
            taint_sets: Vec::new(),
            taint_set_ids: HashMap::default(),
            bound_with_affinity: 0,
            bound_with_required_anti_affinity: 0,
            topology: PodTopology::default(),
            generation: 0,
            revision: 0,
            dra: None,
            dra_node_local: true,
            pods_with_claims: 0,
            claims: Vec::new(),
            task_shapes: TaskShapes::default(),
            typical_shapes: TaskShapes::default(),
            fit_shapes: TaskShapes::default(),
            device_choice: crate::config::DeviceScoring::Strategy,
            shape_counts: BTreeMap::new(),
            shapes_dirty: false,
            allocations: Vec::new(),
            priorities: BTreeMap::new(),
        }
    }

    /// The state of a loaded cluster: every object added, in the cluster's order. Node and
    /// pod ids are then the objects' positions in `cluster.nodes` and `cluster.pods`. Pods
    /// naming a node that does not exist hold nothing. Fails when an object is defined twice
    /// or the DRA objects are invalid (a CEL selector that does not compile, say).
    pub fn from_cluster(mut cluster: Cluster) -> Result<ClusterState, ChangeError> {
        let mut state = ClusterState::empty(std::mem::take(&mut cluster.resources));
        state.reserve(cluster.nodes.len(), 0);
        // Pods, the bulk of a cluster, are added in one piece after the other kinds.
        let pods = std::mem::take(&mut cluster.pods);
        state.load(object_iter(cluster).map(Change::Add), pods)?;
        Ok(state)
    }

    /// The state of a cluster held elsewhere (a copy of its objects).
    pub fn new(cluster: &Cluster) -> Result<ClusterState, ChangeError> {
        ClusterState::from_cluster(cluster.clone())
    }

    /// Makes room for `nodes` more nodes and `pods` more pods.
    pub fn reserve(&mut self, nodes: usize, pods: usize) {
        let c = Arc::make_mut(&mut self.cluster);
        c.nodes.reserve(nodes);
        c.pods.reserve(pods);
        self.node_of.reserve(pods);
        self.claims.reserve(pods);
        self.allocations.reserve(pods);
        self.pod_live.reserve(pods);
        self.pod_generation.reserve(pods);
        self.allocatable.reserve(nodes * self.width);
        self.requested.reserve(nodes * self.width);
        self.node_ids.reserve(nodes);
    }

    /// The resource names objects are interned in: a front end interns a new resource here
    /// before it builds an object that requests it.
    pub fn resources_mut(&mut self) -> &mut ResourceNames {
        &mut Arc::make_mut(&mut self.cluster).resources
    }

    /// Applies one change. A rejected change leaves the state exactly as it was.
    pub fn apply(&mut self, change: Change) -> Result<Applied, ChangeError> {
        self.widen();
        self.check(&change)?;
        let dra_kind = self.touches_dra(&change);
        if dra_kind {
            // Rebuild the devices from the objects as they will be; put the objects back
            // when the rebuild fails.
            let undo = self.undo_for(&change);
            let applied = self.apply_unchecked(change, false);
            if let Err(e) = self.rebuild_dra() {
                self.restore(undo);
                self.rebuild_dra()
                    .expect("the device state rebuilt before the change rebuilds again");
                self.finish();
                return Err(e.into());
            }
            self.finish();
            return Ok(applied);
        }
        let applied = self.apply_unchecked(change, false);
        self.finish();
        Ok(applied)
    }

    /// Brings the summaries some changes leave stale up to date.
    fn finish(&mut self) {
        if self.shapes_dirty {
            self.task_shapes = task_shapes(&self.shape_counts);
            self.typical_shapes = typical_shapes(&self.shape_counts, TYPICAL_PERCENT);
            self.fit_shapes = typical_shapes(&self.shape_counts, 100);
            self.shapes_dirty = false;
        }
    }

    /// Applies changes in order, the way a whole cluster is loaded: the device state is built
    /// once at the end, and pods already bound are placed at the end in name order
    /// (namespace, then name), whatever order they came in — a running pod whose claims hold
    /// no allocation yet is matched to devices then, and the first to ask gets a contested
    /// device. On an error the state is left part-way: drop it.
    pub fn apply_all(
        &mut self,
        changes: impl IntoIterator<Item = Change>,
    ) -> Result<(), ChangeError> {
        self.load(changes, Vec::new())
    }

    /// [`apply_all`](Self::apply_all), then `pods` added.
    fn load(
        &mut self,
        changes: impl IntoIterator<Item = Change>,
        pods: Vec<Pod>,
    ) -> Result<(), ChangeError> {
        self.widen();
        let mut dra = false;
        for change in changes {
            // A new pod is checked by its insertion into the name index (one lookup
            // instead of two): a second pod of the name is refused there.
            if let Change::Add(Object::Pod(pod)) = change {
                dra |= !pod.resource_claims.is_empty();
                self.generation += 1;
                self.add_new_pod(pod, true)?;
                continue;
            }
            self.check(&change)?;
            dra |= self.touches_dra(&change);
            self.apply_unchecked(change, true);
        }
        dra |= self.add_pods(pods)?;
        if dra || (self.dra.is_none() && self.wants_dra()) {
            self.rebuild_dra()?;
        }
        let mut deferred = std::mem::take(&mut self.loaded_bound);
        // Pods that waited for a node this load added.
        let arrived: Vec<String> = self
            .orphans
            .keys()
            .filter(|node| self.node_ids.contains_key(*node))
            .cloned()
            .collect();
        for node in arrived {
            deferred.extend(self.orphans.remove(&node).unwrap_or_default());
        }
        let cluster = Arc::clone(&self.cluster);
        // A pod the load added and then deleted or changed is placed as it is now.
        deferred.retain(|p| {
            self.pod_live[p.index()]
                && self.node_of[p.index()].is_none()
                && cluster.pods[p.index()].is_bound()
        });
        deferred.sort_unstable_by(|&a, &b| {
            let (pa, pb) = (&cluster.pods[a.index()], &cluster.pods[b.index()]);
            (&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name))
        });
        deferred.dedup();
        for id in deferred {
            let name = cluster.pods[id.index()]
                .node_name
                .as_deref()
                .expect("bound");
            match self.node_ids.get(name) {
                Some(&node) => self.assume(id, node),
                None => self.orphans.entry(name.to_string()).or_default().push(id),
            }
        }
        self.finish();
        Ok(())
    }

    /// Rejects a change that names what does not exist, or adds what does.
    fn check(&self, change: &Change) -> Result<(), ChangeError> {
        match change {
            Change::Add(o) => {
                let (ns, name) = o.names();
                if self.exists(o.kind(), ns, name) {
                    return Err(ChangeError::Duplicate {
                        kind: o.kind(),
                        key: o.key(),
                    });
                }
            }
            Change::Update(o) => {
                let (ns, name) = o.names();
                if !self.exists(o.kind(), ns, name) {
                    return Err(ChangeError::Missing {
                        kind: o.kind(),
                        key: o.key(),
                    });
                }
            }
            Change::Delete(kind, key) => {
                if !self.exists(*kind, &key.namespace, &key.name) {
                    return Err(ChangeError::Missing {
                        kind: *kind,
                        key: key.clone(),
                    });
                }
            }
            Change::Bind { pod, node } => {
                let Some(id) = self.pod_id(&pod.namespace, &pod.name) else {
                    return Err(ChangeError::Missing {
                        kind: Kind::Pod,
                        key: pod.clone(),
                    });
                };
                let p = &self.cluster.pods[id.index()];
                if let Some(on) = &p.node_name {
                    return Err(ChangeError::AlreadyBound {
                        pod: pod.clone(),
                        node: on.clone(),
                    });
                }
                if matches!(p.phase, PodPhase::Succeeded | PodPhase::Failed) {
                    return Err(ChangeError::Finished { pod: pod.clone() });
                }
                if !self.node_ids.contains_key(node) {
                    return Err(ChangeError::UnknownNode {
                        pod: pod.clone(),
                        node: node.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    fn exists(&self, kind: Kind, ns: &str, name: &str) -> bool {
        let c = &self.cluster;
        match kind {
            Kind::Node => self.node_ids.contains_key(name),
            Kind::Pod => self.pod_id(ns, name).is_some(),
            Kind::PriorityClass => c.priority_classes.iter().any(|o| o.name == name),
            Kind::PodDisruptionBudget => c
                .pod_disruption_budgets
                .iter()
                .any(|o| o.namespace == ns && o.name == name),
            Kind::Namespace => c.namespaces.contains_key(name),
            Kind::Workload => c
                .workloads
                .iter()
                .any(|o| o.namespace == ns && o.name == name),
            Kind::PodGroup => c
                .pod_groups
                .iter()
                .any(|o| o.namespace == ns && o.name == name),
            Kind::CompositePodGroup => c
                .composite_pod_groups
                .iter()
                .any(|o| o.namespace == ns && o.name == name),
            Kind::DeviceClass => c.device_classes.iter().any(|o| o.name == name),
            Kind::ResourceSlice => c.resource_slices.iter().any(|o| o.name == name),
            Kind::ResourceClaim => c
                .resource_claims
                .iter()
                .any(|o| o.namespace == ns && o.name == name),
            Kind::ResourceClaimTemplate => c
                .resource_claim_templates
                .iter()
                .any(|o| o.namespace == ns && o.name == name),
        }
    }

    /// Whether the change needs the device state rebuilt.
    fn touches_dra(&self, change: &Change) -> bool {
        let kind = match change {
            Change::Add(o) | Change::Update(o) => o.kind(),
            Change::Delete(k, _) => *k,
            // Placed by name order with the other running pods, as a loaded cluster is.
            Change::Bind { pod, .. } => {
                return self.dra.is_some()
                    && self.pod_id(&pod.namespace, &pod.name).is_some_and(|id| {
                        !self.cluster.pods[id.index()].resource_claims.is_empty()
                    });
            }
        };
        match kind {
            Kind::DeviceClass
            | Kind::ResourceSlice
            | Kind::ResourceClaim
            | Kind::ResourceClaimTemplate => true,
            // Slices are matched to nodes by name and selector.
            Kind::Node => self.dra.is_some(),
            // A group's claims from templates are claims of the device state.
            Kind::PodGroup => {
                self.dra.is_some()
                    || matches!(change, Change::Add(Object::PodGroup(g)) | Change::Update(Object::PodGroup(g)) if !g.resource_claims.is_empty())
            }
            // The first pod with claims brings the device state in; a running pod with claims
            // may be what keeps a claim's allocation (its reservedFor), which the device
            // state settles when it is built.
            Kind::Pod => {
                let new = match change {
                    Change::Add(Object::Pod(p)) | Change::Update(Object::Pod(p)) => {
                        !p.resource_claims.is_empty() && (self.dra.is_none() || p.is_bound())
                    }
                    _ => false,
                };
                let (ns, name) = match change {
                    Change::Add(o) | Change::Update(o) => o.names(),
                    Change::Delete(_, k) => (k.namespace.as_str(), k.name.as_str()),
                    Change::Bind { .. } => return false,
                };
                if self.dra.is_none() && !new {
                    return false;
                }
                let old = self.pod_id(ns, name).is_some_and(|id| {
                    let p = &self.cluster.pods[id.index()];
                    !p.resource_claims.is_empty() && p.is_bound()
                });
                new || old
            }
            _ => false,
        }
    }

    /// Grows the flat per-node rows when resource names were interned since the last change.
    fn widen(&mut self) {
        let width = self.cluster.resources.len();
        if width == self.width {
            return;
        }
        let n = self.node_live.len();
        let mut allocatable = vec![0; n * width];
        let mut requested = vec![0; n * width];
        for i in 0..n {
            allocatable[i * width..i * width + self.width]
                .copy_from_slice(&self.allocatable[i * self.width..(i + 1) * self.width]);
            requested[i * width..i * width + self.width]
                .copy_from_slice(&self.requested[i * self.width..(i + 1) * self.width]);
        }
        self.allocatable = allocatable;
        self.requested = requested;
        self.width = width;
    }

    /// Applies a checked change. `loading`: bound pods wait for the end of `apply_all`.
    fn apply_unchecked(&mut self, change: Change, loading: bool) -> Applied {
        self.generation += 1;
        match change {
            Change::Add(Object::Node(node)) => Applied::Node(self.add_node(node, loading)),
            Change::Update(Object::Node(node)) => Applied::Node(self.update_node(node)),
            Change::Delete(Kind::Node, key) => Applied::Node(self.delete_node(&key.name)),
            Change::Add(Object::Pod(pod)) => Applied::Pod(self.add_pod(pod, loading)),
            Change::Update(Object::Pod(pod)) => Applied::Pod(self.update_pod(pod)),
            Change::Delete(Kind::Pod, key) => {
                let id = self.pod_id(&key.namespace, &key.name).expect("checked");
                self.delete_pod(id);
                Applied::Pod(id)
            }
            Change::Bind { pod, node } => {
                let id = self.pod_id(&pod.namespace, &pod.name).expect("checked");
                let node_id = self.node_ids[&node];
                Arc::make_mut(&mut self.cluster).pods[id.index()].node_name = Some(node);
                self.revision += 1;
                self.assume(id, node_id);
                Applied::Pod(id)
            }
            Change::Add(o) | Change::Update(o) => {
                self.set_object(o);
                Applied::Other
            }
            Change::Delete(kind, key) => {
                self.delete_object(kind, &key);
                Applied::Other
            }
        }
    }

    fn add_node(&mut self, node: Node, loading: bool) -> NodeId {
        let id = match self.free_nodes.pop() {
            Some(id) => id,
            None => {
                let id = NodeId(self.node_live.len() as u32);
                let w = self.width;
                self.allocatable.extend(std::iter::repeat_n(0, w));
                self.requested.extend(std::iter::repeat_n(0, w));
                self.non_zero.push([0, 0]);
                self.pod_count.push(0);
                self.ports.push(Vec::new());
                self.pods_on_node.push(Vec::new());
                self.node_live.push(false);
                self.node_generation.push(0);
                self.rank.push(0);
                self.node_taint_set.push(0);
                Arc::make_mut(&mut self.cluster).nodes.push(blank_node());
                id
            }
        };
        let name = node.name.clone();
        self.node_live[id.index()] = true;
        self.node_ids.insert(name.clone(), id);
        // Insert into name order; positions after it move by one.
        let cluster = Arc::clone(&self.cluster);
        let at = self
            .order
            .partition_point(|n| cluster.nodes[n.index()].name < name);
        drop(cluster);
        self.order.insert(at, id);
        for (k, n) in self.order.iter().enumerate().skip(at) {
            self.rank[n.index()] = k as u32;
        }
        self.set_node(id, node);
        if !loading && let Some(pods) = self.orphans.remove(&name) {
            let cluster = Arc::clone(&self.cluster);
            let mut pods = pods;
            pods.sort_by(|&a, &b| {
                let (pa, pb) = (&cluster.pods[a.index()], &cluster.pods[b.index()]);
                (&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name))
            });
            for p in pods {
                self.assume(p, id);
            }
        }
        id
    }

    /// Writes a live node's object and its row, taint set and counts.
    fn set_node(&mut self, id: NodeId, node: Node) {
        self.count_node(id, -1);
        let base = id.index() * self.width;
        self.allocatable[base..base + self.width].fill(0);
        for (r, v) in node.allocatable.iter() {
            self.allocatable[base + r.index()] = v;
        }
        let set = match self.taint_set_ids.get(&node.taints) {
            Some(&s) => s,
            None => {
                let s = self.taint_sets.len() as u32;
                self.taint_sets.push(node.taints.clone());
                self.taint_set_ids.insert(node.taints.clone(), s);
                s
            }
        };
        self.node_taint_set[id.index()] = set;
        self.topology
            .set_node_labels(id, &node.labels, &self.pods_on_node[id.index()]);
        Arc::make_mut(&mut self.cluster).nodes[id.index()] = node;
        self.count_node(id, 1);
    }

    /// Adds (`sign` 1) or removes (-1) a live node's unschedulable and taint counts.
    fn count_node(&mut self, id: NodeId, sign: i32) {
        let node = &self.cluster.nodes[id.index()];
        if !self.node_live[id.index()] || node.name.is_empty() {
            return;
        }
        let hard = node
            .taints
            .iter()
            .any(|t| t.effect != TaintEffect::PreferNoSchedule);
        let prefer = node
            .taints
            .iter()
            .any(|t| t.effect == TaintEffect::PreferNoSchedule);
        let add = |n: &mut u32, on: bool| {
            if on {
                *n = n.wrapping_add_signed(sign);
            }
        };
        add(&mut self.unschedulable_nodes, node.unschedulable);
        add(&mut self.hard_taint_nodes, hard);
        add(&mut self.prefer_taint_nodes, prefer);
        self.any_unschedulable_node = self.unschedulable_nodes > 0;
        self.any_hard_taint = self.hard_taint_nodes > 0;
        self.any_prefer_no_schedule_taint = self.prefer_taint_nodes > 0;
    }

    fn update_node(&mut self, node: Node) -> NodeId {
        let id = self.node_ids[&node.name];
        self.set_node(id, node);
        id
    }

    /// Removes a node: its pods stay bound to its name and hold nothing until a node of the
    /// name comes back.
    fn delete_node(&mut self, name: &str) -> NodeId {
        let id = self.node_ids[name];
        for p in self.pods_on_node[id.index()].clone() {
            self.forget(p);
            self.orphans.entry(name.to_string()).or_default().push(p);
        }
        self.count_node(id, -1);
        self.node_ids.remove(name);
        let at = self.rank[id.index()] as usize;
        self.order.remove(at);
        for (k, n) in self.order.iter().enumerate().skip(at) {
            self.rank[n.index()] = k as u32;
        }
        let base = id.index() * self.width;
        self.allocatable[base..base + self.width].fill(0);
        self.topology
            .set_node_labels(id, &Labels::default(), &self.pods_on_node[id.index()]);
        Arc::make_mut(&mut self.cluster).nodes[id.index()] = blank_node();
        self.node_live[id.index()] = false;
        self.node_generation[id.index()] += 1;
        self.free_nodes.push(id);
        id
    }

    fn add_pod(&mut self, pod: Pod, loading: bool) -> PodId {
        self.add_new_pod(pod, loading)
            .expect("checked: no pod of the name")
    }

    /// Adds a pod, refusing (with nothing changed) a second pod of the same name.
    fn add_new_pod(&mut self, pod: Pod, loading: bool) -> Result<PodId, ChangeError> {
        let id = match self.free_pods.pop() {
            Some(id) => {
                Arc::make_mut(&mut self.cluster).pods[id.index()] = pod;
                id
            }
            None => {
                Arc::make_mut(&mut self.cluster).pods.push(pod);
                self.grow_pod_slots(1);
                PodId(self.pod_live.len() as u32 - 1)
            }
        };
        self.register_pod(id, loading)
    }

    /// Adds many pods at once (their objects move into the state in one piece), while
    /// loading. Returns whether any names claims.
    fn add_pods(&mut self, pods: Vec<Pod>) -> Result<bool, ChangeError> {
        let first = self.pod_live.len();
        let n = pods.len();
        let claims = pods.iter().any(|p| !p.resource_claims.is_empty());
        let c = Arc::make_mut(&mut self.cluster);
        debug_assert_eq!(c.pods.len(), first, "pod objects and slots agree");
        if c.pods.is_empty() {
            c.pods = pods;
        } else {
            c.pods.extend(pods);
        }
        self.grow_pod_slots(n);
        for i in first..first + n {
            self.generation += 1;
            self.register_pod(PodId(i as u32), true)?;
        }
        Ok(claims)
    }

    fn grow_pod_slots(&mut self, n: usize) {
        let len = self.pod_live.len() + n;
        self.node_of.resize(len, None);
        self.claims.resize(len, PodClaims::None);
        self.allocations.resize(len, None);
        self.pod_live.resize(len, false);
        self.pod_generation.resize(len, 0);
    }

    /// Indexes the pod in slot `id` by name and counts it; a second pod of the name is
    /// refused and its slot freed.
    fn register_pod(&mut self, id: PodId, loading: bool) -> Result<PodId, ChangeError> {
        let pods = &self.cluster.pods;
        let pod = &pods[id.index()];
        match self.pod_index.entry(
            name_hash(&pod.namespace, &pod.name),
            |&p| pods[p.index()].namespace == pod.namespace && pods[p.index()].name == pod.name,
            |&p| name_hash(&pods[p.index()].namespace, &pods[p.index()].name),
        ) {
            hashbrown::hash_table::Entry::Occupied(_) => {
                let key = Key::namespaced(&pod.namespace, &pod.name);
                let blank = &mut Arc::make_mut(&mut self.cluster).pods[id.index()];
                blank.phase = PodPhase::Succeeded;
                blank.node_name = None;
                blank.pod_group = None;
                self.free_pods.push(id);
                return Err(ChangeError::Duplicate {
                    kind: Kind::Pod,
                    key,
                });
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(id);
            }
        }
        self.pod_live[id.index()] = true;
        self.index_pod(id, loading);
        Ok(id)
    }

    /// Writes a live pod's object, then indexes it.
    fn set_pod(&mut self, id: PodId, pod: Pod, loading: bool) {
        Arc::make_mut(&mut self.cluster).pods[id.index()] = pod;
        self.index_pod(id, loading);
    }

    /// Counts a live pod's claims and shape, and places it when it is bound (while loading,
    /// at the end of the load).
    fn index_pod(&mut self, id: PodId, loading: bool) {
        self.revision += 1;
        self.topology.pod_changed(id);
        self.topology
            .register_keys(&self.cluster.pods[id.index()], &self.cluster.nodes);
        if !self.cluster.pods[id.index()].resource_claims.is_empty() {
            self.pods_with_claims += 1;
        }
        let claims = resolve_claims(self.dra.as_ref(), &self.cluster, id);
        self.claims[id.index()] = claims;
        self.count_shape(id, 1);
        let pod = &self.cluster.pods[id.index()];
        if pod.is_bound() {
            if loading {
                self.loaded_bound.push(id);
                return;
            }
            let name = pod.node_name.as_deref().expect("bound");
            match self.node_ids.get(name) {
                Some(&node) => self.assume(id, node),
                None => self.orphans.entry(name.to_string()).or_default().push(id),
            }
        }
    }

    /// Takes a live pod off its node (or the orphans) and out of the counts.
    fn unset_pod(&mut self, id: PodId) {
        self.revision += 1;
        self.forget(id);
        let pod = &self.cluster.pods[id.index()];
        if let Some(name) = pod.node_name.clone() {
            self.remove_orphan(id, &name);
        }
        self.count_shape(id, -1);
        if !self.cluster.pods[id.index()].resource_claims.is_empty() {
            self.pods_with_claims -= 1;
        }
    }

    fn remove_orphan(&mut self, id: PodId, node: &str) {
        if let Some(pods) = self.orphans.get_mut(node) {
            pods.retain(|p| *p != id);
            if pods.is_empty() {
                self.orphans.remove(node);
            }
        }
    }

    fn update_pod(&mut self, pod: Pod) -> PodId {
        let id = self.pod_id(&pod.namespace, &pod.name).expect("checked");
        self.unset_pod(id);
        self.set_pod(id, pod, false);
        id
    }

    fn delete_pod(&mut self, id: PodId) {
        self.unset_pod(id);
        let cluster = Arc::make_mut(&mut self.cluster);
        let pod = &mut cluster.pods[id.index()];
        let hash = name_hash(&pod.namespace, &pod.name);
        if let Ok(entry) = self.pod_index.find_entry(hash, |&p| p == id) {
            entry.remove();
        }
        // A blank that nothing schedules, counts or groups.
        pod.phase = PodPhase::Succeeded;
        pod.node_name = None;
        pod.pod_group = None;
        pod.resource_claims.clear();
        pod.labels = Labels::default();
        self.claims[id.index()] = PodClaims::None;
        self.pod_live[id.index()] = false;
        self.pod_generation[id.index()] += 1;
        self.free_pods.push(id);
    }

    /// Adds to (`sign` 1) or removes from (-1) the pod's (claims, requests) shape count.
    fn count_shape(&mut self, id: PodId, sign: i32) {
        let refs: &[ClaimRef] = match &self.claims[id.index()] {
            PodClaims::Refs(refs) => refs,
            PodClaims::None => &[],
            PodClaims::Missing(_) => return,
        };
        if self.dra.is_none() {
            return;
        }
        let pod = &self.cluster.pods[id.index()];
        let key: ShapeKey = (refs.to_vec(), pod.requests.iter().collect());
        if sign > 0 {
            *self.shape_counts.entry(key).or_insert(0) += 1;
        } else if let Some(n) = self.shape_counts.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.shape_counts.remove(&key);
            }
        }
        self.shapes_dirty = true;
    }

    /// Adds or replaces an object of a kind without per-object indexes.
    fn set_object(&mut self, object: Object) {
        self.revision += 1;
        let c = Arc::make_mut(&mut self.cluster);
        fn put<T>(list: &mut Vec<T>, item: T, same: impl Fn(&T) -> bool) {
            match list.iter().position(same) {
                Some(i) => list[i] = item,
                None => list.push(item),
            }
        }
        match object {
            Object::PriorityClass(o) => {
                let n = o.name.clone();
                put(&mut c.priority_classes, o, |x| x.name == n)
            }
            Object::PodDisruptionBudget(o) => {
                let k = (o.namespace.clone(), o.name.clone());
                put(&mut c.pod_disruption_budgets, o, |x| {
                    x.namespace == k.0 && x.name == k.1
                })
            }
            Object::Namespace { name, labels } => {
                c.namespaces.insert(name, labels);
            }
            Object::Workload(o) => {
                let k = (o.namespace.clone(), o.name.clone());
                put(&mut c.workloads, o, |x| x.namespace == k.0 && x.name == k.1)
            }
            Object::PodGroup(o) => {
                let k = (o.namespace.clone(), o.name.clone());
                put(&mut c.pod_groups, o, |x| {
                    x.namespace == k.0 && x.name == k.1
                })
            }
            Object::CompositePodGroup(o) => {
                let k = (o.namespace.clone(), o.name.clone());
                put(&mut c.composite_pod_groups, o, |x| {
                    x.namespace == k.0 && x.name == k.1
                })
            }
            Object::DeviceClass(o) => {
                let n = o.name.clone();
                put(&mut c.device_classes, o, |x| x.name == n)
            }
            Object::ResourceSlice(o) => {
                let n = o.name.clone();
                put(&mut c.resource_slices, o, |x| x.name == n)
            }
            Object::ResourceClaim(o) => {
                let k = (o.namespace.clone(), o.name.clone());
                put(&mut c.resource_claims, o, |x| {
                    x.namespace == k.0 && x.name == k.1
                })
            }
            Object::ResourceClaimTemplate(o) => {
                let k = (o.namespace.clone(), o.name.clone());
                put(&mut c.resource_claim_templates, o, |x| {
                    x.namespace == k.0 && x.name == k.1
                })
            }
            Object::Node(_) | Object::Pod(_) => unreachable!("nodes and pods have slots"),
        }
    }

    fn delete_object(&mut self, kind: Kind, key: &Key) {
        self.revision += 1;
        let c = Arc::make_mut(&mut self.cluster);
        let (ns, name) = (key.namespace.as_str(), key.name.as_str());
        match kind {
            Kind::PriorityClass => c.priority_classes.retain(|o| o.name != name),
            Kind::PodDisruptionBudget => c
                .pod_disruption_budgets
                .retain(|o| !(o.namespace == ns && o.name == name)),
            Kind::Namespace => {
                c.namespaces.remove(name);
            }
            Kind::Workload => c
                .workloads
                .retain(|o| !(o.namespace == ns && o.name == name)),
            Kind::PodGroup => c
                .pod_groups
                .retain(|o| !(o.namespace == ns && o.name == name)),
            Kind::CompositePodGroup => c
                .composite_pod_groups
                .retain(|o| !(o.namespace == ns && o.name == name)),
            Kind::DeviceClass => c.device_classes.retain(|o| o.name != name),
            Kind::ResourceSlice => c.resource_slices.retain(|o| o.name != name),
            Kind::ResourceClaim => c
                .resource_claims
                .retain(|o| !(o.namespace == ns && o.name == name)),
            Kind::ResourceClaimTemplate => c
                .resource_claim_templates
                .retain(|o| !(o.namespace == ns && o.name == name)),
            Kind::Node | Kind::Pod => unreachable!("nodes and pods have slots"),
        }
    }

    /// What puts the objects a DRA-touching change replaces back as they were.
    fn undo_for(&self, change: &Change) -> Vec<Change> {
        let previous = |kind: Kind, key: &Key| self.object(kind, key);
        match change {
            Change::Add(o) => vec![Change::Delete(o.kind(), o.key())],
            Change::Update(o) => previous(o.kind(), &o.key())
                .map(Change::Update)
                .into_iter()
                .collect(),
            Change::Delete(kind, key) => {
                previous(*kind, key).map(Change::Add).into_iter().collect()
            }
            Change::Bind { .. } => Vec::new(),
        }
    }

    fn restore(&mut self, undo: Vec<Change>) {
        for change in undo {
            self.apply_unchecked(change, false);
        }
    }

    /// A copy of the object of `kind` and `key`, when it exists.
    pub fn object(&self, kind: Kind, key: &Key) -> Option<Object> {
        let c = &self.cluster;
        let (ns, name) = (key.namespace.as_str(), key.name.as_str());
        let find = |n: &str, s: &str, o_ns: &str| o_ns == ns && n == s;
        match kind {
            Kind::Node => self
                .node_id(name)
                .map(|id| Object::Node(c.nodes[id.index()].clone())),
            Kind::Pod => self
                .pod_id(ns, name)
                .map(|id| Object::Pod(c.pods[id.index()].clone())),
            Kind::PriorityClass => c
                .priority_classes
                .iter()
                .find(|o| o.name == name)
                .cloned()
                .map(Object::PriorityClass),
            Kind::PodDisruptionBudget => c
                .pod_disruption_budgets
                .iter()
                .find(|o| find(&o.name, name, &o.namespace))
                .cloned()
                .map(Object::PodDisruptionBudget),
            Kind::Namespace => c.namespaces.get(name).map(|l| Object::Namespace {
                name: name.to_string(),
                labels: l.clone(),
            }),
            Kind::Workload => c
                .workloads
                .iter()
                .find(|o| find(&o.name, name, &o.namespace))
                .cloned()
                .map(Object::Workload),
            Kind::PodGroup => c
                .pod_groups
                .iter()
                .find(|o| find(&o.name, name, &o.namespace))
                .cloned()
                .map(Object::PodGroup),
            Kind::CompositePodGroup => c
                .composite_pod_groups
                .iter()
                .find(|o| find(&o.name, name, &o.namespace))
                .cloned()
                .map(Object::CompositePodGroup),
            Kind::DeviceClass => c
                .device_classes
                .iter()
                .find(|o| o.name == name)
                .cloned()
                .map(Object::DeviceClass),
            Kind::ResourceSlice => c
                .resource_slices
                .iter()
                .find(|o| o.name == name)
                .cloned()
                .map(Object::ResourceSlice),
            Kind::ResourceClaim => c
                .resource_claims
                .iter()
                .find(|o| find(&o.name, name, &o.namespace))
                .cloned()
                .map(Object::ResourceClaim),
            Kind::ResourceClaimTemplate => c
                .resource_claim_templates
                .iter()
                .find(|o| find(&o.name, name, &o.namespace))
                .cloned()
                .map(Object::ResourceClaimTemplate),
        }
    }

    fn wants_dra(&self) -> bool {
        let c = &self.cluster;
        !c.resource_slices.is_empty()
            || !c.device_classes.is_empty()
            || !c.resource_claims.is_empty()
            || !c.resource_claim_templates.is_empty()
            || self.pods_with_claims > 0
    }

    /// Builds the device state from the objects, then gives every placed pod with claims
    /// its devices again, in name order. Proportional to the DRA objects and the pods.
    fn rebuild_dra(&mut self) -> Result<(), DraError> {
        let dra = if self.wants_dra() {
            Some(self.build_dra()?)
        } else {
            None
        };
        for a in &mut self.allocations {
            *a = None;
        }
        self.dra = dra;
        self.dra_node_local = self.cluster.resource_slices.iter().all(|s| {
            matches!(
                s.node_scope,
                lockstep_model::dra::SliceNodeScope::NodeName(_)
            )
        });
        // Claim ids are new: resolve every pod again, and count shapes again.
        self.shape_counts.clear();
        for i in 0..self.pod_live.len() {
            let id = PodId(i as u32);
            if !self.pod_live[i] {
                continue;
            }
            self.claims[i] = resolve_claims(self.dra.as_ref(), &self.cluster, id);
            self.count_shape(id, 1);
        }
        // Every pod on a node with claims, in name order, takes its devices again.
        let mut with_claims: Vec<(PodId, NodeId)> = self
            .node_of
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((PodId(i as u32), (*n)?)))
            .filter(|(p, _)| matches!(self.claims[p.index()], PodClaims::Refs(_)))
            .collect();
        let cluster = Arc::clone(&self.cluster);
        with_claims.sort_by(|&(a, _), &(b, _)| {
            let (pa, pb) = (&cluster.pods[a.index()], &cluster.pods[b.index()]);
            (&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name))
        });
        for (pod, node) in with_claims {
            self.take_devices(pod, node, None);
        }
        Ok(())
    }

    fn build_dra(&self) -> Result<DraState, DraError> {
        let cluster = &*self.cluster;
        // A PodGroup's claim from a template is one claim for the whole group: made here
        // as a ResourceClaim named `<group>-<claim>`, which its pods then share.
        let mut claims = cluster.resource_claims.clone();
        for g in &cluster.pod_groups {
            for c in &g.resource_claims {
                let Some(t) = c.resource_claim_template_name.as_ref().and_then(|t| {
                    cluster
                        .resource_claim_templates
                        .iter()
                        .find(|x| x.namespace == g.namespace && x.name == *t)
                }) else {
                    continue;
                };
                claims.push(ResourceClaim {
                    namespace: g.namespace.clone(),
                    name: group_claim_name(&g.name, &c.name),
                    spec: t.spec.clone(),
                    allocation: None,
                    reserved_for: Vec::new(),
                });
            }
        }
        // A running pod in a claim's reservedFor is counted again when it is placed: count
        // it there only. A claim whose every consumer is such a pod is freed with its last
        // one, as the claim controller would.
        let mut unpin = Vec::new();
        for c in &mut claims {
            if c.reserved_for.is_empty() {
                continue;
            }
            c.reserved_for.retain(|key| {
                let pod = key
                    .split_once('/')
                    .and_then(|(ns, name)| self.pod_id(ns, name));
                !pod.is_some_and(|p| self.running_user(p, &c.namespace, &c.name))
            });
            if c.reserved_for.is_empty() {
                unpin.push((c.namespace.clone(), c.name.clone()));
            }
        }
        let mut dra = DraState::new(DraInputs {
            nodes: &cluster.nodes,
            classes: &cluster.device_classes,
            slices: &cluster.resource_slices,
            claims: &claims,
            templates: &cluster.resource_claim_templates,
        })?;
        for (ns, name) in unpin {
            if let Some(id) = dra.claim_id(&ns, &name) {
                dra.unpin(id);
            }
        }
        Ok(dra)
    }

    /// Whether `pod` runs on a node of the state and uses the claim `namespace/claim` (by
    /// name, or as the claim made for it from a template): placing it counts it as a user
    /// of the claim.
    fn running_user(&self, pod: PodId, namespace: &str, claim: &str) -> bool {
        let p = &self.cluster.pods[pod.index()];
        p.namespace == namespace
            && p.is_bound()
            && p.node_name
                .as_deref()
                .is_some_and(|n| self.node_ids.contains_key(n))
            && p.resource_claims.iter().any(|c| {
                c.resource_claim_name.as_deref() == Some(claim)
                    || (c.resource_claim_template_name.is_some()
                        && c.generated_claim.as_deref() == Some(claim))
            })
    }

    /// Whether the id names a node of the state (not a deleted slot).
    pub fn is_node_live(&self, node: NodeId) -> bool {
        self.node_live.get(node.index()).copied().unwrap_or(false)
    }

    /// Whether the id names a pod of the state (not a deleted slot).
    pub fn is_live(&self, pod: PodId) -> bool {
        self.pod_live.get(pod.index()).copied().unwrap_or(false)
    }

    /// The pod's id with its slot's generation.
    pub fn handle(&self, pod: PodId) -> PodHandle {
        PodHandle {
            id: pod,
            generation: self.pod_generation[pod.index()],
        }
    }

    /// Whether `handle` still names the pod it was taken for.
    pub fn check_pod(&self, handle: PodHandle) -> Result<PodId, ChangeError> {
        let found = self
            .pod_generation
            .get(handle.id.index())
            .copied()
            .unwrap_or(u32::MAX);
        if found == handle.generation && self.is_live(handle.id) {
            Ok(handle.id)
        } else {
            Err(ChangeError::Stale {
                kind: Kind::Pod,
                id: handle.id.0,
                expected: handle.generation,
                found,
            })
        }
    }

    /// Ids of the live pods, in id order.
    pub fn pod_ids(&self) -> impl Iterator<Item = PodId> + '_ {
        (0..self.pod_live.len())
            .filter(|&i| self.pod_live[i])
            .map(|i| PodId(i as u32))
    }

    /// Number of pod slots (live or not): the length of per-pod vectors.
    pub fn pod_slots(&self) -> usize {
        self.pod_live.len()
    }

    pub fn pod_id(&self, namespace: &str, name: &str) -> Option<PodId> {
        let pods = &self.cluster.pods;
        self.pod_index
            .find(name_hash(namespace, name), |&p| {
                pods[p.index()].namespace == namespace && pods[p.index()].name == name
            })
            .copied()
    }

    /// The live nodes, in name order.
    pub fn nodes(&self) -> &[NodeId] {
        &self.order
    }

    /// The node's position in name order: ties between nodes are broken by it.
    pub fn rank(&self, node: NodeId) -> u32 {
        self.rank[node.index()]
    }

    /// The lowest priority among the pods on nodes.
    pub fn lowest_running_priority(&self) -> Option<i32> {
        self.priorities.keys().next().copied()
    }

    /// The pod's DRA claims.
    pub fn claims(&self, pod: PodId) -> &PodClaims {
        &self.claims[pod.index()]
    }

    /// The device allocation a placed pod holds.
    pub fn allocation(&self, pod: PodId) -> Option<&NodeAllocation> {
        self.allocations[pod.index()].as_ref()
    }

    /// Number of live nodes.
    pub fn num_nodes(&self) -> usize {
        self.order.len()
    }
    /// Number of node slots (live or not): the length of per-node vectors.
    pub fn node_slots(&self) -> usize {
        self.node_live.len()
    }
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_ids.get(name).copied()
    }
    pub fn pod(&self, id: PodId) -> &Pod {
        &self.cluster.pods[id.index()]
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.cluster.nodes[id.index()]
    }
    pub fn allocatable(&self, node: NodeId, r: ResourceId) -> i64 {
        self.allocatable[node.index() * self.width + r.index()]
    }
    pub fn requested(&self, node: NodeId, r: ResourceId) -> i64 {
        self.requested[node.index() * self.width + r.index()]
    }
    /// Non-zero requested CPU (milli) and memory (bytes) on the node.
    pub fn non_zero_requested(&self, node: NodeId) -> [i64; 2] {
        self.non_zero[node.index()]
    }
    pub fn pod_count(&self, node: NodeId) -> u32 {
        self.pod_count[node.index()]
    }
    pub fn used_ports(&self, node: NodeId) -> &[HostPort] {
        &self.ports[node.index()]
    }
    pub fn pods_on(&self, node: NodeId) -> &[PodId] {
        &self.pods_on_node[node.index()]
    }
    pub fn node_of(&self, pod: PodId) -> Option<NodeId> {
        self.node_of[pod.index()]
    }

    /// Places a pod on a node: its requests, ports and identity now count there.
    pub fn assume(&mut self, id: PodId, node: NodeId) {
        self.place(id, node, None);
    }

    /// Puts a pod taken off by [`forget`](Self::forget) back where it was, with the devices
    /// it held then (`allocation`, as `forget` returned it) rather than searching again:
    /// undoing a trial eviction gives the state back exactly.
    pub fn reassume(&mut self, id: PodId, node: NodeId, allocation: Option<NodeAllocation>) {
        self.place(id, node, Some(allocation));
    }

    fn place(&mut self, id: PodId, node: NodeId, held: Option<Option<NodeAllocation>>) {
        debug_assert!(self.node_of[id.index()].is_none(), "pod assumed twice");
        self.generation += 1;
        let cluster = Arc::clone(&self.cluster);
        let pod = &cluster.pods[id.index()];
        let base = node.index() * self.width;
        for (r, v) in pod.requests.iter() {
            self.requested[base + r.index()] += v;
        }
        let nz = &mut self.non_zero[node.index()];
        nz[0] += pod.non_zero_cpu;
        nz[1] += pod.non_zero_memory;
        self.pod_count[node.index()] += 1;
        self.ports[node.index()].extend(pod.host_ports.iter().cloned());
        self.pods_on_node[node.index()].push(id);
        self.node_of[id.index()] = Some(node);
        *self.priorities.entry(pod.priority).or_insert(0) += 1;
        self.take_devices(id, node, held);
        if !pod.pod_affinity.is_empty() || !pod.pod_anti_affinity.is_empty() {
            self.bound_with_affinity += 1;
        }
        if !pod.pod_anti_affinity.required.is_empty() {
            self.bound_with_required_anti_affinity += 1;
        }
        self.topology.place(id, pod, node, &cluster.nodes);
    }

    /// Gives a placed pod with claims its devices: `held` when it is given back, else the
    /// deterministic search (a scheduled pod passed the DynamicResources filter on this
    /// node, so the same search finds the allocation again; a running pod whose claims
    /// cannot be allocated holds no devices the scheduler can see).
    fn take_devices(&mut self, id: PodId, node: NodeId, held: Option<Option<NodeAllocation>>) {
        let held = match held {
            None if self.device_choice.is_integer_fragmentation()
                && matches!(self.claims[id.index()], PodClaims::Refs(_)) =>
            {
                // The allocation the fragmentation score chose this node for.
                let cluster = Arc::clone(&self.cluster);
                crate::plugins::dynamic_resources::least_fragmenting(
                    self,
                    &cluster.pods[id.index()],
                    id,
                    node,
                    self.device_choice,
                    true,
                )
                .map(|(a, _)| a)
            }
            held => held,
        };
        if let (PodClaims::Refs(refs), Some(dra)) = (&self.claims[id.index()], self.dra.as_mut()) {
            let allocation = match held {
                Some(held) => held,
                None => dra.try_allocate(node, refs).ok(),
            };
            if let Some(a) = allocation {
                debug_assert_eq!(a.node, node, "an allocation restored on another node");
                dra.reserve(&a);
                self.allocations[id.index()] = Some(a);
            }
        }
    }

    /// Removes a pod from its node (the inverse of `assume`); returns the devices it held,
    /// for [`reassume`](Self::reassume).
    pub fn forget(&mut self, id: PodId) -> Option<NodeAllocation> {
        let node = self.node_of[id.index()].take()?;
        self.generation += 1;
        let held = self.allocations[id.index()].take();
        if let (Some(a), Some(dra)) = (&held, self.dra.as_mut()) {
            dra.release(a);
        }
        let cluster = Arc::clone(&self.cluster);
        let pod = &cluster.pods[id.index()];
        let base = node.index() * self.width;
        for (r, v) in pod.requests.iter() {
            self.requested[base + r.index()] -= v;
        }
        let nz = &mut self.non_zero[node.index()];
        nz[0] -= pod.non_zero_cpu;
        nz[1] -= pod.non_zero_memory;
        self.pod_count[node.index()] -= 1;
        for p in &pod.host_ports {
            let ports = &mut self.ports[node.index()];
            if let Some(i) = ports.iter().position(|x| x == p) {
                ports.swap_remove(i);
            }
        }
        let pods = &mut self.pods_on_node[node.index()];
        if let Some(i) = pods.iter().position(|x| *x == id) {
            pods.remove(i);
        }
        if let Some(n) = self.priorities.get_mut(&pod.priority) {
            *n -= 1;
            if *n == 0 {
                self.priorities.remove(&pod.priority);
            }
        }
        if !pod.pod_affinity.is_empty() || !pod.pod_anti_affinity.is_empty() {
            self.bound_with_affinity -= 1;
        }
        if !pod.pod_anti_affinity.required.is_empty() {
            self.bound_with_required_anti_affinity -= 1;
        }
        self.topology.forget(id);
        held
    }

    /// A description of the state by names only (no ids): what is on each node, what each
    /// node has left, which devices are in use. Two states holding the same objects with
    /// the same placements describe alike, whatever order their objects arrived in.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let c = &self.cluster;
        let mut out = String::new();
        for &node in &self.order {
            let n = &c.nodes[node.index()];
            let _ = write!(out, "node {} rank {}:", n.name, self.rank(node));
            for r in 0..self.width {
                let r = ResourceId(r as u16);
                let (a, q) = (self.allocatable(node, r), self.requested(node, r));
                if a != 0 || q != 0 {
                    let _ = write!(out, " {}={}/{}", c.resources.name(r), q, a);
                }
            }
            let nz = self.non_zero_requested(node);
            let _ = write!(
                out,
                " nonzero={}/{} count={}",
                nz[0],
                nz[1],
                self.pod_count(node)
            );
            let mut ports: Vec<String> = self
                .used_ports(node)
                .iter()
                .map(|p| format!("{p:?}"))
                .collect();
            ports.sort();
            let mut pods: Vec<String> = self
                .pods_on(node)
                .iter()
                .map(|&p| {
                    let devices = match (self.allocation(p), self.dra.as_ref()) {
                        (Some(a), Some(dra)) => a
                            .claims
                            .iter()
                            .map(|ca| format!("{:?}", dra.allocation_result(a.node, ca).devices))
                            .collect::<Vec<_>>()
                            .join(","),
                        _ => String::new(),
                    };
                    format!("{}{}", c.pods[p.index()].key(), devices)
                })
                .collect();
            pods.sort();
            let _ = writeln!(out, " ports={ports:?} pods={pods:?}");
        }
        let mut pending: Vec<String> = self
            .pod_ids()
            .filter(|&p| self.node_of(p).is_none())
            .map(|p| {
                let pod = &c.pods[p.index()];
                let claims = match (self.claims(p), self.dra.as_ref()) {
                    (PodClaims::Refs(refs), Some(dra)) => refs
                        .iter()
                        .map(|r| dra.claim_key(*r).to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    (other, _) => format!("{other:?}"),
                };
                format!("{} {:?} {claims}", pod.key(), pod.node_name)
            })
            .collect();
        pending.sort();
        let _ = writeln!(out, "not placed: {pending:?}");
        let _ = writeln!(
            out,
            "priorities {:?} affinity {} anti {} flags {} {} {} dra {} local {}",
            self.priorities,
            self.bound_with_affinity,
            self.bound_with_required_anti_affinity,
            self.any_unschedulable_node,
            self.any_hard_taint,
            self.any_prefer_no_schedule_taint,
            self.dra.is_some(),
            self.dra_node_local,
        );
        out
    }
}

/// A cluster's objects, each kind in the cluster's order: nodes, then the kinds pods and
/// groups refer to, then pods (the order [`ClusterState::from_cluster`] adds them in).
pub fn objects_of(mut cluster: Cluster) -> (ResourceNames, Vec<Object>) {
    let resources = std::mem::take(&mut cluster.resources);
    (resources, object_iter(cluster).collect())
}

/// The objects of [`objects_of`], moved out one at a time.
fn object_iter(cluster: Cluster) -> impl Iterator<Item = Object> {
    let Cluster {
        resources: _,
        nodes,
        pods,
        priority_classes,
        pod_disruption_budgets,
        namespaces,
        pod_groups,
        composite_pod_groups,
        workloads,
        device_classes,
        resource_slices,
        resource_claims,
        resource_claim_templates,
    } = cluster;
    nodes
        .into_iter()
        .map(Object::Node)
        .chain(priority_classes.into_iter().map(Object::PriorityClass))
        .chain(
            namespaces
                .into_iter()
                .map(|(name, labels)| Object::Namespace { name, labels }),
        )
        .chain(
            pod_disruption_budgets
                .into_iter()
                .map(Object::PodDisruptionBudget),
        )
        .chain(workloads.into_iter().map(Object::Workload))
        .chain(
            composite_pod_groups
                .into_iter()
                .map(Object::CompositePodGroup),
        )
        .chain(pod_groups.into_iter().map(Object::PodGroup))
        .chain(device_classes.into_iter().map(Object::DeviceClass))
        .chain(resource_slices.into_iter().map(Object::ResourceSlice))
        .chain(
            resource_claim_templates
                .into_iter()
                .map(Object::ResourceClaimTemplate),
        )
        .chain(resource_claims.into_iter().map(Object::ResourceClaim))
        .chain(pods.into_iter().map(Object::Pod))
}

/// A cluster holding `objects` (the inverse of [`objects_of`]).
pub fn cluster_of(resources: ResourceNames, objects: impl IntoIterator<Item = Object>) -> Cluster {
    let mut c = Cluster {
        resources,
        ..Cluster::default()
    };
    for o in objects {
        match o {
            Object::Node(o) => c.nodes.push(o),
            Object::Pod(o) => c.pods.push(o),
            Object::PriorityClass(o) => c.priority_classes.push(o),
            Object::PodDisruptionBudget(o) => c.pod_disruption_budgets.push(o),
            Object::Namespace { name, labels } => {
                c.namespaces.insert(name, labels);
            }
            Object::Workload(o) => c.workloads.push(o),
            Object::PodGroup(o) => c.pod_groups.push(o),
            Object::CompositePodGroup(o) => c.composite_pod_groups.push(o),
            Object::DeviceClass(o) => c.device_classes.push(o),
            Object::ResourceSlice(o) => c.resource_slices.push(o),
            Object::ResourceClaim(o) => c.resource_claims.push(o),
            Object::ResourceClaimTemplate(o) => c.resource_claim_templates.push(o),
        }
    }
    c
}

/// The hash a pod is indexed by.
fn name_hash(namespace: &str, name: &str) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    namespace.hash(&mut h);
    name.hash(&mut h);
    h.finish()
}

fn blank_node() -> Node {
    Node {
        name: String::new(),
        labels: Labels::default(),
        taints: Vec::new(),
        unschedulable: true,
        allocatable: Default::default(),
    }
}

/// The name of the claim a PodGroup's template claim becomes.
pub fn group_claim_name(group: &str, claim: &str) -> String {
    format!("{group}-{claim}")
}

fn resolve_claims(dra: Option<&DraState>, cluster: &Cluster, id: PodId) -> PodClaims {
    let pod = &cluster.pods[id.index()];
    if pod.resource_claims.is_empty() {
        return PodClaims::None;
    }
    let Some(dra) = dra else {
        return PodClaims::Missing(String::from("(no DRA objects)"));
    };
    let group = pod.pod_group.as_ref().and_then(|g| {
        cluster
            .pod_groups
            .iter()
            .find(|x| x.namespace == pod.namespace && x.name == *g)
    });
    let mut refs = Vec::with_capacity(pod.resource_claims.len());
    for c in &pod.resource_claims {
        // A claim that matches one of its PodGroup's claims exactly is the group's claim.
        let of_group = group.and_then(|g| {
            g.resource_claims
                .iter()
                .find(|gc| {
                    gc.name == c.name
                        && gc.resource_claim_template_name.is_some()
                        && gc.resource_claim_template_name == c.resource_claim_template_name
                })
                .map(|gc| group_claim_name(&g.name, &gc.name))
        });
        if let Some(name) = of_group {
            match dra.claim_id(&pod.namespace, &name) {
                Some(id) => refs.push(ClaimRef::Claim(id)),
                None => {
                    return PodClaims::Missing(format!(
                        "pod \"{}\": ResourceClaim not created yet",
                        pod.key()
                    ));
                }
            }
            continue;
        }
        let found = match (&c.resource_claim_name, &c.resource_claim_template_name) {
            (Some(name), _) => dra
                .claim_id(&pod.namespace, name)
                .map(ClaimRef::Claim)
                .ok_or_else(|| format!("resourceclaim \"{name}\" not found")),
            // The claim made for the pod from the template, when the input holds it.
            (None, Some(_))
                if let Some(id) = c
                    .generated_claim
                    .as_deref()
                    .and_then(|g| dra.claim_id(&pod.namespace, g)) =>
            {
                Ok(ClaimRef::Claim(id))
            }
            // The ResourceClaim controller cannot make the pod's claim without its template.
            (None, Some(name)) => dra
                .template_id(&pod.namespace, name)
                .map(ClaimRef::Template)
                .ok_or_else(|| format!("pod \"{}\": ResourceClaim not created yet", pod.key())),
            (None, None) => continue,
        };
        match found {
            Ok(r) => refs.push(r),
            Err(message) => return PodClaims::Missing(message),
        }
    }
    PodClaims::Refs(refs)
}

/// The distinct (claims, requests) of the pods, each weighted by its pods, in order; the
/// requests of each; and a hash of the list.
fn task_shapes(counts: &BTreeMap<ShapeKey, u32>) -> TaskShapes {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut shapes = Vec::with_capacity(counts.len());
    let mut requests = Vec::with_capacity(counts.len());
    for ((refs, req), n) in counts {
        refs.hash(&mut h);
        req.hash(&mut h);
        n.hash(&mut h);
        shapes.push(lockstep_dra::TaskShape {
            claims: refs.clone(),
            weight: f64::from(*n),
        });
        requests.push(req.clone());
    }
    TaskShapes::new(shapes, requests, h.finish())
}

/// The share of the pods the paper's typical tasks make up.
const TYPICAL_PERCENT: u64 = 95;

/// The paper's typical tasks: the pods grouped by (claims, cpu request), most common first
/// (ties: larger cpu first), as many as make up `percent` of the pods (95 in the paper),
/// weighted by their pods.
fn typical_shapes(counts: &BTreeMap<ShapeKey, u32>, percent: u64) -> TaskShapes {
    use std::hash::{Hash, Hasher};
    let mut grouped: BTreeMap<(Vec<ClaimRef>, i64), u32> = BTreeMap::new();
    for ((refs, req), n) in counts {
        let cpu = req
            .iter()
            .find(|(r, _)| *r == ResourceId::CPU)
            .map_or(0, |&(_, v)| v);
        *grouped.entry((refs.clone(), cpu)).or_insert(0) += n;
    }
    let mut list: Vec<((Vec<ClaimRef>, i64), u32)> = grouped.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.1.cmp(&a.0.1)));
    let total: u64 = list.iter().map(|x| u64::from(x.1)).sum();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "typical".hash(&mut h);
    percent.hash(&mut h);
    let (mut shapes, mut requests) = (Vec::new(), Vec::new());
    let mut sum = 0u64;
    for ((refs, cpu), n) in list {
        if sum * 100 >= total * percent {
            break;
        }
        sum += u64::from(n);
        refs.hash(&mut h);
        cpu.hash(&mut h);
        n.hash(&mut h);
        shapes.push(lockstep_dra::TaskShape {
            claims: refs,
            weight: f64::from(n),
        });
        requests.push(vec![(ResourceId::CPU, cpu)]);
    }
    TaskShapes::new(shapes, requests, h.finish())
}

/// The workload the fragmentation device score plans for: the distinct (claims, requests) of
/// the state's pods, weighted by how many pods have them.
#[derive(Debug, Clone, Default)]
pub struct TaskShapes {
    pub shapes: Vec<lockstep_dra::TaskShape>,
    /// The resource requests of each shape.
    pub requests: Vec<Vec<(ResourceId, i64)>>,
    /// A hash of the list (the DRA state's cache key part).
    pub id: u64,
    /// The resources the shapes request, in order: the only ones a node's fragmentation for
    /// them depends on besides its devices.
    pub resources: Vec<ResourceId>,
}

impl TaskShapes {
    fn new(
        shapes: Vec<lockstep_dra::TaskShape>,
        requests: Vec<Vec<(ResourceId, i64)>>,
        id: u64,
    ) -> TaskShapes {
        let mut resources: Vec<ResourceId> = requests.iter().flatten().map(|&(r, _)| r).collect();
        resources.sort_unstable();
        resources.dedup();
        TaskShapes {
            shapes,
            requests,
            id,
            resources,
        }
    }
}
