//! The pod scheduling cycle: PreFilter, Filter over nodes (stopping once enough feasible
//! nodes are found), PreScore/Score/NormalizeScore over the feasible nodes, and selection.
//!
//! A pod with `status.nominatedNodeName` tries that node first and takes it, without
//! scoring other nodes, when it passes every filter (kube-scheduler's fast path for the node
//! an earlier preemption made room on).
//!
//! Tie-breaking: among nodes with the highest total score the one with the lowest `NodeId`
//! (nodes are sorted by name, so the alphabetically first) wins. The node scan starts where
//! the previous cycle stopped (kube-scheduler's `nextStartNodeIndex`), so with
//! `percentageOfNodesToScore` below 100 successive pods look at successive windows.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use lockstep_model::{NodeId, Pod, PodId};

use crate::config::{ConfigError, Profile};
use crate::framework::{CycleState, Plugin, PreFilter, Reason, Signature};
use crate::state::ClusterState;
use crate::{helper, plugins};

const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
const MIN_FEASIBLE_NODES_PERCENTAGE: usize = 5;
/// From this many feasible nodes on, a cycle scores them on two cores (see
/// [`Framework::run_scores`]); below, handing half over costs more than it saves.
const SPLIT_SCORES: usize = 128;
/// A scan over this many nodes or more filters them on two cores (see
/// [`Framework::scan_split`]), in runs of at least this many.
const SPLIT_SCAN: usize = 256;
/// The unit of the helper's part of a split: it takes between a quarter and three quarters of
/// the nodes, moved by one unit a cycle towards both sides finishing together.
const SHARE_UNITS: usize = 64;

/// The helper's next share after a split whose `last` side finished last: the two cores need
/// not be equally fast (a busy machine, a core shared with another guest).
fn next_share(share: usize, last: helper::Last) -> usize {
    match last {
        helper::Last::Helper => (share - 1).max(SHARE_UNITS / 4),
        helper::Last::Caller => (share + 1).min(SHARE_UNITS * 3 / 4),
    }
}

/// Whether `node` passes every `active` filter; `reasons` holds (only) the reasons of the
/// filters that ran on it.
#[inline(always)]
fn passes_filters(
    filters: &[Box<dyn Plugin>],
    active: &[usize],
    snap: &ClusterState,
    pod: &Pod,
    state: &CycleState,
    node: NodeId,
    reasons: &mut Vec<Reason>,
) -> bool {
    reasons.clear();
    active
        .iter()
        .all(|&i| filters[i].filter(snap, pod, state, node, reasons))
}

/// Counts a failing node's reasons among a cycle's rejections.
fn count_reasons(failures: &mut FxHashMap<Reason, u32>, reasons: &[Reason]) {
    for r in reasons {
        *failures.entry(*r).or_insert(0) += 1;
    }
}

/// One side's part of a run of nodes in a scan on two cores.
#[derive(Debug, Default)]
struct ScanSide {
    /// The positions (in the scan's order) of the nodes that passed every filter.
    feasible: Vec<usize>,
    reasons: Vec<Reason>,
    /// The reasons of the nodes that failed, counted over the whole scan.
    failures: FxHashMap<Reason, u32>,
}

