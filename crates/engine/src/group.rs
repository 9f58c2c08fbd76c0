//! Gang scheduling: the PodGroup / CompositePodGroup tree, readiness, and the group cycle
//! with its placement search and topology domains.
//!
//! A group is tried as one unit against one snapshot: its pods are assumed one by one inside a
//! transaction; the group commits when its gang condition holds, otherwise everything it
//! assumed is forgotten again.
//!
//! Placement search: pods are placed hardest first (largest dominant share of the candidate
//! nodes' capacity); when that order fails, the group tries each "largest first by resource
//! R" order for every resource its pods request, then name order. An order is abandoned as
//! soon as too many pods have failed for the gang condition to hold, so a hopeless gang costs
//! at most one pass per order.
//!
//! Topology domains: with a topology constraint the candidate nodes are split by the value of
//! the constraint's label key (nodes without the key are never candidates). Domains that
//! cannot hold the group by aggregate free capacity are dropped; a domain must hold every
//! already-bound member. The rest are tried tightest first — least free capacity of the
//! group's dominant resource left after the group, ties by domain value — and the first
//! domain where the group fits is chosen. Large free domains stay free for large gangs.

use std::collections::{BTreeMap, HashMap};

use lockstep_model::{Cluster, GroupPolicy, NodeId, PodId, ResourceId};

use crate::state::ClusterState;

/// One schedulable unit of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Pod(PodId),
    Group(usize),
    Composite(usize),
}

#[derive(Debug)]
pub struct GroupInfo {
    pub key: String,
    /// Pending member pods this run schedules.
    pub pending: Vec<PodId>,
    /// Members already running.
    pub bound: Vec<PodId>,
    pub parent: Option<usize>,
    pub priority: i32,
}

#[derive(Debug)]
pub struct CompositeInfo {
    pub key: String,
    pub groups: Vec<usize>,
    pub composites: Vec<usize>,
    pub parent: Option<usize>,
    pub priority: i32,
}

/// The group tree of a cluster, resolved to indexes into `Cluster::pod_groups` and
/// `Cluster::composite_pod_groups`.
#[derive(Debug, Default)]
pub struct GroupIndex {
    pub groups: Vec<GroupInfo>,
    pub composites: Vec<CompositeInfo>,
    /// Namespace, then name, to PodGroup index.
    group_ids: HashMap<String, HashMap<String, usize>>,
    /// Each pod's PodGroup index, when it names one that exists.
    pod_group: Vec<Option<u32>>,
    /// Every pod of the cluster naming each PodGroup, in name order.
    members: Vec<Vec<PodId>>,
    /// The position of each pod and each PodGroup in one order by (namespace, name), a pod
    /// before a PodGroup of the same name: ties between preemption victim units go by it.
    pod_rank: Vec<u32>,
    group_rank: Vec<u32>,
}

impl GroupIndex {
    /// Builds the tree. `accepted` tells which pending pods this run schedules, `on_node`
    /// which pods hold a node.
    pub fn new(
        cluster: &Cluster,
        accepted: impl Fn(PodId) -> bool,
        on_node: impl Fn(PodId) -> bool,
    ) -> GroupIndex {
        let mut idx = GroupIndex::build(cluster);
        idx.refresh(cluster, accepted, on_node);
        idx
    }

