//! The Scheduler: the cluster state it decides on (`ClusterState`, changed through
//! [`Scheduler::apply`], with the change log the queue reads), and one scheduling pass:
//! the units (single pods, PodGroups, CompositePodGroup trees) in PrioritySort order, each
//! through its cycle — a pod cycle (`cycle`), a group cycle (`group_cycle`), preemption
//! when it fails (`preemption`) — and the decisions a front end reports. The queue between
//! passes is `queue`.

use lockstep_model::{Cluster, NodeId, Pod, PodId, WhenUnsatisfiable};

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
use crate::cycle::Framework;
use crate::group::{GroupIndex, Unit};
use crate::group_cycle::Attempt;
use crate::preemption::{Eviction, GangPreemption};
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
    /// Filter and score the nodes of a large cycle on two cores (see `Framework::scan_split`
    /// and `Framework::run_scores`). The decisions are the same either way.
    pub two_cores: bool,
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
            two_cores: true,
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

pub struct Scheduler {
    pub snapshot: ClusterState,
    pub(crate) framework: Framework,
    pub(crate) options: Options,
    /// Pods assumed inside the open transactions, in order.
    pub(crate) log: Vec<(PodId, NodeId)>,
    /// The last batching scope handed out (0 is the whole cluster).
    pub(crate) scopes: u64,
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
    pub(crate) search_proven: bool,
    /// Pods of the last `schedule` call whose unit failed without covering every placement.
    unproven: Vec<PodId>,
    /// With `Options::record_ties`: the ties of pods placed by group cycles' orders.
    pub(crate) search_ties: Vec<(PodId, Vec<NodeId>)>,
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
        framework.two_cores = options.two_cores;
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

    /// Scans whose nodes were filtered in two parts, and full cycles whose feasible nodes were
    /// scored in two parts (`Options::two_cores`).
    pub fn split_cycles(&self) -> (u64, u64) {
        (self.framework.split_scans, self.framework.split_scores)
    }

