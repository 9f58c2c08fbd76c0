//! Whole-gang placement: a search for a placement of every pod of a unit at once, for when
//! placing the pods one after another has stranded one of them although the unit fits.
//!
//! The group cycle first places a unit pod by pod, in the few pod orders it tries (see
//! `group`). Only when none of them meets the gang condition, and the profile's
//! `gangPlacement` is `Search` (the default), does it ask this search. So a gang the pod-by-pod
//! path places lands exactly where it did; a gang it fails is placed whenever some placement
//! exists within the step bound.
//!
//! The search is depth-first over the unit's pods in a fixed order: pods with required pod
//! affinity last (they may need their mates placed), the others fewest feasible nodes first,
//! then largest dominant share, identical pods next to each other, then by name. Each pod
//! tries the nodes where it passes every filter, best scored first (every candidate node is
//! filtered and scored, with no sampling); a pod may be left out while its gang can still
//! reach its minimum. The first complete placement wins, so the objective is stated: in that
//! pod order, each pod on the best-scored node that keeps the rest of the unit placeable.
//! Once every gang reaches its minimum the remaining pods are placed where they fit, without
//! backtracking.
//!
//! Devices: a pod's claims are allocated as the DynamicResources filter would, first fit.
//! Where a pod does not fit on a node only because mates placed there by this search took
//! the devices it needs, the allocator is asked for all their claims (from templates) on that
//! node at once, and the mates keep the devices of that joint allocation: the device choice
//! inside a node is searched by the existing allocator, not by a second one.
//!
//! Making it fast: nodes that are alike (the same allocatable, use, labels but the hostname,
//! taints, devices and device use, and, when the unit's pods look at other pods, the same
//! pods) and hold no pod of the unit are one candidate, the best-scored of them; identical
//! pods (equal scheduling signatures) never try a node an identical pod before them already
//! failed on (the placements would only be swapped); a pod that fits no node before any of
//! the unit is placed, and needs no mate, is left out at once; a gang that cannot fit the
//! free capacity even with its smallest requests (per resource, the `minCount` smallest
//! summed) fails at once. Every placement tried is one step; past `gangSearchSteps` the
//! search stops and says so.

use std::collections::HashMap;

use lockstep_dra::{ClaimRef, Limits, NodeAllocation, Unfit, UnfitReason};
use lockstep_model::{NodeId, PodId};

use crate::framework::Signature;
use crate::group::{capacity_of, dominant_share, free_of, min_demand};
use crate::scheduler::Scheduler;
use crate::state::PodClaims;

/// One gang of a search: its pending pods and how many of them must be placed.
#[derive(Debug, Clone)]
pub(crate) struct Gang {
    pub pods: Vec<PodId>,
    pub target: usize,
}

/// How a search ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Every gang reached its minimum; the placements stay assumed. The pods left without a
    /// node, with the reason.
    Placed(Vec<(PodId, String)>),
    /// No placement exists (every case was covered).
    Infeasible,
    /// The step bound was reached first; nothing stays assumed.
    Exhausted,
}

/// Counters of the whole-gang search, for reports and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GangSearchCounts {
    /// Searches run (units the pod-by-pod path could not place).
    pub searches: u64,
    /// Searches that found a placement.
    pub placed: u64,
    /// Searches stopped by the step bound.
    pub exhausted: u64,
    /// Placements tried, over all searches.
    pub steps: u64,
}

impl std::ops::Sub for GangSearchCounts {
    type Output = GangSearchCounts;
    /// The searches between two readings of the counters.
    fn sub(self, earlier: GangSearchCounts) -> GangSearchCounts {
        GangSearchCounts {
            searches: self.searches - earlier.searches,
            placed: self.placed - earlier.placed,
            exhausted: self.exhausted - earlier.exhausted,
            steps: self.steps - earlier.steps,
        }
    }
}

/// A node's class at the start of a search: nodes of one class are interchangeable for the
/// unit while none of its pods is on them.
const UNIQUE: u32 = u32::MAX;

