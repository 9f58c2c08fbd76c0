//! [`PodTopology`]: the placed pods as InterPodAffinity and PodTopologySpread read them,
//! kept up to date by [`ClusterState`](crate::state::ClusterState) on every placement,
//! removal and node label change, so a PreFilter costs time proportional to the pod's terms
//! and the matching pods' domains, not to every pod.
//!
//! - Topology keys (every key a pod's affinity term or spread constraint names) are interned
//!   with their values: each node slot has a value id per key, so a Filter looks a node's
//!   domain up in an array.
//! - Placed pods are grouped into label classes (namespace, labels, terminating): a
//!   selector is evaluated once per class, not once per pod. Each class counts its pods per
//!   node and per value of every topology key. Classes are found from a selector through an
//!   index on their labels (one `key=value` the selector requires).
//! - Placed pods' affinity terms are grouped into term classes (kind, owner namespace,
//!   term), each counting its pods per value of the term's topology key. A term class is
//!   indexed by one `key=value` its selector requires, so an incoming pod looks at the
//!   classes keyed by its own labels only (plus the few whose selector requires none).
//!
//! Classes are never removed (a class whose pods are gone counts zero): there are as many
//! as distinct label sets and terms ever placed.

use rustc_hash::FxHashMap as HashMap;

use lockstep_model::{LabelSelector, Labels, NodeId, Operator, Pod, PodAffinityTerm, PodId};

/// The value id of a node that lacks the key.
pub const NO_VALUE: u32 = u32::MAX;

/// Counts of pods per value id of one topology key, and their total. Sparse while few values
/// have pods, dense (indexed by value id) once at least an eighth of the ids seen do, so
/// the memory stays proportional to the values with pods and a Filter's lookup of a busy
/// class is an array read.
#[derive(Debug, Clone)]
pub struct Counts {
    repr: Repr,
    pub total: u64,
    /// One more than the highest value id counted.
    top: u32,
}

#[derive(Debug, Clone)]
enum Repr {
    /// Non-zero counts only.
    Sparse(HashMap<u32, u32>),
    Dense(Vec<u32>),
}

/// Sparse counts with at least this many values may turn dense.
const DENSE_MIN: usize = 32;

impl Default for Counts {
    fn default() -> Self {
        Counts {
            repr: Repr::Sparse(HashMap::default()),
            total: 0,
            top: 0,
        }
    }
}

impl Counts {
    #[inline]
    pub fn get(&self, value: u32) -> u32 {
        match &self.repr {
            Repr::Sparse(m) => m.get(&value).copied().unwrap_or(0),
            Repr::Dense(v) => v.get(value as usize).copied().unwrap_or(0),
        }
    }
    /// Calls `f` with each value that has a non-zero count, and the count.
    pub fn for_each(&self, mut f: impl FnMut(u32, u32)) {
        match &self.repr {
            Repr::Sparse(m) => m.iter().for_each(|(v, n)| f(*v, *n)),
            Repr::Dense(d) => d
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .for_each(|(v, n)| f(v as u32, *n)),
        }
    }
    fn add(&mut self, value: u32, delta: i32) {
        if value == NO_VALUE {
            return;
        }
        self.total = self.total.wrapping_add_signed(i64::from(delta));
        self.top = self.top.max(value + 1);
        match &mut self.repr {
            Repr::Dense(d) => {
                if d.len() <= value as usize {
                    d.resize(value as usize + 1, 0);
                }
                let e = &mut d[value as usize];
                *e = e.wrapping_add_signed(delta);
            }
            Repr::Sparse(m) => {
                let e = m.entry(value).or_insert(0);
                *e = e.wrapping_add_signed(delta);
                if *e == 0 {
                    m.remove(&value);
                } else if m.len() >= DENSE_MIN && m.len() * 8 >= self.top as usize {
                    let mut d = vec![0; self.top as usize];
                    for (&v, &n) in m.iter() {
                        d[v as usize] = n;
                    }
                    self.repr = Repr::Dense(d);
                }
            }
        }
    }
}

/// One interned topology key.
#[derive(Debug, Default)]
struct TopoKey {
    name: String,
    values: HashMap<String, u32>,
    /// Per value id: the live nodes having it.
    value_nodes: Vec<u32>,
    /// Per node slot: the value id, or [`NO_VALUE`].
    node_value: Vec<u32>,
}

impl TopoKey {
    fn value_of(&mut self, labels: &Labels) -> u32 {
        let Some(v) = labels.get(&self.name) else {
            return NO_VALUE;
        };
        if let Some(&id) = self.values.get(v.as_str()) {
            return id;
        }
        let id = self.value_nodes.len() as u32;
        self.values.insert(v.clone(), id);
        self.value_nodes.push(0);
        id
    }
    fn set_node(&mut self, node: usize, value: u32) {
        if self.node_value.len() <= node {
            self.node_value.resize(node + 1, NO_VALUE);
        }
        let old = std::mem::replace(&mut self.node_value[node], value);
        if old != NO_VALUE {
            self.value_nodes[old as usize] -= 1;
        }
        if value != NO_VALUE {
            self.value_nodes[value as usize] += 1;
        }
    }
}

