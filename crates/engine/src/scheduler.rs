//! The Scheduler facade: builds the queue of units (single pods, PodGroups, CompositePodGroup
//! trees) in PrioritySort order, runs a pod cycle or a group cycle for each, and collects the
//! decisions a front end reports.

use lockstep_model::{Cluster, GroupPolicy, NodeId, Pod, PodId, WhenUnsatisfiable};

use crate::config::{ConfigError, Profile};

/// Why a scheduler cannot be set up for a cluster: the configuration or the DRA objects are
/// invalid (both are bad input).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Dra(#[from] lockstep_dra::DraError),
    #[error(transparent)]
    State(Box<crate::state::ChangeError>),
}

impl From<crate::state::ChangeError> for SetupError {
    fn from(e: crate::state::ChangeError) -> Self {
        match e {
            crate::state::ChangeError::Dra(e) => SetupError::Dra(e),
            e => SetupError::State(Box::new(e)),
        }
    }
}
use crate::config::GangPlacement;
use crate::cycle::{FitError, Framework};
use crate::gang_search::{Gang, Outcome};
use crate::group::{GroupIndex, Unit, candidate_orders, capacity_of, domains, free_of, min_demand};
use crate::plugins::dynamic_resources;
use crate::preemption::{Eviction, GangPreemption, Lifted};
use crate::queue::{ChangeLog, Logged};
use crate::state::ClusterState;

/// Run options.
#[derive(Debug, Clone)]
pub struct Options {
    pub profile: Profile,
    /// Pending pods whose `schedulerName` (empty means `default-scheduler`) is one of these
    /// are scheduled; others are skipped.
    pub scheduler_names: Vec<String>,
    /// Opportunistic batching: consecutive pods with the same signature reuse the previous
    /// cycle's scored nodes.
    pub batching: bool,
    /// Whether pods and groups that do not fit may preempt lower-priority pods.
    pub preemption: bool,
    /// Victim selection for groups whose `disruptionMode` is `single`.
    pub gang_preemption: GangPreemption,
    /// Build kube-scheduler's message for every pod that does not fit (front ends that
    /// discard messages, like the simulator, turn this off).
    pub explain: bool,
    /// Record, for each pod placed by a pod cycle, the other nodes that scored as high as
    /// the chosen one (`Decisions::ties`), for comparisons with schedulers that break
    /// score ties at random.
    pub record_ties: bool,
    /// Skip a PodGroup identical to one that just failed against the same state, answering
    /// it with that failure (only without messages; see `unit_memo_key`). The decisions are
    /// the same either way.
    pub remember_failed_gangs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            profile: Profile::default(),
            scheduler_names: vec!["default-scheduler".into(), "lockstep".into()],
            batching: true,
            preemption: true,
            gang_preemption: GangPreemption::default(),
            explain: true,
            record_ties: false,
            remember_failed_gangs: true,
        }
    }
}

/// The PodGroupInitiallyScheduled outcome of a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// `namespace/name`.
    pub name: String,
    pub scheduled: bool,
    pub message: String,
}

/// What a run decided. Pod ids index `Cluster::pods`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Placements made by this run, in the order they were made.
    pub bindings: Vec<(PodId, NodeId)>,
    pub unschedulable: Vec<(PodId, String)>,
    pub waiting: Vec<(PodId, String)>,
    pub skipped: Vec<(PodId, String)>,
    /// Every PodGroup with pending members.
    pub pod_groups: Vec<GroupStatus>,
    /// Pods evicted by preemption, in the order decided.
    pub evictions: Vec<Eviction>,
    /// PodGroups that lost pods to preemption (`namespace/name`, DisruptionTarget message).
    pub disrupted_groups: Vec<(String, String)>,
    /// Devices allocated to the pods this run placed, one entry per claim.
    pub allocations: Vec<ClaimDevices>,
    /// With `Options::record_ties`: for each pod placed by a pod cycle (its own, or one of
    /// its group's pod-by-pod orders), the other nodes
    /// whose total score equalled its node's.
    pub ties: Vec<(PodId, Vec<NodeId>)>,
}

/// The devices allocated for one claim of a placed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimDevices {
    pub pod: PodId,
    /// `namespace/name` of the ResourceClaim; a claim made from a template is named
    /// `namespace/<pod>-<pod claim name>`, as the ResourceClaim controller names it.
    pub claim: String,
    pub node: NodeId,
    pub devices: Vec<AllocatedDevice>,
}

/// One device of an allocation result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// The request (or `request/subrequest`) the device satisfies.
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// PrioritySort: higher priority first, then earlier creation, then namespace/name.
/// Pods without a creationTimestamp sort after those with one.
pub fn queue_order(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| {
            a.creation_timestamp
                .unwrap_or(i64::MAX)
                .cmp(&b.creation_timestamp.unwrap_or(i64::MAX))
        })
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.name.cmp(&b.name))
}

/// The pod's scheduler: an empty `schedulerName` means `default-scheduler`, as the API
/// server defaults it.
pub fn effective_scheduler_name(pod: &Pod) -> &str {
    if pod.scheduler_name.is_empty() {
        "default-scheduler"
    } else {
        &pod.scheduler_name
    }
}

fn accepts(options: &Options, pod: &Pod) -> bool {
    options
        .scheduler_names
        .iter()
        .any(|n| n == effective_scheduler_name(pod))
}

/// Whether more bindings elsewhere can make this pod fit where it did not (required pod
/// affinity, hard topology spread); other failures only get worse as nodes fill.
fn may_fit_later(pod: &Pod) -> bool {
    !pod.pod_affinity.required.is_empty()
        || pod
            .topology_spread
            .iter()
            .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
}

