//! RayCluster and RayJob (`ray.io/v1`), expanded as KubeRay's operator expands them.
//!
//! Pods. One head pod unless one is running (pods are counted by KubeRay's labels
//! `ray.io/cluster`, `ray.io/node-type` and `ray.io/group`, as the operator lists them). Per
//! worker group, the desired pods are `replicas` clamped into `[minReplicas, maxReplicas]`,
//! times `numOfHosts`, and 0 when the group is suspended; running workers of the group count
//! against them (for `numOfHosts` above 1, whole replicas only: pods sharing a
//! `ray.io/worker-group-replica-name` label, as many as `numOfHosts`). A suspended RayCluster
//! has no pods. Names are KubeRay's: `<cluster>-head-` and `<cluster>-<group>-worker-`
//! (each prefix before `-head`/`-worker` cut to 50 characters, lower-cased) completed with a
//! number (see the parent module). Labels are KubeRay's (`ray.io/is-ray-node`,
//! `ray.io/cluster`, `ray.io/node-type`, `ray.io/group` (`headgroup` for the head),
//! `ray.io/identifier`, `app.kubernetes.io/name`, `app.kubernetes.io/created-by`, the
//! replica index, and for multi-host groups the replica name `<group>-<index>` (KubeRay
//! uses five random characters) and host index), over the template's and the group's
//! `labels`. Workers get KubeRay's `wait-gcs-ready` init container (200m CPU, 256Mi); with
//! `enableInTreeAutoscaling` the head gets the `autoscaler` sidecar (500m CPU, 512Mi, or
//! `autoscalerOptions.resources`). `scaleStrategy.workersToDelete` is not applied.
//!
//! Gangs, by the cluster's opt-in:
//! - label `ray.io/gang-scheduling-enabled: "true"` (KubeRay's Workload API scheduler): a
//!   Workload `<cluster>` with one gang template `cluster`, one PodGroup `<cluster>-cluster`
//!   of minCount 1 + every desired worker, which every pod joins;
//! - annotation `ray.io/k8s-workload-scheduling: "true"` (the per-worker-group design): a
//!   Workload `<cluster>` with a basic template `head` and a gang template `worker-<group>`
//!   per worker group with desired pods, PodGroups `<cluster>-head` and
//!   `<cluster>-worker-<group>` of minCount the group's desired pods; at most 7 worker
//!   groups (a Workload holds 8 templates);
//! - annotation `lockstep.dev/ray-scheduling: composite` (lockstep's own, for Kubernetes
//!   1.37): the per-group PodGroups, without a Workload, under one CompositePodGroup
//!   `<cluster>` whose gang needs every one of them, so the whole cluster is a gang of gangs.
//!
//! A cluster with `enableInTreeAutoscaling` gets no gang (with KubeRay's warning); one without
//! an opt-in gets plain pods. A RayJob expands its `rayClusterSpec` as the RayCluster KubeRay
//! makes for it: named `status.rayClusterName`, else `<rayjob>-` completed with a number,
//! labelled and annotated like the RayJob; none when the RayJob is suspended or selects an
//! existing cluster (`clusterSelector`). The submitter Job is not expanded.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value as Json;

use super::{
    Existing, Expansion, InputPod, NewPod, Owner, PodName, basic, gang, pod_group, template,
    workload,
};
use crate::error::LoadError;
use crate::workload_api;

/// The label that opts a RayCluster into KubeRay's whole-cluster gang.
pub(crate) const GANG_LABEL: &str = "ray.io/gang-scheduling-enabled";
/// The annotation that opts a RayCluster into one gang per worker group.
pub(crate) const PER_GROUP_ANNOTATION: &str = "ray.io/k8s-workload-scheduling";
/// lockstep's own opt-in: the per-group gangs under one CompositePodGroup.
pub(crate) const COMPOSITE_ANNOTATION: &str = "lockstep.dev/ray-scheduling";
/// Worker groups the per-group mapping allows: a Workload holds at most 8 templates.
const MAX_WORKER_GROUPS: usize = 7;

