//! Preemption: making room for a pod or a gang by evicting lower-priority pods.
//!
//! **Pods** (a preemptor outside any group) follow kube-scheduler's DefaultPreemption: on each
//! candidate node remove every pod of strictly lower priority, check the preemptor fits, then
//! reprieve victims from the most important down (PodDisruptionBudget-violating victims
//! first; among equals higher priority, then earlier `status.startTime`, then name) while it
//! still fits; among candidate nodes pick by fewest PDB violations, lowest highest victim
//! priority, smallest priority sum, fewest victims, latest earliest `status.startTime` of the
//! highest-priority victims (a pod not started counts as starting now), then node name.
//!
//! **Gangs** (a PodGroup or CompositePodGroup that did not fit) choose victim *units*:
//! a pod outside any group is a unit of one; a group with `disruptionMode: all` is one unit
//! whose pods all go; a group with `disruptionMode: single` follows the gang preemption mode
//! (`off`: each pod its own unit; `minimal`: the group is one unit but only the pods needed
//! are evicted; `atomic`: the group is one unit evicted whole). The objective, in order:
//! fewest PodDisruptionBudget violations, then (a) fewest victim units, (b) lowest highest
//! victim priority, (c) least evicted beyond need (evicted requests, each resource as a share
//! of the cluster's capacity). The heuristic: if even evicting every lower-priority unit does
//! not make the gang fit, nothing is evicted. Otherwise prefer one unit (each unit whose
//! eviction could free enough is tried; the best by the objective wins, ties by the
//! preemptor's placement score, then unit name); if none suffices and there are at most 32
//! candidate units, try every pair, best by the objective first; otherwise add units largest
//! first until the gang fits, then drop every unit that turns out unnecessary (highest
//! priority first). In `minimal` mode the pods of a chosen group that are not
//! needed are then reprieved, most important first.
//!
//! Every decision is transactional: victims are removed and the preemptor placed by the
//! same group cycle that then commits; if the preemptor does not fit, nothing is evicted.
//! Only pods of strictly lower priority are victims, so two jobs never evict each other back
//! and forth; the preemptor is bound in the same step (the nomination cannot be lost).

use std::collections::BTreeMap;

use lockstep_model::{
    DisruptionMode, IntOrPercent, NodeId, Pod, PodId, PreemptionPolicy, ResourceId,
};
use serde::Deserialize;

use crate::cycle::FitError;
use crate::framework::Reason;
use crate::group::{GroupIndex, Unit};
use crate::group_cycle::Attempt;
use crate::plugins::{dynamic_resources, node_resources_fit};
use crate::scheduler::{Decisions, Scheduler};

/// At most this many single victim units that make the gang fit are minimised and compared
/// (candidates are taken cheapest first, so the best is nearly always among them).
const MAX_SINGLE_UNITS: usize = 8;

/// Up to this many candidate victim units, every pair of units is tried before the greedy
/// search (at most 496 pairs, most rejected without a placement).
const MAX_UNITS_FOR_PAIRS: usize = 32;

/// Victim selection for groups whose `disruptionMode` is `single`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GangPreemption {
    /// Pods are chosen individually, gang boundaries ignored (kube-scheduler's behaviour).
    Off,
    /// Victims are grouped by gang; only the pods needed are evicted.
    #[default]
    Minimal,
    /// A chosen gang is evicted whole, cluster-wide.
    Atomic,
}

impl GangPreemption {
    pub fn as_str(self) -> &'static str {
        match self {
            GangPreemption::Off => "off",
            GangPreemption::Minimal => "minimal",
            GangPreemption::Atomic => "atomic",
        }
    }
}

/// A pod taken off its node during preemption (tentatively or for good), and the devices it
/// held, so that putting it back restores exactly what it had.
#[derive(Debug, Clone)]
pub(crate) struct Lifted {
    pub pod: PodId,
    pub node: NodeId,
    pub held: Option<lockstep_dra::NodeAllocation>,
}

/// One eviction decided by preemption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    pub pod: PodId,
    pub node: NodeId,
    /// `namespace/name` of the preemptor pod or group.
    pub preemptor: String,
    pub reason: String,
}

/// A victim unit with its position in the name order of pods and PodGroups, which orders
/// units wherever they tie.
type UnitKey = (u32, VictimUnit);

/// What one gang's victim choice is for: the gang (`unit`, its `pending` pods), the
/// candidates and the nodes where its pods could go.
struct Ask<'a> {
    index: &'a GroupIndex,
    unit: Unit,
    pending: &'a [PodId],
    victims: &'a Victims,
    room: &'a [NodeId],
}

fn unit_rank(index: &GroupIndex, u: VictimUnit) -> u32 {
    match u {
        VictimUnit::Pod(p) => index.pod_rank(p),
        VictimUnit::Group(g) => index.group_rank(g),
    }
}

/// What a victim pod belongs to for counting disruptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VictimUnit {
    Pod(PodId),
    Group(usize),
}

#[derive(Debug, Clone, Copy)]
struct VictimInfo {
    unit: VictimUnit,
    /// The unit's priority (a group's own priority or its highest pod's, whichever is higher).
    priority: i32,
    /// Evicting any pod of the unit evicts all of it.
    whole: bool,
}

/// A PodDisruptionBudget's remaining allowance during one preemption decision.
struct Budget {
    namespace: String,
    selector: Option<lockstep_model::LabelSelector>,
    allowed: i64,
}

