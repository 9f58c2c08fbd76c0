//! Workload objects expanded into pods and Workload API objects: names, labels, counts, gang
//! mappings, unknown fields and invalid specs, per kind.

mod common;
use common::{assert_contains, err, ok};

use lockstep_manifests::Loaded;
use lockstep_model::{GroupPolicy, Pod, PodGroup, ResourceId};

fn pod_names(loaded: &Loaded) -> Vec<String> {
    loaded.cluster.pods.iter().map(Pod::key).collect()
}

fn pod<'a>(loaded: &'a Loaded, key: &str) -> &'a Pod {
    loaded
        .cluster
        .pods
        .iter()
        .find(|p| p.key() == key)
        .unwrap_or_else(|| panic!("no pod {key} in {:?}", pod_names(loaded)))
}

fn group<'a>(loaded: &'a Loaded, name: &str) -> &'a PodGroup {
    loaded
        .cluster
        .pod_groups
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no PodGroup {name}"))
}

fn group_names(loaded: &Loaded) -> Vec<String> {
    loaded
        .cluster
        .pod_groups
        .iter()
        .map(|g| g.name.clone())
        .collect()
}

fn unknown_paths(loaded: &Loaded) -> Vec<String> {
    loaded
        .unknown_fields
        .iter()
        .map(|u| u.path.clone())
        .collect()
}

// ---------------------------------------------------------------- RayCluster

