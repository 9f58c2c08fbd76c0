//! The mutable view of the cluster the engine schedules against: per-node requested and
//! allocatable vectors, pods per node, host ports, and the indexes the plugins need.

use std::collections::HashMap;

use lockstep_dra::{ClaimRef, DraError, DraInputs, DraState, NodeAllocation};
use lockstep_model::{Cluster, HostPort, NodeId, Pod, PodId, ResourceId, TaintEffect};

/// A pod's DRA claims, resolved against the snapshot's devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodClaims {
    None,
    Refs(Vec<ClaimRef>),
    /// A claim the pod names does not exist (or cannot be made from its template): the
    /// kube-scheduler message.
    Missing(String),
}

/// Per-node state, dense and indexed by `NodeId`.
pub struct Snapshot<'c> {
    pub cluster: &'c Cluster,
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
    node_ids: HashMap<&'c str, NodeId>,
    pub any_unschedulable_node: bool,
    pub any_hard_taint: bool,
    pub any_prefer_no_schedule_taint: bool,
    /// Nodes with the same taints (in the same order) share a taint set: TaintToleration
    /// judges each set once per pod. The set of each node, and a node of each set.
    pub node_taint_set: Vec<u32>,
    pub taint_set_nodes: Vec<NodeId>,
    /// Bound pods that have any pod affinity or anti-affinity term.
    pub bound_with_affinity: usize,
    /// Bound pods that have required anti-affinity terms.
    pub bound_with_required_anti_affinity: usize,
    /// Incremented by every `assume` and `forget`: state derived from the snapshot (the
    /// batching state) is valid only for the generation it was made at.
    pub generation: u64,
    /// Devices, when the cluster uses Dynamic Resource Allocation.
    pub dra: Option<DraState>,
    /// Every device is local to one node (no network-attached pools): allocating on one
    /// node never changes what another node can allocate.
    pub dra_node_local: bool,
    /// Each pod's claims, indexed by pod.
    claims: Vec<PodClaims>,
    pub task_shapes: TaskShapes,
    /// The device allocation each placed pod holds, indexed by pod.
    allocations: Vec<Option<NodeAllocation>>,
    /// How many placed pods have each priority (preemption looks for lower ones).
    priorities: std::collections::BTreeMap<i32, u32>,
}