/// Placed pods of one namespace, label set and terminating flag.
#[derive(Debug)]
pub struct LabelClass {
    pub namespace: String,
    pub labels: Labels,
    pub terminating: bool,
    /// Placed pods in the class.
    pub pods: u32,
    node_counts: HashMap<u32, u32>,
    /// Per topology key id.
    by_key: Vec<Counts>,
}

impl LabelClass {
    /// The class's pods on `node`.
    pub fn on_node(&self, node: NodeId) -> u32 {
        self.node_counts.get(&node.0).copied().unwrap_or(0)
    }
    /// The class's pods per value of topology key `key` (pods on nodes lacking it are not
    /// counted).
    pub fn by_key(&self, key: u32) -> &Counts {
        &self.by_key[key as usize]
    }
}

/// The kinds of affinity terms placed pods have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TermKind {
    RequiredAffinity,
    RequiredAnti,
    PreferredAffinity(i32),
    PreferredAnti(i32),
}

/// Placed pods' terms of one kind, owner namespace and term.
#[derive(Debug)]
pub struct TermClass {
    pub kind: TermKind,
    pub owner_namespace: String,
    pub term: PodAffinityTerm,
    /// The term's topology key id.
    pub key: u32,
    /// The placed pods having the term, per value of its topology key (a pod with the term
    /// twice counts twice).
    pub counts: Counts,
}

/// The classes a placed pod counts in.
#[derive(Debug, Default, Clone)]
struct PodClasses {
    label: u32,
    terms: Vec<u32>,
}

#[derive(Default)]
pub struct PodTopology {
    key_ids: HashMap<String, u32>,
    keys: Vec<TopoKey>,
    label_classes: Vec<LabelClass>,
    label_class_ids: hashbrown::HashTable<u32>,
    /// Label key, then value: the label classes having it.
    classes_by_label: HashMap<String, HashMap<String, Vec<u32>>>,
    term_classes: Vec<TermClass>,
    term_class_ids: hashbrown::HashTable<u32>,
    /// Term classes by one `key=value` their selector requires.
    terms_by_label: HashMap<String, HashMap<String, Vec<u32>>>,
    /// Term classes whose selector requires no `key=value` (or has no selector).
    terms_unindexed: Vec<u32>,
    /// Per pod slot: the classes of the pod as it is now (kept while it is off its node, so
    /// a pod placed again is not hashed again; dropped when the pod object changes).
    pod_classes: Vec<Option<PodClasses>>,
    /// Per pod slot: the node it is counted on.
    counted_on: Vec<Option<NodeId>>,
}

fn hash_of<T: std::hash::Hash + ?Sized>(x: &T) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(x)
}

/// The `key=value` pairs a selector requires, as the index keys them: the first of
/// `matchLabels`, else every value of the first `In` expression.
fn index_pairs(sel: &LabelSelector) -> Option<(&str, Vec<&str>)> {
    if let Some((k, v)) = sel.match_labels.first() {
        return Some((k, vec![v.as_str()]));
    }
    sel.match_expressions
        .iter()
        .find(|r| r.operator == Operator::In)
        .map(|r| {
            (
                r.key.as_str(),
                r.values.iter().map(String::as_str).collect(),
            )
        })
}

impl PodTopology {
    /// The id of topology key `name`, when some pod of the state names it.
    pub fn key_id(&self, name: &str) -> Option<u32> {
        self.key_ids.get(name).copied()
    }

    /// The node's value id of key `key` ([`NO_VALUE`] when it lacks the label).
    pub fn node_value(&self, key: u32, node: NodeId) -> u32 {
        self.keys[key as usize]
            .node_value
            .get(node.index())
            .copied()
            .unwrap_or(NO_VALUE)
    }

    /// Number of value ids of key `key`.
    pub fn values(&self, key: u32) -> usize {
        self.keys[key as usize].value_nodes.len()
    }

    /// Live nodes having value `value` of key `key`.
    pub fn value_nodes(&self, key: u32, value: u32) -> u32 {
        self.keys[key as usize].value_nodes[value as usize]
    }

    pub fn label_class(&self, id: u32) -> &LabelClass {
        &self.label_classes[id as usize]
    }

    pub fn term_class(&self, id: u32) -> &TermClass {
        &self.term_classes[id as usize]
    }