    /// The parts that depend only on the cluster: the tree, names, each pod's group.
    pub fn build(cluster: &Cluster) -> GroupIndex {
        let mut idx = GroupIndex::default();
        let mut comp_ids: HashMap<(String, String), usize> = HashMap::new();
        for (i, c) in cluster.composite_pod_groups.iter().enumerate() {
            comp_ids.insert((c.namespace.clone(), c.name.clone()), i);
            idx.composites.push(CompositeInfo {
                key: format!("{}/{}", c.namespace, c.name),
                groups: Vec::new(),
                composites: Vec::new(),
                parent: None,
                priority: c.priority.unwrap_or(i32::MIN),
            });
        }
        for (i, c) in cluster.composite_pod_groups.iter().enumerate() {
            if let Some(p) = &c.parent
                && let Some(&pi) = comp_ids.get(&(c.namespace.clone(), p.clone()))
            {
                idx.composites[i].parent = Some(pi);
                idx.composites[pi].composites.push(i);
            }
        }
        for (i, g) in cluster.pod_groups.iter().enumerate() {
            idx.group_ids
                .entry(g.namespace.clone())
                .or_default()
                .insert(g.name.clone(), i);
            let parent = g
                .parent
                .as_ref()
                .and_then(|p| comp_ids.get(&(g.namespace.clone(), p.clone())).copied());
            if let Some(pi) = parent {
                idx.composites[pi].groups.push(i);
            }
            idx.groups.push(GroupInfo {
                key: format!("{}/{}", g.namespace, g.name),
                pending: Vec::new(),
                bound: Vec::new(),
                parent,
                priority: g.priority.unwrap_or(i32::MIN),
            });
        }
        idx.pod_group = vec![None; cluster.pods.len()];
        idx.members = vec![Vec::new(); cluster.pod_groups.len()];
        for (i, pod) in cluster.pods.iter().enumerate() {
            let Some(name) = &pod.pod_group else { continue };
            let Some(g) = idx.group_of(&pod.namespace, name) else {
                continue;
            };
            idx.pod_group[i] = Some(g as u32);
            idx.members[g].push(PodId(i as u32));
        }
        idx.sort_by_name(cluster);
        idx
    }

    /// Puts every list in name order and ranks pods and groups by name: everything derived
    /// from these lists (pending and bound members, demands, victim lists) is in name order,
    /// never in input order.
    fn sort_by_name(&mut self, cluster: &Cluster) {
        let idx = self;
        let pod_name = |p: &PodId| {
            let pod = &cluster.pods[p.index()];
            (pod.namespace.as_str(), pod.name.as_str())
        };
        for m in &mut idx.members {
            m.sort_by(|a, b| pod_name(a).cmp(&pod_name(b)));
        }
        let group_name = |g: &usize| {
            let pg = &cluster.pod_groups[*g];
            (pg.namespace.as_str(), pg.name.as_str())
        };
        let composite_name = |c: &usize| {
            let cpg = &cluster.composite_pod_groups[*c];
            (cpg.namespace.as_str(), cpg.name.as_str())
        };
        for c in &mut idx.composites {
            c.groups.sort_by(|a, b| group_name(a).cmp(&group_name(b)));
            c.composites
                .sort_by(|a, b| composite_name(a).cmp(&composite_name(b)));
        }
        let mut names: Vec<(&str, &str, bool, usize)> = cluster
            .pods
            .iter()
            .enumerate()
            .map(|(i, p)| (p.namespace.as_str(), p.name.as_str(), false, i))
            .chain(
                cluster
                    .pod_groups
                    .iter()
                    .enumerate()
                    .map(|(i, g)| (g.namespace.as_str(), g.name.as_str(), true, i)),
            )
            .collect();
        names.sort_unstable();
        idx.pod_rank = vec![0; cluster.pods.len()];
        idx.group_rank = vec![0; cluster.pod_groups.len()];
        for (rank, &(_, _, group, i)) in names.iter().enumerate() {
            if group {
                idx.group_rank[i] = rank as u32;
            } else {
                idx.pod_rank[i] = rank as u32;
            }
        }
    }

    /// A pod's position in the name order of pods and PodGroups.
    pub fn pod_rank(&self, pod: PodId) -> u32 {
        self.pod_rank[pod.index()]
    }

    /// A PodGroup's position in the name order of pods and PodGroups.
    pub fn group_rank(&self, g: usize) -> u32 {
        self.group_rank[g]
    }

    /// Fills which members are pending (and scheduled by this run) and which hold a node,
    /// and the priorities that depend on them.
    pub fn refresh(
        &mut self,
        cluster: &Cluster,
        accepted: impl Fn(PodId) -> bool,
        on_node: impl Fn(PodId) -> bool,
    ) {
        for (g, info) in self.groups.iter_mut().enumerate() {
            info.pending.clear();
            info.bound.clear();
            for &id in &self.members[g] {
                if on_node(id) {
                    info.bound.push(id);
                } else if accepted(id) {
                    info.pending.push(id);
                }
            }
            // The PodGroup's own priority, else the highest of its pods.
            info.priority = cluster.pod_groups[g].priority.unwrap_or_else(|| {
                info.pending
                    .iter()
                    .chain(&info.bound)
                    .map(|p| cluster.pods[p.index()].priority)
                    .max()
                    .unwrap_or(0)
            });
        }
        // A composite's own priority, else the highest of its children.
        for (c, info) in self.composites.iter_mut().enumerate() {
            info.priority = cluster.composite_pod_groups[c].priority.unwrap_or(i32::MIN);
        }
        for c in 0..self.composites.len() {
            if self.composites[c].priority == i32::MIN {
                let p = self.subtree_max_priority(c);
                self.composites[c].priority = p;
            }
        }
    }

