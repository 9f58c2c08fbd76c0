//! The general estimator read from a Cluster's resource summary and resource models, and
//! webhook validation of bindings, through the crate's loader.

use std::sync::atomic::{AtomicUsize, Ordering};

use lockstep_federation::estimate::{Usage, summary_estimate};
use lockstep_federation::{FederationError, load};
use lockstep_manifests::Source;

static SERIAL: AtomicUsize = AtomicUsize::new(0);

fn load_text(text: &str) -> Result<lockstep_federation::Loaded, FederationError> {
    let path = std::env::temp_dir().join(format!(
        "lockstep-federation-estimate-{}-{}.yaml",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, text).expect("write the input");
    let out = load(&[Source::Path(path.clone())]);
    let _ = std::fs::remove_file(path);
    out
}

const CLUSTER: &str = "apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: m}
spec: {syncMode: Push}
status:
  resourceSummary:
    allocatable: {cpu: \"10\", memory: 10Gi, pods: \"8\", nvidia.com/gpu: \"4\"}
    allocated: {cpu: 2500m, memory: 2Gi, pods: \"2\"}
    allocating: {cpu: 500m, pods: \"1\"}
";

fn binding(requests: &str) -> String {
    format!(
        "---
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata: {{name: b, namespace: default}}
spec:
  resource: {{apiVersion: apps/v1, kind: Deployment, name: b}}
  replicas: 1
  replicaRequirements: {{resourceRequest: {requests}}}
  placement: {{}}
"
    )
}

fn estimate(cluster: &str, requests: &str) -> Option<i64> {
    let loaded = load_text(&format!("{cluster}{}", binding(requests))).expect("valid");
    let f = &loaded.federation;
    summary_estimate(
        &f.clusters[0],
        &Usage::default(),
        &f.bindings[0],
        &f.bindings,
    )
}

#[test]
fn summary_free_room_is_allocatable_minus_allocated_minus_allocating() {
    // 7 CPUs free (10 - 2.5 - 0.5), 8Gi memory, 5 pods.
    assert_eq!(estimate(CLUSTER, "{cpu: \"2\"}"), Some(3));
    assert_eq!(estimate(CLUSTER, "{cpu: 700m}"), Some(5)); // pods bound it: 10 by CPU
    assert_eq!(estimate(CLUSTER, "{memory: 3Gi}"), Some(2));
    assert_eq!(estimate(CLUSTER, "{nvidia.com/gpu: \"1\"}"), Some(4));
    // A resource the cluster does not have: nothing fits.
    assert_eq!(estimate(CLUSTER, "{example.com/fpga: \"1\"}"), Some(0));
}

#[test]
fn bindings_holding_room_are_subtracted() {
    let loaded = load_text(&format!("{CLUSTER}{}", binding("{cpu: \"2\"}"))).expect("valid");
    let f = &loaded.federation;
    let mut usage = Usage::default();
    usage.add(0, &f.bindings[0], 2); // 4 CPUs and 2 pods held
    assert_eq!(
        summary_estimate(&f.clusters[0], &usage, &f.bindings[0], &f.bindings),
        Some(1)
    );
}

#[test]
fn resource_models_place_replicas_on_model_nodes() {
    // Two grades: 3 nodes of 2 CPUs and 1 node of 8 CPUs. Replicas of 3 CPUs fit only on
    // the big nodes: 2 of them, though the summary has room for more.
    let cluster = "apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: m}
spec:
  syncMode: Push
  resourceModels:
  - grade: 0
    ranges: [{name: cpu, min: \"2\", max: \"4\"}]
  - grade: 1
    ranges: [{name: cpu, min: \"8\", max: \"16\"}]
status:
  resourceSummary:
    allocatable: {cpu: \"100\", pods: \"100\"}
    allocatableModelings: [{grade: 0, count: 3}, {grade: 1, count: 1}]
";
    assert_eq!(estimate(cluster, "{cpu: \"3\"}"), Some(2));
    assert_eq!(estimate(cluster, "{cpu: \"1\"}"), Some(14));
}

#[test]
fn no_summary_is_no_estimate() {
    let cluster = "apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: m}
spec: {syncMode: Push}
";
    assert_eq!(estimate(cluster, "{cpu: \"1\"}"), None);
}

fn invalid(placement: &str, extra: &str) -> String {
    let text = format!(
        "apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata: {{name: b, namespace: default}}
spec:
  resource: {{apiVersion: apps/v1, kind: Deployment, name: b}}
  replicas: 1
{extra}  placement: {placement}
"
    );
    load_text(&text).expect_err("invalid").to_string()
}

#[test]
fn webhook_rules_reject_invalid_placements() {
    assert!(
        invalid(
            "{spreadConstraints: [{spreadByField: cluster, spreadByLabel: x}]}",
            ""
        )
        .contains("spreadByLabel should not co-exist with spreadByField")
    );
    assert!(
        invalid("{spreadConstraints: [{spreadByField: region}]}", "")
            .contains("the cluster spread constraint must be enabled")
    );
    assert!(
        invalid(
            "{clusterAffinities: [{affinityName: a}, {affinityName: a}]}",
            ""
        )
        .contains("clusterAffinities[1].affinityName: each affinity term in a policy must have a unique name")
    );
    assert!(
        invalid(
            "{replicaScheduling: {replicaSchedulingType: Divided, weightPreference: {staticWeightList: [{targetCluster: {}, weight: -1}]}}}",
            ""
        )
        .contains("staticWeightList[0].weight: a weight must be 0 or more")
    );
    assert!(
        invalid(
            "{clusterAffinity: {fieldSelector: {matchExpressions: [{key: cloud, operator: In, values: [a]}]}}}",
            ""
        )
        .contains("unsupported key \"cloud\", must be provider, region, or zone")
    );
    assert!(
        invalid(
            "{}",
            "  schedulePriority: {priority: 5, preemptionPolicy: Always}\n"
        )
        .contains("spec.schedulePriority.preemptionPolicy: \"Always\" is not supported")
    );
}

#[test]
fn text_loads_as_a_file_of_that_name_does() {
    let text = format!("{CLUSTER}{}", binding("{cpu: \"1\"}"));
    let from_file = load_text(&text).expect("valid");
    let from_text = lockstep_federation::load_str("in-memory.yaml", &text).expect("valid");
    assert_eq!(
        format!("{:?}", from_text.federation.clusters),
        format!("{:?}", from_file.federation.clusters)
    );
    assert_eq!(from_text.federation.bindings.len(), 1);
    assert_eq!(
        from_text.federation.bindings[0].origin,
        "in-memory.yaml (document 2)"
    );
    let e =
        lockstep_federation::load_str("given.yaml", &text.replace("replicas: 1", "replicas: -1"))
            .unwrap_err()
            .to_string();
    assert!(
        e.starts_with("given.yaml (document 2): ResourceBinding default/b: spec.replicas"),
        "{e}"
    );
    let e = lockstep_federation::load_str("given.json", "{\"kind\": ")
        .unwrap_err()
        .to_string();
    assert!(e.contains("given.json"), "{e}");
}