    /// Label classes that may match `sel` (a superset: check each): those having one
    /// `key=value` it requires, or every class when it requires none.
    pub fn candidate_classes(&self, sel: &LabelSelector, out: &mut Vec<u32>) {
        out.clear();
        let lookup = |k: &str, v: &str| {
            self.classes_by_label
                .get(k)
                .and_then(|m| m.get(v))
                .map_or(&[][..], Vec::as_slice)
        };
        let mut best: Option<Vec<&[u32]>> = None;
        let mut best_len = usize::MAX;
        for (k, v) in &sel.match_labels {
            let l = lookup(k, v);
            if l.len() < best_len {
                best_len = l.len();
                best = Some(vec![l]);
            }
        }
        for r in &sel.match_expressions {
            if r.operator == Operator::In {
                let lists: Vec<&[u32]> = r.values.iter().map(|v| lookup(&r.key, v)).collect();
                let len = lists.iter().map(|l| l.len()).sum();
                if len < best_len {
                    best_len = len;
                    best = Some(lists);
                }
            }
        }
        match best {
            Some(lists) => {
                let several = lists.len() > 1;
                for l in lists {
                    out.extend_from_slice(l);
                }
                // An `In` may list a value twice.
                if several {
                    out.sort_unstable();
                    out.dedup();
                }
            }
            None => out.extend(0..self.label_classes.len() as u32),
        }
    }

    /// Term classes whose selector may match a pod with `labels` (a superset: check each).
    pub fn candidate_terms(&self, labels: &Labels, out: &mut Vec<u32>) {
        out.clear();
        out.extend_from_slice(&self.terms_unindexed);
        if self.terms_by_label.is_empty() {
            return;
        }
        for (k, v) in labels {
            if let Some(ids) = self.terms_by_label.get(k).and_then(|m| m.get(v.as_str())) {
                out.extend_from_slice(ids);
            }
        }
    }

    /// Interns the topology keys the pod's terms and constraints name. A new key gets every
    /// node's value and every class's counts.
    pub fn register_keys(&mut self, pod: &Pod, nodes: &[lockstep_model::Node]) {
        let terms = pod
            .pod_affinity
            .required
            .iter()
            .chain(pod.pod_anti_affinity.required.iter())
            .chain(pod.pod_affinity.preferred.iter().map(|(_, t)| t))
            .chain(pod.pod_anti_affinity.preferred.iter().map(|(_, t)| t))
            .map(|t| t.topology_key.as_str());
        let spread = pod.topology_spread.iter().map(|c| c.topology_key.as_str());
        for key in terms.chain(spread) {
            if !self.key_ids.contains_key(key) {
                self.add_key(key, nodes);
            }
        }
    }

    fn add_key(&mut self, name: &str, nodes: &[lockstep_model::Node]) -> u32 {
        let id = self.keys.len() as u32;
        let mut k = TopoKey {
            name: name.to_string(),
            ..TopoKey::default()
        };
        k.node_value = vec![NO_VALUE; nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            let v = k.value_of(&n.labels);
            k.set_node(i, v);
        }
        for c in &mut self.label_classes {
            let mut counts = Counts::default();
            for (&node, &n) in &c.node_counts {
                counts.add(k.node_value[node as usize], n as i32);
            }
            c.by_key.push(counts);
        }
        self.keys.push(k);
        self.key_ids.insert(name.to_string(), id);
        id
    }

    /// The pod object in slot `id` was written: its classes are found again when it is
    /// placed next.
    pub fn pod_changed(&mut self, id: PodId) {
        if let Some(c) = self.pod_classes.get_mut(id.index()) {
            debug_assert!(
                self.counted_on[id.index()].is_none(),
                "changed while placed"
            );
            *c = None;
        }
    }

    /// Node slot `node` now has `labels` (empty for a deleted node); `pods` are on it.
    pub fn set_node_labels(&mut self, node: NodeId, labels: &Labels, pods: &[PodId]) {
        let n = node.index();
        let changes = self.keys.iter().any(|k| {
            let old = k.node_value.get(n).copied().unwrap_or(NO_VALUE);
            let new = labels
                .get(&k.name)
                .map_or(Some(NO_VALUE), |v| k.values.get(v.as_str()).copied());
            new != Some(old)
        });
        if !changes {
            return;
        }
        for &p in pods {
            self.count(p, node, -1);
        }
        for k in &mut self.keys {
            let v = k.value_of(labels);
            k.set_node(n, v);
        }
        for &p in pods {
            self.count(p, node, 1);
        }
    }

    /// Counts `pod` (the object in slot `id`) on `node`; `nodes` are the node slots.
    pub fn place(&mut self, id: PodId, pod: &Pod, node: NodeId, nodes: &[lockstep_model::Node]) {
        let i = id.index();
        if self.pod_classes.len() <= i {
            self.pod_classes.resize(i + 1, None);
            self.counted_on.resize(i + 1, None);
        }
        if self.pod_classes[i].is_none() {
            self.register_keys(pod, nodes);
            let classes = self.classes_of(pod);
            self.pod_classes[i] = Some(classes);
        }
        debug_assert!(self.counted_on[i].is_none(), "pod counted twice");
        self.counted_on[i] = Some(node);
        self.count(id, node, 1);
    }