    pub(crate) fn pod_key(&self, id: PodId) -> String {
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

    /// One scheduling pass over `pending`: the pods and ready groups become units in queue
    /// order; each unit is tried (with preemption), and single pods that failed are tried
    /// again while bindings keep coming.
    fn schedule_with(
        &mut self,
        index: &GroupIndex,
        pending: &[PodId],
        mut decisions: Decisions,
    ) -> Decisions {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let mut statuses: Vec<Option<(bool, String)>> = vec![None; index.groups.len()];
        let mut units = self.pod_units(index, pending, &mut decisions);
        units.extend(self.group_units(index, &mut decisions, &mut statuses));
        self.sort_units(index, &mut units);

        let mut failed: Vec<(PodId, String)> = Vec::new();
        loop {
            let bound_before = decisions.bindings.len();
            for &unit in &units {
                match unit {
                    Unit::Pod(id) => {
                        if let Err(message) = self.place_pod(index, id, &mut decisions) {
                            failed.push((id, message));
                        }
                    }
                    Unit::Group(_) | Unit::Composite(_) => {
                        self.place_group_unit(index, unit, &mut decisions, &mut statuses);
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
        self.group_statuses(index, statuses, &mut decisions);
        decisions
    }

    /// The pending pods outside groups as units; pods of other schedulers are skipped, pods
    /// naming a missing PodGroup wait.
    fn pod_units(
        &self,
        index: &GroupIndex,
        pending: &[PodId],
        decisions: &mut Decisions,
    ) -> Vec<Unit> {
        let cluster = &self.snapshot.cluster;
        let mut units = Vec::new();
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
        units
    }

    /// The top-level groups and composites with pending pods as units once they are ready
    /// (minCount members present, enough child groups ready); the others' pods wait.
    fn group_units(
        &self,
        index: &GroupIndex,
        decisions: &mut Decisions,
        statuses: &mut [Option<(bool, String)>],
    ) -> Vec<Unit> {
        let cluster = &self.snapshot.cluster;
        let mut units = Vec::new();
        for (g, info) in index.groups.iter().enumerate() {
            if info.parent.is_some() || info.pending.is_empty() {
                continue;
            }
            if index.group_ready(cluster, g) {
                units.push(Unit::Group(g));
                continue;
            }
            let min = cluster.pod_groups[g].policy.min_members();
            let msg = format!(
                "waiting for pod group {} ({}/{} pods present)",
                info.key,
                info.pending.len() + info.bound.len(),
                min
            );
            for &p in &info.pending {
                decisions.waiting.push((p, msg.clone()));
            }
            statuses[g] = Some((false, msg));
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
            let (ready, need) = index.composite_ready(cluster, c);
            if ready >= need {
                units.push(Unit::Composite(c));
                continue;
            }
            let msg = format!(
                "waiting for composite pod group {} ({}/{} child groups ready)",
                info.key, ready, need
            );
            for p in pending {
                decisions.waiting.push((p, msg.clone()));
            }
            self.mark_subtree(index, c, &msg, statuses);
        }
        units
    }

    /// One pod's cycle, and preemption when it fits nowhere: the pod is assumed on its node,
    /// or the message saying why it is unschedulable is returned (empty unless explaining).
    fn place_pod(
        &mut self,
        index: &GroupIndex,
        id: PodId,
        decisions: &mut Decisions,
    ) -> Result<(), String> {
        let node = match self.framework.schedule_pod(&self.snapshot, id) {
            Ok(node) => {
                if self.options.record_ties {
                    decisions.ties.push((id, self.framework.tied.clone()));
                }
                node
            }
            Err(e) => match self.preempt_for_pod(index, id, decisions) {
                Some(node) => node,
                None if self.options.explain => {
                    return Err(self.unschedulable_message(index, id, &e));
                }
                None => return Err(String::new()),
            },
        };
        self.snapshot.assume(id, node);
        self.mark_placed(id);
        decisions.bindings.push((id, node));
        Ok(())
    }

    /// One group or composite: its group cycle (answered from the last failure when an
    /// identical gang just failed against the same state), preemption when it fails, and
    /// the bindings, failures and group statuses it decided.
    fn place_group_unit(
        &mut self,
        index: &GroupIndex,
        unit: Unit,
        decisions: &mut Decisions,
        statuses: &mut [Option<(bool, String)>],
    ) {
        let mark = self.log.len();
        let memo_key = self.unit_memo_key(index, unit);
        self.search_proven = !matches!(unit, Unit::Composite(_));
        let attempt = match self.remembered_failure(index, unit, memo_key.as_ref()) {
            Some(attempt) => attempt,
            None => {
                let mut attempt = self.try_unit(index, unit);
                if !attempt.ok
                    && let Some(after) = self.preempt_for_unit(index, unit, decisions)
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
            }
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
            statuses[g] = Some((ok, msg));
        }
    }

    /// The failed attempt of a gang with the same pods against the unchanged state, when
    /// there is one: this gang fails the same way.
    fn remembered_failure(
        &mut self,
        index: &GroupIndex,
        unit: Unit,
        key: Option<&UnitKey>,
    ) -> Option<Attempt> {
        let (Some(key), Some(f), Unit::Group(g)) = (key, &self.failed_unit, unit) else {
            return None;
        };
        if f.key != *key || f.generation != self.snapshot.generation {
            return None;
        }
        self.search_proven = f.proven;
        self.failures_reused += 1;
        let message = format!(
            "gang {}: does not fit, as gang {} with the same pods did not",
            index.groups[g].key, f.group
        );
        Some(Attempt {
            ok: false,
            failed: index.groups[g]
                .pending
                .iter()
                .map(|p| (*p, message.clone()))
                .collect(),
            statuses: vec![(g, false, message.clone())],
            message,
        })
    }

    /// `decisions.pod_groups`: each group with pending pods, by name.
    fn group_statuses(
        &self,
        index: &GroupIndex,
        statuses: Vec<Option<(bool, String)>>,
        decisions: &mut Decisions,
    ) {
        let cluster = &self.snapshot.cluster;
        for (g, status) in statuses.into_iter().enumerate() {
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

    fn sort_units(&self, index: &GroupIndex, units: &mut [Unit]) {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        // (priority, creation time, then the key `namespace/name` byte by byte, as the
        // key's string compares), without building the pods' keys.
        let key = |u: &Unit| -> (i32, i64, &str, Option<&str>) {
            match *u {
                Unit::Pod(p) => {
                    let pod = &cluster.pods[p.index()];
                    (
                        pod.priority,
                        pod.creation_timestamp.unwrap_or(i64::MAX),
                        &pod.namespace,
                        Some(&pod.name),
                    )
                }
                Unit::Group(g) => (
                    index.groups[g].priority,
                    cluster.pod_groups[g].creation_timestamp.unwrap_or(i64::MAX),
                    &index.groups[g].key,
                    None,
                ),
                Unit::Composite(c) => (
                    index.composites[c].priority,
                    cluster.composite_pod_groups[c]
                        .creation_timestamp
                        .unwrap_or(i64::MAX),
                    &index.composites[c].key,
                    None,
                ),
            }
        };
        fn text<'a>(head: &'a str, name: Option<&'a str>) -> impl Iterator<Item = u8> + 'a {
            let slash: &[u8] = if name.is_some() { b"/" } else { b"" };
            head.bytes()
                .chain(slash.iter().copied())
                .chain(name.unwrap_or_default().bytes())
        }
        units.sort_by(|a, b| {
            let (pa, ta, ha, na) = key(a);
            let (pb, tb, hb, nb) = key(b);
            pb.cmp(&pa)
                .then(ta.cmp(&tb))
                .then_with(|| text(ha, na).cmp(text(hb, nb)))
        });
    }
}

/// Convenience: one run over `cluster` with `options`.
pub fn schedule(cluster: &Cluster, options: Options) -> Result<Decisions, SetupError> {
    Ok(Scheduler::new(cluster, options)?.run())
}
