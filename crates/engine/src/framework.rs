//! The plugin framework: the extension points a plugin implements, the per-cycle state, and
//! the reasons a node is rejected.

use std::any::{Any, TypeId};

use lockstep_model::{NodeId, Pod, PodId};

use crate::state::ClusterState;

/// Why a node was rejected for a pod: the rejections of the plugin (or framework step) that
/// rejected it and the code it gave. Small and `Copy` so the filter loop never allocates;
/// turned into kube-scheduler's wording only for the final message. Each plugin keeps its
/// reasons, their texts and whether preemption can cure them in its own file.
#[derive(Clone, Copy)]
pub struct Reason {
    pub by: &'static Rejections,
    pub code: u32,
}

/// A plugin's rejection reasons: their texts and whether removing pods can cure them.
pub struct Rejections {
    /// The plugin (or framework step) giving these reasons.
    pub plugin: &'static str,
    /// kube-scheduler's text for a code.
    pub message: fn(u32, &ClusterState) -> String,
    /// Whether removing pods from `node` could cure a rejection of `pod` with this code:
    /// kube-scheduler's `Unschedulable` status code, as opposed to
    /// `UnschedulableAndUnresolvable`. Preemption only looks at nodes rejected for such
    /// reasons.
    pub resolvable: fn(u32, &ClusterState, &Pod, NodeId) -> bool,
}

impl Reason {
    /// kube-scheduler's text for the reason.
    pub fn message(&self, snap: &ClusterState) -> String {
        (self.by.message)(self.code, snap)
    }

    /// Whether removing pods from `node` could cure this rejection of `pod` (see
    /// [`Rejections::resolvable`]).
    pub fn resolvable(&self, snap: &ClusterState, pod: &Pod, node: NodeId) -> bool {
        (self.by.resolvable)(self.code, snap, pod, node)
    }

    /// Whether `rejections` gave this reason.
    pub fn is_from(&self, rejections: &'static Rejections) -> bool {
        std::ptr::eq(self.by, rejections)
    }

    /// A node outside the node set a PreFilter narrowed the cycle to; bit 0 NodeAffinity,
    /// bit 1 NodeName.
    pub fn not_in_pre_filter_result(bits: u8) -> Reason {
        Reason {
            by: &PRE_FILTER_RESULT,
            code: bits as u32,
        }
    }
}

/// The framework's own reason: outside a PreFilter's node set.
static PRE_FILTER_RESULT: Rejections = Rejections {
    plugin: "PreFilterResult",
    message: |bits, _| {
        let names: Vec<&str> = [(1u32, "NodeAffinity"), (2u32, "NodeName")]
            .iter()
            .filter(|(b, _)| bits & b != 0)
            .map(|(_, n)| *n)
            .collect();
        format!("node(s) didn't satisfy plugin(s) [{}]", names.join(" "))
    },
    resolvable: |_, _, _, _| false,
};

impl PartialEq for Reason {
    fn eq(&self, other: &Self) -> bool {
        self.is_from(other.by) && self.code == other.code
    }
}
impl Eq for Reason {}
impl std::hash::Hash for Reason {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.by as *const Rejections as usize).hash(h);
        self.code.hash(h);
    }
}
impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Reason {
    /// By plugin name, then code: a deterministic order that does not depend on addresses.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.by.plugin, self.code).cmp(&(other.by.plugin, other.code))
    }
}
impl std::fmt::Debug for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.by.plugin, self.code)
    }
}

/// The outcome of a PreFilter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreFilter {
    /// Run this plugin's filter on every node.
    Run,
    /// Run this plugin's filter, and only on these nodes (kube-scheduler's
    /// `PreFilterResult.NodeNames`); the bit names the plugin in
    /// `Reason::not_in_pre_filter_result`.
    RunOn(Vec<NodeId>, u8),
    /// The filter cannot reject any node for this pod: skip it this cycle.
    Skip,
    /// Every node is rejected for this reason; the message, when given, says more than the
    /// reason's text (it names the claim or request).
    RejectAll(Reason, Option<String>),
}

/// State computed once per pod and cycle by PreFilter/PreScore, read by Filter/Score. Each
/// plugin keeps its state type in its own file; the state holds one value per type, kept
/// across cycles so a plugin reuses its buffers (a plugin's PreFilter/PreScore overwrites
/// what it reads later in the cycle).
pub struct CycleState {
    /// The pod this cycle is for.
    pub pod: PodId,
    slots: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
}