/// Device placements one joint allocation of several pods' claims may try.
const JOINT_ALLOCATION_STEPS: u64 = 10_000;

/// A pod of the gangs as the search orders it.
struct Entry {
    pod: PodId,
    gang: usize,
    needs_mates: bool,
    feasible: usize,
    share: f64,
    signature: Option<Signature>,
    name: (String, String),
}

/// The search's pod order (each pod with its gang): pods that need mates last, then by
/// fewest feasible nodes, largest dominant share and name, identical pods together at the
/// place of the first of them; and for each position whether the pod is identical to the
/// one before it.
fn search_order(entries: &[Entry]) -> (Vec<(PodId, usize)>, Vec<bool>) {
    let mut first_of: HashMap<&Signature, usize> = HashMap::new();
    let mut group_of: Vec<usize> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        group_of.push(match &e.signature {
            Some(s) => *first_of.entry(s).or_insert(i),
            None => i,
        });
    }
    let mut idx: Vec<usize> = (0..entries.len()).collect();
    let rep_key = |i: usize| {
        let r = &entries[group_of[i]];
        (
            r.needs_mates,
            r.feasible,
            std::cmp::Reverse(OrdF64(r.share)),
            &r.name,
        )
    };
    idx.sort_by(|&a, &b| {
        rep_key(a)
            .cmp(&rep_key(b))
            .then_with(|| entries[a].name.cmp(&entries[b].name))
    });
    let order = idx
        .iter()
        .map(|&i| (entries[i].pod, entries[i].gang))
        .collect();
    let same_as_previous = idx
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            k > 0 && entries[i].signature.is_some() && group_of[i] == group_of[idx[k - 1]]
        })
        .collect();
    (order, same_as_previous)
}

/// What a joint allocation on a node shared with mates gave.
enum Joint {
    Placed,
    NoRoom,
    /// The allocator reached its bound: the answer is unknown.
    Bounded,
}

struct Search<'n> {
    /// (pod, gang) in search order.
    order: Vec<(PodId, usize)>,
    /// Whether the pod at each position is identical to the one before it.
    same_as_previous: Vec<bool>,
    target: Vec<usize>,
    placed: Vec<usize>,
    /// Pods of each gang at or after the current position.
    left: Vec<usize>,
    nodes: Option<&'n [NodeId]>,
    /// Class of each node (by index), `UNIQUE` when it is alike only to itself.
    class: Vec<u32>,
    /// Pods of the unit on each node (by index), placed by this search.
    unit_on: Vec<u32>,
    steps: u64,
    limit: u64,
    exhausted: bool,
    /// Where the search's placements start in the scheduler's log.
    mark: usize,
}

impl Search<'_> {
    /// What a node is, for the symmetry rules, at this point of the search: its class while
    /// it holds no pod of the unit, itself after.
    fn key(&self, node: NodeId) -> u64 {
        let c = self.class[node.index()];
        if c == UNIQUE || self.unit_on[node.index()] > 0 {
            (1 << 32) | node.0 as u64
        } else {
            u64::from(c)
        }
    }
}

impl Scheduler {
    /// Whether none of `pods` looks at other pods or claims devices.
    fn all_independent(&self, mut pods: impl Iterator<Item = PodId>) -> bool {
        pods.all(|p| {
            let pod = self.snapshot.pod(p);
            pod.pod_affinity.is_empty()
                && pod.pod_anti_affinity.is_empty()
                && pod.topology_spread.is_empty()
                && matches!(self.snapshot.claims(p), PodClaims::None)
        })
    }

