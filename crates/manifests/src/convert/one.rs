//! One object at a time, for front ends that keep a cluster state and change it object by
//! object (the live scheduler follows its watch caches this way). The object goes through
//! the same routing, validation and conversion as a manifest; what needs every object at
//! once (the PodGroup tree, the global default PriorityClass, resource names interned in
//! name order) is the caller's to keep: new resource names are appended to the caller's.

use std::collections::BTreeSet;

use lockstep_model::dra::{ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use lockstep_model::{Node, Pod, PodDisruptionBudget, PodGroup, PriorityClass, ResourceNames};
use serde_json::Value;

use super::{MAX_RESOURCE_NAMES, dra, node, pod, policy, workload};
use crate::documents::Document;
use crate::error::{LoadError, Origin};
use crate::route::Collected;

/// An object converted on its own.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Converted {
    Node(Node),
    Pod(Pod),
    PodDisruptionBudget(PodDisruptionBudget),
    PodGroup(PodGroup),
    ResourceSlice(ResourceSlice),
    ResourceClaim(ResourceClaim),
    ResourceClaimTemplate(ResourceClaimTemplate),
}

/// Whether objects of `kind` can be converted one by one (the others need the whole set:
/// Namespaces, PriorityClasses, Workloads, CompositePodGroups and DeviceClasses).
pub fn converts_alone(kind: &str) -> bool {
    matches!(
        kind,
        "Node"
            | "Pod"
            | "PodDisruptionBudget"
            | "PodGroup"
            | "ResourceSlice"
            | "ResourceClaim"
            | "ResourceClaimTemplate"
    )
}

/// Converts one object as the API server serves it, named `name` in messages (`Pod
/// ml/web`). Resource names it uses that `resources` lacks are interned there (in name
/// order); pod and PodGroup priorities come from `priority_classes`. Returns the object
/// and the warnings; `Ok(None)` for a kind [`converts_alone`] refuses or one lockstep does
/// not read.
pub fn convert_object(
    name: &str,
    value: Value,
    resources: &mut ResourceNames,
    priority_classes: &[PriorityClass],
) -> Result<Option<(Converted, Vec<String>)>, LoadError> {
    let mut collected = Collected::default();
    collected.add_document(name, Document { number: 1, value })?;
    let mut warnings = std::mem::take(&mut collected.warnings);
    let priorities = policy::Priorities::from_classes(priority_classes);
    let origin = Origin {
        file: name.into(),
        document: 1,
        item: None,
    };
    let mut names = BTreeSet::new();
    for n in &collected.nodes {
        node::resource_names(&n.value, &mut names);
    }
    for p in &collected.pods {
        names.extend(p.value.resource_names().map(str::to_string));
    }
    let new: Vec<&String> = names
        .iter()
        .filter(|n| resources.get(n).is_none())
        .collect();
    if resources.len() + new.len() > MAX_RESOURCE_NAMES {
        return Err(LoadError::Limit {
            origin,
            message: format!(
                "{name}: more than {MAX_RESOURCE_NAMES} different resource names (cpu, memory, \
                 extended resources) in the cluster; use fewer resource names"
            ),
        });
    }
    for n in new {
        resources.intern(n);
    }
    let converted = if let Some(n) = collected.nodes.first() {
        Converted::Node(node::node(n, resources, &mut warnings)?)
    } else if let Some(p) = collected.pods.pop() {
        Converted::Pod(pod::finish(p, &priorities, resources)?)
    } else if let Some(b) = collected.pod_disruption_budgets.first() {
        Converted::PodDisruptionBudget(policy::pod_disruption_budget(b)?)
    } else if let Some(g) = collected.pod_groups.first() {
        Converted::PodGroup(workload::pod_group(g, &priorities)?)
    } else if let Some(s) = collected.resource_slices.first() {
        Converted::ResourceSlice(dra::resource_slice(s, &mut warnings)?)
    } else if let Some(c) = collected.resource_claims.first() {
        Converted::ResourceClaim(dra::resource_claim(c, &mut warnings)?)
    } else if let Some(t) = collected.resource_claim_templates.first() {
        Converted::ResourceClaimTemplate(dra::resource_claim_template(t, &mut warnings)?)
    } else {
        return Ok(None);
    };
    Ok(Some((converted, warnings)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(priority_class: Option<&str>, gpu: bool) -> Value {
        let mut requests = json!({"cpu": "500m", "memory": "1Gi"});
        if gpu {
            requests["example.com/gpu"] = json!("1");
        }
        let mut v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": requests, "limits": {}}}]}});
        if let Some(c) = priority_class {
            v["spec"]["priorityClassName"] = json!(c);
        }
        v
    }

    #[test]
    fn a_pod_is_converted_alone_with_new_resource_names_appended() {
        let mut resources = ResourceNames::default();
        let high = PriorityClass {
            name: "high".into(),
            value: 1000,
            global_default: false,
            preemption_policy: Default::default(),
        };
        let before = resources.len();
        let Some((Converted::Pod(p), _)) = convert_object(
            "Pod ml/web",
            pod(Some("high"), true),
            &mut resources,
            std::slice::from_ref(&high),
        )
        .unwrap() else {
            panic!("a pod converts to a pod")
        };
        assert_eq!(p.priority, 1000);
        assert_eq!(resources.len(), before + 1, "example.com/gpu interned");
        let gpu = resources.get("example.com/gpu").unwrap();
        assert_eq!(p.requests.get(gpu), 1);
        assert_eq!(p.requests.get(lockstep_model::ResourceId(0)), 500);
    }

    #[test]
    fn bad_objects_and_other_kinds() {
        let mut resources = ResourceNames::default();
        let e = convert_object(
            "Pod ml/web",
            pod(Some("missing"), false),
            &mut resources,
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
        assert!(
            convert_object("Namespace ml", ns, &mut resources, &[])
                .unwrap()
                .is_none()
        );
        assert!(!converts_alone("Namespace") && converts_alone("Pod"));
    }
}