impl CycleState {
    /// The plugin state of type `T`, when a PreFilter or PreScore wrote it.
    pub fn read<T: Any>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.slots
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref())
    }

    /// The plugin state of type `T` to write, created empty the first time.
    pub fn write<T: Any + Default + Send + Sync>(&mut self) -> &mut T {
        let id = TypeId::of::<T>();
        let at = match self.slots.iter().position(|(t, _)| *t == id) {
            Some(at) => at,
            None => {
                self.slots.push((id, Box::new(T::default())));
                self.slots.len() - 1
            }
        };
        self.slots[at]
            .1
            .downcast_mut()
            .expect("a slot holds the type it is keyed by")
    }
}

impl Default for CycleState {
    fn default() -> Self {
        CycleState {
            pod: PodId(0),
            slots: Vec::new(),
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("pod", &self.pod)
            .field("plugin_states", &self.slots.len())
            .finish()
    }
}

/// A pod's scheduling signature: hashes of what each plugin depends on. Two pods with equal
/// signatures get the same Filter verdict and Score on every node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Signature(Vec<u64>);

impl Signature {
    pub fn clear(&mut self) {
        self.0.clear();
    }
    /// Adds one fragment: the plugin's name and the hashed part of the pod.
    pub fn add<T: std::hash::Hash + ?Sized>(&mut self, plugin: &str, part: &T) {
        use std::hash::{Hash, Hasher};
        let mut h = FragmentHasher::default();
        plugin.hash(&mut h);
        part.hash(&mut h);
        self.0.push(h.finish());
    }
}

/// A fast deterministic 64-bit hasher for signature fragments (multiply-rotate, as in
/// rustc's FxHasher); signatures are compared whole, fragment by fragment.
#[derive(Default)]
struct FragmentHasher(u64);

impl std::hash::Hasher for FragmentHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    // Integers are one word each (the default goes through `write`'s byte chunks).
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_i32(&mut self, v: i32) {
        self.write_u64(v as u32 as u64);
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The highest score a plugin gives a node after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;

/// A scheduling plugin. Every extension point has a default that does nothing, so a plugin
/// implements only the points it has. All methods take the snapshot read-only: the cycle
/// never changes cluster state until it assumes the chosen node.
pub trait Plugin: Send + Sync {
    /// The kube-scheduler plugin name (used in configuration).
    fn name(&self) -> &'static str;

    fn pre_filter(&self, _snap: &ClusterState, _pod: &Pod, _state: &mut CycleState) -> PreFilter {
        PreFilter::Skip
    }

    /// Opportunistic batching: adds to `sig` everything of the pod this plugin's Filter and
    /// Score depend on, and returns true when the plugin's verdict and score on a node
    /// depend only on that node (so placing a pod elsewhere changes nothing here). Returns
    /// false when it cannot sign the pod; the pod then gets a full cycle.
    fn sign(&self, _snap: &ClusterState, _pod: &Pod, _sig: &mut Signature) -> bool {
        false
    }

    /// Returns false and pushes one or more reasons when the node cannot host the pod.
    /// Must not allocate.
    fn filter(
        &self,
        _snap: &ClusterState,
        _pod: &Pod,
        _state: &CycleState,
        _node: NodeId,
        _reasons: &mut Vec<Reason>,
    ) -> bool {
        true
    }

    /// Prepares scoring over the feasible nodes. Returns false to skip scoring this pod (the
    /// plugin then contributes 0 to every node).
    fn pre_score(
        &self,
        _snap: &ClusterState,
        _pod: &Pod,
        _state: &mut CycleState,
        _feasible: &[NodeId],
    ) -> bool {
        false
    }

    fn score(&self, _snap: &ClusterState, _pod: &Pod, _state: &CycleState, _node: NodeId) -> i64 {
        0
    }

    /// Scores every node of `nodes` into `out` (appended, aligned with `nodes`): `score` per
    /// node unless a plugin reads its cycle state once for all of them.
    fn score_nodes(
        &self,
        snap: &ClusterState,
        pod: &Pod,
        state: &CycleState,
        nodes: &[NodeId],
        out: &mut Vec<i64>,
    ) {
        out.extend(nodes.iter().map(|&n| self.score(snap, pod, state, n)));
    }

    /// Maps raw scores (aligned with `feasible`) to 0..=MAX_NODE_SCORE.
    fn normalize(&self, _state: &CycleState, _feasible: &[NodeId], _scores: &mut [i64]) {}
}

/// `DefaultNormalizeScore`: scales so the largest score becomes MAX_NODE_SCORE; with `reverse`
/// the largest becomes 0.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let v = MAX_NODE_SCORE * *s / max;
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_scales_and_reverses() {
        let mut s = vec![0, 5, 10];
        default_normalize(&mut s, false);
        assert_eq!(s, vec![0, 50, 100]);
        let mut s = vec![0, 5, 10];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 50, 0]);
        let mut s = vec![0, 0];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 100]);
        let mut s = vec![0, 0];
        default_normalize(&mut s, false);
        assert_eq!(s, vec![0, 0]);
    }
}