    fn subtree_max_priority(&self, c: usize) -> i32 {
        let info = &self.composites[c];
        info.groups
            .iter()
            .map(|&g| self.groups[g].priority)
            .chain(info.composites.iter().map(|&k| {
                if self.composites[k].priority == i32::MIN {
                    self.subtree_max_priority(k)
                } else {
                    self.composites[k].priority
                }
            }))
            .max()
            .unwrap_or(0)
    }

    pub fn group_of(&self, namespace: &str, name: &str) -> Option<usize> {
        self.group_ids.get(namespace)?.get(name).copied()
    }

    /// The PodGroup a pod belongs to (when it names one that exists).
    pub fn group_of_pod(&self, pod: PodId) -> Option<usize> {
        self.pod_group
            .get(pod.index())
            .copied()
            .flatten()
            .map(|g| g as usize)
    }

    /// How many member pods a group still needs bound for its gang condition (0 once
    /// enough members run or the group was already initially scheduled).
    pub fn needed(&self, snap: &ClusterState, g: usize) -> usize {
        let pg = &snap.cluster.pod_groups[g];
        if pg.initially_scheduled {
            return 0;
        }
        match pg.policy {
            GroupPolicy::Gang { min } => (min as usize).saturating_sub(self.running(snap, g)),
            GroupPolicy::Basic => 0,
        }
    }

    /// Members that hold a node now (members evicted during the run no longer count).
    pub fn running(&self, snap: &ClusterState, g: usize) -> usize {
        self.groups[g]
            .bound
            .iter()
            .filter(|p| snap.node_of(**p).is_some())
            .count()
    }

    /// Whether a group has enough members present to enter the queue.
    pub fn group_ready(&self, cluster: &Cluster, g: usize) -> bool {
        let info = &self.groups[g];
        if info.pending.is_empty() {
            return false;
        }
        match cluster.pod_groups[g].policy {
            GroupPolicy::Gang { min } => info.pending.len() + info.bound.len() >= min as usize,
            GroupPolicy::Basic => true,
        }
    }

    /// Children of a composite that are ready, and how many must fit.
    pub fn composite_ready(&self, cluster: &Cluster, c: usize) -> (usize, usize) {
        let info = &self.composites[c];
        let ready = info
            .groups
            .iter()
            .filter(|&&g| self.group_ready(cluster, g))
            .count()
            + info
                .composites
                .iter()
                .filter(|&&k| {
                    let (r, need) = self.composite_ready(cluster, k);
                    r >= need.max(1)
                })
                .count();
        let need = cluster.composite_pod_groups[c].policy.min_members();
        (ready, need)
    }

    /// All pending pods under a composite.
    pub fn composite_pending(&self, c: usize, out: &mut Vec<PodId>) {
        let info = &self.composites[c];
        for &g in &info.groups {
            out.extend(&self.groups[g].pending);
        }
        for &k in &info.composites {
            self.composite_pending(k, out);
        }
    }

    /// All bound pods under a composite.
    pub fn composite_bound(&self, c: usize, out: &mut Vec<PodId>) {
        let info = &self.composites[c];
        for &g in &info.groups {
            out.extend(&self.groups[g].bound);
        }
        for &k in &info.composites {
            self.composite_bound(k, out);
        }
    }
}

/// The dominant share of a pod's requests relative to the candidate nodes' capacity.
pub fn dominant_share(snap: &ClusterState, pod: PodId, capacity: &[i64]) -> f64 {
    let p = snap.pod(pod);
    let mut share = 0f64;
    for (r, v) in p.requests.iter() {
        let cap = capacity.get(r.index()).copied().unwrap_or(0);
        if cap > 0 {
            share = share.max(v as f64 / cap as f64);
        }
    }
    share
}

