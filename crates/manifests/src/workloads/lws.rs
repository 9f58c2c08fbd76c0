//! LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`): `replicas` groups (default 1) of `size`
//! pods (default 1), as its controller makes them: group `g`'s leader `<lws>-<g>` (from
//! `leaderTemplate`, else `workerTemplate`) and workers `<lws>-<g>-<w>` for `w` from 1 to
//! `size - 1`, labelled `leaderworkerset.sigs.k8s.io/name`, `group-index`, `worker-index`
//! and `group-key` (SHA-1 of `<namespace>/<leader>`).
//!
//! Each group is a gang: a Workload `<lws>` with one gang template `group`, and per group a
//! PodGroup `<lws>-<g>` whose minCount is the group's pods to create (`size` for a new
//! group); a group whose pods are all in the input gets none. The annotation
//! `leaderworkerset.sigs.k8s.io/exclusive-topology: KEY` becomes the groups' topology
//! constraint (each group in one KEY domain). A pod of the input with a group's pod name
//! and the LeaderWorkerSet's name label is that pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value as Json;

use super::{Existing, Expansion, NewPod, Owner, PodName, gang, sha1_hex};
use crate::error::LoadError;

pub(crate) const EXCLUSIVE_KEY: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
const NAME_KEY: &str = "leaderworkerset.sigs.k8s.io/name";

/// `leaderworkerset.x-k8s.io/v1` LeaderWorkerSet.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaderWorkerSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LeaderWorkerSetSpec,
    /// Written by the controller; not read.
    #[allow(dead_code)]
    pub status: Option<Json>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaderWorkerSetSpec {
    pub replicas: Option<i32>,
    pub leader_worker_template: Option<LeaderWorkerTemplate>,
    pub rollout_strategy: Option<Json>,
    pub startup_policy: Option<String>,
    pub network_config: Option<Json>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaderWorkerTemplate {
    pub leader_template: Option<core::PodTemplateSpec>,
    pub worker_template: Option<core::PodTemplateSpec>,
    pub size: Option<i32>,
    pub restart_policy: Option<String>,
    pub sub_group_policy: Option<Json>,
    pub resize_policy: Option<Json>,
}

pub(crate) fn expand(
    owner: &Owner,
    lws: &LeaderWorkerSet,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let mut out = Expansion::default();
    let spec = &lws.spec;
    super::non_negative(owner, "spec.replicas", spec.replicas)?;
    let Some(t) = &spec.leader_worker_template else {
        return Err(owner.invalid(
            "spec.leaderWorkerTemplate",
            "required: a LeaderWorkerSet needs a leaderWorkerTemplate with a workerTemplate",
        ));
    };
    let Some(worker) = t
        .worker_template
        .as_ref()
        .filter(|w| w.spec.as_ref().is_some_and(|s| !s.containers.is_empty()))
    else {
        return Err(owner.invalid(
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers",
            "required: the worker template needs at least one container",
        ));
    };
    let size = t.size.unwrap_or(1);
    if size < 1 {
        return Err(owner.invalid(
            "spec.leaderWorkerTemplate.size",
            format!("{size}: must be at least 1 (the leader counts)"),
        ));
    }
    let (leader, leader_path) = match &t.leader_template {
        Some(l) => (l, "spec.leaderWorkerTemplate.leaderTemplate"),
        None => (worker, "spec.leaderWorkerTemplate.workerTemplate"),
    };
    let exclusive = lws
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXCLUSIVE_KEY))
        .cloned();
    if let Some(key) = &exclusive
        && let Some(why) = crate::route::label_key_error(key)
    {
        return Err(owner.invalid(
            format!("metadata.annotations[{EXCLUSIVE_KEY}]"),
            format!("{key:?} is not a topology key: {why}"),
        ));
    }
    let present: Vec<String> = existing
        .active(owner.namespace)
        .filter(|p| p.label(NAME_KEY) == Some(owner.name))
        .map(|p| p.name())
        .collect();
    let replicas = spec.replicas.unwrap_or(1);
    super::check_pod_count(
        owner,
        "spec.replicas",
        i64::from(replicas) * i64::from(size),
    )?;
    let mut groups_made = false;
    for g in 0..replicas {
        let leader_name = format!("{}-{g}", owner.name);
        let group_key = sha1_hex(&format!("{}/{leader_name}", owner.namespace));
        let mut pods = Vec::new();
        for w in 0..size {
            let (name, template, path) = if w == 0 {
                (leader_name.clone(), leader, leader_path)
            } else {
                (
                    format!("{leader_name}-{w}"),
                    worker,
                    "spec.leaderWorkerTemplate.workerTemplate",
                )
            };
            if present.contains(&name) {
                out.adopted.push(name);
                continue;
            }
            let mut pod = NewPod::from_template(
                template,
                PodName::Fixed(name),
                super::controller_ref(
                    "apps/v1",
                    "StatefulSet",
                    &if w == 0 {
                        owner.name.to_string()
                    } else {
                        leader_name.clone()
                    },
                    "",
                ),
                path.to_string(),
            );
            pod.labels.extend(BTreeMap::from([
                (NAME_KEY.to_string(), owner.name.to_string()),
                (
                    "leaderworkerset.sigs.k8s.io/group-index".to_string(),
                    g.to_string(),
                ),
                (
                    "leaderworkerset.sigs.k8s.io/worker-index".to_string(),
                    w.to_string(),
                ),
                (
                    "leaderworkerset.sigs.k8s.io/group-key".to_string(),
                    group_key.clone(),
                ),
            ]));
            pod.annotations
                .insert("leaderworkerset.sigs.k8s.io/size".into(), size.to_string());
            pod.group = Some(leader_name.clone());
            pods.push(pod);
        }
        if !pods.is_empty() {
            let min = i32::try_from(pods.len()).unwrap_or(i32::MAX);
            out.pod_groups.push(super::pod_group(
                owner,
                &leader_name,
                Some((owner.name, "group")),
                gang(min),
                exclusive.as_deref(),
            ));
            groups_made = true;
        }
        out.pods.extend(pods);
    }
    if groups_made {
        out.workloads.push(super::workload(
            owner,
            "leaderworkerset.x-k8s.io",
            owner.name,
            vec![super::template("group", gang(size), exclusive.as_deref())],
        ));
    }
    Ok(out)
}