    /// Whether placing `pods` one after another is exact: identical pods that look at no
    /// other pods and claim no devices fail one by one only when no node has room for one
    /// more, whatever the order.
    pub(crate) fn one_by_one_is_exact(&mut self, pods: &[PodId]) -> bool {
        if !self.all_independent(pods.iter().copied()) {
            return false;
        }
        let mut first: Option<Signature> = None;
        for &p in pods {
            let Some(s) = self.framework.signature_of(&self.snapshot, p) else {
                return false;
            };
            match &first {
                None => first = Some(s),
                Some(f) if *f != s => return false,
                Some(_) => {}
            }
        }
        true
    }

    /// The whole-gang search for `gangs` on `nodes` (None: every node). See the module.
    pub(crate) fn whole_gang(&mut self, gangs: &[Gang], nodes: Option<&[NodeId]>) -> Outcome {
        let mut signatures: Vec<Option<Signature>> = Vec::new();
        for gang in gangs {
            for &pod in &gang.pods {
                signatures.push(self.framework.signature_of(&self.snapshot, pod));
            }
        }
        if self.fails_at_once(gangs, nodes, &signatures) {
            return Outcome::Infeasible;
        }
        self.gang_search.searches += 1;
        let entries = self.search_entries(gangs, nodes, signatures);
        let mut left = vec![0usize; gangs.len()];
        for e in &entries {
            left[e.gang] += 1;
        }
        if gangs.iter().zip(&left).any(|(g, &l)| l < g.target) {
            return Outcome::Infeasible;
        }
        let (order, same_as_previous) = search_order(&entries);
        let class = self.node_classes(&order);
        let mut search = Search {
            order,
            same_as_previous,
            target: gangs.iter().map(|g| g.target).collect(),
            placed: vec![0; gangs.len()],
            left,
            nodes,
            class,
            unit_on: vec![0; self.snapshot.node_slots()],
            steps: 0,
            limit: self.options.profile.gang_search_steps,
            exhausted: false,
            mark: self.log.len(),
        };
        let found = self.dfs(&mut search, 0, &[]);
        self.gang_search.steps += search.steps;
        if found {
            self.gang_search.placed += 1;
            return Outcome::Placed(self.left_out(gangs, nodes));
        }
        self.rollback(search.mark);
        if search.exhausted {
            self.gang_search.exhausted += 1;
            Outcome::Exhausted
        } else {
            Outcome::Infeasible
        }
    }

    /// Whether the gangs fail without a search: identical pods that look at no other pods
    /// and claim no devices (placing them one after another fails only when no node has
    /// room for one more, whatever the order; with claims a first-fit device choice may
    /// strand the next pod), or a gang whose least demand exceeds the free capacity.
    fn fails_at_once(
        &self,
        gangs: &[Gang],
        nodes: Option<&[NodeId]>,
        signatures: &[Option<Signature>],
    ) -> bool {
        if self.all_independent(gangs.iter().flat_map(|g| &g.pods).copied())
            && signatures.first().is_some_and(Option::is_some)
            && signatures.windows(2).all(|w| w[0] == w[1])
        {
            return true;
        }
        let snap = &self.snapshot;
        let free = match nodes {
            Some(n) => free_of(snap, n),
            None => free_of(snap, snap.nodes()),
        };
        gangs.iter().any(|gang| {
            let demand = min_demand(snap, &gang.pods, gang.target);
            demand.iter().zip(&free).any(|(d, f)| d > f)
        })
    }

