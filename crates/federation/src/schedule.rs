//! One run over a federation: the bindings Karmada would schedule are taken in priority
//! order (then creation time, then key), each is filtered, scored, estimated, selected and
//! assigned as Karmada's scheduler does, and its placement is assumed before the next binding
//! (overcommit protection); a binding that does not fit and may preempt makes room on one
//! cluster (`preempt.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use lockstep_manifests::Source;
use serde::Serialize;

use crate::api::ClusterAffinity;
use crate::divide::{self, Candidate, Dynamic};
use crate::error::FederationError;
use crate::estimate::{Dense, Usage};
use crate::filter;
use crate::member::Member;
use crate::model::{Binding, Federation, Strategy};
use crate::spread::{self, Scored};

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Whether bindings with `preemptionPolicy: PreemptLowerPriority` may preempt.
    pub preemption: bool,
    /// `--member CLUSTER=PATH`: member clusters whose manifests are known.
    pub members: Vec<(String, Vec<Source>)>,
    /// `--estimator CLUSTER=ADDRESS`: member clusters whose scheduler estimator answers
    /// replica questions, as karmada-scheduler asks them.
    pub estimators: Vec<(String, std::sync::Arc<dyn ReplicaEstimator>)>,
}

/// A member cluster's scheduler estimator (karmada-scheduler-estimator, or `lockstep
/// estimator`): how many replicas of a binding's requirements fit on the member as it runs.
/// `None` when it gives no answer (unreachable, timed out, an error: Karmada's
/// UnauthenticReplica); the summary estimate is used then.
pub trait ReplicaEstimator: std::fmt::Debug + Send + Sync {
    fn max_available_replicas(&self, cluster: &str, binding: &Binding) -> Option<i64>;

    /// `MaxAvailableComponentSets`: how many whole component sets of a multi-component
    /// binding fit on `cluster`; `None` when the estimator gives no answer.
    fn max_available_component_sets(&self, _cluster: &str, _binding: &Binding) -> Option<i64> {
        None
    }

