//! apps/v1 Deployment, ReplicaSet and StatefulSet: `replicas` pods (default 1) from the pod
//! template, independent of each other (no gang).
//!
//! Validated as the API server does: `replicas` at least 0, `selector` given, not empty, and
//! matching the template's labels.
//!
//! - ReplicaSet: active pods of the input that match the selector and are controlled by the
//!   ReplicaSet, or by nothing (the controller adopts orphans), count; new pods are named
//!   `<name>-` completed with a number (the API server's random suffix).
//! - Deployment: its pods belong to a ReplicaSet named `<deployment>-<pod-template-hash>`;
//!   active pods that match the selector and are controlled by a ReplicaSet whose name starts
//!   with `<deployment>-` count. lockstep does not compute the template hash: new pods are
//!   named `<deployment>-` completed with a number.
//! - StatefulSet: pods `<name>-<ordinal>` for ordinals from `spec.ordinals.start` (default 0),
//!   labelled `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`, with
//!   hostname the pod's name and subdomain `serviceName`. A pod of such a name in the input
//!   controlled by the StatefulSet (or matching its selector) is that ordinal. All missing
//!   ordinals are created at once: with the default `OrderedReady` policy the controller
//!   creates them one by one, each once the previous is ready, which ends with the same pods.
//!   Volume claim templates are not modelled.

use std::collections::BTreeSet;

pub(crate) use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use lockstep_model::LabelSelector;

use super::{Existing, Expansion, NewPod, Owner, PodName};
use crate::convert::{Ctx, selectors};
use crate::error::LoadError;

/// The selector, converted and checked against the template's labels.
fn selector(
    owner: &Owner,
    selector: Option<&meta::LabelSelector>,
    template: &core::PodTemplateSpec,
) -> Result<LabelSelector, LoadError> {
    let empty = selector.is_none_or(|s| {
        s.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
    });
    if empty {
        return Err(owner.invalid(
            "spec.selector",
            format!(
                "required: a {} needs a non-empty selector matching its template's labels \
                 (e.g. selector: {{matchLabels: {{app: NAME}}}})",
                owner.kind
            ),
        ));
    }
    let ctx = Ctx {
        origin: owner.origin,
        object: owner.object,
    };
    let converted = selectors::label_selector(&ctx, "spec.selector", selector.expect("checked"))?;
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if !converted.matches(&labels) {
        return Err(owner.invalid(
            "spec.template.metadata.labels",
            "the selector does not match the template's labels; make the template carry the \
             labels the selector asks for",
        ));
    }
    if template
        .spec
        .as_ref()
        .is_none_or(|s| s.containers.is_empty())
    {
        return Err(owner.invalid(
            "spec.template.spec.containers",
            "required: the pod template needs at least one container",
        ));
    }
    Ok(converted)
}

/// New pods of a generated name counted against `replicas`.
fn generated(
    owner: &Owner,
    replicas: Option<i32>,
    template: &core::PodTemplateSpec,
    counted: Vec<String>,
) -> Result<Expansion, LoadError> {
    super::non_negative(owner, "spec.replicas", replicas)?;
    let want = i64::from(replicas.unwrap_or(1));
    super::check_pod_count(owner, "spec.replicas", want)?;
    let create = (want - counted.len() as i64).max(0);
    let mut out = Expansion {
        adopted: counted,
        ..Default::default()
    };
    for _ in 0..create {
        out.pods.push(NewPod::from_template(
            template,
            PodName::Generate(super::generate_name(&format!("{}-", owner.name))),
            owner.controller_ref(),
            "spec.template".into(),
        ));
    }
    Ok(out)
}

pub(crate) fn expand_replica_set(
    owner: &Owner,
    rs: &ReplicaSet,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let spec = &rs.spec;
    let empty = core::PodTemplateSpec::default();
    let template = spec.template.as_ref().unwrap_or(&empty);
    let sel = selector(owner, Some(&spec.selector), template)?;
    let counted = existing
        .active(owner.namespace)
        .filter(|p| sel.matches(p.labels()))
        .filter(|p| match p.controller() {
            None => true,
            Some((kind, name)) => kind == "ReplicaSet" && name == owner.name,
        })
        .map(|p| p.name())
        .collect();
    generated(owner, spec.replicas, template, counted)
}

pub(crate) fn expand_deployment(
    owner: &Owner,
    d: &Deployment,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let spec = &d.spec;
    let sel = selector(owner, Some(&spec.selector), &spec.template)?;
    let prefix = format!("{}-", owner.name);
    let counted = existing
        .active(owner.namespace)
        .filter(|p| sel.matches(p.labels()))
        .filter(|p| {
            p.controller()
                .is_some_and(|(kind, name)| kind == "ReplicaSet" && name.starts_with(&prefix))
        })
        .map(|p| p.name())
        .collect();
    generated(owner, spec.replicas, &spec.template, counted)
}

pub(crate) fn expand_stateful_set(
    owner: &Owner,
    s: &StatefulSet,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let spec = &s.spec;
    let sel = selector(owner, Some(&spec.selector), &spec.template)?;
    super::non_negative(owner, "spec.replicas", spec.replicas)?;
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    super::non_negative(owner, "spec.ordinals.start", Some(start))?;
    let replicas = spec.replicas.unwrap_or(1);
    super::check_pod_count(owner, "spec.replicas", i64::from(replicas))?;
    let mut out = Expansion::default();
    let present: BTreeSet<String> = existing
        .all(owner.namespace)
        .filter(|p| {
            p.controller().map_or_else(
                || sel.matches(p.labels()),
                |(kind, name)| kind == "StatefulSet" && name == owner.name,
            )
        })
        .map(|p| p.name())
        .collect();
    for ordinal in i64::from(start)..i64::from(start) + i64::from(replicas) {
        let name = format!("{}-{ordinal}", owner.name);
        if present.contains(&name) {
            out.adopted.push(name);
            continue;
        }
        let mut pod = NewPod::from_template(
            &spec.template,
            PodName::Fixed(name.clone()),
            owner.controller_ref(),
            "spec.template".into(),
        );
        pod.labels
            .insert("statefulset.kubernetes.io/pod-name".into(), name.clone());
        pod.labels
            .insert("apps.kubernetes.io/pod-index".into(), ordinal.to_string());
        pod.spec.hostname = Some(name);
        if let Some(service) = spec.service_name.as_ref().filter(|s| !s.is_empty()) {
            pod.spec.subdomain = Some(service.clone());
        }
        out.pods.push(pod);
    }
    Ok(out)
}