/// The candidate victims of one preemption decision.
pub(crate) struct Victims {
    /// Indexed by pod: how the pod counts as a victim, when it is one.
    info: Vec<Option<VictimInfo>>,
    /// The candidate victims, by pod id.
    list: Vec<PodId>,
    budgets: Vec<Budget>,
    /// Each resource's cluster capacity, for the evicted-amount measure.
    capacity: Vec<i64>,
}

/// A chosen set of victim pods and its cost.
#[derive(Debug, Clone, PartialEq)]
struct Choice {
    pods: Vec<PodId>,
    pdb_violations: u32,
    units: usize,
    max_priority: i32,
    amount: f64,
}

impl Victims {
    fn get(&self, pod: PodId) -> Option<&VictimInfo> {
        self.info[pod.index()].as_ref()
    }
    fn at(&self, pod: PodId) -> &VictimInfo {
        self.info[pod.index()].as_ref().expect("a candidate victim")
    }
}

impl Choice {
    fn key(&self) -> (u32, usize, i32) {
        (self.pdb_violations, self.units, self.max_priority)
    }
    fn better_than(&self, other: &Choice) -> bool {
        self.key()
            .cmp(&other.key())
            .then(self.amount.total_cmp(&other.amount))
            .is_lt()
    }
}

/// A pod's `status.startTime` for preemption's orderings (kube-scheduler's
/// `GetPodStartTime`): a pod that has not started counts as starting now, after every pod
/// that has a start time.
fn start_time(pod: &Pod) -> i64 {
    pod.start_time.unwrap_or(i64::MAX)
}

fn scaled(value: &IntOrPercent, total: i64) -> i64 {
    match *value {
        IntOrPercent::Int(v) => i64::from(v),
        // Kubernetes rounds percentages up for disruption budgets.
        IntOrPercent::Percent(p) => (i64::from(p) * total + 99) / 100,
    }
}

impl Scheduler {
    fn unit_priority(&self, index: &GroupIndex, g: usize) -> i32 {
        let info = &index.groups[g];
        info.bound
            .iter()
            .filter(|p| self.snapshot.node_of(**p).is_some())
            .map(|p| self.snapshot.pod(*p).priority)
            .chain([info.priority])
            .max()
            .unwrap_or(info.priority)
    }

    /// Collects the pods that may be evicted for a preemptor of `priority`: running pods
    /// (bound before this run started) of strictly lower priority.
    pub(crate) fn victims(&self, index: &GroupIndex, priority: i32) -> Victims {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let mode = self.options.gang_preemption;
        let mut info: Vec<Option<VictimInfo>> = vec![None; cluster.pods.len()];
        for &node in self.snapshot.nodes() {
            for &p in self.snapshot.pods_on(node) {
                if self.placed_now(p) {
                    continue;
                }
                let pod = self.snapshot.pod(p);
                let v = match index.group_of_pod(p) {
                    Some(g) => {
                        let all = cluster.pod_groups[g].disruption_mode == DisruptionMode::All;
                        VictimInfo {
                            unit: if all || mode != GangPreemption::Off {
                                VictimUnit::Group(g)
                            } else {
                                VictimUnit::Pod(p)
                            },
                            priority: if all || mode == GangPreemption::Atomic {
                                self.unit_priority(index, g)
                            } else {
                                pod.priority.max(index.groups[g].priority)
                            },
                            whole: all || mode == GangPreemption::Atomic,
                        }
                    }
                    None => VictimInfo {
                        unit: VictimUnit::Pod(p),
                        priority: pod.priority,
                        whole: false,
                    },
                };
                if v.priority < priority {
                    info[p.index()] = Some(v);
                }
            }
        }
        self.keep_complete_units(index, &mut info);
        // In name order, so that every list of victims built from it is too.
        let mut list: Vec<PodId> = (0..info.len())
            .filter(|&i| info[i].is_some())
            .map(|i| PodId(i as u32))
            .collect();
        list.sort_by_key(|p| index.pod_rank(*p));
        let budgets = self.budgets();
        let all: Vec<NodeId> = self.snapshot.nodes().to_vec();
        Victims {
            info,
            list,
            budgets,
            capacity: crate::group::capacity_of(&self.snapshot, &all),
        }
    }

    /// Drops the candidates of a unit that goes whole unless every pod of it is one.
    fn keep_complete_units(&self, index: &GroupIndex, info: &mut [Option<VictimInfo>]) {
        let mut whole_groups: Vec<usize> = info
            .iter()
            .flatten()
            .filter(|v| v.whole)
            .filter_map(|v| match v.unit {
                VictimUnit::Group(g) => Some(g),
                VictimUnit::Pod(_) => None,
            })
            .collect();
        whole_groups.sort_unstable();
        whole_groups.dedup();
        for g in whole_groups {
            let members = &index.groups[g].bound;
            let complete = members
                .iter()
                .filter(|p| self.snapshot.node_of(**p).is_some())
                .all(|p| info[p.index()].is_some());
            if !complete {
                for p in members {
                    info[p.index()] = None;
                }
            }
        }
    }