    /// Each pod of the gangs with its feasible node count before any is placed (once per
    /// signature), its dominant share and its name; pods that fit nowhere now and need no
    /// mate are left out (they can only be left out of the placement).
    fn search_entries(
        &mut self,
        gangs: &[Gang],
        nodes: Option<&[NodeId]>,
        signatures: Vec<Option<Signature>>,
    ) -> Vec<Entry> {
        let capacity = match nodes {
            Some(n) => capacity_of(&self.snapshot, n),
            None => capacity_of(&self.snapshot, self.snapshot.nodes()),
        };
        let mut entries: Vec<Entry> = Vec::new();
        let mut feasible_by_signature: HashMap<Signature, usize> = HashMap::new();
        let mut signatures = signatures.into_iter();
        for (g, gang) in gangs.iter().enumerate() {
            for &pod in &gang.pods {
                let p = self.snapshot.pod(pod);
                let needs_mates = !p.pod_affinity.required.is_empty();
                let name = (p.namespace.clone(), p.name.clone());
                let signature = signatures.next().flatten();
                let known = signature
                    .as_ref()
                    .and_then(|s| feasible_by_signature.get(s).copied());
                let feasible = match known {
                    Some(f) => f,
                    None => {
                        let f = self
                            .framework
                            .ranked(&self.snapshot, pod, nodes)
                            .map_or(0, |r| r.len());
                        if let Some(s) = &signature {
                            feasible_by_signature.insert(s.clone(), f);
                        }
                        f
                    }
                };
                entries.push(Entry {
                    pod,
                    gang: g,
                    needs_mates,
                    feasible,
                    share: dominant_share(&self.snapshot, pod, &capacity),
                    signature,
                    name,
                });
            }
        }
        entries.retain(|e| e.needs_mates || e.feasible > 0);
        entries
    }

    /// The pods of the gangs left without a node by a placement the search found, with why.
    fn left_out(&mut self, gangs: &[Gang], nodes: Option<&[NodeId]>) -> Vec<(PodId, String)> {
        let mut unplaced = Vec::new();
        for gang in gangs {
            for &pod in &gang.pods {
                if self.snapshot.node_of(pod).is_none() {
                    let message = match self.framework.ranked(&self.snapshot, pod, nodes) {
                        Err(e) => e.message(&self.snapshot),
                        Ok(_) => "left out by the gang's placement search".to_string(),
                    };
                    unplaced.push((pod, message));
                }
            }
        }
        unplaced
    }

    /// Classes of alike nodes for the unit whose pods are `order` (see the module). One
    /// function of about 80 lines: the node key it builds (numbers, then text) is read best
    /// in one place.
    fn node_classes(&self, order: &[(PodId, usize)]) -> Vec<u32> {
        let snap = &self.snapshot;
        let cluster = &snap.cluster;
        let hostname = "kubernetes.io/hostname";
        let names_nodes = order.iter().any(|&(p, _)| {
            let pod = snap.pod(p);
            let term_names = |t: &lockstep_model::NodeSelectorTerm| {
                !t.match_fields.is_empty() || t.match_expressions.iter().any(|r| r.key == hostname)
            };
            pod.node_selector.iter().any(|(k, _)| k == hostname)
                || pod.node_affinity.required.iter().flatten().any(term_names)
                || pod
                    .node_affinity
                    .preferred
                    .iter()
                    .any(|(_, t)| term_names(t))
        });
        let mut class = vec![UNIQUE; snap.node_slots()];
        if names_nodes {
            return class;
        }
        let looks_at_pods = snap.bound_with_required_anti_affinity > 0
            || order.iter().any(|&(p, _)| {
                let pod = snap.pod(p);
                !pod.pod_affinity.is_empty()
                    || !pod.pod_anti_affinity.is_empty()
                    || !pod.topology_spread.is_empty()
            });
        let mut ids: HashMap<(Vec<i64>, String), u32> = HashMap::new();
        let mut numbers: Vec<i64> = Vec::new();
        for &n in snap.nodes() {
            numbers.clear();
            if let Some(dra) = snap.dra.as_ref()
                && !dra.node_usage_key(n, &mut numbers)
            {
                continue;
            }
            for r in 0..snap.width {
                let id = lockstep_model::ResourceId(r as u16);
                numbers.push(snap.allocatable(n, id));
                numbers.push(snap.requested(n, id));
            }
            numbers.extend(snap.non_zero_requested(n));
            numbers.push(i64::from(snap.pod_count(n)));
            let node = &cluster.nodes[n.index()];
            let mut text = String::new();
            for (k, v) in node.labels.iter() {
                if k != hostname {
                    text.push_str(&format!("{k}={v}\u{0}"));
                }
            }
            text.push_str(&format!(
                "\u{1}{:?}\u{1}{}",
                node.taints, node.unschedulable
            ));
            let mut ports: Vec<String> = snap
                .used_ports(n)
                .iter()
                .map(|p| format!("{p:?}"))
                .collect();
            ports.sort();
            text.push_str(&format!("\u{1}{ports:?}"));
            if looks_at_pods {
                let mut pods: Vec<String> = snap
                    .pods_on(n)
                    .iter()
                    .map(|&p| {
                        let pod = snap.pod(p);
                        format!(
                            "{}\u{0}{:?}\u{0}{:?}\u{0}{}",
                            pod.namespace, pod.labels, pod.pod_anti_affinity, pod.terminating
                        )
                    })
                    .collect();
                pods.sort();
                text.push_str(&format!("\u{1}{pods:?}"));
            }
            let next = ids.len() as u32;
            class[n.index()] = *ids.entry((numbers.clone(), text)).or_insert(next);
        }
        class
    }

