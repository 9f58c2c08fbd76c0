//! `lockstep federate --estimator`: a member's estimator (`lockstep estimator`, started as a
//! process on loopback) answers the replica question for its cluster over gRPC, as
//! karmada-scheduler asks it; an estimator that does not answer leaves the cluster to its
//! summary estimate, with a warning.

#[path = "support/estimator_process.rs"]
mod estimator_process;

use std::path::Path;
use std::process::Command;

/// A binding asking 10 replicas of one GPU each. On the GPU cluster of [`karmada`] the
/// resource summary has CPU and memory for 100 of them, but the GPUs (two nodes x four,
/// published through DRA) hold only 8.
const TRAIN: &str = r#"
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: train
  namespace: ml
  creationTimestamp: "2026-11-20T08:00:00Z"
spec:
  resource: {apiVersion: batch/v1, kind: Job, namespace: ml, name: train, uid: 5f0c1a52-3d1e-4b8a-9a57-0d2b8f6f1e09}
  replicas: 10
  replicaRequirements:
    resourceRequest: {cpu: "4", memory: 32Gi}
    resourceClaimRefs:
    - {name: gpu, resourceClaimTemplateName: one-gpu}
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Aggregated
"#;

/// The Cluster `gpu-cluster`, ready, with the API `group_version` / `kind` (resource
/// `resource`) and `cpu` CPUs and `memory` in its resource summary, then `bindings`.
fn gpu_cluster(
    group_version: &str,
    resource: &str,
    kind: &str,
    cpu: u32,
    memory: &str,
    bindings: &str,
) -> String {
    format!(
        r#"
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {{name: gpu-cluster}}
spec: {{syncMode: Push}}
status:
  conditions:
  - {{type: Ready, status: "True", reason: ClusterReady, message: ready, lastTransitionTime: "2026-11-01T00:00:00Z"}}
  apiEnablements:
  - groupVersion: {group_version}
    resources: [{{name: {resource}, kind: {kind}}}]
  resourceSummary:
    allocatable: {{cpu: "{cpu}", memory: {memory}, pods: "220"}}
---{bindings}"#
    )
}

/// [`TRAIN`] on a GPU cluster whose summary has 400 CPUs.
fn karmada() -> String {
    gpu_cluster("batch/v1", "jobs", "Job", 400, "3200Gi", TRAIN)
}

fn lockstep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
}

/// Runs `lockstep federate -o json` on the Karmada objects with `extra` flags: (stdout as
/// JSON, stderr).
fn federate(dir: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    federate_text(dir, &karmada(), extra)
}

/// [`federate`] on other Karmada objects.
fn federate_text(dir: &Path, karmada: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let input = dir.join("karmada.yaml");
    std::fs::write(&input, karmada).unwrap();
    let out = lockstep()
        .arg("federate")
        .arg("-f")
        .arg(&input)
        .args(["-o", "json"])
        .args(extra)
        .output()
        .expect("run lockstep federate");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "federate failed: {stderr}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), stderr)
}

/// [`federate_text`] asking gpu-cluster's estimator at `address`; the estimator answers, so
/// nothing is written to stderr.
fn federate_asking(dir: &Path, karmada: &str, address: &str) -> serde_json::Value {
    let (out, stderr) = federate_text(
        dir,
        karmada,
        &["--estimator", &format!("gpu-cluster={address}")],
    );
    assert!(
        stderr.is_empty(),
        "no warning when the estimator answers: {stderr}"
    );
    out
}