impl<'c> Snapshot<'c> {
    /// Builds the snapshot and places every pod that already runs on a node. Pods naming a
    /// node that does not exist are ignored (they hold nothing the scheduler can see). Fails
    /// when the DRA objects are invalid (a CEL selector that does not compile, say).
    pub fn new(cluster: &'c Cluster) -> Result<Snapshot<'c>, DraError> {
        let n = cluster.nodes.len();
        let width = cluster.resources.len();
        let mut allocatable = vec![0; n * width];
        let mut any_hard_taint = false;
        let mut any_prefer = false;
        for (i, node) in cluster.nodes.iter().enumerate() {
            for (r, v) in node.allocatable.iter() {
                allocatable[i * width + r.index()] = v;
            }
            for t in &node.taints {
                match t.effect {
                    TaintEffect::PreferNoSchedule => any_prefer = true,
                    _ => any_hard_taint = true,
                }
            }
        }
        let mut sets: HashMap<&[lockstep_model::Taint], u32> = HashMap::new();
        let mut taint_set_nodes = Vec::new();
        let node_taint_set = cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                *sets.entry(node.taints.as_slice()).or_insert_with(|| {
                    taint_set_nodes.push(NodeId(i as u32));
                    (taint_set_nodes.len() - 1) as u32
                })
            })
            .collect();
        let uses_dra = !cluster.resource_slices.is_empty()
            || !cluster.device_classes.is_empty()
            || !cluster.resource_claims.is_empty()
            || !cluster.resource_claim_templates.is_empty()
            || cluster.pods.iter().any(|p| !p.resource_claims.is_empty());
        let dra = if uses_dra {
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
                    claims.push(lockstep_model::dra::ResourceClaim {
                        namespace: g.namespace.clone(),
                        name: group_claim_name(&g.name, &c.name),
                        spec: t.spec.clone(),
                        allocation: None,
                        reserved_for: Vec::new(),
                    });
                }
            }
            // A running pod in a claim's reservedFor is counted again when it is assumed
            // below: count it there only. A claim whose every consumer is such a pod is freed
            // with its last one, as the claim controller would.
            let mut unpin = Vec::new();
            let pods_by_key: HashMap<(&str, &str), &Pod> =
                if claims.iter().any(|c| !c.reserved_for.is_empty()) {
                    cluster
                        .pods
                        .iter()
                        .map(|p| ((p.namespace.as_str(), p.name.as_str()), p))
                        .collect()
                } else {
                    HashMap::new()
                };
            for c in &mut claims {
                if c.reserved_for.is_empty() {
                    continue;
                }
                c.reserved_for.retain(|key| {
                    let pod = key
                        .split_once('/')
                        .and_then(|(ns, name)| pods_by_key.get(&(ns, name)));
                    !pod.is_some_and(|p| running_user(cluster, p, &c.namespace, &c.name))
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
            Some(dra)
        } else {
            None
        };
        let claims: Vec<PodClaims> = cluster
            .pods
            .iter()
            .map(|p| resolve_claims(dra.as_ref(), cluster, p))
            .collect();
        let task_shapes = task_shapes(cluster, &claims);
        let mut snap = Snapshot {
            cluster,
            width,
            allocatable,
            requested: vec![0; n * width],
            non_zero: vec![[0, 0]; n],
            pod_count: vec![0; n],
            ports: vec![Vec::new(); n],
            pods_on_node: vec![Vec::new(); n],
            node_of: vec![None; cluster.pods.len()],
            node_ids: cluster
                .nodes
                .iter()
                .enumerate()
                .map(|(i, nd)| (nd.name.as_str(), NodeId(i as u32)))
                .collect(),
            node_taint_set,
            taint_set_nodes,
            any_unschedulable_node: cluster.nodes.iter().any(|nd| nd.unschedulable),
            any_hard_taint,
            any_prefer_no_schedule_taint: any_prefer,
            bound_with_affinity: 0,
            bound_with_required_anti_affinity: 0,
            generation: 0,
            dra,
            dra_node_local: cluster.resource_slices.iter().all(|s| {
                matches!(
                    s.node_scope,
                    lockstep_model::dra::SliceNodeScope::NodeName(_)
                )
            }),
            claims,
            task_shapes,
            allocations: vec![None; cluster.pods.len()],
            priorities: Default::default(),
        };
        // Running pods are placed in name order (namespace, then name), not input order:
        // a running pod whose claims hold no allocation yet is matched to devices here, and
        // the first to ask gets a contested device.
        let mut running: Vec<usize> = (0..cluster.pods.len())
            .filter(|&i| cluster.pods[i].is_bound())
            .collect();
        running.sort_by(|&a, &b| {
            let (pa, pb) = (&cluster.pods[a], &cluster.pods[b]);
            (&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name))
        });
        for i in running {
            let pod = &cluster.pods[i];
            if let Some(node) = pod.node_name.as_deref().and_then(|nm| snap.node_id(nm)) {
                snap.assume(PodId(i as u32), node);
            }
        }
        Ok(snap)
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

    pub fn num_nodes(&self) -> usize {
        self.pod_count.len()
    }
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_ids.get(name).copied()
    }
    pub fn pod(&self, id: PodId) -> &'c Pod {
        &self.cluster.pods[id.index()]
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
    /// undoing a trial eviction gives the snapshot back exactly.
    pub fn reassume(&mut self, id: PodId, node: NodeId, allocation: Option<NodeAllocation>) {
        self.place(id, node, Some(allocation));
    }

    fn place(&mut self, id: PodId, node: NodeId, held: Option<Option<NodeAllocation>>) {
        debug_assert!(self.node_of[id.index()].is_none(), "pod assumed twice");
        self.generation += 1;
        let pod = &self.cluster.pods[id.index()];
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
        if let (PodClaims::Refs(refs), Some(dra)) = (&self.claims[id.index()], self.dra.as_mut()) {
            let allocation = match held {
                Some(held) => held,
                // A scheduled pod passed the DynamicResources filter on this node, so the
                // same deterministic search finds the allocation again. A running pod whose
                // claims cannot be allocated holds no devices the scheduler can see.
                None => dra.try_allocate(node, refs).ok(),
            };
            if let Some(a) = allocation {
                debug_assert_eq!(a.node, node, "an allocation restored on another node");
                dra.reserve(&a);
                self.allocations[id.index()] = Some(a);
            }
        }
        if !pod.pod_affinity.is_empty() || !pod.pod_anti_affinity.is_empty() {
            self.bound_with_affinity += 1;
        }
        if !pod.pod_anti_affinity.required.is_empty() {
            self.bound_with_required_anti_affinity += 1;
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
        let pod = &self.cluster.pods[id.index()];
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
        held
    }
}

