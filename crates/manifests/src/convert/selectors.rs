//! Label selectors and node selector terms, validated as the API server validates them.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use lockstep_model::{LabelSelector, NodeSelector, NodeSelectorTerm, Operator, Requirement};

use super::Ctx;
use crate::error::LoadError;

const LABEL_OPERATORS: &str = "In, NotIn, Exists, DoesNotExist";
const NODE_OPERATORS: &str = "In, NotIn, Exists, DoesNotExist, Gt, Lt";

/// A `metav1.LabelSelector`; `path` names the selector field.
pub(crate) fn label_selector(
    ctx: &Ctx,
    path: &str,
    selector: &meta::LabelSelector,
) -> Result<LabelSelector, LoadError> {
    let match_labels = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut match_expressions = Vec::new();
    for (i, r) in selector.match_expressions.iter().flatten().enumerate() {
        let path = format!("{path}.matchExpressions[{i}]");
        let operator = match r.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => return Err(bad_operator(ctx, &path, other, LABEL_OPERATORS)),
        };
        let values = r.values.clone().unwrap_or_default();
        check_values(ctx, &path, operator, &values)?;
        match_expressions.push(Requirement {
            key: r.key.clone(),
            operator,
            values,
        });
    }
    Ok(LabelSelector {
        match_labels,
        match_expressions,
    })
}

/// A `v1.NodeSelectorTerm`: label requirements and field requirements (only `metadata.name`).
pub(crate) fn node_selector_term(
    ctx: &Ctx,
    path: &str,
    term: &core::NodeSelectorTerm,
) -> Result<NodeSelectorTerm, LoadError> {
    let mut match_expressions = Vec::new();
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        let path = format!("{path}.matchExpressions[{i}]");
        match_expressions.push(node_requirement(ctx, &path, r)?);
    }
    let mut match_fields = Vec::new();
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        let path = format!("{path}.matchFields[{i}]");
        if r.key != "metadata.name" {
            return Err(ctx.invalid(
                format!("{path}.key"),
                format!(
                    "matchFields supports only the key metadata.name, not {:?}; use \
                     matchExpressions for labels",
                    r.key
                ),
            ));
        }
        let req = node_requirement(ctx, &path, r)?;
        if !matches!(req.operator, Operator::In | Operator::NotIn) || req.values.len() != 1 {
            return Err(ctx.invalid(
                path,
                "a metadata.name field requirement needs operator In or NotIn and exactly one \
                 value (a node name)",
            ));
        }
        match_fields.push(req);
    }
    Ok(NodeSelectorTerm {
        match_expressions,
        match_fields,
    })
}

/// A `v1.NodeSelector` (its terms are ORed); `path` names the selector field.
pub(crate) fn node_selector(
    ctx: &Ctx,
    path: &str,
    selector: &core::NodeSelector,
) -> Result<NodeSelector, LoadError> {
    if selector.node_selector_terms.is_empty() {
        return Err(ctx.invalid(
            format!("{path}.nodeSelectorTerms"),
            "must have at least one node selector term; add a term",
        ));
    }
    let mut terms = Vec::with_capacity(selector.node_selector_terms.len());
    for (i, t) in selector.node_selector_terms.iter().enumerate() {
        terms.push(node_selector_term(
            ctx,
            &format!("{path}.nodeSelectorTerms[{i}]"),
            t,
        )?);
    }
    Ok(NodeSelector { terms })
}

fn node_requirement(
    ctx: &Ctx,
    path: &str,
    r: &core::NodeSelectorRequirement,
) -> Result<Requirement, LoadError> {
    let operator = match r.operator.as_str() {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        "Gt" => Operator::Gt,
        "Lt" => Operator::Lt,
        other => return Err(bad_operator(ctx, path, other, NODE_OPERATORS)),
    };
    let values = r.values.clone().unwrap_or_default();
    check_values(ctx, path, operator, &values)?;
    Ok(Requirement {
        key: r.key.clone(),
        operator,
        values,
    })
}

fn bad_operator(ctx: &Ctx, path: &str, operator: &str, allowed: &str) -> LoadError {
    ctx.invalid(
        format!("{path}.operator"),
        format!("invalid operator {operator:?}; use one of {allowed}"),
    )
}

fn check_values(
    ctx: &Ctx,
    path: &str,
    operator: Operator,
    values: &[String],
) -> Result<(), LoadError> {
    let problem = match operator {
        Operator::In | Operator::NotIn if values.is_empty() => Some(format!(
            "operator {operator:?} needs at least one value; add values"
        )),
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => Some(format!(
            "operator {operator:?} takes no values; remove values"
        )),
        Operator::Gt | Operator::Lt => match values {
            [v] if v.parse::<i64>().is_ok() => None,
            _ => Some(format!(
                "operator {operator:?} needs exactly one integer value, found {values:?}"
            )),
        },
        _ => None,
    };
    match problem {
        Some(message) => Err(ctx.invalid(format!("{path}.values"), message)),
        None => Ok(()),
    }
}