/// `ray.io/v1` RayCluster.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RayCluster {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RayClusterSpec,
    /// Written by the operator; not read.
    #[allow(dead_code)]
    pub status: Option<Json>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RayClusterSpec {
    pub upgrade_strategy: Option<Json>,
    pub auth_options: Option<Json>,
    pub suspend: Option<bool>,
    pub managed_by: Option<String>,
    pub autoscaler_options: Option<AutoscalerOptions>,
    pub head_service_annotations: Option<BTreeMap<String, String>>,
    pub enable_in_tree_autoscaling: Option<bool>,
    pub gcs_fault_tolerance_options: Option<Json>,
    pub history_server_options: Option<Json>,
    pub network_policy: Option<Json>,
    #[serde(rename = "tlsOptions")]
    pub tls_options: Option<Json>,
    pub head_group_spec: Option<HeadGroupSpec>,
    pub ray_version: Option<String>,
    pub worker_group_specs: Option<Vec<WorkerGroupSpec>>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeadGroupSpec {
    pub template: Option<core::PodTemplateSpec>,
    pub head_service: Option<Json>,
    pub enable_ingress: Option<bool>,
    pub ingress_options: Option<Json>,
    pub resources: Option<BTreeMap<String, String>>,
    pub labels: Option<BTreeMap<String, String>>,
    pub ray_start_params: Option<BTreeMap<String, Json>>,
    pub service_type: Option<String>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkerGroupSpec {
    pub suspend: Option<bool>,
    #[serde(default)]
    pub group_name: String,
    pub replicas: Option<i32>,
    pub min_replicas: Option<i32>,
    pub max_replicas: Option<i32>,
    pub idle_timeout_seconds: Option<i32>,
    pub priority: Option<i32>,
    pub resources: Option<BTreeMap<String, String>>,
    pub labels: Option<BTreeMap<String, String>>,
    pub ray_start_params: Option<BTreeMap<String, Json>>,
    pub template: Option<core::PodTemplateSpec>,
    pub scale_strategy: Option<ScaleStrategy>,
    pub num_of_hosts: Option<i32>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScaleStrategy {
    pub workers_to_delete: Option<Vec<String>>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AutoscalerOptions {
    pub resources: Option<core::ResourceRequirements>,
    pub image: Option<String>,
    pub image_pull_policy: Option<String>,
    pub security_context: Option<Json>,
    pub idle_timeout_seconds: Option<i32>,
    pub upscaling_mode: Option<String>,
    pub version: Option<String>,
    pub env: Option<Json>,
    pub env_from: Option<Json>,
    pub volume_mounts: Option<Json>,
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
}

/// `ray.io/v1` RayJob.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RayJob {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RayJobSpec,
    /// Written by the operator; only `rayClusterName` is read.
    pub status: Option<Json>,
}

// Every API field is declared, so that only fields the API does not define are reported
// as unknown; lockstep reads some of them.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RayJobSpec {
    pub active_deadline_seconds: Option<i32>,
    pub backoff_limit: Option<i32>,
    pub ray_cluster_spec: Option<RayClusterSpec>,
    pub submitter_pod_template: Option<Json>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub cluster_selector: Option<BTreeMap<String, String>>,
    pub submitter_config: Option<Json>,
    pub managed_by: Option<String>,
    pub deletion_strategy: Option<Json>,
    pub entrypoint: Option<String>,
    #[serde(rename = "runtimeEnvYAML")]
    pub runtime_env_yaml: Option<String>,
    pub job_id: Option<String>,
    pub submission_mode: Option<String>,
    pub entrypoint_resources: Option<String>,
    pub entrypoint_num_cpus: Option<f64>,
    pub entrypoint_num_gpus: Option<f64>,
    #[serde(rename = "ttlSecondsAfterFinished")]
    pub ttl_seconds_after_finished: Option<i32>,
    pub pre_running_deadline_seconds: Option<i32>,
    pub shutdown_after_job_finishes: Option<bool>,
    pub suspend: Option<bool>,
}

/// How a cluster's pods are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapping {
    Plain,
    WholeCluster,
    PerGroup,
    Composite,
}

fn is_true(map: Option<&BTreeMap<String, String>>, key: &str) -> bool {
    map.and_then(|m| m.get(key))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// KubeRay's desired pods of a worker group.
pub(crate) fn desired_workers(group: &WorkerGroupSpec) -> i64 {
    if group.suspend == Some(true) {
        return 0;
    }
    let min = i64::from(group.min_replicas.unwrap_or(0));
    let max = i64::from(group.max_replicas.unwrap_or(i32::MAX));
    let replicas = match group.replicas {
        None => min,
        Some(r) if i64::from(r) < min => min,
        Some(r) if i64::from(r) > max => max,
        Some(r) => i64::from(r),
    };
    replicas * i64::from(group.num_of_hosts.unwrap_or(1))
}

/// KubeRay's pod name prefix: `<prefix>-<node type>-`, the prefix cut to 50 characters and
/// the whole lower-cased.
pub(crate) fn pod_prefix(prefix: &str, node_type: &str) -> String {
    let cut: String = prefix.chars().take(50).collect();
    format!("{cut}-{node_type}-").to_lowercase()
}

pub(crate) fn expand_cluster(
    owner: &Owner,
    cluster: &RayCluster,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    expand_spec(
        owner,
        owner.name,
        cluster.metadata.labels.as_ref(),
        cluster.metadata.annotations.as_ref(),
        &cluster.spec,
        "spec",
        existing,
    )
}

pub(crate) fn expand_job(
    owner: &Owner,
    job: &RayJob,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let spec = &job.spec;
    if spec.suspend == Some(true)
        || spec
            .cluster_selector
            .as_ref()
            .is_some_and(|s| !s.is_empty())
    {
        return Ok(Expansion::default());
    }
    let Some(cluster_spec) = &spec.ray_cluster_spec else {
        return Err(owner.invalid(
            "spec.rayClusterSpec",
            "required: a RayJob needs either rayClusterSpec or clusterSelector",
        ));
    };
    let status_name = job
        .status
        .as_ref()
        .and_then(|s| s.get("rayClusterName"))
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty());
    let cluster_name = match status_name {
        Some(name) => name.to_string(),
        None => {
            // KubeRay names the cluster `<rayjob>-<5 random characters>`; the number stands
            // in for them (the first whose head pod name is unused).
            let taken: BTreeSet<String> = existing.all(owner.namespace).map(|p| p.name()).collect();
            (0u64..)
                .map(|n| format!("{}-{n}", owner.name))
                .find(|c| !taken.iter().any(|p| p.starts_with(&format!("{c}-head-"))))
                .expect("a free name")
        }
    };
    let mut labels = job.metadata.labels.clone().unwrap_or_default();
    labels.insert("ray.io/originated-from-cr-name".into(), owner.name.into());
    labels.insert("ray.io/originated-from-crd".into(), "RayJob".into());
    expand_spec(
        owner,
        &cluster_name,
        Some(&labels),
        job.metadata.annotations.as_ref(),
        cluster_spec,
        "spec.rayClusterSpec",
        existing,
    )
}

/// The expansion of a RayCluster spec named `cluster` (`at` is the spec's field path).
fn expand_spec(
    owner: &Owner,
    cluster: &str,
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
    spec: &RayClusterSpec,
    at: &str,
    existing: &Existing,
) -> Result<Expansion, LoadError> {
    let mut out = Expansion::default();
    let Some(head) = &spec.head_group_spec else {
        return Err(owner.invalid(
            format!("{at}.headGroupSpec"),
            "required: a RayCluster needs a head group (headGroupSpec with a pod template)",
        ));
    };
    let head_template = pod_template(
        owner,
        &format!("{at}.headGroupSpec.template"),
        head.template.as_ref(),
    )?;
    let groups = spec.worker_group_specs.as_deref().unwrap_or_default();
    let mut names = BTreeSet::new();
    for (i, g) in groups.iter().enumerate() {
        let path = format!("{at}.workerGroupSpecs[{i}]");
        if g.group_name.is_empty() {
            return Err(owner.invalid(
                format!("{path}.groupName"),
                "required: every worker group needs a groupName",
            ));
        }
        if !names.insert(g.group_name.as_str()) {
            return Err(owner.invalid(
                format!("{path}.groupName"),
                format!(
                    "worker group name {:?} is used twice; give every worker group its own name",
                    g.group_name
                ),
            ));
        }
        for (field, value) in [
            ("replicas", g.replicas),
            ("minReplicas", g.min_replicas),
            ("maxReplicas", g.max_replicas),
        ] {
            super::non_negative(owner, &format!("{path}.{field}"), value)?;
        }
        if let (Some(min), Some(max)) = (g.min_replicas, g.max_replicas)
            && min > max
        {
            return Err(owner.invalid(
                format!("{path}.minReplicas"),
                format!("minReplicas ({min}) is greater than maxReplicas ({max}); make it at most maxReplicas"),
            ));
        }
        if let Some(n) = g.num_of_hosts
            && n < 1
        {
            return Err(owner.invalid(
                format!("{path}.numOfHosts"),
                format!("{n}: must be at least 1 (the hosts of one replica)"),
            ));
        }
        pod_template(owner, &format!("{path}.template"), g.template.as_ref())?;
    }

    let autoscaling = spec.enable_in_tree_autoscaling == Some(true);
    let whole = is_true(labels, GANG_LABEL);
    let per_group = is_true(annotations, PER_GROUP_ANNOTATION);
    let composite = annotations
        .and_then(|a| a.get(COMPOSITE_ANNOTATION))
        .map(String::as_str);
    if let Some(value) = composite
        && value != "composite"
    {
        return Err(owner.invalid(
            format!("metadata.annotations[{COMPOSITE_ANNOTATION}]"),
            format!("{value:?}: the only value lockstep reads is \"composite\""),
        ));
    }
    let chosen: Vec<Mapping> = [
        (whole, Mapping::WholeCluster),
        (per_group, Mapping::PerGroup),
        (composite.is_some(), Mapping::Composite),
    ]
    .into_iter()
    .filter_map(|(on, m)| on.then_some(m))
    .collect();
    if chosen.len() > 1 {
        return Err(owner.invalid(
            "metadata",
            format!(
                "more than one gang mapping is asked for (label {GANG_LABEL}, annotations \
                 {PER_GROUP_ANNOTATION} and {COMPOSITE_ANNOTATION}); keep one of them"
            ),
        ));
    }
    let mut mapping = chosen.first().copied().unwrap_or(Mapping::Plain);
    if mapping != Mapping::Plain && autoscaling {
        out.warnings.push(format!(
            "warning: {} (in {}): skipping Kubernetes workload-aware scheduling: autoscaling \
             is not yet supported (enableInTreeAutoscaling); its pods are scheduled one by one",
            owner.object, owner.origin
        ));
        mapping = Mapping::Plain;
    }
    if matches!(mapping, Mapping::PerGroup | Mapping::Composite) && groups.len() > MAX_WORKER_GROUPS
    {
        return Err(owner.invalid(
            format!("{at}.workerGroupSpecs"),
            format!(
                "InvalidRayClusterSpec: {} worker groups, but one PodGroup per worker group \
                 allows at most {MAX_WORKER_GROUPS} (a Workload holds at most 8 PodGroup \
                 templates, one of them the head's); merge worker groups or use the \
                 whole-cluster gang (label {GANG_LABEL})",
                groups.len()
            ),
        ));
    }
    if spec.suspend == Some(true) {
        return Ok(out);
    }

    // Groups and their PodGroups.
    let desired: Vec<i64> = groups.iter().map(desired_workers).collect();
    let total: i64 = desired.iter().fold(0i64, |a, d| a.saturating_add(*d));
    super::check_pod_count(owner, &format!("{at}.workerGroupSpecs"), total)?;
    let head_group: Option<String>;
    let mut worker_groups: Vec<Option<String>> = vec![None; groups.len()];
    match mapping {
        Mapping::Plain => head_group = None,
        Mapping::WholeCluster => {
            let min_count = i32::try_from(1 + total).map_err(|_| {
                owner.invalid(
                    format!("{at}.workerGroupSpecs"),
                    "more desired workers than a gang's minCount can hold",
                )
            })?;
            let pg = format!("{cluster}-cluster");
            out.workloads.push(workload(
                owner,
                "ray.io",
                cluster,
                vec![template("cluster", gang(min_count), None)],
            ));
            out.pod_groups.push(pod_group(
                owner,
                &pg,
                Some((cluster, "cluster")),
                gang(min_count),
                None,
            ));
            head_group = Some(pg.clone());
            worker_groups = vec![Some(pg); groups.len()];
        }
        Mapping::PerGroup | Mapping::Composite => {
            let with_workload = mapping == Mapping::PerGroup;
            let mut templates = vec![template("head", basic(), None)];
            let head_pg = format!("{cluster}-head");
            let reference = |t: &str| -> Option<(&str, String)> {
                with_workload.then(|| (cluster, t.to_string()))
            };
            let mut children = vec![];
            let r = reference("head");
            children.push(pod_group(
                owner,
                &head_pg,
                r.as_ref().map(|(w, t)| (*w, t.as_str())),
                basic(),
                None,
            ));
            for (i, g) in groups.iter().enumerate() {
                if desired[i] == 0 {
                    continue;
                }
                let min_count = i32::try_from(desired[i]).map_err(|_| {
                    owner.invalid(
                        format!("{at}.workerGroupSpecs[{i}]"),
                        "more desired workers than a gang's minCount can hold",
                    )
                })?;
                let t = format!("worker-{}", g.group_name);
                let pg = format!("{cluster}-worker-{}", g.group_name);
                templates.push(template(&t, gang(min_count), None));
                let r = reference(&t);
                children.push(pod_group(
                    owner,
                    &pg,
                    r.as_ref().map(|(w, t)| (*w, t.as_str())),
                    gang(min_count),
                    None,
                ));
                worker_groups[i] = Some(pg);
            }
            if with_workload {
                out.workloads
                    .push(workload(owner, "ray.io", cluster, templates));
            } else {
                let count = i32::try_from(children.len()).unwrap_or(i32::MAX);
                for child in &mut children {
                    child.spec.parent_composite_pod_group_name = Some(cluster.to_string());
                }
                out.composites.push(workload_api::CompositePodGroup {
                    metadata: ObjectMeta {
                        name: Some(cluster.to_string()),
                        namespace: Some(owner.namespace.to_string()),
                        owner_references: Some(vec![owner.controller_ref()]),
                        ..Default::default()
                    },
                    spec: workload_api::CompositePodGroupSpec {
                        scheduling_policy:
                            k8s_openapi::api::scheduling::v1beta1::CompositePodGroupSchedulingPolicy {
                                gang: Some(
                                    k8s_openapi::api::scheduling::v1beta1::CompositeGangSchedulingPolicy {
                                        min_group_count: count,
                                    },
                                ),
                                basic: None,
                            },
                        ..Default::default()
                    },
                });
            }
            out.pod_groups.extend(children);
            head_group = Some(head_pg);
        }
    }
    let gang_scheduled = mapping != Mapping::Plain;

    // The head.
    let cluster_pods: Vec<InputPod> = existing
        .active(owner.namespace)
        .filter(|p| p.label("ray.io/cluster") == Some(cluster))
        .collect();
    let head_running = cluster_pods
        .iter()
        .filter(|p| p.label("ray.io/node-type") == Some("head"))
        .map(InputPod::name)
        .collect::<Vec<_>>();
    out.adopted.extend(head_running.iter().cloned());
    let owner_ref = super::controller_ref("ray.io/v1", "RayCluster", cluster, "");
    if head_running.is_empty() {
        let mut pod = NewPod::from_template(
            head_template,
            PodName::Generate(pod_prefix(cluster, "head")),
            owner_ref.clone(),
            format!("{at}.headGroupSpec.template"),
        );
        pod.labels = ray_labels(
            cluster,
            "head",
            "headgroup",
            &pod.labels,
            head.labels.as_ref(),
        );
        if autoscaling {
            let resources = spec
                .autoscaler_options
                .as_ref()
                .and_then(|o| o.resources.clone())
                .unwrap_or_else(|| fixed_resources("500m", "512Mi"));
            pod.spec.containers.push(core::Container {
                name: "autoscaler".into(),
                image: pod.spec.containers.first().and_then(|c| c.image.clone()),
                resources: Some(resources),
                ..Default::default()
            });
        }
        pod.group = head_group;
        if gang_scheduled {
            pod.spec.scheduler_name = Some("default-scheduler".into());
        }
        out.pods.push(pod);
    }

    // The workers.
    for (i, g) in groups.iter().enumerate() {
        let path = format!("{at}.workerGroupSpecs[{i}].template");
        let template = g.template.as_ref().expect("checked above");
        let hosts = i64::from(g.num_of_hosts.unwrap_or(1));
        let running: Vec<InputPod> = cluster_pods
            .iter()
            .copied()
            .filter(|p| {
                p.label("ray.io/node-type") == Some("worker")
                    && p.label("ray.io/group") == Some(g.group_name.as_str())
            })
            .collect();
        out.adopted.extend(running.iter().map(InputPod::name));
        let index_of = |p: &InputPod| {
            p.label("ray.io/worker-group-replica-index")
                .and_then(|v| v.parse::<i64>().ok())
        };
        // Replica indexes in use, and how many replicas to create.
        let mut used: BTreeSet<i64> = BTreeSet::new();
        let to_create = if hosts > 1 {
            let mut replicas: HashMap<&str, Vec<InputPod>> = HashMap::new();
            for p in &running {
                if let Some(r) = p.label("ray.io/worker-group-replica-name") {
                    replicas.entry(r).or_default().push(*p);
                }
            }
            let complete: Vec<&Vec<InputPod>> = replicas
                .values()
                .filter(|pods| pods.len() as i64 >= hosts)
                .collect();
            for pods in &complete {
                if let Some(i) = pods.first().and_then(index_of) {
                    used.insert(i);
                }
            }
            (desired[i] / hosts - complete.len() as i64).max(0)
        } else {
            used.extend(running.iter().filter_map(index_of));
            (desired[i] - running.len() as i64).max(0)
        };
        let mut next = 0i64;
        for _ in 0..to_create {
            while used.contains(&next) {
                next += 1;
            }
            used.insert(next);
            for host in 0..hosts {
                let mut pod = NewPod::from_template(
                    template,
                    PodName::Generate(pod_prefix(&format!("{cluster}-{}", g.group_name), "worker")),
                    owner_ref.clone(),
                    path.clone(),
                );
                let mut l = ray_labels(
                    cluster,
                    "worker",
                    &g.group_name,
                    &pod.labels,
                    g.labels.as_ref(),
                );
                l.insert("ray.io/worker-group-replica-index".into(), next.to_string());
                if hosts > 1 {
                    l.insert(
                        "ray.io/worker-group-replica-name".into(),
                        format!("{}-{next}", g.group_name),
                    );
                    l.insert("ray.io/replica-host-index".into(), host.to_string());
                }
                pod.labels = l;
                let image = pod.spec.containers.first().and_then(|c| c.image.clone());
                pod.spec
                    .init_containers
                    .get_or_insert_with(Vec::new)
                    .push(core::Container {
                        name: "wait-gcs-ready".into(),
                        image,
                        resources: Some(fixed_resources("200m", "256Mi")),
                        ..Default::default()
                    });
                pod.group = worker_groups[i].clone();
                if gang_scheduled {
                    pod.spec.scheduler_name = Some("default-scheduler".into());
                }
                out.pods.push(pod);
            }
        }
    }
    Ok(out)
}

/// A pod template that has at least one container.
fn pod_template<'t>(
    owner: &Owner,
    path: &str,
    template: Option<&'t core::PodTemplateSpec>,
) -> Result<&'t core::PodTemplateSpec, LoadError> {
    match template {
        Some(t) if t.spec.as_ref().is_some_and(|s| !s.containers.is_empty()) => Ok(t),
        _ => Err(owner.invalid(
            format!("{path}.spec.containers"),
            "required: the pod template needs at least one container (KubeRay's Ray container)",
        )),
    }
}