/// The outcome of one group or composite attempt.
pub(crate) struct Attempt {
    pub(crate) ok: bool,
    message: String,
    /// Member pods that did not get a node, with why.
    failed: Vec<(PodId, String)>,
    /// Group statuses decided inside (for composites: every child group).
    statuses: Vec<(usize, bool, String)>,
}

pub struct Scheduler {
    pub snapshot: ClusterState,
    pub(crate) framework: Framework,
    pub(crate) options: Options,
    /// Pods assumed inside the open transactions, in order.
    pub(crate) log: Vec<(PodId, NodeId)>,
    /// The last batching scope handed out (0 is the whole cluster).
    scopes: u64,
    /// The `schedule` call each pod was last placed in; pods placed by the current call
    /// (`epoch`) are never victims of preemption in it.
    placed_epoch: Vec<u32>,
    epoch: u32,
    /// The PodGroup tree, built at `index_revision` of the state (rebuilt when pods or
    /// groups changed since); `schedule` refreshes who is pending and running.
    index: GroupIndex,
    index_revision: u64,
    /// Sum of the chosen nodes' scores over the pods placed by the last `search`.
    pub(crate) score_sum: i64,
    /// The nodes of the last placement preemption found (one entry per placed pod).
    pub(crate) last_placement: Vec<NodeId>,
    /// Counters of the whole-gang search.
    pub(crate) gang_search: crate::gang_search::GangSearchCounts,
    /// The last PodGroup that failed in this `schedule` call (see `unit_memo_key`).
    failed_unit: Option<FailedUnit>,
    /// PodGroups answered with a remembered failure.
    failures_reused: u64,
    /// The changes that may help pods that did not fit (see `queue`).
    pub(crate) changes: ChangeLog,
    /// Whether the searches since it was last set covered every placement.
    search_proven: bool,
    /// Pods of the last `schedule` call whose unit failed without covering every placement.
    unproven: Vec<PodId>,
    /// With `Options::record_ties`: the ties of pods placed by group cycles' orders.
    search_ties: Vec<(PodId, Vec<NodeId>)>,
}

/// A change as [`Scheduler::apply`] saw it before applying it.
enum Before {
    Node,
    Pod {
        /// The pod's previous version, when there was one.
        old: Option<OldPod>,
        /// The new version belongs to a PodGroup.
        grouped: bool,
    },
    Everything,
}

struct OldPod {
    node: Option<NodeId>,
    /// It had required anti-affinity (its leaving can open a whole domain).
    wide: bool,
    grouped: bool,
}

/// What a PodGroup's cycle depends on besides the cluster state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UnitKey {
    /// The pending pods' signatures, in name order.
    pods: Vec<crate::framework::Signature>,
    /// The group's policy, topology, priority, preemption and pods needed.
    group: String,
}

/// A PodGroup that failed against the state at `generation` (after its preemption attempt).
#[derive(Debug)]
struct FailedUnit {
    key: UnitKey,
    generation: u64,
    group: String,
    proven: bool,
}

impl Scheduler {
    /// A scheduler for a copy of `cluster`'s objects.
    pub fn new(cluster: &Cluster, options: Options) -> Result<Self, SetupError> {
        Scheduler::with_state(ClusterState::new(cluster)?, options)
    }

    /// A scheduler for `cluster`, which it takes.
    pub fn from_cluster(cluster: Cluster, options: Options) -> Result<Self, SetupError> {
        Scheduler::with_state(ClusterState::from_cluster(cluster)?, options)
    }

    /// A scheduler for a cluster state; the state then changes through
    /// [`apply`](Self::apply).
    pub fn with_state(mut state: ClusterState, options: Options) -> Result<Self, SetupError> {
        state.device_choice = crate::plugins::device_choice(&options.profile);
        let mut framework = Framework::new(&options.profile, &state.cluster.resources)?;
        framework.set_batching(options.batching);
        Ok(Scheduler {
            framework,
            placed_epoch: vec![0; state.pod_slots()],
            epoch: 0,
            index: GroupIndex::build(&state.cluster),
            index_revision: state.revision,
            snapshot: state,
            options,
            log: Vec::new(),
            scopes: 0,
            score_sum: 0,
            last_placement: Vec::new(),
            gang_search: Default::default(),
            failed_unit: None,
            failures_reused: 0,
            changes: ChangeLog::default(),
            search_proven: true,
            unproven: Vec::new(),
            search_ties: Vec::new(),
        })
    }

    fn accepts(&self, pod: &Pod) -> bool {
        accepts(&self.options, pod)
    }

    /// Whether `pod` was placed by the current `schedule` call (such pods are never
    /// preemption victims in it).
    pub(crate) fn placed_now(&self, pod: PodId) -> bool {
        self.placed_epoch[pod.index()] == self.epoch
    }

    fn mark_placed(&mut self, pod: PodId) {
        self.placed_epoch[pod.index()] = self.epoch;
    }

    pub(crate) fn assume(&mut self, pod: PodId, node: NodeId) {
        self.snapshot.assume(pod, node);
        self.log.push((pod, node));
    }

    pub(crate) fn rollback(&mut self, mark: usize) {
        while self.log.len() > mark {
            let (pod, _) = self.log.pop().expect("log longer than mark");
            self.snapshot.forget(pod);
        }
    }

    /// Removes a pod from its node (it finished or was evicted).
    pub fn release(&mut self, pod: PodId) {
        let Some(node) = self.snapshot.node_of(pod) else {
            return;
        };
        let held = self.snapshot.forget(pod);
        let local = match (&held, &self.snapshot.dra) {
            (Some(a), Some(dra)) => dra.is_node_local(a),
            _ => true,
        };
        // Room on one node, unless the pod's anti-affinity kept pods off a whole domain or
        // its devices are reachable from other nodes too.
        let change = if local && self.snapshot.pod(pod).pod_anti_affinity.required.is_empty() {
            Logged::Freed(node)
        } else {
            Logged::Everything
        };
        self.changes.push(change);
    }

