//! InterPodAffinity: required pod affinity and anti-affinity of the incoming pod, and the
//! required anti-affinity of pods already running, as a filter (checked in that order, as
//! kube-scheduler does); preferred terms (both ways)
//! and existing pods' required affinity (weighted by `hardPodAffinityWeight`) as a score.

use std::collections::BTreeMap;

use lockstep_model::{Labels, NodeId, Pod, PodAffinityTerm};

use serde::Deserialize;

use crate::config::{ConfigError, Profile};
use crate::framework::{
    CycleState, MAX_NODE_SCORE, Plugin, PreFilter, Reason, Rejections, Signature,
};
use crate::plugins::{Registration, args};
use crate::state::ClusterState;
use crate::topology::{LabelClass, NO_VALUE, PodTopology, TermKind};

pub struct InterPodAffinity {
    pub hard_pod_affinity_weight: i64,
}

pub static PLUGIN: Registration = Registration {
    name: "InterPodAffinity",
    filter: true,
    score: true,
    default_filter: true,
    weight: 2,
    scored_by_default: true,
    build: |profile, _| {
        Box::new(InterPodAffinity {
            hard_pod_affinity_weight: profile.hard_pod_affinity_weight,
        })
    },
    configure,
};

/// `InterPodAffinityArgs`: the fields lockstep reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    #[serde(default)]
    hard_pod_affinity_weight: Option<i64>,
}

fn configure(value: &serde_json::Value, field: &str, p: &mut Profile) -> Result<(), ConfigError> {
    if let Some(w) = args::<Args>(value, field)?.hard_pod_affinity_weight {
        if !(0..=100).contains(&w) {
            return Err(ConfigError::Invalid {
                field: format!("{field}.hardPodAffinityWeight"),
                problem: format!("{w} must be between 0 and 100"),
            });
        }
        p.hard_pod_affinity_weight = w;
    }
    Ok(())
}

static REJECTIONS: Rejections = Rejections {
    plugin: "InterPodAffinity",
    message: |code, _| match code {
        POD_AFFINITY_CODE => "node(s) didn't match pod affinity rules".into(),
        POD_ANTI_AFFINITY_CODE => "node(s) didn't match pod anti-affinity rules".into(),
        _ => "node(s) didn't satisfy existing pods anti-affinity rules".into(),
    },
    // Removing pods cannot create the pods an affinity term needs; it can remove the pods
    // an anti-affinity term (the pod's or theirs) objects to.
    resolvable: |code, _, _, _| code != POD_AFFINITY_CODE,
};

const POD_AFFINITY_CODE: u32 = 0;
const POD_ANTI_AFFINITY_CODE: u32 = 1;

/// No pod the pod's required affinity needs runs in the node's domain.
pub const POD_AFFINITY_NOT_MATCH: Reason = Reason {
    by: &REJECTIONS,
    code: POD_AFFINITY_CODE,
};

/// A pod the pod's required anti-affinity objects to runs in the node's domain.
pub const POD_ANTI_AFFINITY_NOT_MATCH: Reason = Reason {
    by: &REJECTIONS,
    code: POD_ANTI_AFFINITY_CODE,
};

/// A pod in the node's domain has required anti-affinity to the pod.
pub const EXISTING_PODS_ANTI_AFFINITY_NOT_MATCH: Reason = Reason {
    by: &REJECTIONS,
    code: 2,
};

/// The PreFilter state: which of the state's pod classes count for the pod. Counts are read
/// from the classes ([`PodTopology`]) per node, by the node's value id of each key.
#[derive(Debug, Default)]
struct AffinityFilterState {
    /// Term classes of existing pods' required anti-affinity that select the incoming pod.
    existing_anti: Vec<u32>,
    /// Per required affinity term, its topology key id ([`NO_VALUE`] when no pod names it).
    affinity_keys: Vec<u32>,
    /// Label classes of existing pods that match all the required affinity terms (a pod
    /// matching only some counts for none, as in kube-scheduler); they count in every
    /// term's domain their node has.
    affinity_classes: Vec<u32>,
    /// Per required anti-affinity term: its key id and the range of `anti_classes` holding
    /// the label classes it selects.
    anti: Vec<(u32, std::ops::Range<usize>)>,
    anti_classes: Vec<u32>,
    /// No existing pod matching all affinity terms was counted in any domain, and the pod
    /// matches all its own terms: the first pod of a collection may go anywhere.
    self_affinity_ok: bool,
    candidates: Vec<u32>,
}

/// Where a score comes from: pods of a label class or holders of a term class, counted per
/// value of a key, times a weight.
#[derive(Debug, Clone, Copy)]
enum Source {
    Label(u32),
    Term(u32),
}

#[derive(Debug, Default)]
struct AffinityScoreState {
    sources: Vec<(u32, i64, Source)>,
    candidates: Vec<u32>,
}

