//! batch/v1 Job, expanded as the Job controller of Kubernetes 1.37 expands it.
//!
//! Defaults as the API server's: without `completions` and `parallelism` both are 1; without
//! `parallelism` it is 1; `completionMode` is NonIndexed. A suspended Job has no pods.
//! Validated as the API server does: `parallelism` and `completions` at least 0, an Indexed
//! Job has `completions`, the template's `restartPolicy` is Never or OnFailure.
//!
//! Pods: the controller keeps `min(parallelism, completions - succeeded)` pods active (a Job
//! without `completions` keeps `parallelism` until one succeeds). Pods of the input whose
//! controller ownerReference is the Job count: running ones as active, Succeeded ones as
//! done (for an Indexed Job, by their `batch.kubernetes.io/job-completion-index`). New
//! pods are named `<job>-` (NonIndexed) or `<job>-<index>-` (Indexed, the lowest indexes
//! neither done nor active first) completed with a number, labelled `job-name` and
//! `batch.kubernetes.io/job-name` (and with the index label, annotation and hostname
//! `<job>-<index>` when Indexed).
//!
//! Gang: a Job with `spec.scheduling` (the Workload API integration, feature gate
//! WorkloadWithJob) that has no controller and whose template names no PodGroup gets the
//! Workload and PodGroup the Job controller creates: one template `<job>-pgt-0` whose policy
//! is the Job's (`gang.minCount` defaulting to `parallelism`, at least 1; basic when no
//! policy is given), with its topology constraint, disruption mode, claims and the template's
//! priority class; every pod joins the PodGroup. The controller names the Workload
//! `<job>-<hash of the Job's UID>`, which the API server assigns; lockstep names it `<job>`,
//! and names the PodGroup from it exactly as the controller does:
//! `<workload>-<template>-<hash>`. Without `spec.scheduling` the pods are independent.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::scheduling::v1beta1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{Existing, Expansion, InputPod, NewPod, Owner, PodName, basic, controller_of, gang};
use crate::error::LoadError;

pub(crate) const INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
/// The longest generateName the API server keeps whole.
const MAX_GENERATED_NAME_PREFIX: usize = 58;

/// The pods of one Job, whether given as a Job or made by a JobSet.
pub(crate) struct JobPods<'a> {
    pub name: &'a str,
    pub spec: &'a batch::JobSpec,
    /// Field path of the Job spec in the object, e.g. `spec` or
    /// `spec.replicatedJobs[0].template.spec`.
    pub at: &'a str,
    /// The Job's ownerReference, set on its pods.
    pub controller: OwnerReference,
    /// Labels and annotations the Job adds to its template's (a JobSet's).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The completion mode when the Job does not set one (JobSet defaults to Indexed).
    pub default_mode: &'static str,
}

pub(crate) fn expand(
    owner: &Owner,
    job: &batch::Job,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let mut out = Expansion::default();
    let Some(spec) = &job.spec else {
        return Err(owner.invalid("spec", "required: a Job needs a spec with a pod template"));
    };
    let mut labels = BTreeMap::new();
    if let Some(uid) = job.metadata.uid.as_ref().filter(|u| !u.is_empty()) {
        labels.insert("controller-uid".to_string(), uid.clone());
        labels.insert(
            "batch.kubernetes.io/controller-uid".to_string(),
            uid.clone(),
        );
    }
    let job_pods = JobPods {
        name: owner.name,
        spec,
        at: "spec",
        controller: owner.controller_ref(),
        labels,
        annotations: BTreeMap::new(),
        default_mode: "NonIndexed",
    };
    let (mut pods, adopted) = pods(owner, &job_pods, existing)?;
    out.adopted = adopted;

    let template_group = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_group.as_ref());
    if let Some(scheduling) = &spec.scheduling
        && controller_of(&job.metadata).is_none()
        && template_group.is_none()
    {
        let parallelism = spec.parallelism.unwrap_or(1);
        let policy = match scheduling.scheduling_policy.as_ref() {
            Some(p) if p.gang.is_some() && p.basic.is_some() => {
                return Err(owner.invalid(
                    "spec.scheduling.schedulingPolicy",
                    "both basic and gang are set; set exactly one",
                ));
            }
            Some(p) if p.gang.is_some() => {
                let min = p.gang.as_ref().and_then(|g| g.min_count);
                if let Some(m) = min
                    && m < 1
                {
                    return Err(owner.invalid(
                        "spec.scheduling.schedulingPolicy.gang.minCount",
                        format!("{m}: must be at least 1"),
                    ));
                }
                gang(min.unwrap_or(parallelism.max(1)))
            }
            _ => basic(),
        };
        let topology = scheduling
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .map(|t| t.iter().map(|t| t.key.clone()).collect::<Vec<_>>())
            .unwrap_or_default();
        if topology.len() > 1 {
            return Err(owner.invalid(
                "spec.scheduling.schedulingConstraints.topology",
                format!(
                    "{} topology constraints; at most 1 is allowed",
                    topology.len()
                ),
            ));
        }
        let disruption_mode = scheduling
            .disruption_mode
            .as_ref()
            .map(|d| api::DisruptionMode {
                all: d.all.as_ref().map(|a| api::AllDisruptionMode(a.0.clone())),
                single: d
                    .single
                    .as_ref()
                    .map(|s| api::SingleDisruptionMode(s.0.clone())),
            });
        let claims = scheduling.resource_claims.as_ref().map(|claims| {
            claims
                .iter()
                .map(|c| api::PodGroupResourceClaim {
                    name: c.name.clone(),
                    resource_claim_name: c.resource_claim_name.clone(),
                    resource_claim_template_name: c.resource_claim_template_name.clone(),
                })
                .collect::<Vec<_>>()
        });
        let priority_class = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.clone())
            .filter(|s| !s.is_empty());
        let workload_name = owner.name.to_string();
        let template_name = format!("{}-pgt-0", owner.name);
        let group_name = pod_group_name(&workload_name, &template_name);
        let mut t = super::template(
            &template_name,
            policy.clone(),
            topology.first().map(String::as_str),
        );
        t.disruption_mode = disruption_mode.clone();
        t.resource_claims = claims.clone();
        t.priority_class_name = priority_class.clone();
        out.workloads
            .push(super::workload(owner, "batch", &workload_name, vec![t]));
        let mut g = super::pod_group(
            owner,
            &group_name,
            Some((&workload_name, &template_name)),
            policy,
            topology.first().map(String::as_str),
        );
        g.spec.disruption_mode = disruption_mode;
        g.spec.resource_claims = claims;
        g.spec.priority_class_name = priority_class;
        out.pod_groups.push(g);
        for p in &mut pods {
            p.group = Some(group_name.clone());
        }
    }
    out.pods = pods;
    Ok(out)
}