    /// The position of the change log: a pod that does not fit in an attempt that starts
    /// now is parked at it (see [`Queue::park`](crate::Queue::park)).
    pub fn change_position(&self) -> u64 {
        self.changes.position()
    }

    /// Pods of the last [`schedule`](Self::schedule) call that did not fit without the
    /// attempt covering every placement (a gang whose pod-by-pod orders failed and whose
    /// whole-gang search was off or reached its bound, a CompositePodGroup), in the order
    /// they failed.
    pub fn unproven_failures(&self) -> &[PodId] {
        &self.unproven
    }

    /// Applies a change to the cluster state (see [`ClusterState::apply`]); a pod whose
    /// slot is reused starts with a clean record.
    pub fn apply(
        &mut self,
        change: crate::state::Change,
    ) -> Result<crate::state::Applied, crate::state::ChangeError> {
        let before = self.before_change(&change);
        let applied = self.snapshot.apply(change)?;
        self.placed_epoch.resize(self.snapshot.pod_slots(), 0);
        if let crate::state::Applied::Pod(p) = applied {
            self.placed_epoch[p.index()] = 0;
        }
        self.log_change(before, applied);
        Ok(applied)
    }

    /// What a change was about before it is applied, for [`log_change`](Self::log_change).
    fn before_change(&self, change: &crate::state::Change) -> Before {
        use crate::state::{Change, Kind, Object};
        let s = &self.snapshot;
        if s.dra.is_some() {
            // Device changes and placements can move devices between pods and nodes.
            return Before::Everything;
        }
        let pod = |ns: &str, name: &str| {
            let id = s.pod_id(ns, name)?;
            let p = s.pod(id);
            Some(OldPod {
                node: s.node_of(id),
                wide: !p.pod_anti_affinity.required.is_empty(),
                grouped: p.pod_group.is_some(),
            })
        };
        match change {
            Change::Add(Object::Node(_)) | Change::Update(Object::Node(_)) => Before::Node,
            Change::Add(Object::Pod(p)) => Before::Pod {
                old: None,
                grouped: p.pod_group.is_some(),
            },
            Change::Update(Object::Pod(p)) => Before::Pod {
                old: pod(&p.namespace, &p.name),
                grouped: p.pod_group.is_some(),
            },
            Change::Delete(Kind::Pod, key) => match pod(&key.namespace, &key.name) {
                Some(old) => Before::Pod {
                    old: Some(old),
                    grouped: false,
                },
                None => Before::Everything,
            },
            Change::Bind { pod: key, .. } => Before::Pod {
                old: pod(&key.namespace, &key.name),
                grouped: false,
            },
            _ => Before::Everything,
        }
    }

    /// Logs what an applied change may do for pods that did not fit (see [`Queue`]): a
    /// node added or changed is room on that node; a pod leaving a node frees room there;
    /// a pod placed only matters to pods that look at other pods; a pending pod added or
    /// changed helps nobody else, unless it belongs to a PodGroup (it may complete one).
    /// Everything else (node deletes, pending pods deleted, every other kind, anything in
    /// a cluster with devices) may help any pod.
    ///
    /// [`Queue`]: crate::Queue
    fn log_change(&mut self, before: Before, applied: crate::state::Applied) {
        use crate::state::Applied;
        match (before, applied) {
            (Before::Node, Applied::Node(n)) => self.changes.push(Logged::Freed(n)),
            (Before::Pod { old, grouped }, Applied::Pod(id)) => {
                let live = self.snapshot.is_live(id);
                let grouped = grouped
                    || old.as_ref().is_some_and(|o| o.grouped)
                    || (live && self.snapshot.pod(id).pod_group.is_some());
                let left = old.as_ref().and_then(|o| o.node.map(|n| (n, o.wide)));
                let placed = live && self.snapshot.node_of(id).is_some();
                let pending_deleted = !live && left.is_none();
                if grouped || pending_deleted {
                    self.changes.push(Logged::Everything);
                    return;
                }
                match left {
                    Some((_, true)) => self.changes.push(Logged::Everything),
                    Some((n, false)) => self.changes.push(Logged::Freed(n)),
                    None => {}
                }
                if placed {
                    self.changes.push(Logged::Placed);
                }
            }
            _ => self.changes.push(Logged::Everything),
        }
    }

    /// The cluster state.
    pub fn state(&self) -> &ClusterState {
        &self.snapshot
    }

    /// PodGroups answered with the failure of an identical group before them (see
    /// `Options::remember_failed_gangs`).
    pub fn gang_failures_reused(&self) -> u64 {
        self.failures_reused
    }

    /// Cycles answered by batching and full cycles run so far.
    pub fn cycle_counts(&self) -> (u64, u64) {
        (self.framework.batched_cycles, self.framework.full_cycles)
    }

    fn pod_key(&self, id: PodId) -> String {
        self.snapshot.pod(id).key()
    }

    /// Schedules every pending pod of the cluster until nothing more can be placed.
    pub fn run(&mut self) -> Decisions {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let pending: Vec<PodId> = (0..cluster.pods.len() as u32)
            .map(PodId)
            .filter(|p| cluster.pods[p.index()].is_pending())
            .collect();
        self.schedule(&pending)
    }