    /// Takes the pod in slot `id` out of the counts.
    pub fn forget(&mut self, id: PodId) {
        if let Some(node) = self.counted_on.get_mut(id.index()).and_then(Option::take) {
            self.count(id, node, -1);
        }
    }

    fn count(&mut self, id: PodId, node: NodeId, delta: i32) {
        let classes = self.pod_classes[id.index()]
            .as_ref()
            .expect("a placed pod has classes");
        let c = &mut self.label_classes[classes.label as usize];
        c.pods = c.pods.wrapping_add_signed(delta);
        let e = c.node_counts.entry(node.0).or_insert(0);
        *e = e.wrapping_add_signed(delta);
        if *e == 0 {
            c.node_counts.remove(&node.0);
        }
        for (k, counts) in self.keys.iter().zip(c.by_key.iter_mut()) {
            counts.add(
                k.node_value.get(node.index()).copied().unwrap_or(NO_VALUE),
                delta,
            );
        }
        for &t in &classes.terms {
            let t = &mut self.term_classes[t as usize];
            let v = self.keys[t.key as usize]
                .node_value
                .get(node.index())
                .copied()
                .unwrap_or(NO_VALUE);
            t.counts.add(v, delta);
        }
    }

    fn classes_of(&mut self, pod: &Pod) -> PodClasses {
        let label = self.label_class_of(pod);
        let mut terms = Vec::new();
        let kinds = pod
            .pod_affinity
            .required
            .iter()
            .map(|t| (TermKind::RequiredAffinity, t))
            .chain(
                pod.pod_anti_affinity
                    .required
                    .iter()
                    .map(|t| (TermKind::RequiredAnti, t)),
            )
            .chain(
                pod.pod_affinity
                    .preferred
                    .iter()
                    .map(|(w, t)| (TermKind::PreferredAffinity(*w), t)),
            )
            .chain(
                pod.pod_anti_affinity
                    .preferred
                    .iter()
                    .map(|(w, t)| (TermKind::PreferredAnti(*w), t)),
            );
        for (kind, term) in kinds {
            terms.push(self.term_class_of(kind, &pod.namespace, term));
        }
        PodClasses { label, terms }
    }

    fn label_class_of(&mut self, pod: &Pod) -> u32 {
        let hash = hash_of(&(&pod.namespace, &pod.labels, pod.terminating));
        let classes = &self.label_classes;
        if let Some(&id) = self.label_class_ids.find(hash, |&c| {
            let c = &classes[c as usize];
            c.terminating == pod.terminating
                && c.namespace == pod.namespace
                && c.labels == pod.labels
        }) {
            return id;
        }
        let id = self.label_classes.len() as u32;
        self.label_classes.push(LabelClass {
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            terminating: pod.terminating,
            pods: 0,
            node_counts: HashMap::default(),
            by_key: vec![Counts::default(); self.keys.len()],
        });
        let classes = &self.label_classes;
        self.label_class_ids.insert_unique(hash, id, |&c| {
            let c = &classes[c as usize];
            hash_of(&(&c.namespace, &c.labels, c.terminating))
        });
        for (k, v) in &pod.labels {
            self.classes_by_label
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .push(id);
        }
        id
    }

    fn term_class_of(&mut self, kind: TermKind, owner: &str, term: &PodAffinityTerm) -> u32 {
        let hash = hash_of(&(kind, owner, term));
        let classes = &self.term_classes;
        if let Some(&id) = self.term_class_ids.find(hash, |&c| {
            let c = &classes[c as usize];
            c.kind == kind && c.owner_namespace == owner && c.term == *term
        }) {
            return id;
        }
        let key = self.key_ids[term.topology_key.as_str()];
        let id = self.term_classes.len() as u32;
        self.term_classes.push(TermClass {
            kind,
            owner_namespace: owner.to_string(),
            term: term.clone(),
            key,
            counts: Counts::default(),
        });
        let classes = &self.term_classes;
        self.term_class_ids.insert_unique(hash, id, |&c| {
            let c = &classes[c as usize];
            hash_of(&(c.kind, c.owner_namespace.as_str(), &c.term))
        });
        match term.selector.as_ref().and_then(index_pairs) {
            Some((k, values)) => {
                let by_value = self.terms_by_label.entry(k.to_string()).or_default();
                for v in values {
                    let ids = by_value.entry(v.to_string()).or_default();
                    // An `In` listing a value twice indexes the class once.
                    if ids.last() != Some(&id) {
                        ids.push(id);
                    }
                }
            }
            None => self.terms_unindexed.push(id),
        }
        id
    }
}
