//! The Scheduler facade: orders the pending pods (PrioritySort), runs a cycle for each, and
//! collects the decisions a front end reports.

use lockstep_model::{Cluster, NodeId, Pod, PodId, WhenUnsatisfiable};

use crate::config::{ConfigError, Profile};
use crate::cycle::Framework;
use crate::snapshot::Snapshot;

/// Run options.
#[derive(Debug, Clone)]
pub struct Options {
    pub profile: Profile,
    /// Pending pods with one of these `schedulerName`s (or none) are scheduled; others are
    /// skipped.
    pub scheduler_names: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            profile: Profile::default(),
            scheduler_names: vec!["default-scheduler".into(), "lockstep".into()],
        }
    }
}

/// What a run decided. Pod ids index `Cluster::pods`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Placements made by this run, in the order they were made.
    pub bindings: Vec<(PodId, NodeId)>,
    pub unschedulable: Vec<(PodId, String)>,
    pub waiting: Vec<(PodId, String)>,
    pub skipped: Vec<(PodId, String)>,
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

/// Whether more bindings elsewhere can make this pod fit where it did not (required pod
/// affinity, hard topology spread); other failures only get worse as nodes fill.
fn may_fit_later(pod: &Pod) -> bool {
    !pod.pod_affinity.required.is_empty()
        || pod
            .topology_spread
            .iter()
            .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
}

pub struct Scheduler<'c> {
    pub snapshot: Snapshot<'c>,
    framework: Framework,
    options: Options,
}

impl<'c> Scheduler<'c> {
    pub fn new(cluster: &'c Cluster, options: Options) -> Result<Self, ConfigError> {
        Ok(Scheduler {
            framework: Framework::new(&options.profile, &cluster.resources)?,
            snapshot: Snapshot::new(cluster),
            options,
        })
    }

    fn accepts(&self, pod: &Pod) -> bool {
        pod.scheduler_name.is_empty() || self.options.scheduler_names.contains(&pod.scheduler_name)
    }

    /// Schedules every pending pod until nothing more can be placed.
    pub fn run(&mut self) -> Decisions {
        let cluster = self.snapshot.cluster;
        let mut decisions = Decisions::default();
        let mut queue: Vec<PodId> = Vec::new();
        for (i, pod) in cluster.pods.iter().enumerate() {
            let id = PodId(i as u32);
            if !pod.is_pending() {
                continue;
            }
            if !self.accepts(pod) {
                decisions
                    .skipped
                    .push((id, format!("schedulerName {}", pod.scheduler_name)));
            } else if let Some(group) = &pod.pod_group {
                decisions.waiting.push((
                    id,
                    format!("waiting for pod group {}/{}", pod.namespace, group),
                ));
            } else {
                queue.push(id);
            }
        }
        queue.sort_by(|a, b| queue_order(&cluster.pods[a.index()], &cluster.pods[b.index()]));

        let mut failed: Vec<(PodId, String)> = Vec::new();
        loop {
            let bound_before = decisions.bindings.len();
            for &id in &queue {
                match self.framework.schedule_pod(&self.snapshot, id) {
                    Ok(node) => {
                        self.snapshot.assume(id, node);
                        decisions.bindings.push((id, node));
                    }
                    Err(e) => failed.push((id, e.message(&self.snapshot))),
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
            queue = retry.into_iter().map(|(id, _)| id).collect();
        }
        decisions
    }
}

/// Convenience: one run over `cluster` with `options`.
pub fn schedule(cluster: &Cluster, options: Options) -> Result<Decisions, ConfigError> {
    Ok(Scheduler::new(cluster, options)?.run())
}