    /// The PodDisruptionBudgets with the disruptions each allows now.
    fn budgets(&self) -> Vec<Budget> {
        self.snapshot
            .cluster
            .pod_disruption_budgets
            .iter()
            .map(|b| {
                let matching = (self.snapshot.nodes().iter())
                    .flat_map(|&n| self.snapshot.pods_on(n).iter())
                    .filter(|p| {
                        let pod = self.snapshot.pod(**p);
                        pod.namespace == b.namespace
                            && b.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))
                    })
                    .count() as i64;
                let allowed = match (b.disruptions_allowed, &b.min_available, &b.max_unavailable) {
                    (Some(a), _, _) => i64::from(a),
                    (None, Some(min), _) => matching - scaled(min, matching),
                    (None, None, Some(max)) => scaled(max, matching),
                    (None, None, None) => i64::MAX,
                };
                Budget {
                    namespace: b.namespace.clone(),
                    selector: b.selector.clone(),
                    allowed,
                }
            })
            .collect()
    }

    /// The pods evicted together with `pod` (its whole unit when the unit goes whole).
    fn expand(&self, index: &GroupIndex, victims: &Victims, pod: PodId, out: &mut Vec<PodId>) {
        match victims.get(pod) {
            Some(VictimInfo {
                unit: VictimUnit::Group(g),
                whole: true,
                ..
            }) => {
                for &p in &index.groups[*g].bound {
                    if self.snapshot.node_of(p).is_some() && !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
            _ => {
                if !out.contains(&pod) {
                    out.push(pod);
                }
            }
        }
    }

    fn pdb_violations(&self, victims: &Victims, pods: &[PodId]) -> u32 {
        let mut violations = 0u32;
        for b in &victims.budgets {
            let hit = pods
                .iter()
                .filter(|p| {
                    let pod = self.snapshot.pod(**p);
                    pod.namespace == b.namespace
                        && b.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))
                })
                .count() as i64;
            violations += (hit - b.allowed.max(0)).max(0) as u32;
        }
        violations
    }

    fn amount(&self, victims: &Victims, pods: &[PodId]) -> f64 {
        pods.iter()
            .flat_map(|p| self.snapshot.pod(*p).requests.iter())
            .map(|(r, v)| {
                let c = victims.capacity.get(r.index()).copied().unwrap_or(0);
                if c > 0 { v as f64 / c as f64 } else { 0.0 }
            })
            .sum()
    }

    fn choice(&self, victims: &Victims, pods: Vec<PodId>) -> Choice {
        let mut units: Vec<VictimUnit> = pods.iter().map(|p| victims.at(*p).unit).collect();
        units.sort();
        units.dedup();
        Choice {
            pdb_violations: self.pdb_violations(victims, &pods),
            units: units.len(),
            max_priority: pods
                .iter()
                .map(|p| victims.at(*p).priority)
                .max()
                .unwrap_or(i32::MIN),
            amount: self.amount(victims, &pods),
            pods,
        }
    }

    /// Removes `pods` from the snapshot and returns where they were.
    fn lift(&mut self, pods: &[PodId]) -> Vec<Lifted> {
        let mut lifted = Vec::with_capacity(pods.len());
        for &p in pods {
            if let Some(node) = self.snapshot.node_of(p) {
                let held = self.snapshot.forget(p);
                lifted.push(Lifted { pod: p, node, held });
            }
        }
        lifted
    }

    /// Puts lifted pods back, each with the devices it held.
    pub(crate) fn restore(&mut self, lifted: &[Lifted]) {
        for l in lifted.iter().rev() {
            self.snapshot.reassume(l.pod, l.node, l.held.clone());
        }
    }

    /// Whether the unit fits with `pods` removed; returns the placement score when it does.
    /// The snapshot is left as it was.
    fn unit_fits_without(
        &mut self,
        index: &GroupIndex,
        unit: Unit,
        pods: &[PodId],
        room: &[NodeId],
    ) -> Option<i64> {
        let lifted = self.lift(pods);
        let mut nodes: Vec<NodeId> = room.to_vec();
        nodes.extend(lifted.iter().map(|l| l.node));
        nodes.sort_by_key(|n| self.snapshot.rank(*n));
        nodes.dedup();
        let mark = self.log.len();
        self.framework.force_score = true;
        let attempt = match unit {
            Unit::Group(g) => self.try_group(index, g, Some(&nodes)),
            Unit::Composite(c) => self.try_composite(index, c, Some(&nodes)),
            Unit::Pod(_) => unreachable!("pods use pod preemption"),
        };
        self.framework.force_score = false;
        let score = attempt.ok.then_some(self.score_sum);
        if attempt.ok {
            self.last_placement.clear();
            self.last_placement
                .extend(self.log[mark..].iter().map(|(_, n)| *n));
        }
        self.rollback(mark);
        self.restore(&lifted);
        score
    }

    /// Nodes where at least one pending pod of the unit fits as things are.
    fn nodes_with_room(&mut self, pods: &[PodId]) -> Vec<NodeId> {
        let mut shapes: Vec<PodId> = Vec::new();
        for &p in pods {
            let pod = self.snapshot.pod(p);
            if !shapes
                .iter()
                .any(|s| self.snapshot.pod(*s).requests == pod.requests)
            {
                shapes.push(p);
            }
        }
        let mut out = Vec::new();
        for &node in self.snapshot.nodes() {
            if shapes
                .iter()
                .any(|&p| self.framework.fits_on(&self.snapshot, p, node))
            {
                out.push(node);
            }
        }
        out
    }

    /// Finds victims so that the group unit fits, or `None` (nothing is changed either way).
    pub(crate) fn choose_gang_victims(
        &mut self,
        index: &GroupIndex,
        unit: Unit,
        pending: &[PodId],
        priority: i32,
    ) -> Option<Vec<PodId>> {
        let victims = self.victims(index, priority);
        if victims.list.is_empty() {
            return None;
        }
        let room = self.nodes_with_room(pending);
        // Units and their pods, in name order of the units (never input order).
        let mut units: BTreeMap<UnitKey, Vec<PodId>> = BTreeMap::new();
        for &p in &victims.list {
            let u = victims.at(p).unit;
            units.entry((unit_rank(index, u), u)).or_default().push(p);
        }
        let ask = Ask {
            index,
            unit,
            pending,
            victims: &victims,
            room: &room,
        };
        if let Some(choice) = self.best_single_unit(&ask, &units) {
            return Some(choice.pods);
        }
        // Nothing is evicted when even every candidate together is not enough.
        self.unit_fits_without(index, unit, &victims.list, &room)?;
        if units.len() <= MAX_UNITS_FOR_PAIRS
            && let Some(choice) = self.first_fitting_pair(&ask, &units)
        {
            return Some(choice.pods);
        }
        self.several_units(&ask, &units).map(|c| c.pods)
    }

    /// One unit: candidates cheapest first by what the whole unit would cost; at most
    /// MAX_SINGLE_UNITS that fit are minimised and compared (by the objective, then the
    /// gang's score without them, then name).
    fn best_single_unit(
        &mut self,
        ask: &Ask,
        units: &BTreeMap<UnitKey, Vec<PodId>>,
    ) -> Option<Choice> {
        let mut singles: Vec<(Choice, UnitKey)> = units
            .iter()
            .filter(|(_, pods)| self.could_free_enough(ask.pending, pods, ask.room))
            .map(|(u, pods)| (self.choice(ask.victims, pods.clone()), *u))
            .collect();
        singles.sort_by(|a, b| {
            a.0.key()
                .cmp(&b.0.key())
                .then(a.0.amount.total_cmp(&b.0.amount))
                .then(a.1.cmp(&b.1))
        });
        let mut best: Option<(Choice, i64, String)> = None;
        let mut fitting = 0;
        for (whole_unit, u) in singles {
            if fitting >= MAX_SINGLE_UNITS {
                break;
            }
            let Some(score) =
                self.unit_fits_without(ask.index, ask.unit, &whole_unit.pods, ask.room)
            else {
                continue;
            };
            fitting += 1;
            let choice = self.minimise(ask.index, ask.unit, ask.victims, whole_unit.pods, ask.room);
            let name = self.unit_name(ask.index, u.1);
            let better = match &best {
                None => true,
                Some((b, bs, bn)) => {
                    choice.better_than(b)
                        || (!b.better_than(&choice)
                            && (score > *bs || (score == *bs && name < *bn)))
                }
            };
            if better {
                best = Some((choice, score, name));
            }
        }
        best.map(|(choice, _, _)| choice)
    }

    /// Two units, exhaustively: the best pair by the objective (checked cheapest first, so
    /// most pairs are never placed), minimised.
    fn first_fitting_pair(
        &mut self,
        ask: &Ask,
        units: &BTreeMap<UnitKey, Vec<PodId>>,
    ) -> Option<Choice> {
        let keys: Vec<UnitKey> = units.keys().copied().collect();
        let mut pairs: Vec<Choice> = Vec::new();
        for i in 0..keys.len() {
            for j in i + 1..keys.len() {
                let mut pods = units[&keys[i]].clone();
                pods.extend(&units[&keys[j]]);
                if self.could_free_enough(ask.pending, &pods, ask.room) {
                    pairs.push(self.choice(ask.victims, pods));
                }
            }
        }
        pairs.sort_by(|a, b| a.key().cmp(&b.key()).then(a.amount.total_cmp(&b.amount)));
        for pair in pairs {
            if self
                .unit_fits_without(ask.index, ask.unit, &pair.pods, ask.room)
                .is_some()
            {
                return Some(self.minimise(ask.index, ask.unit, ask.victims, pair.pods, ask.room));
            }
        }
        None
    }

    /// Several units: largest first (ties: lower priority, then name) until the gang fits,
    /// then the units not needed dropped (the highest priority first, then the smallest),
    /// minimised.
    fn several_units(
        &mut self,
        ask: &Ask,
        units: &BTreeMap<UnitKey, Vec<PodId>>,
    ) -> Option<Choice> {
        let (index, unit, victims, room) = (ask.index, ask.unit, ask.victims, ask.room);
        let mut order: Vec<(i32, f64, UnitKey)> = units
            .iter()
            .map(|(u, pods)| {
                (
                    pods.iter()
                        .map(|p| victims.at(*p).priority)
                        .max()
                        .unwrap_or(0),
                    self.amount(victims, pods),
                    *u,
                )
            })
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
        let mut chosen: Vec<UnitKey> = Vec::new();
        let mut pods: Vec<PodId> = Vec::new();
        let mut fits = false;
        for (_, _, u) in &order {
            chosen.push(*u);
            pods.extend(&units[u]);
            if self.could_free_enough(ask.pending, &pods, room)
                && self.unit_fits_without(index, unit, &pods, room).is_some()
            {
                fits = true;
                break;
            }
        }
        if !fits {
            return None;
        }
        let mut drop_order: Vec<(i32, f64, UnitKey)> = order
            .iter()
            .filter(|(_, _, u)| chosen.contains(u))
            .copied()
            .collect();
        drop_order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
        for (_, _, u) in drop_order {
            let without: Vec<PodId> = pods
                .iter()
                .copied()
                .filter(|p| victims.at(*p).unit != u.1)
                .collect();
            if !without.is_empty()
                && self
                    .unit_fits_without(index, unit, &without, room)
                    .is_some()
            {
                pods = without;
                chosen.retain(|x| *x != u);
            }
        }
        Some(self.minimise(index, unit, victims, pods, room))
    }

    /// Reprieves victims that are not needed: pods of units that need not go whole, the most
    /// important first (higher priority first). Within a priority, two orders are tried —
    /// larger pods kept first, and smaller pods kept first — and the one that evicts less
    /// wins; ties by name.
    fn minimise(
        &mut self,
        index: &GroupIndex,
        unit: Unit,
        victims: &Victims,
        pods: Vec<PodId>,
        room: &[NodeId],
    ) -> Choice {
        let mut best: Option<Choice> = None;
        for larger_first in [true, false] {
            let mut kept_out = pods.clone();
            // The placement found with every candidate evicted; a victim on a node it does
            // not use can be reprieved without another placement.
            if self
                .unit_fits_without(index, unit, &kept_out, room)
                .is_none()
            {
                break;
            }
            let mut order: Vec<PodId> = pods
                .iter()
                .copied()
                .filter(|p| !victims.at(*p).whole)
                .collect();
            order.sort_by(|a, b| {
                let (pa, pb) = (self.snapshot.pod(*a), self.snapshot.pod(*b));
                let (sa, sb) = (self.amount(victims, &[*a]), self.amount(victims, &[*b]));
                let by_size = if larger_first {
                    sb.total_cmp(&sa)
                } else {
                    sa.total_cmp(&sb)
                };
                pb.priority
                    .cmp(&pa.priority)
                    .then(by_size)
                    .then((&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name)))
            });
            let unit_pods_independent = self.unit_pods_independent(index, unit);
            for p in order {
                let without: Vec<PodId> = kept_out.iter().copied().filter(|x| *x != p).collect();
                let elsewhere = self
                    .snapshot
                    .node_of(p)
                    .is_some_and(|n| !self.last_placement.contains(&n));
                if elsewhere
                    && unit_pods_independent
                    && self.snapshot.pod(p).pod_anti_affinity.is_empty()
                {
                    // The placement found leaves the victim's node alone and nothing ties
                    // the unit's pods to it: it stays valid with the victim reprieved.
                    kept_out = without;
                    continue;
                }
                if self
                    .unit_fits_without(index, unit, &without, room)
                    .is_some()
                {
                    kept_out = without;
                }
            }
            let mut expanded = Vec::new();
            for p in &kept_out {
                self.expand(index, victims, *p, &mut expanded);
            }
            let choice = self.choice(victims, expanded);
            if best.as_ref().is_none_or(|b| choice.better_than(b)) {
                best = Some(choice);
            }
        }
        best.unwrap_or_else(|| self.choice(victims, pods))
    }

    /// Whether a placement of the unit depends only on the nodes it uses: no pod of the unit
    /// has inter-pod (anti-)affinity or topology spread constraints, and every device is
    /// node-local. Then a victim on another node can be reprieved without a new placement.
    fn unit_pods_independent(&self, index: &GroupIndex, unit: Unit) -> bool {
        let mut pending = Vec::new();
        match unit {
            Unit::Group(g) => pending.extend_from_slice(&index.groups[g].pending),
            Unit::Composite(c) => index.composite_pending(c, &mut pending),
            Unit::Pod(p) => pending.push(p),
        }
        (self.snapshot.dra.is_none() || self.snapshot.dra_node_local)
            && pending.iter().all(|&p| {
                let pod = self.snapshot.pod(p);
                pod.pod_affinity.is_empty()
                    && pod.pod_anti_affinity.is_empty()
                    && pod.topology_spread.is_empty()
            })
    }

    /// A cheap necessary condition: on some node with room or with victims, the free room
    /// plus what the victims free there holds the smallest pending pod.
    fn could_free_enough(&self, pending: &[PodId], pods: &[PodId], room: &[NodeId]) -> bool {
        let snap = &self.snapshot;
        let Some(pod) = pending
            .iter()
            .map(|p| snap.pod(*p))
            .min_by_key(|p| p.requests.iter().map(|(_, v)| v).sum::<i64>())
        else {
            return false;
        };
        if !room.is_empty() {
            return true;
        }
        let mut nodes: Vec<NodeId> = pods.iter().filter_map(|p| snap.node_of(*p)).collect();
        nodes.sort_by_key(|n| snap.rank(*n));
        nodes.dedup();
        nodes.iter().any(|&n| {
            pod.requests.iter().all(|(r, v)| {
                let freed: i64 = pods
                    .iter()
                    .filter(|p| snap.node_of(**p) == Some(n))
                    .map(|p| snap.pod(*p).requests.get(r))
                    .sum();
                snap.allocatable(n, r) - snap.requested(n, r) + freed >= v
            })
        })
    }

    pub(crate) fn unit_name(&self, index: &GroupIndex, u: VictimUnit) -> String {
        match u {
            VictimUnit::Pod(p) => self.snapshot.pod(p).key(),
            VictimUnit::Group(g) => index.groups[g].key.clone(),
        }
    }

    /// kube-scheduler's DefaultPreemption for a single pod: the node and the victims.
    pub(crate) fn choose_pod_victims(
        &mut self,
        index: &GroupIndex,
        pod_id: PodId,
    ) -> Option<(NodeId, Vec<PodId>)> {
        let pod: &Pod = self.snapshot.pod(pod_id);
        let victims = self.victims(index, pod.priority);
        if victims.list.is_empty() {
            return None;
        }
        let n = self.snapshot.num_nodes();
        let wanted = (n / 10).max(100);
        let mut candidates: Vec<(NodeId, Vec<PodId>)> = Vec::new();
        for i in 0..n {
            let node = self.snapshot.nodes()[i];
            let on_node: Vec<PodId> = self
                .snapshot
                .pods_on(node)
                .iter()
                .copied()
                .filter(|p| victims.get(*p).is_some())
                .collect();
            if on_node.is_empty() || !self.resources_could_fit(pod_id, node, &on_node) {
                continue;
            }
            let lifted = self.lift(&on_node);
            if !self.framework.fits_on(&self.snapshot, pod_id, node) {
                self.restore(&lifted);
                continue;
            }
            let chosen = self.reprieve(pod_id, node, &victims, &on_node, &lifted);
            let mut expanded = Vec::new();
            for p in &chosen {
                self.expand(index, &victims, *p, &mut expanded);
            }
            candidates.push((node, expanded));
            if candidates.len() >= wanted {
                break;
            }
        }
        // kube-scheduler's pickOneNodeForPreemption.
        let key = |s: &Self, (node, v): &(NodeId, Vec<PodId>)| {
            let prios: Vec<i64> = v
                .iter()
                .map(|p| i64::from(s.snapshot.pod(*p).priority))
                .collect();
            let max = prios.iter().copied().max().unwrap_or(i64::MIN);
            let sum: i64 = prios.iter().map(|p| p + i64::from(i32::MAX) + 1).sum();
            // Earliest start among the highest-priority victims: later is better.
            let earliest = v
                .iter()
                .filter(|p| i64::from(s.snapshot.pod(**p).priority) == max)
                .map(|p| start_time(s.snapshot.pod(*p)))
                .min()
                .unwrap_or(i64::MAX);
            (
                s.pdb_violations(&victims, v),
                max,
                sum,
                v.len(),
                std::cmp::Reverse(earliest),
                s.snapshot.rank(*node),
            )
        };
        let best = candidates.iter().min_by_key(|c| key(self, c))?.clone();
        Some(best)
    }

    /// kube-scheduler's reprieve on one node whose candidates (`on_node`, lifted) make room
    /// for `pod_id`: PDB-violating victims first, then by importance (priority, start
    /// time, name), each put back when the pod still fits. Returns the victims that stay
    /// out; the state is as before.
    fn reprieve(
        &mut self,
        pod_id: PodId,
        node: NodeId,
        victims: &Victims,
        on_node: &[PodId],
        lifted: &[Lifted],
    ) -> Vec<PodId> {
        let mut order = on_node.to_vec();
        let violating = |s: &Self, p: PodId| s.pdb_violations(victims, &[p]) > 0;
        order.sort_by(|a, b| {
            let (pa, pb) = (self.snapshot.pod(*a), self.snapshot.pod(*b));
            violating(self, *b)
                .cmp(&violating(self, *a))
                .then(pb.priority.cmp(&pa.priority))
                .then(start_time(pa).cmp(&start_time(pb)))
                .then((&pa.namespace, &pa.name).cmp(&(&pb.namespace, &pb.name)))
        });
        let mut chosen = Vec::new();
        for p in order {
            let held = lifted
                .iter()
                .find(|l| l.pod == p)
                .and_then(|l| l.held.clone());
            self.snapshot.reassume(p, node, held);
            if !self.framework.fits_on(&self.snapshot, pod_id, node) {
                self.snapshot.forget(p);
                chosen.push(p);
            }
        }
        // Put the chosen back: the snapshot is unchanged.
        for l in lifted {
            if self.snapshot.node_of(l.pod).is_none() {
                self.snapshot.reassume(l.pod, l.node, l.held.clone());
            }
        }
        chosen
    }

    /// The message DefaultPreemption's PostFilter adds to the FailedScheduling message of a
    /// pod that fits no node and that preemption cannot help, as kube-scheduler words it:
    /// `preemption: not eligible due to preemptionPolicy=Never.` for a pod that may not
    /// preempt, else `preemption: 0/N nodes are available: ...` with one reason per node:
    /// `Preemption is not helpful for scheduling` where the node's rejection is one that
    /// evicting pods cannot cure (taints, node affinity, a missing label, DRA, a request
    /// beyond the node's allocatable, ...); `No preemption victims found for incoming pod`
    /// where it could be cured but the node runs no pod of lower priority; otherwise why the
    /// pod still does not fit with every lower-priority pod of the node gone (e.g.
    /// `Insufficient cpu`). The snapshot is left as it was.
    pub(crate) fn preemption_message(&mut self, index: &GroupIndex, pod_id: PodId) -> String {
        let pod: &Pod = self.snapshot.pod(pod_id);
        if !Self::may_preempt(pod.preemption_policy) {
            return "preemption: not eligible due to preemptionPolicy=Never.".into();
        }
        let victims = self.victims(index, pod.priority);
        let n = self.snapshot.num_nodes();
        let mut histogram: Vec<(String, u32)> = Vec::new();
        const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
        let all: Vec<NodeId> = self.snapshot.nodes().to_vec();
        let rejections = self.framework.rejections(&self.snapshot, pod_id, &all);
        for (node, rejection) in all.into_iter().zip(rejections) {
            // A node the pod fits cannot occur for a pod that fit nowhere; it counts as one
            // preemption does not help rather than being left out of the total.
            let pod = self.snapshot.pod(pod_id);
            let resolvable = !rejection.is_empty()
                && rejection
                    .iter()
                    .all(|r| r.resolvable(&self.snapshot, pod, node));
            if !resolvable {
                crate::cycle::add_reason(&mut histogram, NOT_HELPFUL.into(), 1);
                continue;
            }
            let on_node: Vec<PodId> = self
                .snapshot
                .pods_on(node)
                .iter()
                .copied()
                .filter(|p| victims.get(*p).is_some())
                .collect();
            if on_node.is_empty() {
                crate::cycle::add_reason(
                    &mut histogram,
                    "No preemption victims found for incoming pod".into(),
                    1,
                );
                continue;
            }
            // A node short of resources that stays short without its victims fails the same
            // filter again (the filters before NodeResourcesFit passed and removing pods
            // cannot break them): count that without touching the snapshot.
            let fit_only = rejection.iter().all(node_resources_fit::is_shortage);
            let short = if fit_only {
                self.short_without(pod_id, node, &on_node)
            } else {
                Vec::new()
            };
            let still = if short.is_empty() {
                let lifted = self.lift(&on_node);
                let still = self.framework.rejection_on(&self.snapshot, pod_id, node);
                self.restore(&lifted);
                still
            } else {
                short
            };
            if still.is_empty() {
                // A candidate preemption would have used: not reached when preemption failed.
                crate::cycle::add_reason(&mut histogram, NOT_HELPFUL.into(), 1);
            }
            for r in still {
                crate::cycle::add_reason(&mut histogram, r.message(&self.snapshot), 1);
            }
        }
        format!(
            "preemption: {}",
            crate::cycle::nodes_available(n, histogram)
        )
    }

    /// NodeResourcesFit's reasons for `pod_id` on `node` with `victims` gone (empty when
    /// the resources would suffice).
    fn short_without(&self, pod_id: PodId, node: NodeId, victims: &[PodId]) -> Vec<Reason> {
        let snap = &self.snapshot;
        let pod = snap.pod(pod_id);
        let mut reasons = Vec::new();
        let pods_left = i64::from(snap.pod_count(node)) - victims.len() as i64;
        if pods_left + 1 > snap.allocatable(node, ResourceId::PODS) {
            reasons.push(node_resources_fit::TOO_MANY_PODS);
        }
        for (r, v) in pod.requests.iter() {
            if r == ResourceId::PODS || v <= 0 {
                continue;
            }
            let freed: i64 = victims.iter().map(|p| snap.pod(*p).requests.get(r)).sum();
            if v > snap.allocatable(node, r) - (snap.requested(node, r) - freed) {
                reasons.push(node_resources_fit::insufficient(r));
            }
        }
        reasons
    }

    fn resources_could_fit(&self, pod_id: PodId, node: NodeId, victims: &[PodId]) -> bool {
        let snap = &self.snapshot;
        let pod = snap.pod(pod_id);
        pod.requests.iter().all(|(r, v)| {
            let freed: i64 = victims.iter().map(|p| snap.pod(*p).requests.get(r)).sum();
            snap.allocatable(node, r) - snap.requested(node, r) + freed >= v
        })
    }

    /// Whether the preemptor may preempt at all.
    pub(crate) fn may_preempt(policy: PreemptionPolicy) -> bool {
        policy != PreemptionPolicy::Never
    }
}