/// A RayCluster `rc` in `ml` with `metadata_extra` under metadata, `spec_extra` under spec
/// and the given worker groups (YAML list items, indented by two spaces).
fn ray(metadata_extra: &str, spec_extra: &str, groups: &str) -> String {
    format!(
        "apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc
  namespace: ml
{metadata_extra}spec:
{spec_extra}  headGroupSpec:
    rayStartParams: {{}}
    template:
      metadata: {{labels: {{team: ml}}}}
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray
          resources: {{requests: {{cpu: \"2\", memory: 4Gi}}}}
  workerGroupSpecs:
{groups}"
    )
}

fn worker_group(name: &str, fields: &str, cpu: &str) -> String {
    format!(
        "  - groupName: {name}
{fields}    rayStartParams: {{}}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray
          resources: {{requests: {{cpu: \"{cpu}\", memory: 1Gi}}}}
"
    )
}

#[test]
fn a_ray_cluster_gets_kuberay_names_labels_and_no_group_without_an_opt_in() {
    let text = ray(
        "",
        "",
        &(worker_group("small", "    replicas: 2\n", "1")
            + &worker_group("big", "    replicas: 1\n    numOfHosts: 2\n", "4")),
    );
    let loaded = ok(&text);
    assert_eq!(
        pod_names(&loaded),
        [
            "ml/rc-head-0",
            "ml/rc-small-worker-0",
            "ml/rc-small-worker-1",
            "ml/rc-big-worker-0",
            "ml/rc-big-worker-1",
        ]
    );
    let head = pod(&loaded, "ml/rc-head-0");
    assert_eq!(head.labels["ray.io/node-type"], "head");
    assert_eq!(head.labels["ray.io/group"], "headgroup");
    assert_eq!(head.labels["ray.io/cluster"], "rc");
    assert_eq!(head.labels["ray.io/identifier"], "rc-head");
    assert_eq!(
        head.labels["app.kubernetes.io/created-by"],
        "kuberay-operator"
    );
    assert_eq!(head.labels["team"], "ml");
    assert_eq!(head.pod_group, None);
    let big1 = pod(&loaded, "ml/rc-big-worker-1");
    assert_eq!(big1.labels["ray.io/group"], "big");
    assert_eq!(big1.labels["ray.io/worker-group-replica-index"], "0");
    assert_eq!(big1.labels["ray.io/worker-group-replica-name"], "big-0");
    assert_eq!(big1.labels["ray.io/replica-host-index"], "1");
    let small1 = pod(&loaded, "ml/rc-small-worker-1");
    assert_eq!(small1.labels["ray.io/worker-group-replica-index"], "1");
    assert!(
        !small1
            .labels
            .contains_key("ray.io/worker-group-replica-name")
    );
    assert!(loaded.cluster.pod_groups.is_empty());
    assert!(loaded.cluster.workloads.is_empty());
    assert_eq!(loaded.owners["ml/rc-big-worker-1"], "RayCluster ml/rc");
}

#[test]
fn ray_workers_carry_the_wait_gcs_ready_init_container() {
    // A worker asking for 100m CPU is charged KubeRay's init container's 200m.
    let loaded = ok(&ray(
        "",
        "",
        &worker_group("tiny", "    replicas: 1\n", "100m"),
    ));
    let worker = pod(&loaded, "ml/rc-tiny-worker-0");
    assert_eq!(worker.requests.get(ResourceId::CPU), 200);
    let head = pod(&loaded, "ml/rc-head-0");
    assert_eq!(head.requests.get(ResourceId::CPU), 2000);
}

#[test]
fn ray_replicas_are_clamped_into_min_and_max_and_suspended_groups_get_none() {
    let groups = worker_group("low", "    replicas: 0\n    minReplicas: 2\n", "1")
        + &worker_group("high", "    replicas: 9\n    maxReplicas: 1\n", "1")
        + &worker_group("off", "    replicas: 3\n    suspend: true\n", "1");
    let loaded = ok(&ray("", "", &groups));
    assert_eq!(
        pod_names(&loaded),
        [
            "ml/rc-head-0",
            "ml/rc-low-worker-0",
            "ml/rc-low-worker-1",
            "ml/rc-high-worker-0"
        ]
    );
}

#[test]
fn running_ray_pods_count_against_the_desired_ones() {
    let running = "---
apiVersion: v1
kind: Pod
metadata:
  name: rc-head-abcde
  namespace: ml
  labels: {ray.io/cluster: rc, ray.io/node-type: head, ray.io/group: headgroup}
spec:
  nodeName: n1
  containers: [{name: ray-head, image: rayproject/ray}]
---
apiVersion: v1
kind: Pod
metadata:
  name: rc-small-worker-xyz12
  namespace: ml
  labels: {ray.io/cluster: rc, ray.io/node-type: worker, ray.io/group: small, ray.io/worker-group-replica-index: \"0\"}
spec:
  nodeName: n1
  containers: [{name: ray-worker, image: rayproject/ray}]
";
    let text = ray("", "", &worker_group("small", "    replicas: 3\n", "1")) + running;
    let loaded = ok(&text);
    let made: Vec<String> = pod_names(&loaded)
        .into_iter()
        .filter(|p| p.starts_with("ml/rc-small-worker-") && !p.ends_with("xyz12"))
        .collect();
    assert_eq!(made, ["ml/rc-small-worker-0", "ml/rc-small-worker-1"]);
    assert!(!pod_names(&loaded).contains(&"ml/rc-head-0".to_string()));
    let indexes: Vec<&str> = made
        .iter()
        .map(|p| pod(&loaded, p).labels["ray.io/worker-group-replica-index"].as_str())
        .collect();
    assert_eq!(indexes, ["1", "2"]);
    assert_eq!(loaded.owners["ml/rc-head-abcde"], "RayCluster ml/rc");
}

#[test]
fn the_gang_label_makes_one_group_of_the_whole_cluster() {
    let groups = worker_group("a", "    replicas: 2\n", "1")
        + &worker_group("b", "    replicas: 1\n    numOfHosts: 2\n", "1");
    let loaded = ok(&ray(
        "  labels: {ray.io/gang-scheduling-enabled: \"true\"}\n",
        "",
        &groups,
    ));
    assert_eq!(group_names(&loaded), ["rc-cluster"]);
    assert_eq!(
        group(&loaded, "rc-cluster").policy,
        GroupPolicy::Gang { min: 5 }
    );
    assert!(
        loaded
            .cluster
            .pods
            .iter()
            .all(|p| p.pod_group.as_deref() == Some("rc-cluster"))
    );
    let workload = &loaded.cluster.workloads[0];
    assert_eq!(workload.name, "rc");
}

#[test]
fn the_per_group_annotation_makes_a_head_group_and_a_gang_per_worker_group() {
    let groups = worker_group("a", "    replicas: 2\n", "1")
        + &worker_group("b", "    replicas: 1\n    numOfHosts: 2\n", "1")
        + &worker_group("idle", "    replicas: 0\n", "1");
    let loaded = ok(&ray(
        "  annotations: {ray.io/k8s-workload-scheduling: \"true\"}\n",
        "",
        &groups,
    ));
    assert_eq!(
        group_names(&loaded),
        ["rc-head", "rc-worker-a", "rc-worker-b"]
    );
    assert_eq!(group(&loaded, "rc-head").policy, GroupPolicy::Basic);
    assert_eq!(
        group(&loaded, "rc-worker-a").policy,
        GroupPolicy::Gang { min: 2 }
    );
    assert_eq!(
        group(&loaded, "rc-worker-b").policy,
        GroupPolicy::Gang { min: 2 }
    );
    assert_eq!(
        pod(&loaded, "ml/rc-b-worker-1").pod_group.as_deref(),
        Some("rc-worker-b")
    );
    assert_eq!(
        pod(&loaded, "ml/rc-head-0").pod_group.as_deref(),
        Some("rc-head")
    );
}

#[test]
fn the_composite_opt_in_puts_the_group_gangs_under_one_composite() {
    let loaded = ok(&ray(
        "  annotations: {lockstep.dev/ray-scheduling: composite}\n",
        "",
        &worker_group("a", "    replicas: 2\n", "1"),
    ));
    let composite = &loaded.cluster.composite_pod_groups[0];
    assert_eq!(composite.name, "rc");
    assert_eq!(composite.policy, GroupPolicy::Gang { min: 2 });
    assert!(
        loaded
            .cluster
            .pod_groups
            .iter()
            .all(|g| g.parent.as_deref() == Some("rc"))
    );
    assert!(loaded.cluster.workloads.is_empty());
}

#[test]
fn an_autoscaling_cluster_gets_no_gang_and_a_warning_and_the_autoscaler_sidecar() {
    let loaded = ok(&ray(
        "  labels: {ray.io/gang-scheduling-enabled: \"true\"}\n",
        "  enableInTreeAutoscaling: true\n",
        &worker_group("a", "    replicas: 1\n", "1"),
    ));
    assert!(loaded.cluster.pod_groups.is_empty());
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("autoscaling is not yet supported")),
        "{:?}",
        loaded.warnings
    );
    // The head's 2 CPU plus the autoscaler's 500m.
    let head = pod(&loaded, "ml/rc-head-0");
    assert_eq!(head.requests.get(ResourceId::CPU), 2500);
}

#[test]
fn more_than_seven_worker_groups_are_invalid_under_the_per_group_mapping() {
    let groups: String = (0..8)
        .map(|i| worker_group(&format!("g{i}"), "    replicas: 1\n", "1"))
        .collect();
    let e = err(&ray(
        "  annotations: {ray.io/k8s-workload-scheduling: \"true\"}\n",
        "",
        &groups,
    ));
    assert_contains(
        &e,
        &[
            "RayCluster ml/rc",
            "spec.workerGroupSpecs",
            "8 worker groups",
            "at most 7",
        ],
    );
    // The whole-cluster gang has no such limit.
    ok(&ray(
        "  labels: {ray.io/gang-scheduling-enabled: \"true\"}\n",
        "",
        &groups,
    ));
}

#[test]
fn ray_cluster_specs_are_validated() {
    let e = err(&ray(
        "",
        "",
        &(worker_group("a", "", "1") + &worker_group("a", "", "1")),
    ));
    assert_contains(&e, &["spec.workerGroupSpecs[1].groupName", "used twice"]);
    let e = err(&ray(
        "",
        "",
        &worker_group("a", "    minReplicas: 3\n    maxReplicas: 1\n", "1"),
    ));
    assert_contains(
        &e,
        &[
            "spec.workerGroupSpecs[0].minReplicas",
            "greater than maxReplicas",
        ],
    );
    let e = err(&ray("", "", &worker_group("a", "    replicas: -1\n", "1")));
    assert_contains(&e, &["spec.workerGroupSpecs[0].replicas", "-1"]);
}

#[test]
fn a_typo_in_a_ray_cluster_is_an_unknown_field_with_its_path() {
    let text = ray("", "", &worker_group("a", "    replica: 2\n", "1"));
    let loaded = ok(&text);
    assert_eq!(unknown_paths(&loaded), ["spec.workerGroupSpecs[0].replica"]);
    assert_contains(
        &loaded.unknown_fields[0].to_string(),
        &[
            "RayCluster ml/rc",
            "spec.workerGroupSpecs[0].replica: unknown field",
        ],
    );
}

#[test]
fn a_ray_job_expands_its_cluster_spec() {
    let text = "apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: rj
  namespace: ml
  labels: {ray.io/gang-scheduling-enabled: \"true\"}
spec:
  entrypoint: python train.py
  shutdownAfterJobFinishes: true
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-head, image: rayproject/ray}]
    workerGroupSpecs:
    - groupName: w
      replicas: 2
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-worker, image: rayproject/ray}]
";
    let loaded = ok(text);
    assert_eq!(
        pod_names(&loaded),
        ["ml/rj-0-head-0", "ml/rj-0-w-worker-0", "ml/rj-0-w-worker-1"]
    );
    assert_eq!(group_names(&loaded), ["rj-0-cluster"]);
    assert_eq!(
        group(&loaded, "rj-0-cluster").policy,
        GroupPolicy::Gang { min: 3 }
    );
    assert_eq!(loaded.owners["ml/rj-0-head-0"], "RayJob ml/rj");
    let typo = ok(&text.replace("entrypoint:", "entrypont:"));
    assert_eq!(unknown_paths(&typo), ["spec.entrypont"]);
    // A suspended RayJob, or one that selects a running cluster, makes no pods.
    let suspended = ok(&text.replace("  entrypoint:", "  suspend: true\n  entrypoint:"));
    assert!(suspended.cluster.pods.is_empty());
}

/// Shaped after KubeRay's own samples: `ray-cluster.sample.yaml` (a head and one worker
/// group of replicas 1, minReplicas 1, maxReplicas 5), `ray-cluster.autoscaler.yaml`
/// (in-tree autoscaling, replicas 1 within [1, 10]) and a multi-host TPU sample (numOfHosts
/// 2, replicas 1): the expansion is what KubeRay's rules give.
#[test]
fn kuberay_sample_shapes_expand_as_kuberay_expands_them() {
    let sample = ray(
        "",
        "",
        &worker_group(
            "workergroup",
            "    replicas: 1\n    minReplicas: 1\n    maxReplicas: 5\n",
            "1",
        ),
    )
    .replace("name: rc\n", "name: raycluster-kuberay\n");
    let loaded = ok(&sample);
    assert_eq!(
        pod_names(&loaded),
        [
            "ml/raycluster-kuberay-head-0",
            "ml/raycluster-kuberay-workergroup-worker-0"
        ]
    );

    let autoscaler = ray(
        "",
        "  enableInTreeAutoscaling: true\n",
        &worker_group(
            "small-group",
            "    replicas: 1\n    minReplicas: 1\n    maxReplicas: 10\n",
            "1",
        ),
    )
    .replace("name: rc\n", "name: raycluster-autoscaler\n");
    let loaded = ok(&autoscaler);
    assert_eq!(
        pod_names(&loaded),
        [
            "ml/raycluster-autoscaler-head-0",
            "ml/raycluster-autoscaler-small-group-worker-0"
        ]
    );

    let tpu = ray(
        "",
        "",
        &worker_group(
            "tpu-group",
            "    replicas: 1\n    minReplicas: 0\n    maxReplicas: 1\n    numOfHosts: 2\n",
            "1",
        ),
    )
    .replace("name: rc\n", "name: tpu-cluster\n");
    let loaded = ok(&tpu);
    let workers: Vec<String> = pod_names(&loaded)
        .into_iter()
        .filter(|p| p.contains("-worker-"))
        .collect();
    assert_eq!(
        workers,
        [
            "ml/tpu-cluster-tpu-group-worker-0",
            "ml/tpu-cluster-tpu-group-worker-1"
        ]
    );
    for (i, w) in workers.iter().enumerate() {
        let p = pod(&loaded, w);
        assert_eq!(p.labels["ray.io/worker-group-replica-name"], "tpu-group-0");
        assert_eq!(p.labels["ray.io/replica-host-index"], i.to_string());
    }
}

// ---------------------------------------------------------------- Job

fn job(spec_extra: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata: {{name: train, namespace: ml}}
spec:
{spec_extra}  template:
    spec:
      restartPolicy: Never
      containers: [{{name: t, image: t, resources: {{requests: {{cpu: \"1\"}}}}}}]
"
    )
}

#[test]
fn a_non_indexed_job_keeps_parallelism_pods_active() {
    let loaded = ok(&job("  parallelism: 3\n  completions: 5\n"));
    assert_eq!(
        pod_names(&loaded),
        ["ml/train-0", "ml/train-1", "ml/train-2"]
    );
    assert_eq!(
        pod(&loaded, "ml/train-0").labels["batch.kubernetes.io/job-name"],
        "train"
    );
    assert!(loaded.cluster.pod_groups.is_empty());
    // Defaults: one pod.
    assert_eq!(pod_names(&ok(&job(""))), ["ml/train-0"]);
    // Suspended: none.
    assert!(ok(&job("  suspend: true\n")).cluster.pods.is_empty());
}

#[test]
fn an_indexed_job_names_pods_by_index_and_skips_done_and_active_indexes() {
    let owned = |name: &str, index: u32, phase: &str| {
        format!(
            "---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml
  annotations: {{batch.kubernetes.io/job-completion-index: \"{index}\"}}
  ownerReferences: [{{apiVersion: batch/v1, kind: Job, name: train, uid: u1, controller: true}}]
spec:
  nodeName: n1
  containers: [{{name: t, image: t}}]
status: {{phase: {phase}}}
"
        )
    };
    let text = job("  completionMode: Indexed\n  completions: 5\n  parallelism: 3\n")
        + &owned("train-0-q7x2k", 0, "Succeeded")
        + &owned("train-2-b8n4m", 2, "Running");
    let loaded = ok(&text);
    let made: Vec<String> = pod_names(&loaded)
        .into_iter()
        .filter(|p| p.starts_with("ml/train-") && !p.ends_with("-q7x2k") && !p.ends_with("-b8n4m"))
        .collect();
    // 4 indexes left (1..4), 3 may run, index 2 runs: create 1 and 3.
    assert_eq!(made, ["ml/train-1", "ml/train-3"]);
    let p = pod(&loaded, "ml/train-3");
    assert_eq!(p.labels["batch.kubernetes.io/job-completion-index"], "3");
}

#[test]
fn a_job_with_a_gang_policy_gets_the_job_controllers_workload_and_pod_group() {
    let loaded = ok(&job(
        "  completionMode: Indexed\n  completions: 4\n  parallelism: 4\n  scheduling:\n    schedulingPolicy: {gang: {}}\n",
    ));
    let names = group_names(&loaded);
    assert_eq!(names.len(), 1);
    assert!(names[0].starts_with("train-train-pgt-0-"), "{names:?}");
    assert_eq!(
        group(&loaded, &names[0]).policy,
        GroupPolicy::Gang { min: 4 }
    );
    assert_eq!(loaded.cluster.workloads[0].name, "train");
    assert!(
        loaded
            .cluster
            .pods
            .iter()
            .all(|p| p.pod_group.as_deref() == Some(names[0].as_str()))
    );
    let explicit = ok(&job(
        "  parallelism: 4\n  scheduling:\n    schedulingPolicy: {gang: {minCount: 2}}\n",
    ));
    assert_eq!(
        explicit.cluster.pod_groups[0].policy,
        GroupPolicy::Gang { min: 2 }
    );
    let basic = ok(&job("  parallelism: 2\n  scheduling: {}\n"));
    assert_eq!(basic.cluster.pod_groups[0].policy, GroupPolicy::Basic);
}

#[test]
fn job_specs_are_validated() {
    assert_contains(
        &err(&job("  parallelism: -1\n")),
        &["Job ml/train", "spec.parallelism", "-1"],
    );
    assert_contains(
        &err(&job("  completionMode: Indexed\n  parallelism: 2\n")),
        &["spec.completions", "Indexed"],
    );
    assert_contains(
        &err(&job("").replace("restartPolicy: Never", "restartPolicy: Always")),
        &["spec.template.spec.restartPolicy", "Never or OnFailure"],
    );
}

#[test]
fn a_typo_in_a_job_is_an_unknown_field_with_its_path() {
    let loaded = ok(&job("  parallelizm: 2\n"));
    assert_eq!(unknown_paths(&loaded), ["spec.parallelizm"]);
}

// ---------------------------------------------------------------- JobSet

fn jobset(annotations: &str, jobs: &str) -> String {
    format!(
        "apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
  namespace: ml
{annotations}spec:
  replicatedJobs:
{jobs}"
    )
}

fn replicated(name: &str, replicas: u32, parallelism: u32) -> String {
    format!(
        "  - name: {name}
    replicas: {replicas}
    template:
      spec:
        parallelism: {parallelism}
        completions: {parallelism}
        template:
          spec:
            containers: [{{name: w, image: w}}]
"
    )
}

#[test]
fn a_jobset_makes_replicas_times_parallelism_pods_named_as_jobset_names_them() {
    let loaded = ok(&jobset(
        "",
        &(replicated("driver", 1, 1) + &replicated("workers", 2, 2)),
    ));
    assert_eq!(
        pod_names(&loaded),
        [
            "ml/js-driver-0-0",
            "ml/js-workers-0-0",
            "ml/js-workers-0-1",
            "ml/js-workers-1-0",
            "ml/js-workers-1-1"
        ]
    );
    let p = pod(&loaded, "ml/js-workers-1-0");
    assert_eq!(p.labels["jobset.sigs.k8s.io/jobset-name"], "js");
    assert_eq!(p.labels["jobset.sigs.k8s.io/job-index"], "1");
    assert_eq!(p.labels["jobset.sigs.k8s.io/job-global-index"], "2");
    assert_eq!(p.labels["batch.kubernetes.io/job-name"], "js-workers-1");
    assert_eq!(p.labels["jobset.sigs.k8s.io/job-key"].len(), 40);
    assert!(loaded.cluster.pod_groups.is_empty());
    assert_eq!(loaded.owners["ml/js-workers-1-0"], "JobSet ml/js");
}

#[test]
fn exclusive_topology_makes_each_child_job_a_gang_in_one_domain() {
    let loaded = ok(&jobset(
        "  annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: topology.kubernetes.io/rack}\n",
        &replicated("workers", 2, 3),
    ));
    assert_eq!(group_names(&loaded), ["js-workers-0", "js-workers-1"]);
    let g = group(&loaded, "js-workers-1");
    assert_eq!(g.policy, GroupPolicy::Gang { min: 3 });
    assert_eq!(
        g.topology_key.as_deref(),
        Some("topology.kubernetes.io/rack")
    );
    let leader = pod(&loaded, "ml/js-workers-1-0");
    assert_eq!(leader.pod_affinity.required.len(), 1);
    assert_eq!(leader.pod_anti_affinity.required.len(), 1);
    let follower = pod(&loaded, "ml/js-workers-1-1");
    assert!(follower.pod_anti_affinity.required.is_empty());
}

#[test]
fn jobset_names_must_be_unique_and_typos_are_reported() {
    let e = err(&jobset(
        "",
        &(replicated("w", 1, 1) + &replicated("w", 1, 1)),
    ));
    assert_contains(
        &e,
        &["JobSet ml/js", "spec.replicatedJobs[1].name", "unique"],
    );
    let loaded = ok(&jobset(
        "",
        &replicated("w", 1, 1).replace("replicas:", "replica:"),
    ));
    assert_eq!(unknown_paths(&loaded), ["spec.replicatedJobs[0].replica"]);
}

// ---------------------------------------------------------------- apps/v1

fn app(kind: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: {kind}
metadata: {{name: web, namespace: default}}
spec:
{spec_extra}  selector:
    matchLabels: {{app: web}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: nginx}}]
"
    )
}

#[test]
fn replica_sets_and_deployments_make_numbered_pods_counting_their_own() {
    let rs = ok(&app("ReplicaSet", "  replicas: 3\n"));
    assert_eq!(
        pod_names(&rs),
        ["default/web-0", "default/web-1", "default/web-2"]
    );
    // An orphan matching the selector is adopted by a ReplicaSet, and counts.
    let orphan = "---
apiVersion: v1
kind: Pod
metadata: {name: web-old, namespace: default, labels: {app: web}}
spec:
  nodeName: n1
  containers: [{name: web, image: nginx}]
";
    let rs = ok(&(app("ReplicaSet", "  replicas: 3\n") + orphan));
    assert_eq!(
        pod_names(&rs),
        ["default/web-old", "default/web-0", "default/web-1"]
    );
    // A Deployment counts only pods of its ReplicaSets.
    let d = ok(&(app("Deployment", "  replicas: 2\n") + orphan));
    assert_eq!(
        pod_names(&d),
        ["default/web-old", "default/web-0", "default/web-1"]
    );
    let owned = orphan.replace(
        "labels: {app: web}}",
        "labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d9f8c7b6, uid: u, controller: true}]}",
    );
    let d = ok(&(app("Deployment", "  replicas: 2\n") + &owned));
    assert_eq!(pod_names(&d), ["default/web-old", "default/web-0"]);
}

#[test]
fn a_stateful_set_makes_ordinal_pods() {
    let s = ok(&app(
        "StatefulSet",
        "  replicas: 2\n  serviceName: web\n  ordinals: {start: 3}\n",
    ));
    assert_eq!(pod_names(&s), ["default/web-3", "default/web-4"]);
    let p = pod(&s, "default/web-4");
    assert_eq!(p.labels["statefulset.kubernetes.io/pod-name"], "web-4");
    assert_eq!(p.labels["apps.kubernetes.io/pod-index"], "4");
}

#[test]
fn apps_selectors_are_required_and_must_match_the_template() {
    for kind in ["Deployment", "ReplicaSet", "StatefulSet"] {
        let no_selector = app(kind, "").replace("  selector:\n    matchLabels: {app: web}\n", "");
        assert_contains(
            &err(&no_selector),
            &[&format!("{kind} default/web"), "spec.selector", "required"],
        );
        let mismatch = app(kind, "").replace("matchLabels: {app: web}", "matchLabels: {app: db}");
        assert_contains(&err(&mismatch), &["does not match the template's labels"]);
        assert_contains(
            &err(&app(kind, "  replicas: -1\n")),
            &["spec.replicas", "-1"],
        );
    }
}

#[test]
fn a_typo_in_an_apps_object_is_an_unknown_field_with_its_path() {
    for kind in ["Deployment", "ReplicaSet", "StatefulSet"] {
        let loaded = ok(&app(kind, "  replica: 2\n"));
        assert_eq!(unknown_paths(&loaded), ["spec.replica"], "{kind}");
        let loaded = ok(&app(kind, "").replace("image: nginx", "image: nginx, resource: {}"));
        assert_eq!(
            unknown_paths(&loaded),
            ["spec.template.spec.containers[0].resource"],
            "{kind}"
        );
    }
}

// ---------------------------------------------------------------- LeaderWorkerSet

const LWS: &str = "apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws, namespace: ml}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 3
    workerTemplate:
      spec:
        containers: [{name: w, image: w}]
";

#[test]
fn a_leader_worker_set_makes_groups_of_size_pods_as_gangs() {
    let loaded = ok(LWS);
    assert_eq!(
        pod_names(&loaded),
        [
            "ml/lws-0",
            "ml/lws-0-1",
            "ml/lws-0-2",
            "ml/lws-1",
            "ml/lws-1-1",
            "ml/lws-1-2"
        ]
    );
    assert_eq!(group_names(&loaded), ["lws-0", "lws-1"]);
    assert_eq!(group(&loaded, "lws-1").policy, GroupPolicy::Gang { min: 3 });
    let w = pod(&loaded, "ml/lws-1-2");
    assert_eq!(w.pod_group.as_deref(), Some("lws-1"));
    assert_eq!(w.labels["leaderworkerset.sigs.k8s.io/group-index"], "1");
    assert_eq!(w.labels["leaderworkerset.sigs.k8s.io/worker-index"], "2");
    let typo = ok(&LWS.replace("size: 3", "sise: 3"));
    assert_eq!(unknown_paths(&typo), ["spec.leaderWorkerTemplate.sise"]);
}

#[test]
fn generated_pods_take_names_no_input_pod_has() {
    let taken = "---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default}
spec:
  containers: [{name: other, image: other}]
";
    let loaded = ok(&(app("ReplicaSet", "  replicas: 1\n") + taken));
    assert_eq!(pod_names(&loaded), ["default/web-0", "default/web-1"]);
    // A fixed name (a StatefulSet ordinal) held by a pod the controller does not own is an
    // error.
    let e = err(&(app("StatefulSet", "  replicas: 1\n") + taken));
    assert_contains(&e, &["StatefulSet default/web", "Pod default/web-0"]);
}

#[test]
fn generated_group_names_must_be_valid_names() {
    let e = err(&ray(
        "  annotations: {ray.io/k8s-workload-scheduling: \"true\"}\n",
        "",
        &worker_group("GPU_big", "    replicas: 1\n", "1"),
    ));
    assert_contains(
        &e,
        &[
            "RayCluster ml/rc",
            "PodGroup \"rc-worker-GPU_big\"",
            "not a valid name",
        ],
    );
}

#[test]
fn a_pod_group_of_the_controllers_name_is_reused_when_owned_and_an_error_otherwise() {
    let cluster = ray(
        "  labels: {ray.io/gang-scheduling-enabled: \"true\"}\n",
        "",
        &worker_group("a", "    replicas: 1\n", "1"),
    );
    let manifest = |owner_refs: &str| {
        format!(
            "---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: rc-cluster
  namespace: ml
{owner_refs}spec:
  schedulingPolicy:
    gang: {{minCount: 2}}
"
        )
    };
    let owned = ok(&(cluster.clone()
        + &manifest(
            "  ownerReferences: [{apiVersion: ray.io/v1, kind: RayCluster, name: rc, uid: u, controller: true}]\n",
        )));
    assert_eq!(group_names(&owned), ["rc-cluster"]);
    // The input's group is the one used: its minCount, not the controller's 2 + 1.
    assert_eq!(
        group(&owned, "rc-cluster").policy,
        GroupPolicy::Gang { min: 2 }
    );
    let e = err(&(cluster + &manifest("")));
    assert_contains(
        &e,
        &["RayCluster ml/rc", "PodGroup ml/rc-cluster", "does not own"],
    );
}

#[test]
fn workload_objects_asking_for_too_many_pods_are_refused_before_any_is_made() {
    let e = err(&app("Deployment", "  replicas: 2000000000\n"));
    assert_contains(
        &e,
        &[
            "Deployment default/web",
            "spec.replicas",
            "at most 1000000 pods",
        ],
    );
    let e = err(&LWS
        .replace("replicas: 2", "replicas: 100000")
        .replace("size: 3", "size: 100"));
    assert_contains(&e, &["LeaderWorkerSet ml/lws", "at most 1000000 pods"]);
    let e = err(&ray(
        "",
        "",
        &worker_group("a", "    replicas: 2000000\n", "1"),
    ));
    assert_contains(&e, &["RayCluster ml/rc", "spec.workerGroupSpecs"]);
    let e = err(&job("  parallelism: 2000000\n"));
    assert_contains(&e, &["Job ml/train", "spec.parallelism"]);
    let e = err(&jobset("", &replicated("w", 100000, 100)));
    assert_contains(&e, &["JobSet ml/js", "spec.replicatedJobs[0].replicas"]);
}
