//! JobSet (`jobset.x-k8s.io/v1alpha2`): per replicated Job, `replicas` (default 1) child Jobs
//! named `<jobset>-<replicatedJob>-<index>`, each expanded as the Job controller expands a
//! Job (see `job`), with JobSet's defaults (completion mode Indexed, restart policy
//! OnFailure) and labels (`jobset.sigs.k8s.io/jobset-name`, `replicatedjob-name`,
//! `job-index`, `job-global-index`, `replicatedjob-replicas`, `restart-attempt` and
//! `job-key`, the SHA-1 of `<namespace>/<job>`). A suspended JobSet has no pods. Names of
//! replicated Jobs must be unique.
//!
//! Exclusive topology (annotation `alpha.jobset.sigs.k8s.io/exclusive-topology: KEY` on the
//! JobSet or a replicated Job's template): JobSet's pod webhook gives each child Job's pod of
//! completion index 0 a required pod affinity to its own Job's pods and a required
//! anti-affinity to other Jobs' pods in the KEY domain, and pins the other pods to the domain
//! their leader landed in. lockstep gives the leaders the same affinities and makes each
//! child Job a gang PodGroup `<job>` (minCount its pods) with topology constraint KEY, so a
//! Job's pods land in one domain, all or nothing, and no two Jobs share a domain. Without the
//! annotation a child Job's pods are independent (the Job controller does not create
//! Workloads for Jobs that have a controller).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::Deserialize;
use serde_json::Value as Json;

use super::job::{self, JobPods};
use super::{Existing, Expansion, Owner, gang, pod_group, sha1_hex};
use crate::error::LoadError;

pub(crate) const EXCLUSIVE_KEY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
const JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";