/// Preemption as the scheduling pass uses it: the victims chosen above evicted from the
/// state, recorded in the decisions, and the message of a pod preemption cannot help.
impl Scheduler {
    /// Takes victims off their nodes, returning where they were.
    fn lift_victims(&mut self, victims: &[PodId]) -> Vec<Lifted> {
        victims
            .iter()
            .filter_map(|&pod| {
                let node = self.snapshot.node_of(pod)?;
                let held = self.snapshot.forget(pod);
                Some(Lifted { pod, node, held })
            })
            .collect()
    }

    /// Records the evictions of victims already taken off their nodes.
    fn record_evictions(
        &self,
        index: &GroupIndex,
        evicted: &[Lifted],
        preemptor: &str,
        reason: &str,
        decisions: &mut Decisions,
    ) {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        for &Lifted { pod: v, node, .. } in evicted {
            let group = index.group_of_pod(v);
            let mut why = reason.to_string();
            if let Some(g) = group {
                if cluster.pod_groups[g].disruption_mode == lockstep_model::DisruptionMode::All {
                    why += &format!("; pod group {} has disruptionMode all", index.groups[g].key);
                }
                let key = index.groups[g].key.clone();
                if !decisions.disrupted_groups.iter().any(|(k, _)| *k == key) {
                    decisions.disrupted_groups.push((
                        key,
                        format!("DisruptionTarget: PreemptionByScheduler: {reason}"),
                    ));
                }
            }
            decisions.evictions.push(Eviction {
                pod: v,
                node,
                preemptor: preemptor.to_string(),
                reason: why,
            });
        }
    }