    /// The binding preemption proposal's `SelectVictims`: which of `candidates` (bindings'
    /// permanent ids, in reprieve order) must leave `cluster` for `replicas` replicas of
    /// `preemptor` to fit there. `None` when the estimator gives no answer; otherwise
    /// whether the preemptor fits at all once every candidate is gone, and the victims.
    fn select_victims(
        &self,
        _cluster: &str,
        _preemptor: &Binding,
        _replicas: i64,
        _candidates: &[String],
    ) -> Option<(bool, Vec<String>)> {
        None
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetReplicas {
    pub name: String,
    pub replicas: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placed {
    pub binding: String,
    pub clusters: Vec<TargetReplicas>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preemption {
    pub binding: String,
    pub cluster: String,
    pub preemptor: String,
    pub replicas: i64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unschedulable {
    pub binding: String,
    pub message: String,
}

/// One estimate of the last attempt to schedule a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EstimateRecord<'a> {
    pub binding: &'a str,
    pub cluster: &'a str,
    pub replicas: i64,
    /// `summary` or `member`: which estimator gave the (smaller) number.
    pub source: &'static str,
}

/// One estimate as a run keeps it (a large run has millions): the cluster's index, the
/// replicas (at most `i32::MAX`, as Karmada's estimators answer) and whether the member's
/// estimator gave the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Estimate {
    cluster: u32,
    replicas: i32,
    member: bool,
}

impl Estimate {
    fn new(cluster: usize, replicas: i64, source: &'static str) -> Estimate {
        Estimate {
            cluster: u32::try_from(cluster).unwrap_or(u32::MAX),
            replicas: i32::try_from(replicas).unwrap_or(if replicas < 0 {
                i32::MIN
            } else {
                i32::MAX
            }),
            member: source == "member",
        }
    }
}

/// The estimates of each binding's last scheduling attempt, by binding key and then cluster
/// name; serialized as the contract's list of [`EstimateRecord`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Estimates {
    /// Cluster names by index.
    clusters: Vec<String>,
    /// (binding key, its estimates in cluster order), by key.
    bindings: Vec<(String, Vec<Estimate>)>,
}

impl Estimates {
    pub fn iter(&self) -> impl Iterator<Item = EstimateRecord<'_>> {
        self.bindings.iter().flat_map(move |(key, list)| {
            list.iter().map(move |e| EstimateRecord {
                binding: key,
                cluster: &self.clusters[e.cluster as usize],
                replicas: i64::from(e.replicas),
                source: if e.member { "member" } else { "summary" },
            })
        })
    }

    pub fn len(&self) -> usize {
        self.bindings.iter().map(|(_, l)| l.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.iter().all(|(_, l)| l.is_empty())
    }
}

impl Serialize for Estimates {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// The outcome of a run, in the `federate` contract's shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Decisions {
    pub placements: Vec<Placed>,
    pub preemptions: Vec<Preemption>,
    pub unschedulable: Vec<Unschedulable>,
    pub unchanged: Vec<Placed>,
    pub estimates: Estimates,
}

/// The state a run changes: bindings' assignments, what they hold on each cluster, member
/// clusters' pods, and preemption claims.
#[derive(Debug)]
pub(crate) struct State {
    pub fed: Federation,
    /// Per cluster (index into `fed.clusters`).
    pub usage: Vec<Usage>,
    /// The usage's amounts and the summaries by resource id, for the summary estimate.
    dense: Dense,
    /// Per binding, an index into `has_api`: whether each cluster (by index) has the
    /// binding's API (bindings of one API share a list).
    api_of: Vec<usize>,
    has_api: Vec<Vec<bool>>,
    pub members: BTreeMap<usize, Member>,
    /// Cluster -> its scheduler estimator, and the answers it gave this run by binding (a
    /// member's estimator sees the member as it runs, which this run does not change).
    pub estimators: BTreeMap<usize, std::sync::Arc<dyn ReplicaEstimator>>,
    pub remote: BTreeMap<(usize, usize), Option<i64>>,
    /// Cluster -> (priority, binding) of the preemptor holding the room freed there.
    pub claims: BTreeMap<usize, (i64, usize)>,
    /// Estimates of the latest scheduling attempt of each binding, in cluster order.
    pub estimates: Vec<Vec<Estimate>>,
    pub recording: bool,
    /// [`State::affinity_matches`] of each distinct affinity list with selectors.
    affinity_masks: HashMap<String, Arc<[bool]>>,
    /// While preemption tries a binding against changes on one cluster at a time, what
    /// does not change between the attempts is kept here.
    pub trial: Option<Trial>,
}

/// Schedules a federation: see the module documentation and README's federation section.
pub fn schedule(fed: &Federation, options: &Options) -> Result<Decisions, FederationError> {
    let members = load_members(fed, options)?;
    schedule_with(fed.clone(), options, members)
}

/// Member clusters' manifests (`Options::members`) loaded for one federation's bindings:
/// each member's engine state with the bindings' shape pods. [`load_members`] makes them;
/// [`schedule_with`] runs on them, so that a caller can load once and time or repeat the run
/// alone.
#[derive(Debug)]
pub struct Members {
    /// Cluster index -> its member.
    by_cluster: BTreeMap<usize, Member>,
    /// The clusters and bindings they were loaded for, by count and key.
    clusters: Vec<String>,
    bindings: Vec<String>,
}

impl Members {
    /// Refuses members loaded for another federation: their shape pods are by binding index.
    fn check(&self, fed: &Federation) -> Result<(), FederationError> {
        let same = self.clusters.len() == fed.clusters.len()
            && self.bindings.len() == fed.bindings.len()
            && self
                .clusters
                .iter()
                .zip(&fed.clusters)
                .all(|(a, c)| *a == c.name)
            && self
                .bindings
                .iter()
                .zip(&fed.bindings)
                .all(|(a, b)| *a == b.key);
        if same {
            Ok(())
        } else {
            Err(FederationError::input(
                "the member clusters were loaded for other clusters or bindings than those \
                 being scheduled; load them for this federation",
            ))
        }
    }
}

/// Loads the member clusters of `options.members` for `fed`'s bindings: names checked first,
/// in order (an unknown or repeated cluster is the error), then the manifests side by side on
/// every core (the first member in order that fails to load is the one reported).
pub fn load_members(fed: &Federation, options: &Options) -> Result<Members, FederationError> {
    // The members' clusters first (in order, so the first bad name is the one reported),
    // then their manifests, loaded side by side on every core.
    let mut member_clusters: Vec<(usize, &String, &Vec<Source>)> = Vec::new();
    for (name, sources) in &options.members {
        let Ok(c) = fed.clusters.binary_search_by(|c| c.name.as_str().cmp(name)) else {
            let known: Vec<&str> = fed.clusters.iter().map(|c| c.name.as_str()).collect();
            return Err(FederationError::Member {
                cluster: name.clone(),
                message: format!(
                    "no Cluster named {name:?} in the input (clusters: {}); give a Cluster \
                         object for it or fix the name",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            });
        };
        if member_clusters.iter().any(|&(m, _, _)| m == c) {
            return Err(FederationError::Member {
                cluster: name.clone(),
                message: "given twice; give each member cluster once".into(),
            });
        }
        member_clusters.push((c, name, sources));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut loaded: Vec<Result<Member, FederationError>> = Vec::new();
    for batch in member_clusters.chunks(threads) {
        std::thread::scope(|scope| {
            let bindings = &fed.bindings;
            let handles: Vec<_> = batch
                .iter()
                .map(|&(_, name, sources)| {
                    scope.spawn(move || Member::load(name, sources, bindings))
                })
                .collect();
            loaded.extend(handles.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }));
        });
    }
    let mut members = BTreeMap::new();
    for (&(c, _, _), member) in member_clusters.iter().zip(loaded) {
        members.insert(c, member?);
    }
    Ok(Members {
        by_cluster: members,
        clusters: fed.clusters.iter().map(|c| c.name.clone()).collect(),
        bindings: fed.bindings.iter().map(|b| b.key.clone()).collect(),
    })
}

/// [`schedule`] on members already loaded for `fed` by [`load_members`]. The run changes
/// the federation's bindings and the members as it goes, so it takes them over (a caller
/// that keeps its input passes a copy).
pub fn schedule_with(
    fed: Federation,
    options: &Options,
    members: Members,
) -> Result<Decisions, FederationError> {
    let mut state = State::new(fed, options, members)?;
    let mut queue: BTreeSet<(i64, i64, String, usize)> = BTreeSet::new();
    let order = |b: &Binding, i: usize| {
        (
            -b.priority,
            b.creation.unwrap_or(i64::MAX),
            b.key.clone(),
            i,
        )
    };
    for (i, b) in state.fed.bindings.iter().enumerate() {
        if b.needs_scheduling && !b.suspended {
            queue.insert(order(b, i));
        }
    }
    let mut outcome: BTreeMap<usize, Result<(), String>> = BTreeMap::new();
    let mut preemptions = Vec::new();
    while let Some(entry) = queue.pop_first() {
        let i = entry.3;
        state.recording = true;
        state.estimates[i].clear();
        let result = state.try_schedule(i);
        state.recording = false;
        match result {
            Ok(assignment) => {
                state.place(i, assignment);
                outcome.insert(i, Ok(()));
            }
            Err(message) => {
                let preempted = if options.preemption {
                    crate::preempt::preempt(&mut state, i)
                } else {
                    None
                };
                match preempted {
                    None => {
                        outcome.insert(i, Err(message));
                    }
                    Some(done) => {
                        let preemptor = state.fed.bindings[i].key.clone();
                        for (j, c, replicas) in &done.victims {
                            let victim = &mut state.fed.bindings[*j];
                            preemptions.push(Preemption {
                                binding: victim.key.clone(),
                                cluster: state.fed.clusters[*c].name.clone(),
                                preemptor: preemptor.clone(),
                                replicas: *replicas,
                                reason: "BindingPreempted".into(),
                            });
                            queue.insert(order(victim, *j));
                        }
                        state.recording = true;
                        state.estimates[i].clear();
                        let again = state.try_schedule(i);
                        state.recording = false;
                        match again {
                            Ok(a) => {
                                state.place(i, a);
                                outcome.insert(i, Ok(()));
                            }
                            // Cannot happen: the preemption was tried on this very state.
                            Err(m) => {
                                outcome.insert(i, Err(m));
                            }
                        }
                    }
                }
            }
        }
    }
    let mut d = Decisions {
        preemptions,
        ..Decisions::default()
    };
    for (i, b) in state.fed.bindings.iter().enumerate() {
        let mut clusters: Vec<TargetReplicas> = b
            .clusters
            .iter()
            .map(|(n, r)| TargetReplicas {
                name: n.clone(),
                replicas: *r,
            })
            .collect();
        clusters.sort_by(|a, b| a.name.cmp(&b.name));
        let placed = Placed {
            binding: b.key.clone(),
            clusters,
        };
        match outcome.get(&i) {
            None => d.unchanged.push(placed),
            Some(Ok(())) => d.placements.push(placed),
            Some(Err(m)) => d.unschedulable.push(Unschedulable {
                binding: b.key.clone(),
                message: m.clone(),
            }),
        }
    }
    // Bindings by key and clusters by index (name order): the list comes out sorted (one
    // attempt records each feasible cluster once, in index order).
    let mut by_key: Vec<usize> = (0..state.fed.bindings.len())
        .filter(|&b| !state.estimates[b].is_empty())
        .collect();
    by_key.sort_by(|a, b| state.fed.bindings[*a].key.cmp(&state.fed.bindings[*b].key));
    d.estimates = Estimates {
        clusters: state.fed.clusters.iter().map(|c| c.name.clone()).collect(),
        bindings: by_key
            .into_iter()
            .map(|b| {
                let list = std::mem::take(&mut state.estimates[b]);
                (state.fed.bindings[b].key.clone(), list)
            })
            .collect(),
    };
    d.placements.sort_by(|a, b| a.binding.cmp(&b.binding));
    d.unchanged.sort_by(|a, b| a.binding.cmp(&b.binding));
    d.unschedulable.sort_by(|a, b| a.binding.cmp(&b.binding));
    d.preemptions
        .sort_by(|a, b| (&a.binding, &a.cluster).cmp(&(&b.binding, &b.cluster)));
    Ok(d)
}

impl State {
    pub fn new(
        fed: Federation,
        options: &Options,
        members: Members,
    ) -> Result<State, FederationError> {
        members.check(&fed)?;
        let mut usage = vec![Usage::default(); fed.clusters.len()];
        let mut dense = Dense::new(&fed.clusters, &fed.bindings);
        for (i, b) in fed.bindings.iter().enumerate() {
            for (name, r) in &b.clusters {
                if let Ok(c) = fed.clusters.binary_search_by(|c| c.name.as_str().cmp(name)) {
                    usage[c].add(i, b, *r);
                    dense.add(c, i, *r);
                }
            }
        }
        let n = fed.bindings.len();
        let mut apis: BTreeMap<&(String, String), usize> = BTreeMap::new();
        let mut has_api = Vec::new();
        let api_of = fed
            .bindings
            .iter()
            .map(|b| {
                *apis.entry(&b.gvk).or_insert_with(|| {
                    has_api.push(
                        fed.clusters
                            .iter()
                            .map(|c| c.apis.contains(&b.gvk))
                            .collect(),
                    );
                    has_api.len() - 1
                })
            })
            .collect();
        let members = members.by_cluster;
        let mut estimators = BTreeMap::new();
        for (name, estimator) in &options.estimators {
            let Ok(c) = fed.clusters.binary_search_by(|c| c.name.as_str().cmp(name)) else {
                return Err(FederationError::Member {
                    cluster: name.clone(),
                    message: format!(
                        "--estimator names no Cluster of the input ({name:?}); give a Cluster \
                         object for it or fix the name"
                    ),
                });
            };
            if estimators.insert(c, estimator.clone()).is_some() {
                return Err(FederationError::Member {
                    cluster: name.clone(),
                    message: "has two estimators; give one --estimator per cluster".into(),
                });
            }
        }
        Ok(State {
            fed,
            usage,
            dense,
            api_of,
            has_api,
            members,
            estimators,
            remote: BTreeMap::new(),
            claims: BTreeMap::new(),
            estimates: vec![Vec::new(); n],
            recording: false,
            affinity_masks: HashMap::new(),
            trial: None,
        })
    }

    /// Replicas of binding `i` cluster `c` can take now (Karmada's AllocatableReplicas).
    pub fn estimate(&mut self, i: usize, c: usize) -> i64 {
        let (replicas, source) = self.estimate_with_source(i, c);
        if self.recording && self.fed.bindings[i].is_workload() {
            self.estimates[i].push(Estimate::new(c, replicas, source));
        }
        replicas
    }

    fn estimate_with_source(&mut self, i: usize, c: usize) -> (i64, &'static str) {
        let b = &self.fed.bindings[i];
        let cluster = &self.fed.clusters[c];
        let from_member = self.members.contains_key(&c) || self.estimators.contains_key(&c);
        let source = if from_member { "member" } else { "summary" };
        if !b.is_workload() {
            return (b.replicas, source);
        }
        if !cluster.ready {
            return (0, source);
        }
        if let Some(&(priority, holder)) = self.claims.get(&c)
            && holder != i
            && b.priority <= priority
        {
            return (0, source);
        }
        let summary =
            self.dense
                .summary_estimate(c, cluster, &self.usage[c], i, &self.fed.bindings);
        // A member's manifests and its estimator count replicas, or whole component sets
        // for a multi-component binding (`MaxAvailableComponentSets`, as Karmada asks).
        let exact = self.members.get_mut(&c).map(|m| m.estimate(i));
        let remote = match self.estimators.get(&c) {
            Some(e) => *self.remote.entry((i, c)).or_insert_with(|| {
                let (cluster, binding) = (&self.fed.clusters[c].name, &self.fed.bindings[i]);
                if binding.components.is_empty() {
                    e.max_available_replicas(cluster, binding)
                } else {
                    e.max_available_component_sets(cluster, binding)
                }
            }),
            None => None,
        };
        // Karmada takes the smallest of the answers it has.
        let member = match (exact, remote) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        };
        let (replicas, source) = match (summary, member) {
            (Some(s), Some(m)) if m <= s => (m, "member"),
            (Some(s), _) => (s, "summary"),
            (None, Some(m)) => (m, "member"),
            (None, None) => (0, "summary"),
        };
        (replicas.min(i64::from(i32::MAX)), source)
    }

    /// Schedules binding `i` against the current state without changing it: its new
    /// assignment, or why it cannot be placed (Karmada's message). ClusterAffinities terms
    /// are tried in order from the observed one (the first under a fresh reschedule); the
    /// first term's error is reported when none fits.
    pub fn try_schedule(&mut self, i: usize) -> Result<Vec<(String, i64)>, String> {
        self.schedule_terms(i, false)
    }

    /// Whether [`State::try_schedule`] would place binding `i`, without dividing its
    /// replicas where the division cannot fail.
    pub fn fits(&mut self, i: usize) -> bool {
        self.schedule_terms(i, true).is_ok()
    }

    fn schedule_terms(&mut self, i: usize, check: bool) -> Result<Vec<(String, i64)>, String> {
        let b = &self.fed.bindings[i];
        let terms = b.placement.cluster_affinities.len();
        if terms == 0 {
            return self.attempt(i, 0, check);
        }
        let start = if b.fresh {
            0
        } else {
            b.placement
                .cluster_affinities
                .iter()
                .position(|t| t.affinity_name == b.observed_affinity)
                .unwrap_or(0)
        };
        let mut first = None;
        for t in start..terms {
            match self.attempt(i, t, check) {
                Ok(a) => return Ok(a),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or_default())
    }

    /// The clusters binding `i` may use under affinity term `term`, and the reasons of the
    /// others.
    pub fn feasible(&mut self, i: usize, term: usize) -> (Vec<usize>, Vec<String>) {
        let affinities = filter::affinities(&self.fed.bindings[i], term);
        let matching = self.affinity_matches(&affinities);
        let b = &self.fed.bindings[i];
        let mut ok = Vec::new();
        let mut reasons = Vec::new();
        for (c, cluster) in self.fed.clusters.iter().enumerate() {
            let has_api = self.has_api[self.api_of[i]][c];
            let affine = matching.as_ref().is_none_or(|m| m[c]);
            let pass = filter::passes_with(b, cluster, affine, has_api);
            debug_assert_eq!(pass, filter::filter(b, cluster, &affinities).is_ok());
            if pass {
                ok.push(c);
            }
        }
        // Reasons are only shown when no cluster fits.
        if ok.is_empty() {
            for cluster in &self.fed.clusters {
                if let Err(r) = filter::filter(b, cluster, &affinities) {
                    reasons.push(r);
                }
            }
        }
        (ok, reasons)
    }

    /// [`filter::matching`] for binding affinities; `None` when there are none (every
    /// cluster matches). Lists with selectors are matched once per run (the verdicts only
    /// depend on the clusters' static properties); lists naming their clusters are cheap.
    fn affinity_matches(&mut self, affinities: &[ClusterAffinity]) -> Option<Arc<[bool]>> {
        if affinities.is_empty() {
            return None;
        }
        let clusters = &self.fed.clusters;
        if filter::names_clusters(affinities) {
            return Some(filter::matching(clusters, affinities).into());
        }
        // Equal affinities print alike, and different ones differently.
        let key = format!("{affinities:?}");
        let mask = self
            .affinity_masks
            .entry(key)
            .or_insert_with(|| filter::matching(clusters, affinities).into());
        Some(mask.clone())
    }

    /// Binding `i`'s static weight rules: each weight with the clusters its rule matches.
    fn weight_rules(&mut self, i: usize) -> Vec<(i64, Arc<[bool]>)> {
        let targets: Vec<(i64, ClusterAffinity)> = self.fed.bindings[i]
            .static_weights
            .iter()
            .map(|r| (r.weight, r.target_cluster.clone()))
            .collect();
        targets
            .into_iter()
            .filter_map(|(w, t)| Some((w, self.affinity_matches(std::slice::from_ref(&t))?)))
            .collect()
    }

    /// Cluster `c` scored for binding `i` with `allocatable` replicas of room.
    fn scored(&self, i: usize, c: usize, allocatable: i64) -> Scored {
        let b = &self.fed.bindings[i];
        let cluster = &self.fed.clusters[c];
        Scored {
            index: c,
            score: filter::score(b, cluster),
            available: allocatable + b.assigned(&cluster.name),
            allocatable,
        }
    }

    /// [`State::attempt`]'s feasible clusters, scored and sorted, during a preemption trial:
    /// the filters, and the estimates of every cluster but the one whose victims are being
    /// tried, are those of the first attempt (nothing else changes while victims are
    /// tried); only the changing cluster is estimated again and sorted in among the others.
    fn trial_scored(&mut self, i: usize, term: usize) -> Result<Vec<Scored>, String> {
        let Some(mut t) = self.trial.take() else {
            unreachable!("a preemption trial is under way");
        };
        let result = self.trial_scored_with(&mut t, i, term);
        self.trial = Some(t);
        result
    }

    fn trial_scored_with(
        &mut self,
        t: &mut Trial,
        i: usize,
        term: usize,
    ) -> Result<Vec<Scored>, String> {
        if t.terms.len() <= term {
            t.terms.resize_with(term + 1, || None);
        }
        let cache = match &mut t.terms[term] {
            Some(cache) => cache,
            slot @ None => {
                let (feasible, reasons) = self.feasible(i, term);
                slot.insert(TermCache {
                    feasible,
                    reasons,
                    others: None,
                })
            }
        };
        if cache.feasible.is_empty() {
            return Err(filter::fit_error(self.fed.clusters.len(), &cache.reasons));
        }
        let changing = t.changing;
        if cache.others.as_ref().is_none_or(|(c, _)| *c != changing) {
            let mut others = Vec::with_capacity(cache.feasible.len());
            for &c in cache.feasible.iter().filter(|&&c| c != changing) {
                let known = match t.estimates[c] {
                    Some(known) => known,
                    None => {
                        let known = self.estimate_with_source(i, c);
                        t.estimates[c] = Some(known);
                        known
                    }
                };
                others.push(self.scored(i, c, known.0));
            }
            spread::sort(&mut others);
            cache.others = Some((changing, others));
        }
        let Some((_, others)) = &cache.others else {
            unreachable!("the other clusters were scored above");
        };
        let mut scored = others.clone();
        if cache.feasible.binary_search(&changing).is_ok() {
            let (allocatable, _) = self.estimate_with_source(i, changing);
            let s = self.scored(i, changing, allocatable);
            // The order is total (the index breaks ties): this is where sorting puts it.
            let at = scored.partition_point(|x| spread::order(x, &s).is_lt());
            scored.insert(at, s);
        }
        Ok(scored)
    }

    /// One affinity term's attempt. With `check`, an empty assignment stands for any: only
    /// whether the binding is placed is worked out.
    fn attempt(
        &mut self,
        i: usize,
        term: usize,
        check: bool,
    ) -> Result<Vec<(String, i64)>, String> {
        if self.recording {
            // The estimates reported are those of the last affinity term tried.
            self.estimates[i].clear();
        }
        let scored = if self.trial.as_ref().is_some_and(|t| t.binding == i) {
            self.trial_scored(i, term)?
        } else {
            let (feasible, reasons) = self.feasible(i, term);
            if feasible.is_empty() {
                return Err(filter::fit_error(self.fed.clusters.len(), &reasons));
            }
            let mut scored = Vec::with_capacity(feasible.len());
            for &c in &feasible {
                let allocatable = self.estimate(i, c);
                scored.push(self.scored(i, c, allocatable));
            }
            spread::sort(&mut scored);
            scored
        };
        let rules = if !check && self.fed.bindings[i].strategy == Strategy::StaticWeight {
            self.weight_rules(i)
        } else {
            Vec::new()
        };
        let b = &self.fed.bindings[i];
        let need = if b.components.len() > 1 {
            1
        } else {
            b.replicas
        };
        let selected = spread::select(b, &scored, &self.fed.clusters, need)?;
        if selected.is_empty() {
            return Err("no clusters available to schedule".into());
        }
        // The division names clusters by index (index order is name order).
        let candidates: Vec<Candidate<usize>> = selected
            .iter()
            .map(|s| Candidate {
                name: s.index,
                available: s.available,
                allocatable: s.allocatable,
            })
            .collect();
        let clusters = &self.fed.clusters;
        // The previous assignment, on clusters of the input (only candidates count).
        let previous = || -> Vec<(usize, i64)> {
            b.clusters
                .iter()
                .filter_map(|(n, r)| {
                    let c = clusters.binary_search_by(|c| c.name.as_str().cmp(n));
                    c.ok().map(|c| (c, *r))
                })
                .collect()
        };
        let divided = (b.replicas > 0 || b.requirements.is_some()) && b.components.len() <= 1;
        if check {
            // Only the dynamic division can fail.
            let dynamic = matches!(b.strategy, Strategy::Aggregated | Strategy::DynamicWeight);
            let fits = !divided
                || !dynamic
                || divide::dynamic_fits(&candidates, &previous(), b.replicas, b.fresh);
            return if fits {
                Ok(Vec::new())
            } else {
                Err(String::new())
            };
        }
        if !divided {
            // Non-workloads and multi-component bindings go to every selected cluster
            // whole (one component set each).
            let each = i64::from(b.components.len() > 1);
            return Ok(candidates
                .iter()
                .map(|c| (clusters[c.name].name.clone(), each))
                .collect());
        }
        let descending = divide::names_descending(&b.uid);
        let seats = match b.strategy {
            Strategy::Duplicated => divide::duplicated(&candidates, b.replicas),
            Strategy::StaticWeight => {
                let weights: Vec<(usize, i64)> = selected
                    .iter()
                    .map(|s| {
                        let w = rules
                            .iter()
                            .filter(|(_, matches)| matches[s.index])
                            .map(|(w, _)| *w)
                            .max()
                            .unwrap_or(0);
                        (s.index, w)
                    })
                    // The division counts only clusters with weight.
                    .filter(|(_, w)| *w > 0)
                    .collect();
                divide::static_weight(&candidates, &weights, b.replicas, descending)
            }
            Strategy::Aggregated | Strategy::DynamicWeight => {
                let kind = if b.strategy == Strategy::Aggregated {
                    Dynamic::Aggregated
                } else {
                    Dynamic::Weighted
                };
                divide::dynamic(
                    kind,
                    &candidates,
                    &previous(),
                    b.replicas,
                    b.fresh,
                    descending,
                )?
            }
        };
        Ok(seats
            .into_iter()
            .map(|(c, r)| (clusters[c].name.clone(), r))
            .collect())
    }

    /// Makes `assignment` binding `i`'s placement: what it holds on each cluster changes
    /// by the difference.
    pub fn place(&mut self, i: usize, assignment: Vec<(String, i64)>) {
        let old = std::mem::take(&mut self.fed.bindings[i].clusters);
        let mut names: BTreeSet<&str> = old.iter().map(|(n, _)| n.as_str()).collect();
        names.extend(assignment.iter().map(|(n, _)| n.as_str()));
        let get = |list: &[(String, i64)], n: &str| {
            list.iter()
                .filter(|(m, _)| m == n)
                .map(|(_, r)| *r)
                .sum::<i64>()
        };
        for name in names {
            let delta = get(&assignment, name) - get(&old, name);
            if delta == 0 {
                continue;
            }
            let Ok(c) = self
                .fed
                .clusters
                .binary_search_by(|c| c.name.as_str().cmp(name))
            else {
                continue;
            };
            self.usage[c].add(i, &self.fed.bindings[i], delta);
            self.dense.add(c, i, delta);
            if let Some(m) = self.members.get_mut(&c) {
                if delta > 0 {
                    m.add(i, delta);
                } else {
                    m.remove(i, -delta);
                }
            }
        }
        self.fed.bindings[i].clusters = assignment;
    }

    /// Takes binding `j` off cluster `c` entirely (the whole of its replicas there); returns
    /// the replicas removed and what the member held, for [`State::restore`].
    pub fn evict(&mut self, j: usize, c: usize) -> Evicted {
        let replicas = self.usage[c].held.get(&j).copied().unwrap_or(0);
        self.usage[c].add(j, &self.fed.bindings[j], -replicas);
        self.dense.add(c, j, -replicas);
        let member = self.members.get_mut(&c).map(|m| m.take(j));
        Evicted { replicas, member }
    }

    /// Undoes [`State::evict`].
    pub fn restore(&mut self, j: usize, c: usize, e: Evicted) {
        self.usage[c].add(j, &self.fed.bindings[j], e.replicas);
        self.dense.add(c, j, e.replicas);
        if let (Some(m), Some(held)) = (self.members.get_mut(&c), e.member) {
            m.give_back(j, held);
        }
    }
}

/// Preemption's trial of a binding: victims are tried on one cluster at a time and the state
/// is put back after each cluster, so the filters and the other clusters' estimates are
/// those of the first attempt.
#[derive(Debug)]
pub(crate) struct Trial {
    pub binding: usize,
    /// The cluster whose victims are being tried.
    pub changing: usize,
    /// Estimates by cluster index, each computed while another cluster was changing.
    estimates: Vec<Option<(i64, &'static str)>>,
    /// By affinity term, once computed.
    terms: Vec<Option<TermCache>>,
}

impl Trial {
    pub fn new(binding: usize, clusters: usize) -> Trial {
        Trial {
            binding,
            changing: usize::MAX,
            estimates: vec![None; clusters],
            terms: Vec::new(),
        }
    }
}

/// One affinity term's feasible clusters (in index order) and the others' reasons, and the
/// feasible clusters but the changing one (`.0`), scored and sorted.
#[derive(Debug)]
struct TermCache {
    feasible: Vec<usize>,
    reasons: Vec<String>,
    others: Option<(usize, Vec<Scored>)>,
}

/// What [`State::evict`] removed.
#[derive(Debug)]
pub(crate) struct Evicted {
    pub replicas: i64,
    pub member: Option<crate::member::Held>,
}
