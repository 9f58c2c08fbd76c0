//! The scheduling queue's unschedulable pods and the changes that may help them:
//! kube-scheduler's queueing hints, made exact.
//!
//! A pod that did not fit waits here ([`Queue::park`]) with the position of the
//! scheduler's [`ChangeLog`] at the start of the attempt that failed. [`Queue::wake`] hands
//! back the pods that a change logged since may have made schedulable, and keeps the others:
//!
//! - a pod whose filters look at other pods (required pod affinity or anti-affinity, hard
//!   topology spread) wakes on any change — a binding elsewhere can help it;
//! - a pod whose failure was not proven (a gang's pod-by-pod orders failed and the
//!   whole-gang search was off or stopped at its bound, a CompositePodGroup, a group that was
//!   not ready), any pod when preemption is on, and a gang's pod in a cluster too large for
//!   every node to be filtered (a failed gang attempt moves the rotating scan start with
//!   the placements it rolls back, so skipping it would change later decisions) wakes
//!   whenever room was freed anywhere;
//! - any other pod was rejected by every node through filters that look only at the node
//!   itself (resources, ports, taints, affinity to node labels, devices the node reaches).
//!   Bindings only take room, so it wakes only when a node where room was freed since now
//!   passes its filters (checked with [`Framework::fits_on`], answers shared by pods with
//!   the same signature). A gang's pods wake together when one of them does.
//!
//! Changes the log cannot place on one node (a release of devices other nodes reach too, of
//! a pod with required anti-affinity, any object change through `Scheduler::apply`) wake
//! every pod. A single pod's failed cycle leaves the rotating scan start where it was (it
//! filtered every node), so leaving it out changes nothing for the pods after it. Within
//! those rules a pod left parked would have failed had it been offered, so the decisions
//! are the same as offering every pending pod every time.

use rustc_hash::FxHashMap as HashMap;

use lockstep_model::{NodeId, Pod, PodId, WhenUnsatisfiable};

use crate::framework::Signature;
use crate::scheduler::Scheduler;

/// One logged change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logged {
    /// A pod left this node (it finished, was released or evicted).
    Freed(NodeId),
    /// Pods were placed.
    Placed,
    /// Anything else: no pod is known to be unaffected.
    Everything,
}

/// The changes of a scheduler's state that may help pods that did not fit, in order.
#[derive(Debug, Default)]
pub struct ChangeLog {
    entries: Vec<Logged>,
    /// The position of `entries[0]`.
    start: u64,
}

impl ChangeLog {
    /// The position after the last change.
    pub fn position(&self) -> u64 {
        self.start + self.entries.len() as u64
    }

    pub(crate) fn push(&mut self, change: Logged) {
        // Kept even when equal to the last one: a pod parked between the two needs it.
        self.entries.push(change);
    }

    /// The changes at or after `position` (all that are kept when it is older).
    fn since(&self, position: u64) -> &[Logged] {
        let from = position
            .saturating_sub(self.start)
            .min(self.entries.len() as u64);
        &self.entries[from as usize..]
    }

    /// Forgets the changes before `position`.
    fn trim(&mut self, position: u64) {
        let n = position
            .saturating_sub(self.start)
            .min(self.entries.len() as u64);
        self.entries.drain(..n as usize);
        self.start += n;
    }
}

/// When a parked pod wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// When a node freed since passes its filters.
    Fit,
    /// When room was freed anywhere.
    Freed,
    /// On any change.
    Any,
}

#[derive(Debug, Clone, Copy)]
struct Parked {
    pod: PodId,
    position: u64,
    wake: Wake,
    /// The pod's group (`namespace/podGroup`, interned) when it belongs to one.
    group: Option<u32>,
}

/// A pod's signature id not asked yet.
const UNSIGNED: u32 = u32::MAX;
/// A pod that cannot be signed.
const NO_SIGNATURE: u32 = u32::MAX - 1;
/// Not parked.
const NOT_PARKED: u32 = u32::MAX;

/// Pods that did not fit, each waiting for a change that may help it.
#[derive(Debug, Default)]
pub struct Queue {
    /// The parked pods, in no particular order.
    parked: Vec<Parked>,
    /// Per pod index: its place in `parked` (`NOT_PARKED` when it is not there).
    place: Vec<u32>,
    /// Group ids by namespace and name.
    group_ids: HashMap<String, HashMap<String, u32>>,
    /// Per pod index: the id of its signature, asked once (`UNSIGNED` before that,
    /// `NO_SIGNATURE` when it cannot be signed), kept while the pod is pending (a pod
    /// object that changes wakes it and is asked again).
    signature_of: Vec<u32>,
    signature_ids: HashMap<Signature, u32>,
}