/// The name of the claim a PodGroup's template claim becomes.
pub fn group_claim_name(group: &str, claim: &str) -> String {
    format!("{group}-{claim}")
}

fn resolve_claims(dra: Option<&DraState>, cluster: &Cluster, pod: &Pod) -> PodClaims {
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

/// Whether `pod` runs on a node of the input and uses the claim `namespace/claim` (by name,
/// or as the claim made for it from a template): the snapshot assumes it, which counts it as
/// a user of the claim.
fn running_user(cluster: &Cluster, pod: &Pod, namespace: &str, claim: &str) -> bool {
    pod.namespace == namespace
        && pod.is_bound()
        && pod
            .node_name
            .as_deref()
            .is_some_and(|n| cluster.nodes.iter().any(|nd| nd.name == n))
        && pod.resource_claims.iter().any(|c| {
            c.resource_claim_name.as_deref() == Some(claim)
                || (c.resource_claim_template_name.is_some()
                    && c.generated_claim.as_deref() == Some(claim))
        })
}

/// The distinct (claims, requests) of the pods with claims, each weighted by its pods, in
/// order; the requests of each; and a hash of the list.
fn task_shapes(cluster: &Cluster, claims: &[PodClaims]) -> TaskShapes {
    use std::hash::{Hash, Hasher};
    type Key<'a> = (&'a [ClaimRef], Vec<(ResourceId, i64)>);
    let mut counts: std::collections::BTreeMap<Key, u32> = Default::default();
    for (pod, c) in cluster.pods.iter().zip(claims) {
        let refs: &[ClaimRef] = match c {
            PodClaims::Refs(refs) => refs,
            PodClaims::None => &[],
            PodClaims::Missing(_) => continue,
        };
        let requests: Vec<(ResourceId, i64)> = pod.requests.iter().collect();
        *counts.entry((refs, requests)).or_insert(0) += 1;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut shapes = Vec::with_capacity(counts.len());
    let mut requests = Vec::with_capacity(counts.len());
    for ((refs, req), n) in counts {
        refs.hash(&mut h);
        req.hash(&mut h);
        n.hash(&mut h);
        shapes.push(lockstep_dra::TaskShape {
            claims: refs.to_vec(),
            weight: f64::from(n),
        });
        requests.push(req);
    }
    TaskShapes {
        shapes,
        requests,
        id: h.finish(),
    }
}

/// The workload the fragmentation device score plans for: the distinct (claims, requests) of
/// the input's pods with claims, weighted by how many pods have them.
#[derive(Debug, Clone, Default)]
pub struct TaskShapes {
    pub shapes: Vec<lockstep_dra::TaskShape>,
    /// The resource requests of each shape.
    pub requests: Vec<Vec<(ResourceId, i64)>>,
    /// A hash of the list (the DRA state's cache key part).
    pub id: u64,
}