/// `jobset.x-k8s.io/v1alpha2` JobSet.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobSet {
    #[serde(default)]
    pub metadata: meta::ObjectMeta,
    #[serde(default)]
    pub spec: JobSetSpec,
    /// Written by the controller; not read.
    #[allow(dead_code)]
    pub status: Option<Json>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobSetSpec {
    pub replicated_jobs: Option<Vec<ReplicatedJob>>,
    pub network: Option<Json>,
    pub success_policy: Option<Json>,
    pub failure_policy: Option<Json>,
    pub startup_policy: Option<Json>,
    pub suspend: Option<bool>,
    pub coordinator: Option<Json>,
    pub managed_by: Option<String>,
    #[serde(rename = "ttlSecondsAfterFinished")]
    pub ttl_seconds_after_finished: Option<i32>,
    pub volume_claim_policies: Option<Json>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReplicatedJob {
    #[serde(default)]
    pub name: String,
    pub group_name: Option<String>,
    #[serde(default)]
    pub template: batch::JobTemplateSpec,
    pub replicas: Option<i32>,
    pub depends_on: Option<Json>,
}

/// JobSet's name of child Job `index` of replicated Job `rjob`.
pub(crate) fn job_name(jobset: &str, rjob: &str, index: i64) -> String {
    format!("{jobset}-{rjob}-{index}")
}

pub(crate) fn expand(
    owner: &Owner,
    js: &JobSet,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let mut out = Expansion::default();
    let rjobs = js.spec.replicated_jobs.as_deref().unwrap_or_default();
    if rjobs.is_empty() {
        return Err(owner.invalid(
            "spec.replicatedJobs",
            "required: a JobSet needs at least one replicated Job",
        ));
    }
    let mut names = BTreeSet::new();
    for (i, r) in rjobs.iter().enumerate() {
        if r.name.is_empty() {
            return Err(owner.invalid(
                format!("spec.replicatedJobs[{i}].name"),
                "required: every replicated Job needs a name",
            ));
        }
        if !names.insert(r.name.as_str()) {
            return Err(owner.invalid(
                format!("spec.replicatedJobs[{i}].name"),
                format!(
                    "{:?} is the name of an earlier replicated Job; replicated Job names must be \
                     unique",
                    r.name
                ),
            ));
        }
        super::non_negative(
            owner,
            &format!("spec.replicatedJobs[{i}].replicas"),
            r.replicas,
        )?;
    }
    if js.spec.suspend == Some(true) {
        return Ok(out);
    }
    let jobset_exclusive = js
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXCLUSIVE_KEY))
        .cloned();
    let mut global = 0i64;
    let mut pods_wanted = 0i64;
    for (i, r) in rjobs.iter().enumerate() {
        let replicas = i64::from(r.replicas.unwrap_or(1));
        let parallelism = r
            .template
            .spec
            .as_ref()
            .and_then(|s| s.parallelism)
            .unwrap_or(1);
        pods_wanted = pods_wanted.saturating_add(replicas.saturating_mul(i64::from(parallelism)));
        super::check_pod_count(
            owner,
            &format!("spec.replicatedJobs[{i}].replicas"),
            pods_wanted,
        )?;
        let exclusive = jobset_exclusive.clone().or_else(|| {
            r.template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(EXCLUSIVE_KEY))
                .cloned()
        });
        if let Some(key) = &exclusive
            && let Some(why) = crate::route::label_key_error(key)
        {
            return Err(owner.invalid(
                format!("metadata.annotations[{EXCLUSIVE_KEY}]"),
                format!("{key:?} is not a topology key: {why}"),
            ));
        }
        let mut spec = r.template.spec.clone().unwrap_or_default();
        // JobSet's default restart policy.
        if let Some(s) = spec.template.spec.as_mut()
            && s.restart_policy.is_none()
        {
            s.restart_policy = Some("OnFailure".into());
        }
        for index in 0..replicas {
            let name = job_name(owner.name, &r.name, index);
            let key = sha1_hex(&format!("{}/{name}", owner.namespace));
            let mut labels = BTreeMap::from([
                (
                    "jobset.sigs.k8s.io/jobset-name".to_string(),
                    owner.name.to_string(),
                ),
                (
                    "jobset.sigs.k8s.io/replicatedjob-name".to_string(),
                    r.name.clone(),
                ),
                (
                    "jobset.sigs.k8s.io/replicatedjob-replicas".to_string(),
                    replicas.to_string(),
                ),
                (
                    "jobset.sigs.k8s.io/job-index".to_string(),
                    index.to_string(),
                ),
                (
                    "jobset.sigs.k8s.io/job-global-index".to_string(),
                    global.to_string(),
                ),
                (
                    "jobset.sigs.k8s.io/restart-attempt".to_string(),
                    "0".to_string(),
                ),
                (JOB_KEY.to_string(), key.clone()),
            ]);
            if let Some(g) = &r.group_name {
                labels.insert("jobset.sigs.k8s.io/group-name".into(), g.clone());
            }
            let mut annotations = labels.clone();
            if let Some(k) = &exclusive {
                annotations.insert(EXCLUSIVE_KEY.into(), k.clone());
            }
            let at = format!("spec.replicatedJobs[{i}].template.spec");
            let job_pods = JobPods {
                name: &name,
                spec: &spec,
                at: &at,
                controller: super::controller_ref("batch/v1", "Job", &name, ""),
                labels,
                annotations,
                default_mode: "Indexed",
            };
            let (mut pods, adopted) = job::pods(owner, &job_pods, existing)?;
            out.adopted.extend(adopted);
            if let Some(k) = &exclusive {
                let size = i32::try_from(pods.len()).unwrap_or(i32::MAX);
                if size > 0 {
                    out.pod_groups
                        .push(pod_group(owner, &name, None, gang(size), Some(k)));
                }
                for p in &mut pods {
                    p.group = Some(name.clone());
                    if p.annotations.get(job::INDEX_KEY).map(String::as_str) == Some("0") {
                        exclusive_affinities(&mut p.spec, &key, k);
                    }
                }
            }
            out.pods.extend(pods);
            global += 1;
        }
    }
    Ok(out)
}

/// JobSet's exclusive placement for a Job's leader pod: required affinity to pods of its own
/// Job key and anti-affinity to pods of any other Job key, in the `topology` domain, across
/// namespaces.
fn exclusive_affinities(spec: &mut core::PodSpec, job_key: &str, topology: &str) {
    let term = |expressions: Vec<meta::LabelSelectorRequirement>| core::PodAffinityTerm {
        label_selector: Some(meta::LabelSelector {
            match_expressions: Some(expressions),
            match_labels: None,
        }),
        topology_key: topology.to_string(),
        namespace_selector: Some(meta::LabelSelector::default()),
        ..Default::default()
    };
    let requirement =
        |operator: &str, values: Option<Vec<String>>| meta::LabelSelectorRequirement {
            key: JOB_KEY.to_string(),
            operator: operator.to_string(),
            values,
        };
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    affinity
        .pod_affinity
        .get_or_insert_with(Default::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term(vec![requirement(
            "In",
            Some(vec![job_key.to_string()]),
        )]));
    affinity
        .pod_anti_affinity
        .get_or_insert_with(Default::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term(vec![
            requirement("Exists", None),
            requirement("NotIn", Some(vec![job_key.to_string()])),
        ]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_jobs_are_named_as_jobset_names_them() {
        assert_eq!(job_name("train", "workers", 2), "train-workers-2");
    }
}