/// The Job controller's PodGroup name for template `template` of Workload `workload`:
/// `<workload>-<template>-<hash>`, the hash FNV-1a (32 bits) of both names, its decimal
/// digits mapped to the API server's name alphabet; the names are cut to fit 253
/// characters, each keeping up to half the room when both are long.
pub(crate) fn pod_group_name(workload: &str, template: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u32 = 0x811c_9dc5;
    for b in workload.bytes().chain(template.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let hash: String = h
        .to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect();
    let available = 253 - hash.len() - 2;
    let (mut wl, mut tpl) = (workload, template);
    if wl.len() + tpl.len() > available {
        let half = available / 2;
        if wl.len() <= half {
            tpl = super::cut(tpl, available - wl.len());
        } else if tpl.len() <= half {
            wl = super::cut(wl, available - tpl.len());
        } else {
            wl = super::cut(wl, available - half);
            tpl = super::cut(tpl, half);
        }
    }
    format!("{wl}-{tpl}-{hash}")
}

/// The Job controller's generateName for the pod of `index` (None for NonIndexed): the Job's
/// name is cut so that the prefix fits 58 characters.
pub(crate) fn pod_prefix(job: &str, index: Option<i64>) -> String {
    match index {
        None => super::generate_name(&format!("{job}-")),
        Some(i) => {
            let suffix = format!("-{i}-");
            let whole = format!("{job}{suffix}");
            if whole.len() > MAX_GENERATED_NAME_PREFIX {
                format!(
                    "{}{suffix}",
                    super::cut(&whole, MAX_GENERATED_NAME_PREFIX - suffix.len())
                )
            } else {
                whole
            }
        }
    }
}

fn completion_index(pod: &InputPod) -> Option<i64> {
    let parse = |v: &str| v.parse::<i64>().ok();
    match pod.index_annotation() {
        Some(v) => parse(v),
        None => pod.label(INDEX_KEY).and_then(parse),
    }
}

/// Validates a Job spec and returns the pods its controller would create now, and the
/// names of the input's pods it counts as its own.
pub(crate) fn pods(
    owner: &Owner,
    job: &JobPods,
    existing: &Existing,
) -> Result<(Vec<NewPod>, Vec<String>), LoadError> {
    let at = job.at;
    let spec = job.spec;
    super::non_negative(owner, &format!("{at}.parallelism"), spec.parallelism)?;
    super::non_negative(owner, &format!("{at}.completions"), spec.completions)?;
    let mode = spec.completion_mode.as_deref().unwrap_or(job.default_mode);
    let indexed = match mode {
        "NonIndexed" => false,
        "Indexed" => true,
        other => {
            return Err(owner.invalid(
                format!("{at}.completionMode"),
                format!("{other:?}: supported values are \"NonIndexed\" and \"Indexed\""),
            ));
        }
    };
    let completions = spec
        .completions
        .or(spec.parallelism.is_none().then_some(1))
        .map(i64::from);
    if indexed && completions.is_none() {
        return Err(owner.invalid(
            format!("{at}.completions"),
            "required when completionMode is Indexed; give the number of indexes",
        ));
    }
    let restart = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref());
    if !matches!(restart, Some("Never" | "OnFailure")) {
        return Err(owner.invalid(
            format!("{at}.template.spec.restartPolicy"),
            format!(
                "{}: a Job's pods must have restartPolicy Never or OnFailure; set one of them",
                restart.map_or("unset (Always)".to_string(), |r| format!("{r:?}"))
            ),
        ));
    }
    if spec
        .template
        .spec
        .as_ref()
        .is_none_or(|s| s.containers.is_empty())
    {
        return Err(owner.invalid(
            format!("{at}.template.spec.containers"),
            "required: the pod template needs at least one container",
        ));
    }
    if spec.suspend == Some(true) {
        return Ok((Vec::new(), Vec::new()));
    }
    let parallelism = i64::from(spec.parallelism.unwrap_or(1));
    super::check_pod_count(owner, &format!("{at}.parallelism"), parallelism)?;

    let owned: Vec<InputPod> = existing
        .all(owner.namespace)
        .filter(|p| p.controlled_by("Job", job.name))
        .collect();
    let adopted = owned.iter().map(InputPod::name).collect();
    let active: Vec<InputPod> = owned.iter().copied().filter(InputPod::is_active).collect();
    let succeeded: Vec<InputPod> = owned
        .iter()
        .copied()
        .filter(|p| p.phase() == Some("Succeeded"))
        .collect();

    let mut indexes: Vec<Option<i64>> = Vec::new();
    if indexed {
        let completions = completions.expect("checked above");
        let done: BTreeSet<i64> = succeeded.iter().filter_map(completion_index).collect();
        let running: BTreeSet<i64> = active.iter().filter_map(completion_index).collect();
        let remaining = completions - done.len() as i64;
        let want = parallelism.min(remaining).max(0) - running.len() as i64;
        indexes.extend(
            (0..completions)
                .filter(|i| !done.contains(i) && !running.contains(i))
                .take(usize::try_from(want.max(0)).unwrap_or(0))
                .map(Some),
        );
    } else {
        let want = match completions {
            None if !succeeded.is_empty() => 0,
            None => parallelism,
            Some(c) => parallelism.min(c - succeeded.len() as i64),
        };
        let create = (want - active.len() as i64).max(0);
        indexes.extend((0..create).map(|_| None));
    }

    let template = &spec.template;
    let mut out = Vec::with_capacity(indexes.len());
    for index in indexes {
        let mut pod = NewPod::from_template(
            template,
            match index {
                Some(_) => PodName::Indexed(pod_prefix(job.name, index)),
                None => PodName::Generate(pod_prefix(job.name, index)),
            },
            job.controller.clone(),
            format!("{at}.template"),
        );
        pod.labels.extend(job.labels.clone());
        pod.annotations.extend(job.annotations.clone());
        pod.labels.insert("job-name".into(), job.name.into());
        pod.labels
            .insert("batch.kubernetes.io/job-name".into(), job.name.into());
        if let Some(i) = index {
            pod.labels.insert(INDEX_KEY.into(), i.to_string());
            pod.annotations.insert(INDEX_KEY.into(), i.to_string());
            pod.spec.hostname = Some(format!("{}-{i}", job.name));
        }
        out.push(pod);
    }
    Ok((out, adopted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_group_names_follow_the_job_controller() {
        // FNV-1a of "train" + "train-pgt-0", its decimal digits mapped to the alphabet.
        let name = pod_group_name("train", "train-pgt-0");
        assert!(name.starts_with("train-train-pgt-0-"), "{name}");
        let hash = name.rsplit('-').next().unwrap();
        assert!((8..=10).contains(&hash.len()), "{hash}");
        assert!(
            hash.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        );
        assert_eq!(name, pod_group_name("train", "train-pgt-0"));
        assert_ne!(name, pod_group_name("train2", "train2-pgt-0"));
        let long = pod_group_name(&"w".repeat(200), &"t".repeat(200));
        assert!(long.len() <= 253, "{}", long.len());
    }

    #[test]
    fn pod_group_hash_is_fnv1a_in_the_name_alphabet() {
        // FNV-1a 32 of "ab" is 0x4d2505ca = 1294271946; digit '1' (49) -> 49 % 27 = 22 -> '4'.
        let name = pod_group_name("a", "b");
        let digits = 1_294_271_946u32.to_string();
        let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
        let expected: String = digits
            .bytes()
            .map(|d| alphabet[usize::from(d) % 27] as char)
            .collect();
        assert_eq!(name, format!("a-b-{expected}"));
    }

    #[test]
    fn indexed_prefixes_keep_the_index_when_cut() {
        assert_eq!(pod_prefix("train", Some(3)), "train-3-");
        assert_eq!(pod_prefix("train", None), "train-");
        let long = "j".repeat(70);
        let p = pod_prefix(&long, Some(12));
        assert_eq!(p.len(), 58);
        assert!(p.ends_with("-12-"));
    }
}