    /// Places the pods from position `i` on; true when every gang reached its minimum (the
    /// placements then stay assumed). Kept as one recursive function of about 90 lines: each
    /// step's bound check, symmetry breaking, assume and undo must be read together to see
    /// that every path restores the state.
    fn dfs(&mut self, s: &mut Search<'_>, i: usize, excluded: &[u64]) -> bool {
        if s.placed.iter().zip(&s.target).all(|(p, t)| p >= t) {
            // The gang condition holds: the rest where they fit, best first.
            for k in i..s.order.len() {
                let pod = s.order[k].0;
                if let Ok(ranked) = self.framework.ranked(&self.snapshot, pod, s.nodes)
                    && let Some(&node) = ranked.first()
                {
                    self.assume(pod, node);
                }
            }
            return true;
        }
        if i == s.order.len() {
            return false;
        }
        let (pod, g) = s.order[i];
        s.left[g] -= 1;
        let mut tried: Vec<u64> = excluded.to_vec();
        let mut candidates: Vec<(NodeId, bool)> = Vec::new();
        if let Ok(ranked) = self.framework.ranked(&self.snapshot, pod, s.nodes) {
            candidates.extend(ranked.into_iter().map(|n| (n, false)));
        }
        // Nodes where mates placed by this search hold devices the pod may need.
        if self.snapshot.dra.is_some() && template_claims(&self.snapshot, pod).is_some() {
            let mut mates_on: Vec<NodeId> = self.log[s.mark..]
                .iter()
                .filter(|(p, _)| template_claims(&self.snapshot, *p).is_some())
                .map(|&(_, n)| n)
                .filter(|n| !candidates.iter().any(|(c, _)| c == n))
                .collect();
            mates_on.sort_by_key(|n| self.snapshot.rank(*n));
            mates_on.dedup();
            candidates.extend(mates_on.into_iter().map(|n| (n, true)));
        }
        for (node, joint) in candidates {
            let key = s.key(node);
            // Every key tried at this level is in `tried` once its placement failed.
            if tried.contains(&key) {
                continue;
            }
            if s.steps >= s.limit {
                s.exhausted = true;
                break;
            }
            s.steps += 1;
            let mark = self.log.len();
            let placed = if joint {
                match self.place_jointly(s.mark, pod, node) {
                    Joint::Placed => true,
                    Joint::NoRoom => false,
                    Joint::Bounded => {
                        s.exhausted = true;
                        break;
                    }
                }
            } else {
                self.assume(pod, node);
                true
            };
            if placed {
                s.placed[g] += 1;
                s.unit_on[node.index()] += 1;
                let next_excluded = if s.same_as_previous.get(i + 1) == Some(&true) {
                    tried.clone()
                } else {
                    Vec::new()
                };
                if self.dfs(s, i + 1, &next_excluded) {
                    return true;
                }
                s.placed[g] -= 1;
                s.unit_on[node.index()] -= 1;
                self.rollback(mark);
                if s.exhausted {
                    break;
                }
            }
            tried.push(key);
        }
        // Leave the pod out, while its gang can still reach its minimum.
        if !s.exhausted && s.placed[g] + s.left[g] >= s.target[g] {
            let next_excluded: Vec<u64> = if s.same_as_previous.get(i + 1) == Some(&true) {
                tried
            } else {
                Vec::new()
            };
            if self.dfs(s, i + 1, &next_excluded) {
                return true;
            }
        }
        s.left[g] += 1;
        false
    }