/// Whether `pod`'s filters look at other pods (bindings anywhere can make it fit).
pub(crate) fn looks_at_other_pods(pod: &Pod) -> bool {
    !pod.pod_affinity.required.is_empty()
        || !pod.pod_anti_affinity.required.is_empty()
        || pod
            .topology_spread
            .iter()
            .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
}

impl Queue {
    pub fn new() -> Queue {
        Queue::default()
    }

    /// Pods waiting.
    pub fn len(&self) -> usize {
        self.parked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    pub fn contains(&self, pod: PodId) -> bool {
        self.place
            .get(pod.index())
            .is_some_and(|&at| at != NOT_PARKED)
    }

    /// Parks `pod`, which did not fit in an attempt that started at `position` of the
    /// scheduler's change log. `proven`: the attempt showed that no placement exists (a
    /// single pod that no node passes, a gang that the whole-gang search covered); see the
    /// module for what else decides when it wakes.
    pub fn park(&mut self, scheduler: &Scheduler, pod: PodId, position: u64, proven: bool) {
        let p = scheduler.snapshot.pod(pod);
        let scans_all = scheduler
            .framework
            .scans_all(scheduler.snapshot.num_nodes());
        let wake = if looks_at_other_pods(p) {
            Wake::Any
        } else if proven && !scheduler.options.preemption && (p.pod_group.is_none() || scans_all) {
            Wake::Fit
        } else {
            Wake::Freed
        };
        let group = p.pod_group.as_ref().map(|g| {
            let next = self.group_ids.values().map(HashMap::len).sum::<usize>() as u32;
            match self.group_ids.get(&p.namespace).and_then(|m| m.get(g)) {
                Some(&id) => id,
                None => {
                    self.group_ids
                        .entry(p.namespace.clone())
                        .or_default()
                        .insert(g.clone(), next);
                    next
                }
            }
        });
        let entry = Parked {
            pod,
            position,
            wake,
            group,
        };
        let i = pod.index();
        if i >= self.place.len() {
            self.place.resize(i + 1, NOT_PARKED);
        }
        match self.place[i] {
            NOT_PARKED => {
                self.place[i] = self.parked.len() as u32;
                self.parked.push(entry);
            }
            at => self.parked[at as usize] = entry,
        }
    }

    /// Takes `pod` out (it was placed, or is gone).
    pub fn remove(&mut self, pod: PodId) {
        self.unpark(pod);
        if let Some(s) = self.signature_of.get_mut(pod.index()) {
            *s = UNSIGNED;
        }
    }

    /// Takes `pod` out of `parked` (its signature stays known).
    fn unpark(&mut self, pod: PodId) {
        let Some(&at) = self.place.get(pod.index()) else {
            return;
        };
        if at == NOT_PARKED {
            return;
        }
        self.place[pod.index()] = NOT_PARKED;
        self.parked.swap_remove(at as usize);
        if let Some(moved) = self.parked.get(at as usize) {
            self.place[moved.pod.index()] = at;
        }
    }

    /// The id of `pod`'s signature, computed once while it waits.
    fn signature(&mut self, scheduler: &mut Scheduler, pod: PodId) -> Option<u32> {
        let i = pod.index();
        if i >= self.signature_of.len() {
            self.signature_of.resize(i + 1, UNSIGNED);
        }
        let id = match self.signature_of[i] {
            UNSIGNED => {
                let id = match scheduler.framework.signature_of(&scheduler.snapshot, pod) {
                    Some(sig) => {
                        let next = self.signature_ids.len() as u32;
                        *self.signature_ids.entry(sig).or_insert(next)
                    }
                    None => NO_SIGNATURE,
                };
                self.signature_of[i] = id;
                id
            }
            id => id,
        };
        (id != NO_SIGNATURE).then_some(id)
    }

    /// Takes out and returns, in id order, the pods a change since they were parked may
    /// have made schedulable (with every other parked pod of their groups).
    pub fn wake(&mut self, scheduler: &mut Scheduler) -> Vec<PodId> {
        let oldest = self.parked.iter().map(|p| p.position).min();
        let Some(oldest) = oldest else {
            let end = scheduler.changes.position();
            scheduler.changes.trim(end);
            return Vec::new();
        };
        let log = LogSummary::of(&scheduler.changes, oldest);
        // Per signature id: the latest position at which a node it fits now was freed.
        let mut latest_fit: HashMap<u32, Option<u64>> = HashMap::default();
        let mut woken: Vec<PodId> = Vec::new();
        let mut groups: Vec<u32> = Vec::new();
        let parked = std::mem::take(&mut self.parked);
        let mut kept: Vec<Parked> = Vec::with_capacity(parked.len());
        for entry in parked {
            let pod = entry.pod;
            // A pod placed or deleted by an object change since it was parked waits for
            // nothing (and must not answer for its signature).
            if !scheduler.snapshot.is_live(pod) || scheduler.snapshot.node_of(pod).is_some() {
                self.place[pod.index()] = NOT_PARKED;
                if let Some(s) = self.signature_of.get_mut(pod.index()) {
                    *s = UNSIGNED;
                }
                continue;
            }
            if entry.position < log.end
                && self.wakes(
                    scheduler,
                    pod,
                    entry.position,
                    entry.wake,
                    &log,
                    &mut latest_fit,
                )
            {
                self.place[pod.index()] = NOT_PARKED;
                woken.push(pod);
                groups.extend(entry.group);
            } else {
                kept.push(entry);
            }
        }
        if !groups.is_empty() {
            groups.sort_unstable();
            kept.retain(|entry| {
                let wakes = entry
                    .group
                    .is_some_and(|g| groups.binary_search(&g).is_ok());
                if wakes {
                    self.place[entry.pod.index()] = NOT_PARKED;
                    woken.push(entry.pod);
                }
                !wakes
            });
        }
        for (at, entry) in kept.iter().enumerate() {
            self.place[entry.pod.index()] = at as u32;
        }
        self.parked = kept;
        let oldest = self
            .parked
            .iter()
            .map(|p| p.position)
            .min()
            .unwrap_or(log.end);
        scheduler.changes.trim(oldest);
        woken.sort_unstable();
        woken
    }

    /// Whether a change logged since position `p` (where `pod` was parked) may help it,
    /// as its `wake` hint says; `latest_fit` keeps, per signature, the latest position at
    /// which a node the signature fits now was freed.
    fn wakes(
        &mut self,
        scheduler: &mut Scheduler,
        pod: PodId,
        p: u64,
        wake: Wake,
        log: &LogSummary,
        latest_fit: &mut HashMap<u32, Option<u64>>,
    ) -> bool {
        if log.last_everything.is_some_and(|at| at >= p) {
            return true;
        }
        match wake {
            Wake::Any => true,
            Wake::Freed => log.last_freed.is_some_and(|at| at >= p),
            Wake::Fit => match self.signature(scheduler, pod) {
                Some(sig) => {
                    let latest = match latest_fit.get(&sig) {
                        Some(l) => *l,
                        None => {
                            let l = log
                                .freed
                                .iter()
                                .find(|&&(_, n)| fits(scheduler, pod, n))
                                .map(|&(at, _)| at);
                            latest_fit.insert(sig, l);
                            l
                        }
                    };
                    latest.is_some_and(|at| at >= p)
                }
                None => log
                    .freed
                    .iter()
                    .take_while(|&&(at, _)| at >= p)
                    .any(|&(_, n)| fits(scheduler, pod, n)),
            },
        }
    }
}

/// The change log since the oldest parked pod, read in one pass: the last position of each
/// kind of change.
struct LogSummary {
    /// The log's end position.
    end: u64,
    last_everything: Option<u64>,
    last_freed: Option<u64>,
    /// Freed nodes with the last position each was freed at, the most recent first.
    freed: Vec<(u64, NodeId)>,
}

impl LogSummary {
    fn of(changes: &ChangeLog, oldest: u64) -> LogSummary {
        let end = changes.position();
        let since = changes.since(oldest);
        let base = end - since.len() as u64;
        let mut last_everything: Option<u64> = None;
        let mut last_freed: Option<u64> = None;
        // Read from the most recent change back: each node's first sighting is its last
        // freeing, and the list comes out most recent first.
        let mut seen: Vec<bool> = Vec::new();
        let mut freed: Vec<(u64, NodeId)> = Vec::new();
        for (k, c) in since.iter().enumerate().rev() {
            let at = base + k as u64;
            match *c {
                Logged::Everything => {
                    last_everything.get_or_insert(at);
                }
                Logged::Freed(n) => {
                    last_freed.get_or_insert(at);
                    let i = n.index();
                    if i >= seen.len() {
                        seen.resize(i + 1, false);
                    }
                    if !seen[i] {
                        seen[i] = true;
                        freed.push((at, n));
                    }
                }
                Logged::Placed => {}
            }
        }
        LogSummary {
            end,
            last_everything,
            last_freed,
            freed,
        }
    }
}

/// Whether `pod` passes every filter on `node` now.
fn fits(scheduler: &mut Scheduler, pod: PodId, node: NodeId) -> bool {
    scheduler.snapshot.is_node_live(node)
        && scheduler.framework.fits_on(&scheduler.snapshot, pod, node)
}
