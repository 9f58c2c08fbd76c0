//! The discrete-event simulation.
//!
//! Time is whole seconds from the start of the trace. Events at one time are handled in this
//! order: completions (their pods are released), then arrivals (their pods become pending),
//! then a scheduling cycle. Ties inside a kind go by job index (the trace's arrival order),
//! so a run is a pure function of the trace and the policy.
//!
//! A scheduling cycle calls [`Scheduler::schedule`] on one scheduler that lives for the whole
//! run, whose snapshot keeps every placement assumed. Which pods a cycle offers follows
//! kube-scheduler's queueing hints, made exact by the engine's [`Queue`]: the pods that
//! became pending since the last cycle, and the pods that did not fit before and that a
//! change since may have helped (a node where room was freed now passes their filters; see
//! `lockstep_engine::queue`). A pod left out would not have fit, so the decisions are those
//! of offering every pending pod each cycle. Without `interval` a cycle runs at every event
//! time that changed something (and offers something); with it, cycles run at multiples of
//! the interval (the first one at or after the change).
//!
//! Preemption is the engine's: victims it reports in `Decisions::evictions` are applied before
//! its bindings. When every pod and group has the same priority, no preemption is possible,
//! and the engine is not asked to look for victims.
//!
//! A job runs once `min_pods` of its pods are bound (all of them, or a gang's `minCount`),
//! and completes `duration` seconds later, releasing its pods. An eviction (reported by the
//! engine's preemption in `Decisions::evictions`, or injected with [`Simulation::evict`])
//! sends the whole job back to pending, as a training job's controller restarts it: all its
//! bound pods are released, its progress is lost and counted as GPU-seconds lost (GPUs of
//! the job x seconds it had run), a stale completion is recognised by the job's epoch, and
//! another cycle at the same time offers the victims again.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::{Duration, Instant};

use lockstep_engine::SetupError;
use lockstep_engine::{Options, Queue, Scheduler};
use lockstep_model::{NodeId, PodId, ResourceId};

use crate::podset::PodSet;
use crate::policy::Policy;
use crate::trace::Trace;

/// How a run advances.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Seconds between scheduling cycles; `None`: a cycle at every event time.
    pub interval: Option<u64>,
    /// Stop at this simulated time (seconds); `None`: when no event is left.
    pub until: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Completion,
    Arrival,
    Cycle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: u64,
    kind: Kind,
    job: u32,
    epoch: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotArrived,
    Pending,
    Running,
    Done,
}

#[derive(Debug, Clone)]
struct JobState {
    phase: Phase,
    bound: usize,
    epoch: u32,
    pending_since: u64,
    start: u64,
    waited: u64,
    first_start: Option<u64>,
    end: Option<u64>,
    restarts: u32,
    lost_gpu_seconds: i64,
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    pub arrival: u64,
    /// When it first ran.
    pub first_start: Option<u64>,
    /// When it completed.
    pub end: Option<u64>,
    /// Total seconds it spent pending (over every restart).
    pub waited: u64,
    /// Times it was evicted and sent back to pending.
    pub restarts: u32,
    pub lost_gpu_seconds: i64,
    /// It was still pending when the run ended (still waiting, or never fitting).
    pub pending_at_end: bool,
}

/// The state after one batch of events; it holds until the next sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub time: u64,
    /// Milli-GPUs requested by bound pods (1000 per whole GPU).
    pub gpu_milli_allocated: i64,
    /// Milli-CPU requested by bound pods.
    pub cpu_allocated: i64,
    pub pending_jobs: u32,
    pub running_jobs: u32,
    /// Free milli-GPUs on nodes where no pending pod shape fits (see [`fragmented_gpus`]).
    pub fragmented_gpu_milli: i64,
    pub free_gpu_milli: i64,
}

/// One scheduling cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleRecord {
    pub time: u64,
    /// Pods offered to the engine.
    pub offered: u32,
    pub bound: u32,
}