    /// Pod preemption: evicts victims and returns the node the pod now fits on.
    pub(crate) fn preempt_for_pod(
        &mut self,
        index: &GroupIndex,
        id: PodId,
        decisions: &mut Decisions,
    ) -> Option<NodeId> {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let pod = &cluster.pods[id.index()];
        if !self.options.preemption
            || !Self::may_preempt(pod.preemption_policy)
            || self
                .snapshot
                .lowest_running_priority()
                .is_none_or(|p| p >= pod.priority)
        {
            return None;
        }
        let (node, victims) = self.choose_pod_victims(index, id)?;
        let lifted = self.lift_victims(&victims);
        if !self.framework.fits_on(&self.snapshot, id, node) {
            self.restore(&lifted);
            return None;
        }
        let reason = format!("preempted by pod {} (priority {})", pod.key(), pod.priority);
        self.record_evictions(index, &lifted, &pod.key(), &reason, decisions);
        Some(node)
    }

    /// Group preemption: evicts victims and runs the group cycle again; `None` when
    /// preemption cannot help (then nothing was evicted).
    pub(crate) fn preempt_for_unit(
        &mut self,
        index: &GroupIndex,
        unit: Unit,
        decisions: &mut Decisions,
    ) -> Option<Attempt> {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        if !self.options.preemption {
            return None;
        }
        let (policy, priority, key) = match unit {
            Unit::Group(g) => (
                cluster.pod_groups[g].preemption_policy,
                index.groups[g].priority,
                index.groups[g].key.clone(),
            ),
            Unit::Composite(c) => (
                cluster.composite_pod_groups[c].preemption_policy,
                index.composites[c].priority,
                index.composites[c].key.clone(),
            ),
            Unit::Pod(_) => return None,
        };
        if !Self::may_preempt(policy)
            || self
                .snapshot
                .lowest_running_priority()
                .is_none_or(|p| p >= priority)
        {
            return None;
        }
        let pending: Vec<PodId> = match unit {
            Unit::Group(g) => index.groups[g].pending.clone(),
            Unit::Composite(c) => {
                let mut p = Vec::new();
                index.composite_pending(c, &mut p);
                p
            }
            Unit::Pod(_) => return None,
        };
        let victims = self.choose_gang_victims(index, unit, &pending, priority)?;
        let lifted = self.lift_victims(&victims);
        let mark = self.log.len();
        let attempt = self.try_unit(index, unit);
        if !attempt.ok {
            // Cannot happen when the choice was checked; stay transactional regardless.
            self.rollback(mark);
            self.restore(&lifted);
            return None;
        }
        let reason = format!(
            "preempted by gang {key} (priority {priority}) in {} mode",
            self.options.gang_preemption.as_str()
        );
        self.record_evictions(index, &lifted, &key, &reason, decisions);
        Some(attempt)
    }

