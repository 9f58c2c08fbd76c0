//! Nodes and taints.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1 as core;
use lockstep_model::{Node, ResourceNames, Taint, TaintEffect};

use super::{Ctx, resource_list};
use crate::error::LoadError;
use crate::route::Entry;

/// What the scheduler may hand out on a node: `status.allocatable`, or, when only
/// `status.capacity` is given, the capacity (a kubelet without reservations reports
/// allocatable equal to capacity). The path names the field used, for messages.
fn allocatable(
    node: &core::Node,
) -> Option<(
    &'static str,
    &std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
)> {
    let status = node.status.as_ref()?;
    match (&status.allocatable, &status.capacity) {
        (Some(a), _) => Some(("status.allocatable", a)),
        (None, Some(c)) => Some(("status.capacity", c)),
        (None, None) => None,
    }
}

pub(crate) fn resource_names(node: &core::Node, names: &mut BTreeSet<String>) {
    if let Some((_, allocatable)) = allocatable(node) {
        names.extend(allocatable.keys().cloned());
    }
}

/// Parses a taint effect; `None` for an empty string (allowed only in tolerations).
pub(crate) fn taint_effect(
    ctx: &Ctx,
    path: &str,
    effect: &str,
) -> Result<Option<TaintEffect>, LoadError> {
    Ok(Some(match effect {
        "" => return Ok(None),
        "NoSchedule" => TaintEffect::NoSchedule,
        "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
        "NoExecute" => TaintEffect::NoExecute,
        other => {
            return Err(ctx.invalid(
                path,
                format!("invalid effect {other:?}; use NoSchedule, PreferNoSchedule or NoExecute"),
            ));
        }
    }))
}

pub(crate) fn node(
    entry: &Entry<core::Node>,
    names: &mut ResourceNames,
    warnings: &mut Vec<String>,
) -> Result<Node, LoadError> {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let n = &entry.value;
    let Some((field, allocatable)) = allocatable(n) else {
        return Err(LoadError::NoAllocatable {
            node: entry.name.clone(),
            origin: entry.origin.clone(),
        });
    };
    let amounts = ctx.amounts(field, Some(allocatable))?;
    if !allocatable.contains_key("pods") {
        warnings.push(format!(
            "warning: node {} in {} has no pods in {field}, so no pod fits on it; \
             add pods: \"110\" (the kubelet's default)",
            entry.name, entry.origin
        ));
    }

    let spec = n.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.taints[{i}]");
        if t.key.is_empty() {
            return Err(ctx.invalid(format!("{path}.key"), "a taint needs a key; add key"));
        }
        let Some(effect) = taint_effect(&ctx, &format!("{path}.effect"), &t.effect)? else {
            return Err(ctx.invalid(
                format!("{path}.effect"),
                "a taint needs an effect; use NoSchedule, PreferNoSchedule or NoExecute",
            ));
        };
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }

    Ok(Node {
        name: entry.name.clone(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        allocatable: resource_list(names, &amounts),
    })
}