/// One eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionRecord {
    pub time: u64,
    pub pod: PodId,
    pub job: u32,
    /// The job was running (its progress was lost).
    pub was_running: bool,
    pub gang: bool,
}

/// Everything a run produced. `cycle_wall` (the engine's wall time per cycle) is the only
/// part that is not a pure function of the trace and the policy.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub policy: Policy,
    pub options: SimOptions,
    pub end_time: u64,
    pub jobs: Vec<JobOutcome>,
    pub samples: Vec<Sample>,
    pub cycles: Vec<CycleRecord>,
    pub evictions: Vec<EvictionRecord>,
    pub gpu_capacity: i64,
    pub cpu_capacity: i64,
    /// Parallel to `cycles`.
    pub cycle_wall: Vec<Duration>,
    /// Wall time of the whole run.
    pub wall: Duration,
}

/// A simulation in progress over one trace under one policy.
pub struct Simulation<'t> {
    trace: &'t Trace,
    policy: Policy,
    options: SimOptions,
    scheduler: Scheduler,
    now: u64,
    events: BinaryHeap<Reverse<Event>>,
    jobs: Vec<JobState>,
    /// Job index of every pod (`u32::MAX` for pods of no job).
    pod_job: Vec<u32>,
    pod_node: Vec<Option<NodeId>>,
    /// Arrived pods not bound.
    pending: PodSet,
    /// How many pending pods have each GPU shape (pods with GPUs only).
    pending_shapes: BTreeMap<Shape, u32>,
    /// Pods that became pending since the last cycle.
    fresh: Vec<PodId>,
    /// Pending pods that did not fit, until a change may help them.
    queue: Queue,
    cycle_scheduled: Option<u64>,
    gpu_milli_allocated: i64,
    /// Milli-GPUs requested by the pods bound to each node.
    node_gpu_milli: Vec<i64>,
    /// Each GPU pod's shape (GPUs, CPU, memory), read once from the trace for the
    /// fragmentation samples; `None` for pods without GPUs.
    gpu_shapes: Vec<Option<Shape>>,
    cpu_allocated: i64,
    running_jobs: u32,
    pending_jobs: u32,
    samples: Vec<Sample>,
    cycles: Vec<CycleRecord>,
    cycle_wall: Vec<Duration>,
    evictions: Vec<EvictionRecord>,
    started: Instant,
    done_jobs: usize,
}

/// Why a simulation cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The setup error's text is part of this one's (not a separate cause), so a caller that
    /// prints the chain of causes prints it once.
    #[error("policy {policy}: {error}")]
    Config { policy: String, error: SetupError },
    /// The run would exceed one of [`crate::trace::limits`].
    #[error("{0}")]
    Limit(String),
}