    /// DynamicResources' PostFilter: whether kube-scheduler would deallocate one of the
    /// pod's allocated claims because it is not available on a node that reached that check
    /// (`resourceclaim not available on the node`), which it does for a claim no other pod
    /// uses. lockstep reports it and keeps the allocation: it does not retry the pod.
    fn claim_to_deallocate(&mut self, id: PodId, e: &FitError) -> bool {
        let unavailable =
            dynamic_resources::reason(lockstep_dra::UnfitReason::ClaimNotAvailableOnNode);
        if !e.reasons.iter().any(|(r, _)| *r == unavailable) {
            return false;
        }
        let crate::state::PodClaims::Refs(refs) = self.snapshot.claims(id) else {
            return false;
        };
        let Some(dra) = self.snapshot.dra.as_ref() else {
            return false;
        };
        let pod = self.snapshot.pod(id);
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let free: Vec<lockstep_dra::ClaimId> = refs
            .iter()
            .filter_map(|r| match r {
                lockstep_dra::ClaimRef::Claim(c) => Some(*c),
                lockstep_dra::ClaimRef::Template(_) => None,
            })
            .filter(|&c| {
                let key = dra.claim_key(lockstep_dra::ClaimRef::Claim(c));
                let only_this_pod = cluster
                    .resource_claims
                    .iter()
                    .find(|rc| rc.key() == key)
                    .is_some_and(|rc| rc.reserved_for == [pod.key()]);
                dra.claim_users(c) == 0 || (dra.claim_users(c) == 1 && only_this_pod)
            })
            .collect();
        if free.is_empty() {
            return false;
        }
        let all: Vec<NodeId> = self.snapshot.nodes().to_vec();
        let rejections = self.framework.rejections(&self.snapshot, id, &all);
        let dra = self.snapshot.dra.as_ref().expect("checked above");
        all.into_iter().zip(rejections).any(|(node, rejection)| {
            rejection == [unavailable] && free.iter().any(|&c| dra.allocated_elsewhere(c, node))
        })
    }

