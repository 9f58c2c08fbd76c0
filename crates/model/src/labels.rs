//! Labels, label selectors and node selector requirements.

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

/// Operators of `metav1.LabelSelectorRequirement` and `v1.NodeSelectorRequirement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Node selectors only: the label value parsed as an integer is greater.
    Gt,
    /// Node selectors only: the label value parsed as an integer is less.
    Lt,
}

/// One requirement: `key op values`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    /// Evaluates the requirement against a value lookup (`None`: the key is absent).
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt | Operator::Lt => {
                let (Some(v), Some(bound)) = (value, self.values.first()) else {
                    return false;
                };
                let (Ok(v), Ok(bound)) = (v.parse::<i64>(), bound.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::Gt {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }
}

/// A `metav1.LabelSelector`: all of `match_labels` and all requirements must hold. An empty
/// selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    pub match_labels: Vec<(String, String)>,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|x| x == v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// A `v1.NodeSelectorTerm`: requirements on labels and on fields (only `metadata.name`).
/// A term with no requirements matches no node, as in Kubernetes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
    pub match_fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions.iter().all(|r| r.matches(labels))
            && self.match_fields.iter().all(|r| {
                if r.key == "metadata.name" {
                    r.matches_value(Some(node_name))
                } else {
                    false
                }
            })
    }
}

/// A `v1.NodeSelector`: the terms are ORed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(node_name, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
    fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn operators() {
        let l = labels(&[("zone", "a"), ("gen", "5")]);
        assert!(req("zone", Operator::In, &["a", "b"]).matches(&l));
        assert!(!req("zone", Operator::NotIn, &["a"]).matches(&l));
        assert!(req("missing", Operator::NotIn, &["a"]).matches(&l));
        assert!(req("zone", Operator::Exists, &[]).matches(&l));
        assert!(req("missing", Operator::DoesNotExist, &[]).matches(&l));
        assert!(req("gen", Operator::Gt, &["4"]).matches(&l));
        assert!(!req("gen", Operator::Gt, &["5"]).matches(&l));
        assert!(req("gen", Operator::Lt, &["6"]).matches(&l));
        assert!(!req("zone", Operator::Lt, &["6"]).matches(&l));
        assert!(!req("missing", Operator::Gt, &["1"]).matches(&l));
    }

    #[test]
    fn empty_term_matches_nothing_but_empty_selector_everything() {
        let l = labels(&[("a", "b")]);
        assert!(!NodeSelectorTerm::default().matches("n", &l));
        assert!(LabelSelector::default().matches(&l));
    }

    #[test]
    fn match_fields_name() {
        let t = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", Operator::In, &["n1"])],
        };
        assert!(t.matches("n1", &Labels::new()));
        assert!(!t.matches("n2", &Labels::new()));
    }
}