impl<'t> Simulation<'t> {
    pub fn new(
        trace: &'t Trace,
        policy: Policy,
        options: SimOptions,
    ) -> Result<Simulation<'t>, SimError> {
        let engine_options = Options {
            profile: policy.profile.clone(),
            batching: policy.batching,
            preemption: policy.preemption && several_priorities(&trace.cluster),
            gang_preemption: policy.gang_preemption,
            // The simulator reports waits, not kube-scheduler's messages.
            explain: false,
            ..Options::default()
        };
        let scheduler =
            Scheduler::new(&trace.cluster, engine_options).map_err(|source| SimError::Config {
                policy: policy.name.clone(),
                error: source,
            })?;
        let cluster = &trace.cluster;
        let mut pod_job = vec![u32::MAX; cluster.pods.len()];
        for (j, job) in trace.jobs.iter().enumerate() {
            for p in &job.pods {
                pod_job[p.index()] = j as u32;
            }
        }
        let mut sim = Simulation {
            trace,
            options,
            now: 0,
            events: BinaryHeap::new(),
            jobs: vec![
                JobState {
                    phase: Phase::NotArrived,
                    bound: 0,
                    epoch: 0,
                    pending_since: 0,
                    start: 0,
                    waited: 0,
                    first_start: None,
                    end: None,
                    restarts: 0,
                    lost_gpu_seconds: 0,
                };
                trace.jobs.len()
            ],
            pod_job,
            pod_node: vec![None; cluster.pods.len()],
            pending: PodSet::default(),
            pending_shapes: BTreeMap::new(),
            fresh: Vec::new(),
            queue: Queue::new(),
            cycle_scheduled: None,
            gpu_milli_allocated: 0,
            node_gpu_milli: vec![0; cluster.nodes.len()],
            gpu_shapes: cluster
                .pods
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let gpus = trace.pod_gpu_milli.get(i).copied().unwrap_or(0);
                    (gpus > 0).then(|| Shape {
                        gpus,
                        cpu: p.requests.get(ResourceId::CPU),
                        memory: p.requests.get(ResourceId::MEMORY),
                    })
                })
                .collect(),
            cpu_allocated: 0,
            running_jobs: 0,
            pending_jobs: 0,
            samples: Vec::new(),
            cycles: Vec::new(),
            cycle_wall: Vec::new(),
            evictions: Vec::new(),
            started: Instant::now(),
            done_jobs: 0,
            scheduler,
            policy,
        };
        // Pods bound in the input already hold their nodes (the snapshot placed them).
        for (j, job) in trace.jobs.iter().enumerate() {
            if job.initially_running {
                for &p in &job.pods {
                    if let Some(node) = sim.scheduler.snapshot.node_of(p) {
                        sim.pod_node[p.index()] = Some(node);
                        sim.account(p, node, 1);
                        sim.jobs[j].bound += 1;
                    }
                }
                sim.jobs[j].phase = Phase::Running;
                sim.jobs[j].first_start = Some(0);
                sim.running_jobs += 1;
                if let Some(d) = job.duration {
                    sim.push(d, Kind::Completion, j, 0);
                }
            } else {
                sim.push(job.arrival, Kind::Arrival, j, 0);
            }
        }
        Ok(sim)
    }

    fn push(&mut self, time: u64, kind: Kind, job: usize, epoch: u32) {
        self.events.push(Reverse(Event {
            time,
            kind,
            job: job as u32,
            epoch,
        }));
    }

    /// The current simulated time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Jobs completed so far.
    pub fn done_jobs(&self) -> usize {
        self.done_jobs
    }

    /// The node a pod is bound to.
    pub fn node_of(&self, pod: PodId) -> Option<NodeId> {
        self.pod_node[pod.index()]
    }

    fn account(&mut self, pod: PodId, node: NodeId, sign: i64) {
        let p = &self.trace.cluster.pods[pod.index()];
        let milli = self
            .trace
            .pod_gpu_milli
            .get(pod.index())
            .copied()
            .unwrap_or(0);
        self.gpu_milli_allocated += sign * milli;
        if let Some(n) = self.node_gpu_milli.get_mut(node.index()) {
            *n += sign * milli;
        }
        self.cpu_allocated += sign * p.requests.get(ResourceId::CPU);
    }

    /// Handles every event at the next event time, then a scheduling cycle if one is due.
    /// Returns false when no event is left (or the `until` time is reached).
    pub fn step(&mut self) -> bool {
        let Some(Reverse(first)) = self.events.peek().copied() else {
            return false;
        };
        if self.options.until.is_some_and(|u| first.time > u) {
            self.now = self.options.until.unwrap_or(self.now);
            return false;
        }
        self.now = first.time;
        let mut cycle_due = false;
        let mut changed = false;
        while let Some(Reverse(e)) = self.events.peek().copied() {
            if e.time != self.now {
                break;
            }
            self.events.pop();
            match e.kind {
                Kind::Completion => changed |= self.complete(e.job as usize, e.epoch),
                Kind::Arrival => {
                    self.arrive(e.job as usize);
                    changed = true;
                }
                Kind::Cycle => {
                    self.cycle_scheduled = None;
                    cycle_due = true;
                }
            }
        }
        match self.options.interval {
            None => {
                if changed || cycle_due {
                    self.cycle();
                }
            }
            Some(interval) => {
                if cycle_due {
                    self.cycle();
                } else if changed && self.cycle_scheduled.is_none() {
                    let interval = interval.max(1);
                    let at = self.now.div_ceil(interval).saturating_mul(interval);
                    if at == self.now {
                        self.cycle();
                    } else {
                        self.cycle_scheduled = Some(at);
                        self.push(at, Kind::Cycle, 0, 0);
                    }
                }
            }
        }
        self.sample();
        true
    }

    fn arrive(&mut self, j: usize) {
        let trace = self.trace;
        let job = &trace.jobs[j];
        let state = &mut self.jobs[j];
        state.phase = Phase::Pending;
        state.pending_since = self.now;
        self.pending_jobs += 1;
        for &p in &job.pods {
            self.make_pending(p);
            self.fresh.push(p);
        }
    }

    /// Adds `p` to the pending pods.
    fn make_pending(&mut self, p: PodId) {
        if self.pending.insert(p)
            && let Some(shape) = self.gpu_shapes[p.index()]
        {
            *self.pending_shapes.entry(shape).or_default() += 1;
        }
    }

    /// Takes `p` out of the pending pods; returns whether it was there.
    fn unpend(&mut self, p: PodId) -> bool {
        if !self.pending.remove(p) {
            return false;
        }
        if let Some(shape) = self.gpu_shapes[p.index()]
            && let std::collections::btree_map::Entry::Occupied(mut e) =
                self.pending_shapes.entry(shape)
        {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
        true
    }

    /// Returns whether the completion was current (not made stale by an eviction).
    fn complete(&mut self, j: usize, epoch: u32) -> bool {
        let state = &self.jobs[j];
        if state.epoch != epoch || state.phase != Phase::Running {
            return false;
        }
        self.release_job(j);
        let state = &mut self.jobs[j];
        state.phase = Phase::Done;
        state.end = Some(self.now);
        self.running_jobs -= 1;
        self.done_jobs += 1;
        true
    }

    /// Unbinds every bound pod of job `j` and drops its pending pods.
    fn release_job(&mut self, j: usize) {
        let trace = self.trace;
        for &p in &trace.jobs[j].pods {
            if let Some(node) = self.pod_node[p.index()].take() {
                self.scheduler.release(p);
                self.account(p, node, -1);
            }
            self.unpend(p);
            self.queue.remove(p);
        }
        self.jobs[j].bound = 0;
    }

    /// Evicts a bound pod now: its whole job goes back to pending and, if it was running,
    /// loses its progress. Tests call this to inject preemptions.
    pub fn evict(&mut self, pod: PodId) {
        self.evict_all(&[pod]);
    }

    /// Evicts pods now (the victims of one cycle). Every victim is counted; each job they
    /// belong to is released and sent back to pending once.
    pub fn evict_all(&mut self, pods: &[PodId]) {
        let mut requeued: Vec<usize> = Vec::new();
        for &pod in pods {
            let j = self.pod_job[pod.index()];
            if j == u32::MAX {
                // A pod of no job (finished input pods): just take it off its node.
                self.scheduler.release(pod);
                continue;
            }
            let j = j as usize;
            let first = !requeued.contains(&j);
            if first && self.pod_node[pod.index()].is_none() {
                continue; // not bound: nothing to evict
            }
            let was_running = if first {
                self.jobs[j].phase == Phase::Running
            } else {
                self.evictions
                    .iter()
                    .rev()
                    .find(|e| e.job == j as u32)
                    .is_some_and(|e| e.was_running)
            };
            self.evictions.push(EvictionRecord {
                time: self.now,
                pod,
                job: j as u32,
                was_running,
                gang: self.trace.jobs[j].gang,
            });
            if first {
                requeued.push(j);
                self.requeue(j);
            }
        }
        if requeued.is_empty() {
            return;
        }
        match self.options.interval {
            None => self.push(self.now, Kind::Cycle, 0, 0),
            Some(interval) if self.cycle_scheduled.is_none() => {
                let interval = interval.max(1);
                let at = (self.now / interval)
                    .saturating_add(1)
                    .saturating_mul(interval);
                self.cycle_scheduled = Some(at);
                self.push(at, Kind::Cycle, 0, 0);
            }
            Some(_) => {}
        }
    }

    /// Releases job `j`'s pods and makes them pending again; a running job loses its
    /// progress.
    fn requeue(&mut self, j: usize) {
        let trace = self.trace;
        let job = &trace.jobs[j];
        let was_running = self.jobs[j].phase == Phase::Running;
        self.release_job(j);
        let now = self.now;
        if was_running {
            let milli: i64 = job
                .pods
                .iter()
                .map(|p| {
                    self.trace
                        .pod_gpu_milli
                        .get(p.index())
                        .copied()
                        .unwrap_or(0)
                })
                .sum();
            let state = &mut self.jobs[j];
            let seconds = i64::try_from(now - state.start).unwrap_or(i64::MAX);
            state.lost_gpu_seconds = state
                .lost_gpu_seconds
                .saturating_add(milli.saturating_mul(seconds) / 1000);
            state.restarts += 1;
            state.epoch += 1;
            state.phase = Phase::Pending;
            state.pending_since = now;
            self.running_jobs -= 1;
            self.pending_jobs += 1;
        }
        for &p in &job.pods {
            self.make_pending(p);
            self.fresh.push(p);
        }
    }

    fn cycle(&mut self) {
        let t0 = Instant::now();
        let mut offered: Vec<PodId> = self.queue.wake(&mut self.scheduler);
        offered.append(&mut self.fresh);
        offered.retain(|&p| self.pending.contains(p));
        offered.sort_unstable();
        offered.dedup();
        if offered.is_empty() {
            return;
        }
        let position = self.scheduler.change_position();
        let decisions = self.scheduler.schedule(&offered);
        self.cycle_wall.push(t0.elapsed());
        self.cycles.push(CycleRecord {
            time: self.now,
            offered: offered.len() as u32,
            bound: decisions.bindings.len() as u32,
        });
        // Victims first: their jobs go back to pending before the preemptors bind.
        if !decisions.evictions.is_empty() {
            let victims: Vec<PodId> = decisions.evictions.iter().map(|e| e.pod).collect();
            self.evict_all(&victims);
        }
        for &(pod, node) in &decisions.bindings {
            self.bind(pod, node);
        }
        // What did not fit waits for a change that may help it.
        let mut unproven: Vec<PodId> = self.scheduler.unproven_failures().to_vec();
        unproven.extend(decisions.waiting.iter().map(|(p, _)| *p));
        unproven.extend(decisions.skipped.iter().map(|(p, _)| *p));
        unproven.sort_unstable();
        for p in offered {
            if self.pending.contains(p) {
                let proven = unproven.binary_search(&p).is_err();
                self.queue.park(&self.scheduler, p, position, proven);
            }
        }
    }

    fn bind(&mut self, pod: PodId, node: NodeId) {
        if !self.unpend(pod) {
            return;
        }
        self.pod_node[pod.index()] = Some(node);
        self.account(pod, node, 1);
        let j = self.pod_job[pod.index()];
        if j == u32::MAX {
            return;
        }
        let j = j as usize;
        let job = &self.trace.jobs[j];
        let state = &mut self.jobs[j];
        state.bound += 1;
        if state.phase == Phase::Pending && state.bound >= job.min_pods {
            state.phase = Phase::Running;
            state.start = self.now;
            state.waited += self.now - state.pending_since;
            state.first_start.get_or_insert(self.now);
            let epoch = state.epoch;
            self.pending_jobs -= 1;
            self.running_jobs += 1;
            if let Some(d) = job.duration {
                self.push(self.now.saturating_add(d), Kind::Completion, j, epoch);
            }
        }
    }

    fn sample(&mut self) {
        let (fragmented, free) = self.fragmentation();
        let s = Sample {
            time: self.now,
            gpu_milli_allocated: self.gpu_milli_allocated,
            cpu_allocated: self.cpu_allocated,
            pending_jobs: self.pending_jobs,
            running_jobs: self.running_jobs,
            fragmented_gpu_milli: fragmented,
            free_gpu_milli: free,
        };
        match self.samples.last_mut() {
            Some(last) if last.time == s.time => *last = s,
            _ => self.samples.push(s),
        }
    }

    /// (fragmented, free) milli-GPUs now. GPUs are counted per node: a fractional pod
    /// "fits" a node whose free milli-GPUs add up to its request, even when they are spread
    /// over several partly shared devices.
    fn fragmentation(&self) -> (i64, i64) {
        let snap = &self.scheduler.snapshot;
        let shapes = pareto_minimal(self.pending_shapes.keys().copied().collect());
        fragmented_gpus(snap.num_nodes(), &shapes, |n| {
            let n = NodeId(n as u32);
            let free = |r| snap.allocatable(n, r) - snap.requested(n, r);
            Shape {
                gpus: self.trace.node_gpus[n.index()].saturating_mul(1000)
                    - self.node_gpu_milli[n.index()],
                cpu: free(ResourceId::CPU),
                memory: free(ResourceId::MEMORY),
            }
        })
    }

    /// Runs to the end; `progress(done_jobs, total_jobs)` is called now and then.
    pub fn run(mut self, progress: &mut dyn FnMut(usize, usize)) -> RunResult {
        let total = self.trace.jobs.len();
        let mut batches = 0u64;
        self.sample();
        while self.step() {
            batches += 1;
            if batches.is_multiple_of(128) {
                progress(self.done_jobs, total);
            }
        }
        progress(self.done_jobs, total);
        self.finish()
    }

    /// Ends the run at the current time.
    pub fn finish(self) -> RunResult {
        let end_time = self.now;
        let jobs = self
            .jobs
            .iter()
            .zip(&self.trace.jobs)
            .map(|(s, job)| JobOutcome {
                arrival: job.arrival,
                first_start: s.first_start,
                end: s.end,
                waited: s.waited
                    + if s.phase == Phase::Pending {
                        end_time - s.pending_since
                    } else {
                        0
                    },
                restarts: s.restarts,
                lost_gpu_seconds: s.lost_gpu_seconds,
                pending_at_end: s.phase == Phase::Pending,
            })
            .collect();
        RunResult {
            gpu_capacity: self.trace.gpus(),
            cpu_capacity: self.trace.capacity("cpu"),
            policy: self.policy,
            options: self.options,
            end_time,
            jobs,
            samples: self.samples,
            cycles: self.cycles,
            evictions: self.evictions,
            cycle_wall: self.cycle_wall,
            wall: self.started.elapsed(),
        }
    }
}