/// Total allocatable of `nodes`, per resource id.
pub fn capacity_of(snap: &ClusterState, nodes: &[NodeId]) -> Vec<i64> {
    let mut cap = vec![0i64; snap.width];
    for &n in nodes {
        for (r, c) in cap.iter_mut().enumerate() {
            *c += snap.allocatable(n, ResourceId(r as u16));
        }
    }
    cap
}

/// Free allocatable of `nodes`, per resource id, with pod slots under `PODS`.
pub fn free_of(snap: &ClusterState, nodes: &[NodeId]) -> Vec<i64> {
    let mut free = vec![0i64; snap.width];
    for &n in nodes {
        for (r, f) in free.iter_mut().enumerate() {
            let id = ResourceId(r as u16);
            let used = if id == ResourceId::PODS {
                i64::from(snap.pod_count(n))
            } else {
                snap.requested(n, id)
            };
            *f += (snap.allocatable(n, id) - used).max(0);
        }
    }
    free
}

/// The least any `needed` of `pods` ask together, per resource (the pod count included): for
/// each resource the `needed` smallest requests of it, summed. A lower bound on what a gang
/// needs whichever of its pods are placed.
pub fn min_demand(snap: &ClusterState, pods: &[PodId], needed: usize) -> Vec<i64> {
    let mut demand = vec![0i64; snap.width];
    let mut amounts: Vec<i64> = Vec::with_capacity(pods.len());
    for (r, d) in demand.iter_mut().enumerate() {
        let id = ResourceId(r as u16);
        if id == ResourceId::PODS {
            *d = needed.min(pods.len()) as i64;
            continue;
        }
        amounts.clear();
        amounts.extend(pods.iter().map(|p| snap.pod(*p).requests.get(id)));
        amounts.sort_unstable();
        *d = amounts.iter().take(needed).sum();
    }
    demand
}

/// The orders worth trying for a group's pods: hardest first, then largest first by each
/// requested resource, then name order; duplicates removed.
pub fn candidate_orders(snap: &ClusterState, pods: &[PodId], capacity: &[i64]) -> Vec<Vec<PodId>> {
    let cluster = std::sync::Arc::clone(&snap.cluster);
    let by_name = |a: &PodId, b: &PodId| {
        let (pa, pb) = (&cluster.pods[a.index()], &cluster.pods[b.index()]);
        (&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name))
    };
    let mut named: Vec<PodId> = pods.to_vec();
    named.sort_by(by_name);
    let homogeneous = named.windows(2).all(|w| {
        let (a, b) = (&cluster.pods[w[0].index()], &cluster.pods[w[1].index()]);
        a.requests == b.requests
    });
    let shares: HashMap<PodId, f64> = named
        .iter()
        .map(|&p| (p, dominant_share(snap, p, capacity)))
        .collect();
    let mut dominant = named.clone();
    dominant.sort_by(|a, b| shares[b].total_cmp(&shares[a]).then_with(|| by_name(a, b)));
    let mut orders = vec![dominant];
    if homogeneous {
        return orders;
    }
    let mut resources: Vec<ResourceId> = named
        .iter()
        .flat_map(|p| cluster.pods[p.index()].requests.iter().map(|(r, _)| r))
        .collect();
    resources.sort();
    resources.dedup();
    for r in resources {
        let mut o = named.clone();
        o.sort_by(|a, b| {
            let (ra, rb) = (
                cluster.pods[a.index()].requests.get(r),
                cluster.pods[b.index()].requests.get(r),
            );
            rb.cmp(&ra)
                .then_with(|| shares[b].total_cmp(&shares[a]))
                .then_with(|| by_name(a, b))
        });
        if !orders.contains(&o) {
            orders.push(o);
        }
    }
    if !orders.contains(&named) {
        orders.push(named);
    }
    orders
}

/// Splits `nodes` by the value of `key` (nodes without it are dropped), by value order.
pub fn domains<'s>(
    snap: &'s ClusterState,
    nodes: &[NodeId],
    key: &str,
) -> BTreeMap<&'s str, Vec<NodeId>> {
    let cluster: &'s lockstep_model::Cluster = &snap.cluster;
    let mut out: BTreeMap<&'s str, Vec<NodeId>> = BTreeMap::new();
    for &n in nodes {
        if let Some(v) = cluster.nodes[n.index()].labels.get(key) {
            out.entry(v.as_str()).or_default().push(n);
        }
    }
    out
}