    /// Places `pod` on `node` with the devices of its mates there (pods of the unit placed
    /// since `mark`) allocated anew together with its own; false, with nothing changed, when
    /// that allocation or another filter fails.
    fn place_jointly(&mut self, mark: usize, pod: PodId, node: NodeId) -> Joint {
        let Some(own) = template_claims(&self.snapshot, pod) else {
            return Joint::NoRoom;
        };
        let mates: Vec<PodId> = self.log[mark..]
            .iter()
            .filter(|(p, n)| *n == node && template_claims(&self.snapshot, *p).is_some())
            .map(|(p, _)| *p)
            .collect();
        if mates.is_empty() {
            return Joint::NoRoom;
        }
        let mut refs: Vec<ClaimRef> = Vec::new();
        let mut counts: Vec<usize> = Vec::new();
        for &m in &mates {
            let r = template_claims(&self.snapshot, m).unwrap_or_default();
            counts.push(r.len());
            refs.extend(r);
        }
        refs.extend(own);
        let held: Vec<Option<NodeAllocation>> =
            mates.iter().map(|&m| self.snapshot.forget(m)).collect();
        // Several pods' claims at once can make the allocator's search long (shareable
        // devices are candidates for every request): it gets a bound of its own, and
        // reaching it stops the whole-gang search as its own bound does.
        let joint = match self.snapshot.dra.as_mut() {
            Some(dra) => {
                let limits = dra.limits();
                dra.set_limits(Limits {
                    max_search_steps: limits.max_search_steps.min(JOINT_ALLOCATION_STEPS),
                });
                let joint = dra.try_allocate(node, &refs);
                dra.set_limits(limits);
                joint
            }
            None => Err(Unfit::with_detail(UnfitReason::CannotAllocateAllClaims, "")),
        };
        let bounded = matches!(&joint, Err(u) if u.reason == UnfitReason::SearchBoundExceeded);
        if let Ok(joint) = joint {
            let mut parts = joint.claims.into_iter();
            for (&m, &c) in mates.iter().zip(&counts) {
                let part = NodeAllocation {
                    node,
                    claims: parts.by_ref().take(c).collect(),
                };
                self.snapshot.reassume(m, node, Some(part));
            }
            if self.framework.fits_on(&self.snapshot, pod, node) {
                self.assume(pod, node);
                return Joint::Placed;
            }
            for &m in &mates {
                self.snapshot.forget(m);
            }
        }
        for (&m, h) in mates.iter().zip(held) {
            self.snapshot.reassume(m, node, h);
        }
        if bounded {
            Joint::Bounded
        } else {
            Joint::NoRoom
        }
    }

    /// Counters of the whole-gang searches run so far.
    pub fn gang_search_counts(&self) -> GangSearchCounts {
        self.gang_search
    }
}

/// The pod's claim references when it has claims and all come from templates (claims of its
/// own, which a joint allocation may move between devices).
fn template_claims(snap: &crate::state::ClusterState, pod: PodId) -> Option<Vec<ClaimRef>> {
    match snap.claims(pod) {
        PodClaims::Refs(refs)
            if !refs.is_empty() && refs.iter().all(|r| matches!(r, ClaimRef::Template(_))) =>
        {
            Some(refs.clone())
        }
        _ => None,
    }
}

/// An `f64` with a total order, for sort keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);

impl Eq for OrdF64 {}

impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