/// Requests and limits of `cpu` and `memory`.
fn fixed_resources(cpu: &str, memory: &str) -> core::ResourceRequirements {
    let list = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.to_string())),
        ("memory".to_string(), Quantity(memory.to_string())),
    ]);
    core::ResourceRequirements {
        limits: Some(list.clone()),
        requests: Some(list),
        ..Default::default()
    }
}

/// KubeRay's pod labels: its own, then the template's and the group's `labels` (the group's
/// win), except that `ray.io/node-type`, `ray.io/group` and `ray.io/cluster` stay KubeRay's.
pub(crate) fn ray_labels(
    cluster: &str,
    node_type: &str,
    group: &str,
    template: &BTreeMap<String, String>,
    group_labels: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let identifier: String = format!("{cluster}-{node_type}").chars().take(63).collect();
    let mut labels = BTreeMap::from([
        ("ray.io/is-ray-node".to_string(), "yes".to_string()),
        ("ray.io/cluster".to_string(), cluster.to_string()),
        ("ray.io/node-type".to_string(), node_type.to_string()),
        ("ray.io/group".to_string(), group.to_string()),
        ("ray.io/identifier".to_string(), identifier),
        ("app.kubernetes.io/name".to_string(), "kuberay".to_string()),
        (
            "app.kubernetes.io/created-by".to_string(),
            "kuberay-operator".to_string(),
        ),
    ]);
    for (k, v) in template.iter().chain(group_labels.into_iter().flatten()) {
        if matches!(
            k.as_str(),
            "ray.io/node-type" | "ray.io/group" | "ray.io/cluster"
        ) {
            continue;
        }
        labels.insert(k.clone(), v.clone());
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(
        replicas: Option<i32>,
        min: Option<i32>,
        max: Option<i32>,
        hosts: Option<i32>,
    ) -> WorkerGroupSpec {
        WorkerGroupSpec {
            replicas,
            min_replicas: min,
            max_replicas: max,
            num_of_hosts: hosts,
            ..Default::default()
        }
    }

    #[test]
    fn desired_workers_clamp_replicas_and_multiply_by_hosts() {
        assert_eq!(desired_workers(&group(Some(3), Some(1), Some(5), None)), 3);
        assert_eq!(desired_workers(&group(Some(0), Some(2), Some(5), None)), 2);
        assert_eq!(desired_workers(&group(Some(9), Some(1), Some(5), None)), 5);
        assert_eq!(desired_workers(&group(None, Some(2), None, None)), 2);
        assert_eq!(desired_workers(&group(Some(2), None, None, Some(4))), 8);
        let mut suspended = group(Some(2), None, None, None);
        suspended.suspend = Some(true);
        assert_eq!(desired_workers(&suspended), 0);
    }

    #[test]
    fn pod_names_follow_kuberay() {
        assert_eq!(pod_prefix("rc", "head"), "rc-head-");
        assert_eq!(pod_prefix("rc-gpu", "worker"), "rc-gpu-worker-");
        assert_eq!(pod_prefix("RC-Big", "worker"), "rc-big-worker-");
        let long = "c".repeat(60);
        assert_eq!(
            pod_prefix(&long, "worker"),
            format!("{}-worker-", "c".repeat(50))
        );
    }

    #[test]
    fn kuberay_labels_cannot_be_overridden() {
        let template = BTreeMap::from([
            ("ray.io/group".to_string(), "mine".to_string()),
            ("team".to_string(), "ml".to_string()),
        ]);
        let l = ray_labels("rc", "worker", "gpu", &template, None);
        assert_eq!(l["ray.io/group"], "gpu");
        assert_eq!(l["team"], "ml");
        assert_eq!(l["ray.io/identifier"], "rc-worker");
    }
}