/// Whether `term`, declared by a pod in namespace `owner_ns`, selects a pod of `namespace`
/// with `labels`.
fn selects(
    term: &PodAffinityTerm,
    owner_ns: &str,
    namespace: &str,
    labels: &Labels,
    namespaces: &BTreeMap<String, Labels>,
) -> bool {
    let ns_ok = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
        namespace == owner_ns
    } else {
        term.namespaces.iter().any(|n| n == namespace)
            || term.namespace_selector.as_ref().is_some_and(|sel| {
                sel.is_empty()
                    || namespaces
                        .get(namespace)
                        .is_some_and(|labels| sel.matches(labels))
            })
    };
    ns_ok && term.selector.as_ref().is_some_and(|s| s.matches(labels))
}

/// Whether `term`, declared by a pod in namespace `owner_ns`, selects `other`.
pub fn term_selects(
    term: &PodAffinityTerm,
    owner_ns: &str,
    other: &Pod,
    namespaces: &BTreeMap<String, Labels>,
) -> bool {
    selects(term, owner_ns, &other.namespace, &other.labels, namespaces)
}

fn class_selected(
    term: &PodAffinityTerm,
    owner_ns: &str,
    class: &LabelClass,
    namespaces: &BTreeMap<String, Labels>,
) -> bool {
    selects(term, owner_ns, &class.namespace, &class.labels, namespaces)
}

/// The label classes with placed pods that `term` (of a pod in `owner_ns`) selects,
/// appended to `out`.
fn selected_classes(
    topo: &PodTopology,
    term: &PodAffinityTerm,
    owner_ns: &str,
    namespaces: &BTreeMap<String, Labels>,
    candidates: &mut Vec<u32>,
    out: &mut Vec<u32>,
) {
    let Some(sel) = &term.selector else {
        return;
    };
    topo.candidate_classes(sel, candidates);
    out.extend(candidates.iter().copied().filter(|&c| {
        let class = topo.label_class(c);
        class.pods > 0 && class_selected(term, owner_ns, class, namespaces)
    }));
}

fn key_of(topo: &PodTopology, term: &PodAffinityTerm) -> u32 {
    topo.key_id(&term.topology_key).unwrap_or(NO_VALUE)
}

/// The node's value id of `key`, [`NO_VALUE`] for a key no pod names.
fn value_of(topo: &PodTopology, key: u32, node: NodeId) -> u32 {
    if key == NO_VALUE {
        NO_VALUE
    } else {
        topo.node_value(key, node)
    }
}