fn estimate_of(d: &serde_json::Value) -> (i64, String) {
    let e = d["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["binding"] == "ml/train" && e["cluster"] == "gpu-cluster")
        .expect("an estimate for ml/train on gpu-cluster");
    (
        e["replicas"].as_i64().unwrap(),
        e["source"].as_str().unwrap().to_string(),
    )
}

#[test]
fn the_members_estimator_answers_exactly_over_grpc() {
    let dir = std::env::temp_dir().join(format!("lockstep-fe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // The summary alone counts CPU and memory: 10 replicas look placeable.
    let (summary, _) = federate(&dir, &[]);
    assert_eq!(estimate_of(&summary), (100, "summary".to_string()));
    assert_eq!(summary["placements"][0]["binding"], "ml/train");

    // The estimator counts the GPUs: 8, so 10 replicas do not fit.
    let estimator = estimator_process::start("gpu-cluster", &estimator_process::gpu_member_files());
    let exact = federate_asking(&dir, &karmada(), &estimator.1);
    assert_eq!(estimate_of(&exact), (8, "member".to_string()));
    assert_eq!(exact["placements"].as_array().unwrap().len(), 0, "{exact}");
    assert_eq!(exact["unschedulable"][0]["binding"], "ml/train", "{exact}");

    drop(estimator);

    // An estimator that is not there: a warning, and the summary estimate.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = dead.local_addr().unwrap();
    drop(dead);
    let (fallback, stderr) = federate(
        &dir,
        &[
            "--estimator",
            &format!("gpu-cluster={address}"),
            "--estimator-timeout",
            "500ms",
        ],
    );
    assert!(
        stderr.contains("warning: cluster gpu-cluster: estimator at")
            && stderr.contains("its summary estimate is used instead"),
        "{stderr}"
    );
    assert_eq!(estimate_of(&fallback), (100, "summary".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The GPU cluster full: ml/batch (priority 1) runs eight one-GPU workers, four on each
/// node, and ml/web (priority 5) two CPU-only pods; both carry their bindings' permanent ids,
/// as Karmada's pods do. ml/train (priority 100) needs two replicas of two GPUs each.
const PREEMPTION_BINDINGS: &str = r#"
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: batch
  namespace: ml
  creationTimestamp: "2026-11-19T08:00:00Z"
  labels: {resourcebinding.karmada.io/permanent-id: pid-batch}
spec:
  resource: {apiVersion: batch/v1, kind: Job, namespace: ml, name: batch}
  replicas: 8
  replicaRequirements:
    resourceRequest: {cpu: "4", memory: 32Gi}
    resourceClaimRefs: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  schedulePriority: {priority: 1}
  clusters: [{name: gpu-cluster, replicas: 8}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}
---
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: web
  namespace: ml
  creationTimestamp: "2026-11-19T08:00:00Z"
  labels: {resourcebinding.karmada.io/permanent-id: pid-web}
spec:
  resource: {apiVersion: batch/v1, kind: Job, namespace: ml, name: web}
  replicas: 2
  replicaRequirements:
    resourceRequest: {cpu: "2", memory: 4Gi}
  schedulePriority: {priority: 5}
  clusters: [{name: gpu-cluster, replicas: 2}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}
---
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: train
  namespace: ml
  creationTimestamp: "2026-11-20T08:00:00Z"
spec:
  resource: {apiVersion: batch/v1, kind: Job, namespace: ml, name: train}
  replicas: 2
  replicaRequirements:
    resourceRequest: {cpu: "8", memory: 64Gi}
    resourceClaimRefs: [{name: gpus, resourceClaimTemplateName: two-gpus}]
  schedulePriority: {priority: 100, preemptionPolicy: PreemptLowerPriority}
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}
"#;

/// The GPU cluster of [`PREEMPTION_BINDINGS`], 128 CPUs in its summary.
fn preemption() -> String {
    gpu_cluster(
        "batch/v1",
        "jobs",
        "Job",
        128,
        "1024Gi",
        PREEMPTION_BINDINGS,
    )
}

/// The member's pods of [`PREEMPTION_BINDINGS`]' running bindings.
fn running_pods() -> String {
    let mut text = String::new();
    for (i, node) in (0..8).map(|i| (i, if i < 4 { 1 } else { 2 })) {
        text += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: batch-{i}, namespace: ml, labels: \
             {{resourcebinding.karmada.io/permanent-id: pid-batch}}}}\nspec:\n  nodeName: \
             gpu-node-{node}\n  containers: [{{name: w, image: batch, resources: {{requests: \
             {{cpu: \"4\", memory: 32Gi}}, claims: [{{name: gpu}}]}}}}]\n  resourceClaims: \
             [{{name: gpu, resourceClaimTemplateName: one-gpu}}]\nstatus: {{phase: Running}}\n"
        );
    }
    for i in 0..2 {
        text += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web-{i}, namespace: ml, labels: \
             {{resourcebinding.karmada.io/permanent-id: pid-web}}}}\nspec:\n  nodeName: \
             gpu-node-{}\n  containers: [{{name: w, image: web, resources: {{requests: {{cpu: \
             \"2\", memory: 4Gi}}}}}}]\nstatus: {{phase: Running}}\n",
            i + 1
        );
    }
    text
}

#[test]
fn the_members_estimator_chooses_the_victims_over_grpc() {
    let dir = std::env::temp_dir().join(format!("lockstep-fe-victims-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pods = dir.join("pods.yaml");
    std::fs::write(&pods, running_pods()).unwrap();
    let mut files = estimator_process::gpu_member_files();
    files.push(pods);

    // The summary sees no GPUs: train looks placeable without evicting anyone.
    let (summary, _) = federate_text(&dir, &preemption(), &[]);
    assert_eq!(
        summary["preemptions"].as_array().unwrap().len(),
        0,
        "{summary}"
    );
    assert_eq!(summary["placements"][0]["binding"], "ml/train", "{summary}");

    // The estimator sees every GPU taken, and chooses the victims on the member: evicting
    // both candidates makes room, web is reprieved (its pods hold no GPU), batch goes.
    let estimator = estimator_process::start("gpu-cluster", &files);
    let exact = federate_asking(&dir, &preemption(), &estimator.1);
    let preempted: Vec<(&str, &str, i64)> = exact["preemptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["binding"].as_str().unwrap(),
                p["preemptor"].as_str().unwrap(),
                p["replicas"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(preempted, [("ml/batch", "ml/train", 8)], "{exact}");
    let placed: Vec<&serde_json::Value> = exact["placements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["binding"] == "ml/train")
        .collect();
    assert_eq!(
        placed[0]["clusters"],
        serde_json::json!([{"name": "gpu-cluster", "replicas": 2}]),
        "{exact}"
    );
    assert_eq!(exact["unschedulable"][0]["binding"], "ml/batch", "{exact}");
    assert!(
        exact["unchanged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["binding"] == "ml/web"),
        "{exact}"
    );
    drop(estimator);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A multi-component binding (a Ray cluster: a head of 4 CPUs, three workers of two GPUs)
/// on the GPU cluster: the summary counts 14 sets by CPU, the member's GPUs hold one.
const RAY: &str = r#"
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata: {name: ray, namespace: ml, creationTimestamp: "2026-11-20T08:00:00Z"}
spec:
  resource: {apiVersion: ray.io/v1, kind: RayCluster, namespace: ml, name: ray}
  replicas: 1
  components:
  - name: head
    replicas: 1
    replicaRequirements:
      resourceRequest: {cpu: "4", memory: 16Gi}
  - name: worker
    replicas: 3
    replicaRequirements:
      resourceRequest: {cpu: "8", memory: 64Gi}
      resourceClaimRefs: [{name: gpus, resourceClaimTemplateName: two-gpus}]
  placement:
    spreadConstraints: [{spreadByField: cluster, minGroups: 1, maxGroups: 1}]
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}
"#;

/// [`RAY`] on the GPU cluster, 400 CPUs in its summary.
fn components() -> String {
    gpu_cluster("ray.io/v1", "rayclusters", "RayCluster", 400, "3200Gi", RAY)
}

#[test]
fn the_members_estimator_counts_whole_component_sets_over_grpc() {
    let dir = std::env::temp_dir().join(format!("lockstep-fe-sets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sets = |d: &serde_json::Value| {
        let e = &d["estimates"][0];
        assert_eq!(e["binding"], "ml/ray", "{d}");
        (
            e["replicas"].as_i64().unwrap(),
            e["source"].as_str().unwrap().to_string(),
        )
    };
    let (summary, _) = federate_text(&dir, &components(), &[]);
    assert_eq!(sets(&summary), (14, "summary".to_string()));

    // MaxAvailableComponentSets: eight GPUs hold the three 2-GPU workers of one set.
    let estimator = estimator_process::start("gpu-cluster", &estimator_process::gpu_member_files());
    let exact = federate_asking(&dir, &components(), &estimator.1);
    assert_eq!(sets(&exact), (1, "member".to_string()));
    assert_eq!(
        exact["placements"][0]["clusters"],
        serde_json::json!([{"name": "gpu-cluster", "replicas": 1}]),
        "{exact}"
    );
    drop(estimator);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_estimator_flags_exit_2() {
    for (flags, says) in [
        (
            vec!["--estimator", "gpu-cluster"],
            "expected CLUSTER=ADDRESS",
        ),
        (
            vec!["--estimator", "nope=127.0.0.1:1"],
            "--estimator names no Cluster",
        ),
        (
            vec![
                "--estimator",
                "gpu-cluster=127.0.0.1:1",
                "--estimator-timeout",
                "0s",
            ],
            "is not a duration",
        ),
    ] {
        let dir = std::env::temp_dir().join(format!("lockstep-fe-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("karmada.yaml");
        std::fs::write(&input, karmada()).unwrap();
        let out = lockstep()
            .arg("federate")
            .arg("-f")
            .arg(&input)
            .args(&flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