    /// Schedules the given pods (pending pods that are not yet on a node in the snapshot)
    /// until nothing more can be placed, and leaves the placements assumed in the snapshot.
    /// Front ends that advance time (the simulator) call this repeatedly with the pods that
    /// have arrived, and `release` pods that finish.
    pub fn schedule(&mut self, pending: &[PodId]) -> Decisions {
        if self.index_revision != self.snapshot.revision {
            self.index = GroupIndex::build(&self.snapshot.cluster);
            self.index_revision = self.snapshot.revision;
        }
        self.placed_epoch.resize(self.snapshot.pod_slots(), 0);
        // Pods placed by an earlier call may be preemption victims in this one.
        self.failed_unit = None;
        self.unproven.clear();
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let decisions = Decisions::default();
        let mut in_set = vec![false; cluster.pods.len()];
        for p in pending {
            in_set[p.index()] = true;
        }
        self.epoch += 1;
        let mut index = std::mem::take(&mut self.index);
        {
            let snap = &self.snapshot;
            let options = &self.options;
            index.refresh(
                &cluster,
                |id| in_set[id.index()] && accepts(options, &cluster.pods[id.index()]),
                |id| snap.node_of(id).is_some(),
            );
        }
        let mut decisions = self.schedule_with(&index, pending, decisions);
        self.index = index;
        if self.options.record_ties {
            // The last placement recorded for each pod is the one its unit kept.
            let bound: std::collections::HashSet<PodId> =
                decisions.bindings.iter().map(|(p, _)| *p).collect();
            let mut seen: std::collections::HashSet<PodId> =
                decisions.ties.iter().map(|(p, _)| *p).collect();
            for (p, t) in std::mem::take(&mut self.search_ties).into_iter().rev() {
                if bound.contains(&p) && seen.insert(p) {
                    decisions.ties.push((p, t));
                }
            }
        }
        decisions
    }

    fn schedule_with(
        &mut self,
        index: &GroupIndex,
        pending: &[PodId],
        mut decisions: Decisions,
    ) -> Decisions {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);

        // Classify pending pods.
        let mut units: Vec<Unit> = Vec::new();
        for &id in pending {
            let pod = &cluster.pods[id.index()];
            if self.snapshot.node_of(id).is_some() {
                continue;
            }
            if !self.accepts(pod) {
                decisions.skipped.push((
                    id,
                    format!("schedulerName {}", effective_scheduler_name(pod)),
                ));
            } else if let Some(group) = &pod.pod_group {
                if index.group_of(&pod.namespace, group).is_none() {
                    decisions.waiting.push((
                        id,
                        format!(
                            "waiting for pod group {}/{} (PodGroup does not exist)",
                            pod.namespace, group
                        ),
                    ));
                }
            } else {
                units.push(Unit::Pod(id));
            }
        }
        let mut group_status: Vec<Option<(bool, String)>> = vec![None; index.groups.len()];
        for (g, info) in index.groups.iter().enumerate() {
            if info.parent.is_some() || info.pending.is_empty() {
                continue;
            }
            if index.group_ready(&cluster, g) {
                units.push(Unit::Group(g));
            } else {
                let min = match cluster.pod_groups[g].policy {
                    GroupPolicy::Gang { min } => min as usize,
                    GroupPolicy::Basic => 1,
                };
                let msg = format!(
                    "waiting for pod group {} ({}/{} pods present)",
                    info.key,
                    info.pending.len() + info.bound.len(),
                    min
                );
                for &p in &info.pending {
                    decisions.waiting.push((p, msg.clone()));
                }
                group_status[g] = Some((false, msg));
            }
        }
        for (c, info) in index.composites.iter().enumerate() {
            if info.parent.is_some() {
                continue;
            }
            let mut pending = Vec::new();
            index.composite_pending(c, &mut pending);
            if pending.is_empty() {
                continue;
            }
            let (ready, need) = index.composite_ready(&cluster, c);
            if ready >= need {
                units.push(Unit::Composite(c));
            } else {
                let msg = format!(
                    "waiting for composite pod group {} ({}/{} child groups ready)",
                    info.key, ready, need
                );
                for p in pending {
                    decisions.waiting.push((p, msg.clone()));
                }
                self.mark_subtree(index, c, &msg, &mut group_status);
            }
        }
        self.sort_units(index, &mut units);

