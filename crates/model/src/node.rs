//! Nodes, taints and tolerations.

use crate::labels::Labels;
use crate::resources::ResourceList;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every key.
    pub key: String,
    pub operator: TolerationOperator,
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// `ToleratesTaint` of `k8s.io/api/core/v1`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// Whether any toleration in the list tolerates the taint.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// Dense node id: the index of the node in `Cluster::nodes` (nodes are sorted by name, so id
/// order is name order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: ResourceList,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(k: &str, v: &str, e: TaintEffect) -> Taint {
        Taint {
            key: k.into(),
            value: v.into(),
            effect: e,
        }
    }

    #[test]
    fn toleration_rules() {
        let t = taint("gpu", "true", TaintEffect::NoSchedule);
        let exists_all = Toleration {
            key: String::new(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: None,
        };
        assert!(exists_all.tolerates(&t));
        let equal = Toleration {
            key: "gpu".into(),
            operator: TolerationOperator::Equal,
            value: "true".into(),
            effect: Some(TaintEffect::NoSchedule),
        };
        assert!(equal.tolerates(&t));
        let wrong_effect = Toleration {
            effect: Some(TaintEffect::NoExecute),
            ..equal.clone()
        };
        assert!(!wrong_effect.tolerates(&t));
        let wrong_value = Toleration {
            value: "false".into(),
            ..equal
        };
        assert!(!wrong_value.tolerates(&t));
    }
}