    /// The FailedScheduling message of a pod that fits no node and that preemption did not
    /// place: the FitError's message and, when preemption is on and there are nodes, the
    /// PostFilter's (kube-scheduler runs PostFilter only after a FitError, not when the
    /// cluster has no nodes).
    pub(crate) fn unschedulable_message(
        &mut self,
        index: &GroupIndex,
        id: PodId,
        e: &FitError,
    ) -> String {
        let mut message = e.message(&self.snapshot);
        if e.num_nodes == 0 {
            return message;
        }
        // DynamicResources' PostFilter reads the state its PreFilter writes. When an earlier
        // PreFilter rejected the pod, DynamicResources' never ran, and its PostFilter fails
        // with kube-scheduler's "not found", which ends PostFilter: no preemption part.
        if let Some(plugin) = e.rejected_by {
            let filters = &self.options.profile.filters;
            let at = |name: &str| filters.iter().position(|f| f == name);
            if let (Some(by), Some(dra)) = (at(plugin), at("DynamicResources"))
                && by < dra
            {
                message.push_str(" not found");
                return message;
            }
        }
        // PostFilter plugins in profile order, their messages joined with ", ".
        let mut post = Vec::new();
        if self.claim_to_deallocate(id, e) {
            post.push("deallocation of ResourceClaim completed".to_string());
        }
        if self.options.preemption {
            post.push(self.preemption_message(index, id));
        }
        if !post.is_empty() {
            message.push(' ');
            message.push_str(&post.join(", "));
        }
        message
    }
}