        let mut failed: Vec<(PodId, String)> = Vec::new();
        loop {
            let bound_before = decisions.bindings.len();
            for &unit in &units {
                match unit {
                    Unit::Pod(id) => match self.framework.schedule_pod(&self.snapshot, id) {
                        Ok(node) => {
                            if self.options.record_ties {
                                decisions.ties.push((id, self.framework.tied.clone()));
                            }
                            self.snapshot.assume(id, node);
                            self.mark_placed(id);
                            decisions.bindings.push((id, node));
                        }
                        Err(e) => match self.preempt_for_pod(index, id, &mut decisions) {
                            Some(node) => {
                                self.snapshot.assume(id, node);
                                self.mark_placed(id);
                                decisions.bindings.push((id, node));
                            }
                            None => {
                                let message = if self.options.explain {
                                    self.unschedulable_message(index, id, &e)
                                } else {
                                    String::new()
                                };
                                failed.push((id, message));
                            }
                        },
                    },
                    Unit::Group(_) | Unit::Composite(_) => {
                        let mark = self.log.len();
                        let memo_key = self.unit_memo_key(index, unit);
                        let remembered = match (&memo_key, &self.failed_unit) {
                            (Some(k), Some(f))
                                if f.key == *k && f.generation == self.snapshot.generation =>
                            {
                                Some((f.group.clone(), f.proven))
                            }
                            _ => None,
                        };
                        self.search_proven = !matches!(unit, Unit::Composite(_));
                        let attempt = if let (Some((other, proven)), Unit::Group(g)) =
                            (remembered, unit)
                        {
                            self.search_proven = proven;
                            self.failures_reused += 1;
                            let message = format!(
                                "gang {}: does not fit, as gang {other} with the same pods did not",
                                index.groups[g].key
                            );
                            Attempt {
                                ok: false,
                                failed: index.groups[g]
                                    .pending
                                    .iter()
                                    .map(|p| (*p, message.clone()))
                                    .collect(),
                                statuses: vec![(g, false, message.clone())],
                                message,
                            }
                        } else {
                            let mut attempt = self.try_unit(index, unit);
                            if !attempt.ok
                                && let Some(after) =
                                    self.preempt_for_unit(index, unit, &mut decisions)
                            {
                                attempt = after;
                            }
                            self.failed_unit = match (memo_key, unit, attempt.ok) {
                                (Some(key), Unit::Group(g), false) => Some(FailedUnit {
                                    key,
                                    generation: self.snapshot.generation,
                                    group: index.groups[g].key.clone(),
                                    proven: self.search_proven,
                                }),
                                _ => None,
                            };
                            attempt
                        };
                        for i in mark..self.log.len() {
                            let p = self.log[i].0;
                            self.mark_placed(p);
                        }
                        decisions.bindings.extend(self.log.drain(mark..));
                        if !attempt.ok && !self.search_proven {
                            self.unproven.extend(attempt.failed.iter().map(|(p, _)| *p));
                        }
                        decisions.unschedulable.extend(attempt.failed);
                        for (g, ok, msg) in attempt.statuses {
                            group_status[g] = Some((ok, msg));
                        }
                    }
                }
            }
            // Retry, in queue order, the failures that new bindings may have cured.
            let progressed = decisions.bindings.len() > bound_before;
            let (retry, stay): (Vec<_>, Vec<_>) = failed
                .drain(..)
                .partition(|(id, _)| progressed && may_fit_later(&cluster.pods[id.index()]));
            decisions.unschedulable.extend(stay);
            if retry.is_empty() {
                break;
            }
            units = retry.into_iter().map(|(id, _)| Unit::Pod(id)).collect();
        }
        if !decisions.evictions.is_empty() {
            self.changes.push(Logged::Everything);
        }
        if !decisions.bindings.is_empty() {
            self.changes.push(Logged::Placed);
        }
        self.collect_allocations(&mut decisions);
        for (g, status) in group_status.into_iter().enumerate() {
            if index.groups[g].pending.is_empty() {
                continue;
            }
            let initially = cluster.pod_groups[g].initially_scheduled;
            let (scheduled, message) = status.unwrap_or((false, "not attempted".into()));
            decisions.pod_groups.push(GroupStatus {
                name: index.groups[g].key.clone(),
                // PodGroupInitiallyScheduled never reverts.
                scheduled: scheduled || initially,
                message,
            });
        }
        decisions.pod_groups.sort_by(|a, b| a.name.cmp(&b.name));
        decisions
    }

    /// Fills `decisions.allocations` for the pods the run placed.
    fn collect_allocations(&self, decisions: &mut Decisions) {
        let Some(dra) = self.snapshot.dra.as_ref() else {
            return;
        };
        for &(pod, node) in &decisions.bindings {
            let Some(a) = self.snapshot.allocation(pod) else {
                continue;
            };
            let p = self.snapshot.pod(pod);
            // Allocations come in the order of the pod's claims.
            for (ca, pc) in a.claims.iter().zip(&p.resource_claims) {
                let claim = match ca.claim {
                    lockstep_dra::ClaimRef::Claim(_) => dra.claim_key(ca.claim).to_string(),
                    lockstep_dra::ClaimRef::Template(_) => {
                        format!("{}/{}-{}", p.namespace, p.name, pc.name)
                    }
                };
                let devices = ca
                    .devices
                    .iter()
                    .map(|d| {
                        let (driver, pool, device) = dra.device_name(d.device);
                        AllocatedDevice {
                            request: dra.request_name(ca.claim, d.request),
                            driver: driver.to_string(),
                            pool: pool.to_string(),
                            device: device.to_string(),
                        }
                    })
                    .collect();
                decisions.allocations.push(ClaimDevices {
                    pod,
                    claim,
                    node,
                    devices,
                });
            }
        }
    }

    fn try_unit(&mut self, index: &GroupIndex, unit: Unit) -> Attempt {
        match unit {
            Unit::Group(g) => self.try_group(index, g, None),
            Unit::Composite(c) => self.try_composite(index, c, None),
            Unit::Pod(_) => unreachable!("pods have their own cycle"),
        }
    }

    /// What decides a PodGroup's cycle besides the cluster state, when it can be remembered:
    /// the simulator (which builds no messages) skips a gang identical to one that just
    /// failed against the same state. `None` when the unit is not such a gang: a composite,
    /// a group with running members or claims of its own, a pod that cannot be signed, or
    /// messages are wanted (they name the gang).
    fn unit_memo_key(&mut self, index: &GroupIndex, unit: Unit) -> Option<UnitKey> {
        let Unit::Group(g) = unit else {
            return None;
        };
        // Sampling nodes moves the scan's start with every cycle: skipping one would change
        // later decisions.
        if self.options.explain
            || !self.options.remember_failed_gangs
            || !self.framework.scans_all(self.snapshot.num_nodes())
        {
            return None;
        }
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let pg = &cluster.pod_groups[g];
        let info = &index.groups[g];
        if !info.bound.is_empty() || !pg.resource_claims.is_empty() || pg.parent.is_some() {
            return None;
        }
        // The pods in name order: the group cycle's orders break ties by name.
        let mut pods = Vec::with_capacity(info.pending.len());
        for &p in &info.pending {
            pods.push(self.framework.signature_of(&self.snapshot, p)?);
        }
        Some(UnitKey {
            pods,
            group: format!(
                "{:?}/{:?}/{}/{:?}/{:?}/{}",
                pg.policy,
                pg.topology_key,
                info.priority,
                pg.preemption_policy,
                pg.disruption_mode,
                index.needed(&self.snapshot, g)
            ),
        })
    }

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

    /// The FailedScheduling message of a pod that fits no node and that preemption did not
    /// place: the FitError's message and, when preemption is on and there are nodes, the
    /// PostFilter's (kube-scheduler runs PostFilter only after a FitError, not when the
    /// cluster has no nodes).
    fn unschedulable_message(&mut self, index: &GroupIndex, id: PodId, e: &FitError) -> String {
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

    /// Pod preemption: evicts victims and returns the node the pod now fits on.
    fn preempt_for_pod(
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
    fn preempt_for_unit(
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

    fn mark_subtree(
        &self,
        index: &GroupIndex,
        c: usize,
        msg: &str,
        status: &mut [Option<(bool, String)>],
    ) {
        for &g in &index.composites[c].groups {
            status[g] = Some((false, msg.to_string()));
        }
        for &k in &index.composites[c].composites {
            self.mark_subtree(index, k, msg, status);
        }
    }

    fn sort_units(&self, index: &GroupIndex, units: &mut [Unit]) {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let key = |u: &Unit| -> (i32, i64, String) {
            match *u {
                Unit::Pod(p) => {
                    let pod = &cluster.pods[p.index()];
                    (
                        pod.priority,
                        pod.creation_timestamp.unwrap_or(i64::MAX),
                        pod.key(),
                    )
                }
                Unit::Group(g) => (
                    index.groups[g].priority,
                    cluster.pod_groups[g].creation_timestamp.unwrap_or(i64::MAX),
                    index.groups[g].key.clone(),
                ),
                Unit::Composite(c) => (
                    index.composites[c].priority,
                    cluster.composite_pod_groups[c]
                        .creation_timestamp
                        .unwrap_or(i64::MAX),
                    index.composites[c].key.clone(),
                ),
            }
        };
        units.sort_by_cached_key(|u| {
            let (p, t, k) = key(u);
            (std::cmp::Reverse(p), t, k)
        });
    }

    /// The candidate domains for a unit with an optional topology key: (label value, nodes)
    /// tightest first, restricted to the domain of already-bound members, dropping domains
    /// whose free capacity cannot hold `demand_pods`' first `needed` pods.
    fn candidate_domains(
        &self,
        nodes: Option<&[NodeId]>,
        key: Option<&str>,
        bound: &[PodId],
        demand_pods: &[PodId],
        needed: usize,
    ) -> Vec<(Option<String>, Vec<NodeId>)> {
        let snap = &self.snapshot;
        let all: Vec<NodeId>;
        let nodes = match nodes {
            Some(n) => n,
            None => {
                all = snap.nodes().to_vec();
                &all
            }
        };
        let Some(key) = key else {
            return vec![(None, nodes.to_vec())];
        };
        let mut doms = domains(snap, nodes, key);
        let mut bound_values: Vec<Option<&String>> = bound
            .iter()
            .filter_map(|p| snap.node_of(*p))
            .map(|n| snap.cluster.nodes[n.index()].labels.get(key))
            .collect();
        bound_values.sort();
        bound_values.dedup();
        match bound_values.as_slice() {
            [] => {}
            [Some(v)] => doms.retain(|k, _| *k == v.as_str()),
            _ => doms.clear(),
        }
        // The least any `needed` of the pods ask, per resource (pods as one slot each).
        let total_cap = capacity_of(snap, nodes);
        let demand = min_demand(snap, demand_pods, needed.max(1));
        let dominant = (0..snap.width)
            .filter(|&r| total_cap[r] > 0)
            .max_by(|&a, &b| {
                (demand[a] as f64 / total_cap[a] as f64)
                    .total_cmp(&(demand[b] as f64 / total_cap[b] as f64))
                    .then(b.cmp(&a))
            })
            .unwrap_or(lockstep_model::ResourceId::PODS.index());
        let mut ranked: Vec<(i64, &str, Vec<NodeId>)> = doms
            .into_iter()
            .filter_map(|(value, members)| {
                let free = free_of(snap, &members);
                if free.iter().zip(&demand).any(|(f, d)| d > f) {
                    return None;
                }
                Some((free[dominant] - demand[dominant], value, members))
            })
            .collect();
        ranked.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        ranked
            .into_iter()
            .map(|(_, v, m)| (Some(v.to_string()), m))
            .collect()
    }

    /// Places `pods` on `nodes` (None: the whole cluster) trying the candidate orders until
    /// at least `target` fit. On success the placements stay assumed and the pods that did
    /// not fit are returned; on failure nothing stays and the best count is returned.
    fn search(
        &mut self,
        pods: &[PodId],
        nodes: Option<&[NodeId]>,
        target: usize,
    ) -> Result<Vec<(PodId, String)>, (usize, String)> {
        let capacity = match nodes {
            Some(n) => capacity_of(&self.snapshot, n),
            None => {
                let all: Vec<NodeId> = self.snapshot.nodes().to_vec();
                capacity_of(&self.snapshot, &all)
            }
        };
        let orders = candidate_orders(&self.snapshot, pods, &capacity);
        self.scopes += 1;
        let scope = if nodes.is_some() { self.scopes } else { 0 };
        let mut best = (0usize, String::new());
        for order in orders {
            self.score_sum = 0;
            let mark = self.log.len();
            let ties_mark = self.search_ties.len();
            let mut failed: Vec<(PodId, String)> = Vec::new();
            for &pod in &order {
                match self
                    .framework
                    .schedule_pod_on(&self.snapshot, pod, nodes, scope)
                {
                    Ok(node) => {
                        self.score_sum += self.framework.last_score;
                        if self.options.record_ties {
                            self.search_ties.push((pod, self.framework.tied.clone()));
                        }
                        self.assume(pod, node);
                    }
                    Err(e) => {
                        failed.push((pod, e.message(&self.snapshot)));
                        if pods.len() - failed.len() < target {
                            break;
                        }
                    }
                }
            }
            let placed = self.log.len() - mark;
            if placed >= target && placed > 0 {
                return Ok(failed);
            }
            if placed >= best.0 && best.1.is_empty() || placed > best.0 {
                let first = failed
                    .first()
                    .map(|(p, m)| format!("{}: {}", self.pod_key(*p), m))
                    .unwrap_or_default();
                best = (placed, first);
            }
            self.rollback(mark);
            self.search_ties.truncate(ties_mark);
        }
        if self.options.profile.gang_placement == GangPlacement::Search {
            let gang = Gang {
                pods: pods.to_vec(),
                target,
            };
            match self.whole_gang(&[gang], nodes) {
                Outcome::Placed(unplaced) => return Ok(unplaced),
                Outcome::Infeasible => {}
                Outcome::Exhausted => {
                    self.search_proven = false;
                    best.1 = append_note(&best.1, &self.search_stopped_note());
                }
            }
        } else if !self.one_by_one_is_exact(pods) {
            self.search_proven = false;
        }
        Err(best)
    }

    /// What a gang's message says when the whole-gang search reached its bound.
    pub(crate) fn search_stopped_note(&self) -> String {
        format!(
            "the whole-gang search reached its bound (gangSearchSteps: {}) without finding a placement",
            self.options.profile.gang_search_steps
        )
    }

    /// One group cycle for PodGroup `g` within `nodes` (None: the whole cluster).
    pub(crate) fn try_group(
        &mut self,
        index: &GroupIndex,
        g: usize,
        nodes: Option<&[NodeId]>,
    ) -> Attempt {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let pg = &cluster.pod_groups[g];
        let info = &index.groups[g];
        let pods = info.pending.clone();
        let needed = index.needed(&self.snapshot, g);
        let target = needed.max(1);
        let domain_list = self.candidate_domains(
            nodes,
            pg.topology_key.as_deref(),
            &info.bound,
            &pods,
            needed,
        );
        let mut best: Option<(usize, Option<String>, String)> = None;
        for (value, members) in &domain_list {
            let restrict = if pg.topology_key.is_some() {
                Some(members.as_slice())
            } else {
                nodes
            };
            match self.search(&pods, restrict, target) {
                Ok(failed) => {
                    let placed = pods.len() - failed.len();
                    let where_ = match (&pg.topology_key, value) {
                        (Some(k), Some(v)) => format!(" in {k}={v}"),
                        _ => String::new(),
                    };
                    let message = format!("{placed} of {} pending pods bound{where_}", pods.len());
                    return Attempt {
                        ok: true,
                        failed,
                        statuses: vec![(g, true, message.clone())],
                        message,
                    };
                }
                Err((placed, first)) => {
                    if best.as_ref().is_none_or(|b| placed > b.0) {
                        best = Some((placed, value.clone(), first));
                    }
                }
            }
        }
        let what = match pg.policy {
            GroupPolicy::Gang { min } => format!(
                "gang {}: {} of minCount {} pods fit",
                info.key,
                best.as_ref().map_or(0, |b| b.0) + index.running(&self.snapshot, g),
                min
            ),
            GroupPolicy::Basic => format!("pod group {}: no pod fits", info.key),
        };
        let mut message = what;
        if let Some(key) = &pg.topology_key {
            match &best {
                Some((n, Some(v), _)) => message += &format!("; best domain {key}={v} fits {n}"),
                _ => {
                    message += &format!("; no domain of {key} has room for the group");
                }
            }
        }
        if let Some((_, _, first)) = &best
            && !first.is_empty()
        {
            message += &format!("; {first}");
        }
        Attempt {
            ok: false,
            failed: pods.iter().map(|p| (*p, message.clone())).collect(),
            statuses: vec![(g, false, message.clone())],
            message,
        }
    }

    /// One cycle for a CompositePodGroup tree: at least `minGroupCount` ready children must
    /// fit together, each meeting its own gang condition, inside the composite's domain.
    pub(crate) fn try_composite(
        &mut self,
        index: &GroupIndex,
        c: usize,
        nodes: Option<&[NodeId]>,
    ) -> Attempt {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let cpg = &cluster.composite_pod_groups[c];
        let info = &index.composites[c];
        let need = match cpg.policy {
            GroupPolicy::Gang { min } => min as usize,
            GroupPolicy::Basic => 1,
        };
        let mut pending = Vec::new();
        index.composite_pending(c, &mut pending);
        let mut bound = Vec::new();
        index.composite_bound(c, &mut bound);
        // Children that can enter: ready groups and ready composites, largest first.
        let mut children: Vec<(Unit, usize, String)> = Vec::new();
        for &g in &info.groups {
            if index.group_ready(&cluster, g) {
                let n: usize = index.groups[g].pending.len();
                children.push((Unit::Group(g), n, index.groups[g].key.clone()));
            }
        }
        for &k in &info.composites {
            let (r, nk) = index.composite_ready(&cluster, k);
            if r >= nk.max(1) {
                let mut p = Vec::new();
                index.composite_pending(k, &mut p);
                children.push((Unit::Composite(k), p.len(), index.composites[k].key.clone()));
            }
        }
        children.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.2.cmp(&b.2)));
        // Aggregate precheck on the pods of the `need` smallest children is approximated by
        // all pending pods of the smallest children; domains are only a filter here.
        let domain_list =
            self.candidate_domains(nodes, cpg.topology_key.as_deref(), &bound, &pending, 1);
        let mut best: Option<(usize, Option<String>, Vec<String>)> = None;
        for (value, members) in &domain_list {
            let restrict = if cpg.topology_key.is_some() {
                Some(members.as_slice())
            } else {
                nodes
            };
            let mark = self.log.len();
            let mut ok_children = 0;
            let mut statuses = Vec::new();
            let mut failed = Vec::new();
            let mut notes = Vec::new();
            for (unit, _, _) in &children {
                let a = match *unit {
                    Unit::Group(g) => self.try_group(index, g, restrict),
                    Unit::Composite(k) => self.try_composite(index, k, restrict),
                    Unit::Pod(_) => unreachable!("children are groups"),
                };
                if a.ok {
                    ok_children += 1;
                } else {
                    notes.push(a.message.clone());
                }
                statuses.extend(a.statuses);
                failed.extend(a.failed);
            }
            if ok_children >= need && ok_children > 0 {
                let where_ = match (&cpg.topology_key, value) {
                    (Some(k), Some(v)) => format!(" in {k}={v}"),
                    _ => String::new(),
                };
                return Attempt {
                    ok: true,
                    message: format!(
                        "composite {}: {ok_children}/{} child groups bound{where_}",
                        info.key,
                        children.len()
                    ),
                    failed,
                    statuses,
                };
            }
            self.rollback(mark);
            // The children one after another failed: search for all of them at once, when
            // every ready child is needed and each is a PodGroup.
            if self.options.profile.gang_placement == GangPlacement::Search
                && need == children.len()
                && ok_children < need
            {
                let gangs: Option<Vec<(usize, Gang)>> = children
                    .iter()
                    .map(|(unit, _, _)| match *unit {
                        // A child's own topology constraint is met by the composite's domain
                        // only when it names the same key.
                        Unit::Group(g)
                            if cluster.pod_groups[g]
                                .topology_key
                                .as_ref()
                                .is_none_or(|k| Some(k) == cpg.topology_key.as_ref()) =>
                        {
                            Some((
                                g,
                                Gang {
                                    pods: index.groups[g].pending.clone(),
                                    target: index.needed(&self.snapshot, g).max(1),
                                },
                            ))
                        }
                        _ => None,
                    })
                    .collect();
                if let Some(gangs) = gangs {
                    let list: Vec<Gang> = gangs.iter().map(|(_, g)| g.clone()).collect();
                    match self.whole_gang(&list, restrict) {
                        Outcome::Placed(unplaced) => {
                            let where_ = match (&cpg.topology_key, value) {
                                (Some(k), Some(v)) => format!(" in {k}={v}"),
                                _ => String::new(),
                            };
                            let statuses = gangs
                                .iter()
                                .map(|(g, gang)| {
                                    let placed = gang
                                        .pods
                                        .iter()
                                        .filter(|p| self.snapshot.node_of(**p).is_some())
                                        .count();
                                    // As the child's own cycle reports it: its domain only
                                    // when it has a topology constraint of its own.
                                    let own = if cluster.pod_groups[*g].topology_key.is_some() {
                                        where_.as_str()
                                    } else {
                                        ""
                                    };
                                    let message = format!(
                                        "{placed} of {} pending pods bound{own}",
                                        gang.pods.len()
                                    );
                                    (*g, true, message)
                                })
                                .collect();
                            return Attempt {
                                ok: true,
                                message: format!(
                                    "composite {}: {need}/{} child groups bound{where_}",
                                    info.key,
                                    children.len()
                                ),
                                failed: unplaced,
                                statuses,
                            };
                        }
                        Outcome::Infeasible => {}
                        Outcome::Exhausted => {
                            let note = self.search_stopped_note();
                            notes.insert(0, note);
                        }
                    }
                }
            }
            if best.as_ref().is_none_or(|b| ok_children > b.0) {
                best = Some((ok_children, value.clone(), notes));
            }
        }
        let mut message = format!(
            "composite {}: {} of minGroupCount {} child groups fit",
            info.key,
            best.as_ref().map_or(0, |b| b.0),
            need
        );
        if let Some(key) = &cpg.topology_key {
            match &best {
                Some((n, Some(v), _)) => message += &format!("; best domain {key}={v} fits {n}"),
                _ => message += &format!("; no domain of {key} has room for the group"),
            }
        }
        if let Some((_, _, notes)) = &best
            && let Some(first) = notes.first()
        {
            message += &format!("; {first}");
        }
        let mut statuses = Vec::new();
        let mut groups = Vec::new();
        collect_groups(index, c, &mut groups);
        for g in groups {
            statuses.push((g, false, message.clone()));
        }
        Attempt {
            ok: false,
            failed: pending.iter().map(|p| (*p, message.clone())).collect(),
            statuses,
            message,
        }
    }
}

/// `text`, then `note` as a sentence of its own when `text` ends one, else after "; ".
fn append_note(text: &str, note: &str) -> String {
    if text.is_empty() {
        return note.to_string();
    }
    match text.strip_suffix('.') {
        Some(_) => {
            let mut chars = note.chars();
            let first: String = chars
                .next()
                .map(|c| c.to_uppercase().collect())
                .unwrap_or_default();
            format!("{text} {first}{}.", chars.as_str())
        }
        None => format!("{text}; {note}"),
    }
}

fn collect_groups(index: &GroupIndex, c: usize, out: &mut Vec<usize>) {
    out.extend(&index.composites[c].groups);
    for &k in &index.composites[c].composites {
        collect_groups(index, k, out);
    }
}

/// Convenience: one run over `cluster` with `options`.
pub fn schedule(cluster: &Cluster, options: Options) -> Result<Decisions, SetupError> {
    Ok(Scheduler::new(cluster, options)?.run())
}