/// `numFeasibleNodesToFind` of kube-scheduler: all nodes below 100, else the configured
/// percentage (adaptive `50 - nodes/125`, at least 5%, when 0), never fewer than 100.
pub fn num_feasible_nodes_to_find(percentage: u32, num_nodes: usize) -> usize {
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND || percentage >= 100 {
        return num_nodes;
    }
    let mut p = percentage as usize;
    if p == 0 {
        p = 50usize.saturating_sub(num_nodes / 125);
        if p < MIN_FEASIBLE_NODES_PERCENTAGE {
            p = MIN_FEASIBLE_NODES_PERCENTAGE;
        }
    }
    (num_nodes * p / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// A cycle that found no node (see `Framework::failed`).
struct Failed {
    signature: Signature,
    scope: u64,
    generation: u64,
    error: FitError,
}

/// Why a pod fits no node: the number of nodes and how many were rejected for each reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    pub num_nodes: usize,
    pub reasons: Vec<(Reason, u32)>,
    /// Set when a PreFilter rejected the pod outright: its message, printed once.
    pub pre_filter: Option<String>,
    /// The plugin whose PreFilter rejected the pod, when one did.
    pub rejected_by: Option<&'static str>,
}

impl FitError {
    /// kube-scheduler's message: `0/5 nodes are available: 2 node(s) had untolerated
    /// taint(s), 3 Insufficient cpu.` Each fragment is `COUNT REASON`; the fragments are
    /// sorted as strings, counts included (so `10 ...` sorts before `2 ...`).
    pub fn message(&self, snap: &ClusterState) -> String {
        if self.num_nodes == 0 {
            return "no nodes available to schedule pods".into();
        }
        if let Some(m) = &self.pre_filter {
            return format!("0/{} nodes are available: {m}.", self.num_nodes);
        }
        let mut merged: Vec<(String, u32)> = Vec::new();
        for (r, n) in &self.reasons {
            add_reason(&mut merged, r.message(snap), *n);
        }
        nodes_available(self.num_nodes, merged)
    }
}

/// Adds `count` nodes rejected for `text` to a histogram of reasons.
pub(crate) fn add_reason(histogram: &mut Vec<(String, u32)>, text: String, count: u32) {
    match histogram.iter_mut().find(|(t, _)| *t == text) {
        Some(e) => e.1 += count,
        None => histogram.push((text, count)),
    }
}

/// `0/N nodes are available: ` and the histogram of reasons as kube-scheduler's
/// `FitError.Error` prints it: `COUNT REASON` fragments sorted as strings, joined with
/// `, `, and a final period.
pub(crate) fn nodes_available(num_nodes: usize, histogram: Vec<(String, u32)>) -> String {
    let mut parts: Vec<String> = histogram
        .into_iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect();
    parts.sort();
    let mut out = format!("0/{num_nodes} nodes are available:");
    if !parts.is_empty() {
        out.push(' ');
        out.push_str(&parts.join(", "));
        out.push('.');
    }
    out
}

/// Opportunistic batching state (KEP-5598): the feasible nodes of the last full cycle in
/// score order, for the next pods with the same signature.
struct Batch {
    signature: Signature,
    scope: u64,
    /// The snapshot generation at which the state is valid: right after the last pod it
    /// placed was assumed, and nothing else.
    generation: u64,
    /// The node the last pod went to; it is re-checked and re-scored for the next pod.
    last: NodeId,
    /// The other feasible nodes by (total score, lowest id).
    heap: BinaryHeap<(i64, Reverse<u32>, NodeId)>,
    /// Indexes of the scorers that ran in the full cycle.
    scorers: Vec<usize>,
}

/// The plugins of one profile, instantiated, and the reusable buffers of a cycle.
pub struct Framework {
    filters: Vec<Box<dyn Plugin>>,
    scorers: Vec<(Box<dyn Plugin>, i64)>,
    percentage: u32,
    next_start: usize,
    state: CycleState,
    active: Vec<usize>,
    reasons: Vec<Reason>,
    /// Rejections per reason in this cycle (Fx: SipHash showed in profiles of full clusters).
    failures: FxHashMap<Reason, u32>,
    feasible: Vec<NodeId>,
    /// Raw scores of the first (and with a split, the second) part of `feasible`, plugin
    /// after plugin; then one plugin's scores of every feasible node.
    raw: Vec<i64>,
    raw_second: Vec<i64>,
    scores: Vec<i64>,
    total: Vec<i64>,
    batching: bool,
    batch: Option<Batch>,
    /// The last full cycle that found no node, for a pod with a signature: an identical pod
    /// against the unchanged snapshot (same generation and scope) fails the same way.
    failed: Option<Failed>,
    signature: Signature,
    active_scorers: Vec<usize>,
    /// The total score of the node the last successful cycle chose.
    pub last_score: i64,
    /// The other nodes whose total score equalled the chosen node's in the last full
    /// cycle (kube-scheduler picks among such nodes at random; lockstep takes the
    /// lowest node id). Empty after a batched cycle or a single feasible node.
    pub tied: Vec<NodeId>,
    /// Score even a single feasible node (preemption compares placements by score).
    pub(crate) force_score: bool,
    /// Filter every candidate node (no sampling by percentageOfNodesToScore, no nominated
    /// node shortcut, the scan's start left alone): set by [`ranked`](Self::ranked).
    rank_all: bool,
    /// Cycles answered from the batch state, and full cycles (for reports and tests).
    pub batched_cycles: u64,
    pub full_cycles: u64,
    /// Filter and score the nodes of a large cycle on two cores (on by default; the verdicts
    /// and scores are the same either way).
    pub two_cores: bool,
    /// Scans whose nodes were filtered in two parts, and cycles whose feasible nodes were
    /// scored in two parts.
    pub split_scans: u64,
    pub split_scores: u64,
    /// The helper thread's part of the nodes to score, in [`SHARE_UNITS`]ths.
    helper_share: usize,
    /// The helper thread's part of a run of nodes to filter, in [`SHARE_UNITS`]ths.
    scan_share: usize,
    /// Each side's verdicts in a scan on two cores.
    scan_sides: [ScanSide; 2],
}

impl Framework {
    pub fn new(
        profile: &Profile,
        names: &lockstep_model::ResourceNames,
    ) -> Result<Self, ConfigError> {
        let make = |name: &str| {
            plugins::build(name, profile, names).ok_or_else(|| ConfigError::UnknownPlugin {
                name: name.into(),
                place: "profile".into(),
                known: String::new(),
            })
        };
        Ok(Framework {
            filters: profile
                .filters
                .iter()
                .map(|n| make(n))
                .collect::<Result<_, _>>()?,
            scorers: profile
                .scores
                .iter()
                .map(|(n, w)| make(n).map(|p| (p, *w)))
                .collect::<Result<_, _>>()?,
            percentage: profile.percentage_of_nodes_to_score,
            next_start: 0,
            state: CycleState::default(),
            active: Vec::new(),
            reasons: Vec::new(),
            failures: FxHashMap::default(),
            feasible: Vec::new(),
            raw: Vec::new(),
            raw_second: Vec::new(),
            scores: Vec::new(),
            total: Vec::new(),
            batching: true,
            batch: None,
            signature: Signature::default(),
            active_scorers: Vec::new(),
            failed: None,
            batched_cycles: 0,
            full_cycles: 0,
            two_cores: true,
            split_scans: 0,
            split_scores: 0,
            helper_share: SHARE_UNITS / 2,
            scan_share: SHARE_UNITS / 2,
            scan_sides: Default::default(),
            last_score: 0,
            tied: Vec::new(),
            force_score: false,
            rank_all: false,
        })
    }

    /// Whether a cycle over `num_nodes` nodes filters all of them (percentageOfNodesToScore
    /// leaves none out), so that the scan's rotating start changes no decision.
    pub fn scans_all(&self, num_nodes: usize) -> bool {
        num_feasible_nodes_to_find(self.percentage, num_nodes) >= num_nodes
    }

    /// Turns opportunistic batching on or off (on by default).
    pub fn set_batching(&mut self, on: bool) {
        self.batching = on;
        self.batch = None;
        self.failed = None;
    }

    /// Drops the batching state (a front end calls this when wall time has passed or the
    /// cluster changed in a way the snapshot generation does not show).
    pub fn expire_batch(&mut self) {
        self.batch = None;
        self.failed = None;
    }

    /// Whether `pod` passes every filter on `node` against the snapshot as it is (PreFilter
    /// state is computed afresh). Used by preemption to test a node with victims removed.
    pub fn fits_on(&mut self, snap: &ClusterState, pod_id: PodId, node: NodeId) -> bool {
        let pod = snap.pod(pod_id);
        self.state.pod = pod_id;
        self.active.clear();
        for (i, p) in self.filters.iter().enumerate() {
            match p.pre_filter(snap, pod, &mut self.state) {
                PreFilter::Run => self.active.push(i),
                PreFilter::RunOn(nodes, _) => {
                    if !nodes.contains(&node) {
                        return false;
                    }
                    self.active.push(i);
                }
                PreFilter::Skip => {}
                PreFilter::RejectAll(..) => return false,
            }
        }
        // The batching state describes a scan, not this probe.
        self.batch = None;
        self.passes(snap, pod, node)
    }

    /// Why `pod` does not fit `node` against the snapshot as it is (PreFilter state is
    /// computed afresh): the reasons of the first plugin that rejects it, as a full cycle
    /// would count them for that node (a PreFilter that rejects every node, or leaves this
    /// node out, gives its reason). Empty when the pod fits.
    pub(crate) fn rejection_on(
        &mut self,
        snap: &ClusterState,
        pod_id: PodId,
        node: NodeId,
    ) -> Vec<Reason> {
        self.rejections(snap, pod_id, &[node])
            .pop()
            .unwrap_or_default()
    }

    /// [`rejection_on`](Self::rejection_on) for each of `nodes`, with one PreFilter.
    pub(crate) fn rejections(
        &mut self,
        snap: &ClusterState,
        pod_id: PodId,
        nodes: &[NodeId],
    ) -> Vec<Vec<Reason>> {
        let pod = snap.pod(pod_id);
        self.state.pod = pod_id;
        self.active.clear();
        self.batch = None;
        // The plugins that narrowed the nodes (all named, as kube-scheduler names them), and
        // the nodes each kept.
        let mut bits = 0u8;
        let mut kept: Vec<Vec<NodeId>> = Vec::new();
        for (i, p) in self.filters.iter().enumerate() {
            match p.pre_filter(snap, pod, &mut self.state) {
                PreFilter::Run => self.active.push(i),
                PreFilter::RunOn(on, bit) => {
                    kept.push(on);
                    bits |= bit;
                    self.active.push(i);
                }
                PreFilter::Skip => {}
                PreFilter::RejectAll(r, _) => return vec![vec![r]; nodes.len()],
            }
        }
        nodes
            .iter()
            .map(|node| {
                if kept.iter().any(|on| !on.contains(node)) {
                    vec![Reason::not_in_pre_filter_result(bits)]
                } else if self.passes(snap, pod, *node) {
                    Vec::new()
                } else {
                    self.reasons.clone()
                }
            })
            .collect()
    }

    /// Computes the pod's signature into `self.signature`; false when some plugin cannot
    /// sign it.
    fn sign(&mut self, snap: &ClusterState, pod: &Pod) -> bool {
        self.signature.clear();
        let mut ok = true;
        for p in &self.filters {
            ok &= p.sign(snap, pod, &mut self.signature);
        }
        for (p, _) in &self.scorers {
            ok &= p.sign(snap, pod, &mut self.signature);
        }
        ok
    }

    /// The pod's signature, when every plugin can sign it: pods with equal signatures get
    /// the same verdict and score on every node, so they are interchangeable.
    pub(crate) fn signature_of(&mut self, snap: &ClusterState, pod_id: PodId) -> Option<Signature> {
        let pod = snap.pod(pod_id);
        let signed = self.sign(snap, pod);
        let out = signed.then(|| self.signature.clone());
        self.signature.clear();
        out
    }

    fn passes(&mut self, snap: &ClusterState, pod: &Pod, node: NodeId) -> bool {
        passes_filters(
            &self.filters,
            &self.active,
            snap,
            pod,
            &self.state,
            node,
            &mut self.reasons,
        )
    }

    /// Answers the cycle from the batching state when it is valid for this pod.
    fn try_batch(&mut self, snap: &ClusterState, pod: &Pod, scope: u64) -> Option<NodeId> {
        let valid = self.batch.as_ref().is_some_and(|b| {
            b.signature == self.signature && b.scope == scope && b.generation == snap.generation
        });
        if !valid {
            self.batch = None;
            return None;
        }
        let mut b = self.batch.take().expect("checked above");
        // The previous pod's node changed: re-check it and re-score it (the rescoring
        // extension); every other node is as the full cycle left it.
        if self.passes(snap, pod, b.last) {
            let total: i64 = b
                .scorers
                .iter()
                .map(|&i| {
                    let (p, w) = &self.scorers[i];
                    p.score(snap, pod, &self.state, b.last) * w
                })
                .sum();
            b.heap.push((total, Reverse(snap.rank(b.last)), b.last));
        }
        while let Some((score, _, node)) = b.heap.pop() {
            if self.passes(snap, pod, node) {
                self.last_score = score;
                b.last = node;
                b.generation = snap.generation + 1;
                self.batch = Some(b);
                self.batched_cycles += 1;
                return Some(node);
            }
        }
        None
    }

    /// Filters nodes (all, or `candidates`), starting where the previous scan stopped, until
    /// enough feasible nodes are found; counts the reasons of the nodes that fail.
    fn scan(&mut self, snap: &ClusterState, pod: &Pod, candidates: Option<&[NodeId]>, n: usize) {
        let want = if self.rank_all {
            n
        } else {
            num_feasible_nodes_to_find(self.percentage, n)
        };
        let start = if candidates.is_none() && !self.rank_all {
            self.next_start % n
        } else {
            0
        };
        let nodes = candidates.unwrap_or(snap.nodes());
        // The nodes from `start` on, then from the first (no division per node).
        let order = [&nodes[start..n], &nodes[..start]];
        let processed = if self.two_cores && n >= SPLIT_SCAN {
            self.split_scans += 1;
            self.scan_split(snap, pod, order, want)
        } else {
            let mut processed = 0;
            for &node in order[0].iter().chain(order[1]) {
                processed += 1;
                if self.passes(snap, pod, node) {
                    self.feasible.push(node);
                    if self.feasible.len() >= want {
                        break;
                    }
                } else {
                    count_reasons(&mut self.failures, &self.reasons);
                }
            }
            processed
        };
        if candidates.is_none() && !self.rank_all {
            self.next_start = (start + processed) % n;
        }
    }

    /// The scan of [`scan`](Self::scan) on two cores, with the same result: the nodes of
    /// `order` (two slices, one after the other) are filtered in runs of at least as many
    /// nodes as are still wanted, the helper thread taking the last part of each run; the
    /// feasible nodes are then taken in order until `want` are found (later verdicts are
    /// dropped, as the sequential scan never reaches those nodes). The reasons of the nodes
    /// that fail are only used when none is feasible, that is when every node was looked at,
    /// so each side counts them apart and they are added up only then. Returns how many
    /// nodes were looked at.
    fn scan_split(
        &mut self,
        snap: &ClusterState,
        pod: &Pod,
        order: [&[NodeId]; 2],
        want: usize,
    ) -> usize {
        let total = order[0].len() + order[1].len();
        let at = |k: usize| {
            if k < order[0].len() {
                order[0][k]
            } else {
                order[1][k - order[0].len()]
            }
        };
        let (filters, active, state) = (&self.filters, &self.active, &self.state);
        let filter_run = |from: usize, to: usize, side: &mut ScanSide| {
            side.feasible.clear();
            for k in from..to {
                if passes_filters(filters, active, snap, pod, state, at(k), &mut side.reasons) {
                    side.feasible.push(k);
                } else {
                    count_reasons(&mut side.failures, &side.reasons);
                }
            }
        };
        for side in &mut self.scan_sides {
            side.failures.clear();
        }
        let mut next = 0;
        while next < total {
            let need = want - self.feasible.len();
            let end = (next + need.max(SPLIT_SCAN)).min(total);
            let cut = end - (end - next) * self.scan_share / SHARE_UNITS;
            let [first, second] = &mut self.scan_sides;
            let (_, last) = helper::join(
                || filter_run(cut, end, second),
                || filter_run(next, cut, first),
            );
            self.scan_share = next_share(self.scan_share, last);
            for side in &self.scan_sides {
                for &k in &side.feasible {
                    self.feasible.push(at(k));
                    if self.feasible.len() >= want {
                        return k + 1;
                    }
                }
            }
            next = end;
        }
        for side in &self.scan_sides {
            for (r, count) in &side.failures {
                *self.failures.entry(*r).or_insert(0) += count;
            }
        }
        total
    }

    /// Runs one scheduling cycle for `pod` against `snap` and returns the chosen node. The
    /// snapshot is not changed: the caller assumes the pod onto the node.
    pub fn schedule_pod(&mut self, snap: &ClusterState, pod_id: PodId) -> Result<NodeId, FitError> {
        self.schedule_pod_on(snap, pod_id, None, 0)
    }

    /// As `schedule_pod`, restricted to `candidates` when given (a topology domain).
    /// `scope` names the candidate set for batching: the batching state of one scope is
    /// never used in another.
    pub fn schedule_pod_on(
        &mut self,
        snap: &ClusterState,
        pod_id: PodId,
        candidates: Option<&[NodeId]>,
        scope: u64,
    ) -> Result<NodeId, FitError> {
        let pod: &Pod = snap.pod(pod_id);
        self.tied.clear();
        // A pod with a nominated node is evaluated on that node first, never from the batch
        // state (kube-scheduler prefers the nomination to the batching hint).
        let signed = self.batching && pod.nominated_node_name.is_none() && self.sign(snap, pod);
        if signed {
            if let Some(node) = self.try_batch(snap, pod, scope) {
                return Ok(node);
            }
            if let Some(f) = &self.failed
                && f.signature == self.signature
                && f.scope == scope
                && f.generation == snap.generation
            {
                self.batched_cycles += 1;
                return Err(f.error.clone());
            }
        } else {
            self.batch = None;
        }
        self.full_cycles += 1;
        let result = self.full_cycle(snap, pod_id, candidates, scope, signed);
        self.failed = match (&result, signed) {
            (Err(error), true) => Some(Failed {
                signature: self.signature.clone(),
                scope,
                generation: snap.generation,
                error: error.clone(),
            }),
            _ => None,
        };
        result
    }

    /// Every node among `candidates` (None: all) where the pod passes every filter, best
    /// first: by total score, ties by name, as a full cycle would choose. Unlike
    /// [`schedule_pod_on`](Self::schedule_pod_on) no node is left out by sampling and the
    /// batching state is not used (and is dropped). The whole-gang search asks this.
    pub(crate) fn ranked(
        &mut self,
        snap: &ClusterState,
        pod_id: PodId,
        candidates: Option<&[NodeId]>,
    ) -> Result<Vec<NodeId>, FitError> {
        self.batch = None;
        self.rank_all = true;
        let force = std::mem::replace(&mut self.force_score, true);
        self.full_cycles += 1;
        let result = self.full_cycle(snap, pod_id, candidates, 0, false);
        self.rank_all = false;
        self.force_score = force;
        self.tied.clear();
        result?;
        let mut order: Vec<(i64, u32, NodeId)> = self
            .feasible
            .iter()
            .zip(&self.total)
            .map(|(&n, &t)| (-t, snap.rank(n), n))
            .collect();
        order.sort_unstable();
        Ok(order.into_iter().map(|(_, _, n)| n).collect())
    }

    /// The full cycle of [`schedule_pod_on`](Self::schedule_pod_on): PreFilter, Filter,
    /// Score, selection.
    fn full_cycle(
        &mut self,
        snap: &ClusterState,
        pod_id: PodId,
        candidates: Option<&[NodeId]>,
        scope: u64,
        signed: bool,
    ) -> Result<NodeId, FitError> {
        let pod: &Pod = snap.pod(pod_id);
        let n_all = candidates.map_or(snap.num_nodes(), <[NodeId]>::len);
        self.failures.clear();
        if n_all == 0 {
            return Err(FitError {
                num_nodes: 0,
                reasons: Vec::new(),
                pre_filter: None,
                rejected_by: None,
            });
        }
        let only = self.run_pre_filters(snap, pod_id, n_all)?;
        let restricted: Vec<NodeId>;
        let mut candidates = candidates;
        let mut outside = None;
        if let Some((mut nodes, bits)) = only {
            if let Some(c) = candidates {
                nodes.retain(|x| c.contains(x));
            }
            nodes.sort_by_key(|n| snap.rank(*n));
            nodes.dedup();
            outside = Some((
                (n_all - nodes.len()) as u32,
                Reason::not_in_pre_filter_result(bits),
            ));
            restricted = nodes;
            candidates = Some(&restricted);
        }
        self.run_filters(snap, pod, candidates);
        if self.feasible.is_empty() {
            let mut reasons: Vec<(Reason, u32)> =
                self.failures.iter().map(|(r, c)| (*r, *c)).collect();
            if let Some((count, r)) = outside
                && count > 0
            {
                reasons.push((r, count));
            }
            reasons.sort();
            return Err(FitError {
                num_nodes: n_all,
                reasons,
                pre_filter: None,
                rejected_by: None,
            });
        }
        if self.feasible.len() == 1 && !self.force_score {
            self.batch = None;
            self.last_score = 0;
            return Ok(self.feasible[0]);
        }
        self.run_scores(snap, pod);
        Ok(self.select(snap, scope, signed))
    }

    /// PreFilter: the filters that run for the pod (`active`), and the node set the
    /// PreFilters narrowed the cycle to with the bits naming them, if any; a PreFilter that
    /// rejects the pod outright ends the cycle (`n` nodes, none looked at).
    fn run_pre_filters(
        &mut self,
        snap: &ClusterState,
        pod_id: PodId,
        n: usize,
    ) -> Result<Option<(Vec<NodeId>, u8)>, FitError> {
        let pod = snap.pod(pod_id);
        self.state.pod = pod_id;
        self.active.clear();
        let mut only: Option<(Vec<NodeId>, u8)> = None;
        for (i, p) in self.filters.iter().enumerate() {
            match p.pre_filter(snap, pod, &mut self.state) {
                PreFilter::Run => self.active.push(i),
                PreFilter::RunOn(nodes, bit) => {
                    self.active.push(i);
                    only = Some(match only {
                        None => (nodes, bit),
                        Some((prev, bits)) => (
                            prev.into_iter().filter(|x| nodes.contains(x)).collect(),
                            bits | bit,
                        ),
                    });
                }
                PreFilter::Skip => {}
                PreFilter::RejectAll(r, message) => {
                    let message = message.unwrap_or_else(|| r.message(snap));
                    return Err(FitError {
                        num_nodes: n,
                        reasons: Vec::new(),
                        pre_filter: Some(message),
                        rejected_by: Some(p.name()),
                    });
                }
            }
        }
        Ok(only)
    }

    /// Filter: `feasible` from the candidate nodes (every node when `None`). The nominated
    /// node (`status.nominatedNodeName`) is tried first; when it passes every filter it is
    /// the only feasible node and the scan is skipped (nor does the scan's start move), as in
    /// kube-scheduler. When it fails, the scan counts it with the others.
    fn run_filters(&mut self, snap: &ClusterState, pod: &Pod, candidates: Option<&[NodeId]>) {
        let n = candidates.map_or(snap.num_nodes(), <[NodeId]>::len);
        self.feasible.clear();
        let nominated = pod
            .nominated_node_name
            .as_deref()
            .and_then(|name| snap.node_id(name))
            .filter(|node| candidates.is_none_or(|c| c.contains(node)));
        if !self.rank_all
            && let Some(node) = nominated
            && self.passes(snap, pod, node)
        {
            self.feasible.push(node);
        } else {
            self.scan(snap, pod, candidates, n);
        }
    }

    /// PreScore, Score and NormalizeScore of every scorer over `feasible`, summed with the
    /// weights into `total`.
    ///
    /// From [`SPLIT_SCORES`] feasible nodes on, the helper thread scores the last part of
    /// them while this one scores the first (every plugin's score of a node depends on that
    /// node alone); NormalizeScore then sees each plugin's scores of all the nodes in order.
    fn run_scores(&mut self, snap: &ClusterState, pod: &Pod) {
        let m = self.feasible.len();
        self.total.clear();
        self.total.resize(m, 0);
        self.active_scorers.clear();
        for (k, (p, _)) in self.scorers.iter().enumerate() {
            if p.pre_score(snap, pod, &mut self.state, &self.feasible) {
                self.active_scorers.push(k);
            }
        }
        let cut = if self.two_cores && m >= SPLIT_SCORES {
            self.split_scores += 1;
            m - m * self.helper_share / SHARE_UNITS
        } else {
            m
        };
        let (first, second) = self.feasible.split_at(cut);
        let (scorers, active, state) = (&self.scorers, &self.active_scorers, &self.state);
        let score_all = |nodes: &[NodeId], out: &mut Vec<i64>| {
            out.clear();
            for &k in active {
                scorers[k].0.score_nodes(snap, pod, state, nodes, out);
            }
        };
        let (raw, raw_second) = (&mut self.raw, &mut self.raw_second);
        if second.is_empty() {
            score_all(first, raw);
            raw_second.clear();
        } else {
            let (_, last) =
                helper::join(|| score_all(second, raw_second), || score_all(first, raw));
            self.helper_share = next_share(self.helper_share, last);
        }
        for (j, &k) in self.active_scorers.iter().enumerate() {
            let (p, weight) = &self.scorers[k];
            self.scores.clear();
            self.scores
                .extend_from_slice(&self.raw[j * cut..(j + 1) * cut]);
            let rest = m - cut;
            self.scores
                .extend_from_slice(&self.raw_second[j * rest..(j + 1) * rest]);
            p.normalize(&self.state, &self.feasible, &mut self.scores);
            for (t, s) in self.total.iter_mut().zip(&self.scores) {
                *t += s * weight;
            }
        }
    }

    /// Selection: the highest total, then the first node in name order; records the nodes
    /// tied with it and, for a signed pod, the batch state for the next identical pod.
    fn select(&mut self, snap: &ClusterState, scope: u64, signed: bool) -> NodeId {
        let mut best = 0;
        for i in 1..self.feasible.len() {
            let better = self.total[i] > self.total[best]
                || (self.total[i] == self.total[best]
                    && snap.rank(self.feasible[i]) < snap.rank(self.feasible[best]));
            if better {
                best = i;
            }
        }
        let chosen = self.feasible[best];
        self.last_score = self.total[best];
        let top = self.total[best];
        self.tied.extend(
            self.feasible
                .iter()
                .zip(&self.total)
                .filter(|(n, t)| **t == top && **n != chosen)
                .map(|(n, _)| *n),
        );
        self.batch = signed.then(|| Batch {
            signature: self.signature.clone(),
            scope,
            generation: snap.generation + 1,
            last: chosen,
            heap: self
                .feasible
                .iter()
                .zip(&self.total)
                .filter(|(n, _)| **n != chosen)
                .map(|(n, t)| (*t, Reverse(snap.rank(*n)), *n))
                .collect(),
            scorers: self.active_scorers.clone(),
        });
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_nodes_to_find_matches_kube_scheduler() {
        assert_eq!(num_feasible_nodes_to_find(0, 50), 50);
        assert_eq!(num_feasible_nodes_to_find(0, 100), 100);
        assert_eq!(num_feasible_nodes_to_find(0, 1000), 420);
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500);
        assert_eq!(num_feasible_nodes_to_find(0, 20000), 1000);
        assert_eq!(num_feasible_nodes_to_find(100, 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(1, 5000), 100);
        assert_eq!(num_feasible_nodes_to_find(30, 5000), 1500);
    }
}