/// Whether the cluster has more than one priority level. With one, no pod or group can
/// preempt another (victims must have a lower priority), so the engine is not asked to try:
/// the decisions are the same and the cost of searching for victims is saved.
fn several_priorities(cluster: &lockstep_model::Cluster) -> bool {
    let mut levels = cluster
        .pods
        .iter()
        .map(|p| p.priority)
        .chain(cluster.pod_groups.iter().filter_map(|g| g.priority))
        .chain(
            cluster
                .composite_pod_groups
                .iter()
                .filter_map(|g| g.priority),
        );
    let Some(first) = levels.next() else {
        return false;
    };
    levels.any(|p| p != first)
}

/// The resources a pending pod asks for, or a node has free, for fragmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Shape {
    pub gpus: i64,
    pub cpu: i64,
    pub memory: i64,
}

impl Shape {
    fn fits_in(&self, free: &Shape) -> bool {
        self.gpus <= free.gpus && self.cpu <= free.cpu && self.memory <= free.memory
    }
}

/// The shapes no other shape is smaller than or equal to in every resource (a node that fits
/// any shape fits one of these).
pub fn pareto_minimal(mut shapes: Vec<Shape>) -> Vec<Shape> {
    shapes.sort_unstable();
    shapes.dedup();
    let mut out: Vec<Shape> = Vec::new();
    for s in shapes {
        if !out.iter().any(|m| m.fits_in(&s)) {
            out.push(s);
        }
    }
    out
}