/// Pods of `classes` in domain `value` of `key`.
fn count_in(topo: &PodTopology, classes: &[u32], key: u32, value: u32) -> u64 {
    classes
        .iter()
        .map(|&c| u64::from(topo.label_class(c).by_key(key).get(value)))
        .sum()
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        "InterPodAffinity"
    }
    fn sign(&self, snap: &ClusterState, pod: &Pod, _sig: &mut Signature) -> bool {
        // Affinity depends on pods on other nodes, both the pod's terms and theirs.
        pod.pod_affinity.is_empty()
            && pod.pod_anti_affinity.is_empty()
            && snap.bound_with_affinity == 0
    }

    fn pre_filter(&self, snap: &ClusterState, pod: &Pod, state: &mut CycleState) -> PreFilter {
        let req_aff = &pod.pod_affinity.required;
        let req_anti = &pod.pod_anti_affinity.required;
        if req_aff.is_empty() && req_anti.is_empty() && snap.bound_with_required_anti_affinity == 0
        {
            return PreFilter::Skip;
        }
        let s = state.write::<AffinityFilterState>();
        let topo = &snap.topology;
        let namespaces = &snap.cluster.namespaces;
        s.existing_anti.clear();
        if snap.bound_with_required_anti_affinity > 0 {
            topo.candidate_terms(&pod.labels, &mut s.candidates);
            s.existing_anti
                .extend(s.candidates.iter().copied().filter(|&t| {
                    let t = topo.term_class(t);
                    t.kind == TermKind::RequiredAnti
                        && t.counts.total > 0
                        && term_selects(&t.term, &t.owner_namespace, pod, namespaces)
                }));
        }
        s.affinity_keys.clear();
        s.affinity_classes.clear();
        let mut any_affinity_match = false;
        if let Some(first) = req_aff.first() {
            s.affinity_keys
                .extend(req_aff.iter().map(|t| key_of(topo, t)));
            selected_classes(
                topo,
                first,
                &pod.namespace,
                namespaces,
                &mut s.candidates,
                &mut s.affinity_classes,
            );
            s.affinity_classes.retain(|&c| {
                let class = topo.label_class(c);
                req_aff[1..]
                    .iter()
                    .all(|t| class_selected(t, &pod.namespace, class, namespaces))
            });
            any_affinity_match = s.affinity_classes.iter().any(|&c| {
                let class = topo.label_class(c);
                s.affinity_keys
                    .iter()
                    .any(|&k| k != NO_VALUE && class.by_key(k).total > 0)
            });
        }
        s.anti.clear();
        s.anti_classes.clear();
        for term in req_anti {
            let from = s.anti_classes.len();
            selected_classes(
                topo,
                term,
                &pod.namespace,
                namespaces,
                &mut s.candidates,
                &mut s.anti_classes,
            );
            s.anti
                .push((key_of(topo, term), from..s.anti_classes.len()));
        }
        s.self_affinity_ok = !any_affinity_match
            && req_aff
                .iter()
                .all(|t| term_selects(t, &pod.namespace, pod, namespaces));
        PreFilter::Run
    }

    fn filter(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        state: &CycleState,
        node: NodeId,
        reasons: &mut Vec<Reason>,
    ) -> bool {
        let Some(s) = state.read::<AffinityFilterState>() else {
            return true;
        };
        let topo = &snap.topology;
        if !pod.pod_affinity.required.is_empty() {
            let mut all_keys = true;
            let mut pods_exist = true;
            for &key in &s.affinity_keys {
                let v = value_of(topo, key, node);
                if v == NO_VALUE {
                    all_keys = false;
                } else if count_in(topo, &s.affinity_classes, key, v) == 0 {
                    pods_exist = false;
                }
            }
            if !all_keys || (!pods_exist && !s.self_affinity_ok) {
                reasons.push(POD_AFFINITY_NOT_MATCH);
                return false;
            }
        }
        for (key, range) in &s.anti {
            let v = value_of(topo, *key, node);
            if v != NO_VALUE && count_in(topo, &s.anti_classes[range.clone()], *key, v) > 0 {
                reasons.push(POD_ANTI_AFFINITY_NOT_MATCH);
                return false;
            }
        }
        for &t in &s.existing_anti {
            let t = topo.term_class(t);
            let v = topo.node_value(t.key, node);
            if v != NO_VALUE && t.counts.get(v) > 0 {
                reasons.push(EXISTING_PODS_ANTI_AFFINITY_NOT_MATCH);
                return false;
            }
        }
        true
    }

    fn pre_score(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        let has_preferred =
            !pod.pod_affinity.preferred.is_empty() || !pod.pod_anti_affinity.preferred.is_empty();
        if !has_preferred && snap.bound_with_affinity == 0 {
            return false;
        }
        let s = state.write::<AffinityScoreState>();
        s.sources.clear();
        let topo = &snap.topology;
        let namespaces = &snap.cluster.namespaces;
        // The pod's preferred terms, over the existing pods they select.
        let own = pod
            .pod_affinity
            .preferred
            .iter()
            .map(|(w, t)| (i64::from(*w), t))
            .chain(
                pod.pod_anti_affinity
                    .preferred
                    .iter()
                    .map(|(w, t)| (-i64::from(*w), t)),
            );
        let mut classes = Vec::new();
        for (w, term) in own {
            let key = key_of(topo, term);
            if key == NO_VALUE {
                continue;
            }
            classes.clear();
            selected_classes(
                topo,
                term,
                &pod.namespace,
                namespaces,
                &mut s.candidates,
                &mut classes,
            );
            for &c in &classes {
                if topo.label_class(c).by_key(key).total > 0 {
                    s.sources.push((key, w, Source::Label(c)));
                }
            }
        }
        // Existing pods' terms that select the pod.
        if snap.bound_with_affinity > 0 {
            topo.candidate_terms(&pod.labels, &mut s.candidates);
            for &id in &s.candidates {
                let t = topo.term_class(id);
                let w = match t.kind {
                    TermKind::RequiredAffinity if self.hard_pod_affinity_weight > 0 => {
                        self.hard_pod_affinity_weight
                    }
                    TermKind::PreferredAffinity(w) => i64::from(w),
                    TermKind::PreferredAnti(w) => -i64::from(w),
                    TermKind::RequiredAffinity | TermKind::RequiredAnti => continue,
                };
                if t.counts.total > 0 && term_selects(&t.term, &t.owner_namespace, pod, namespaces)
                {
                    s.sources.push((t.key, w, Source::Term(id)));
                }
            }
        }
        !s.sources.is_empty()
    }

    fn score(&self, snap: &ClusterState, _pod: &Pod, state: &CycleState, node: NodeId) -> i64 {
        let Some(s) = state.read::<AffinityScoreState>() else {
            return 0;
        };
        let topo = &snap.topology;
        s.sources
            .iter()
            .map(|&(key, w, source)| {
                let v = topo.node_value(key, node);
                if v == NO_VALUE {
                    return 0;
                }
                let n = match source {
                    Source::Label(c) => topo.label_class(c).by_key(key).get(v),
                    Source::Term(t) => topo.term_class(t).counts.get(v),
                };
                w * i64::from(n)
            })
            .sum()
    }

    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], scores: &mut [i64]) {
        let min = scores.iter().copied().min().unwrap_or(0);
        let max = scores.iter().copied().max().unwrap_or(0);
        let diff = max - min;
        for s in scores.iter_mut() {
            *s = if diff > 0 {
                (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
    }
}