/// Fragmentation: free GPUs that no pending pod shape can use. A node's free GPUs count as
/// fragmented when pending GPU pods exist and none of their shapes (GPUs, CPU, memory) fits
/// in the node's free resources. Node affinity, taints and gang topology are not considered.
/// Returns (fragmented, free) GPUs over all nodes.
pub fn fragmented_gpus(
    nodes: usize,
    shapes: &[Shape],
    free_of: impl Fn(usize) -> Shape,
) -> (i64, i64) {
    let mut fragmented = 0;
    let mut free_total = 0;
    for n in 0..nodes {
        let free = free_of(n);
        if free.gpus <= 0 {
            continue;
        }
        free_total += free.gpus;
        if !shapes.is_empty() && !shapes.iter().any(|s| s.fits_in(&free)) {
            fragmented += free.gpus;
        }
    }
    (fragmented, free_total)
}

/// Runs one policy over a trace to the end.
pub fn simulate(
    trace: &Trace,
    policy: Policy,
    options: SimOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunResult, SimError> {
    Ok(Simulation::new(trace, policy, options)?.run(progress))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preemption_needs_two_priority_levels() {
        use crate::trace::{JobSpec, PodShape, TraceBuilder, gib};
        let spec = |name: &str, class: Option<&str>| JobSpec {
            name: name.into(),
            arrival: 0,
            duration: Some(1),
            priority_class: class.map(str::to_string),
            pods: vec![PodShape::new(100, gib(1), 0)],
            gang: false,
            topology_key: None,
        };
        let mut b = TraceBuilder::new();
        b.priority_class("high", 1000);
        b.job(spec("a", None));
        b.job(spec("b", None));
        assert!(!several_priorities(&b.finish("one level").cluster));
        let mut b = TraceBuilder::new();
        b.priority_class("high", 1000);
        b.job(spec("a", None));
        b.job(spec("b", Some("high")));
        assert!(several_priorities(&b.finish("two levels").cluster));
    }

    #[test]
    fn pareto_keeps_only_minimal_shapes() {
        let s = |gpus, cpu, memory| Shape { gpus, cpu, memory };
        let out = pareto_minimal(vec![
            s(1, 4, 4),
            s(1, 8, 8),
            s(2, 2, 2),
            s(1, 4, 4),
            s(1, 2, 9),
        ]);
        assert_eq!(out, vec![s(1, 2, 9), s(1, 4, 4), s(2, 2, 2)]);
    }

    #[test]
    fn fragmentation_counts_unusable_free_gpus() {
        let s = |gpus, cpu, memory| Shape { gpus, cpu, memory };
        let nodes = [s(3, 10, 10), s(8, 10, 10), s(2, 0, 10), s(0, 10, 10)];
        let (frag, free) = fragmented_gpus(4, &[s(4, 1, 1)], |n| nodes[n]);
        assert_eq!((frag, free), (5, 13));
        let (frag, _) = fragmented_gpus(4, &[], |n| nodes[n]);
        assert_eq!(
            frag, 0,
            "no pending pods: free GPUs are idle, not fragmented"
        );
    }
}
