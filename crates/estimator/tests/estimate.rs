//! Exact replica counts on member clusters written as manifests.

use std::collections::BTreeMap;

use lockstep_estimator::member::{Member, Part};
use lockstep_estimator::request::{ClaimRef, Requirements};

fn member(yaml: &str) -> Member {
    let loaded = lockstep_manifests::load_str("member.yaml", yaml).expect("the member loads");
    Member::new(loaded.cluster).expect("the engine takes the member")
}

fn node(name: &str, cpu: &str, memory: &str, pods: u32, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\n{extra}status:\n  allocatable: {{cpu: \"{cpu}\", memory: {memory}, pods: \"{pods}\"}}\n---\n"
    )
}

fn requests(pairs: &[(&str, &str)]) -> Requirements {
    Requirements {
        namespace: "ml".into(),
        requests: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Requirements::default()
    }
}

fn with_claims(claims: Vec<ClaimRef>) -> Requirements {
    Requirements {
        namespace: "ml".into(),
        claims,
        ..Requirements::default()
    }
}

const GPU_CLASS: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
"#;

fn gpu(name: &str, root: &str, memory: &str) -> String {
    format!(
        "  - name: {name}\n    attributes:\n      model: {{string: A100}}\n      pcieRoot: {{string: \"{root}\"}}\n    capacity:\n      memory: {{value: {memory}}}\n"
    )
}

fn slice(node: &str, driver: &str, devices: &[String]) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node}-{driver}}}\nspec:\n  driver: {driver}\n  nodeName: {node}\n  pool: {{name: {node}-{driver}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{}---\n",
        devices.concat()
    )
}

fn template(name: &str, body: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  spec:\n    devices:\n{body}---\n"
    )
}

#[test]
fn cpu_and_memory_are_counted_node_by_node() {
    // 8 cpu / 16Gi and 4 cpu / 64Gi; a running pod takes 3 cpu on a.
    let mut m = member(&format!(
        "{}{}apiVersion: v1\nkind: Pod\nmetadata: {{name: busy, namespace: ml}}\nspec:\n  nodeName: a\n  containers:\n  - name: c\n    image: i\n    resources: {{requests: {{cpu: \"3\"}}}}\n",
        node("a", "8", "16Gi", 110, ""),
        node("b", "4", "64Gi", 110, ""),
    ));
    // a: min(5 cpu / 1, 16Gi / 4Gi) = 4; b: min(4, 16) = 4.
    let r = requests(&[("cpu", "1"), ("memory", "4Gi")]);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 8);
    // 1500m: a has 5 cpu -> 3, b 4 cpu -> 2.
    assert_eq!(
        m.max_replicas(&requests(&[("cpu", "1500m")]), &[]).unwrap(),
        5
    );
    // Pod slots bound a shape that requests nothing.
    assert_eq!(m.max_replicas(&requests(&[]), &[]).unwrap(), 110 - 1 + 110);
    // A resource no node has.
    assert_eq!(
        m.max_replicas(&requests(&[("example.com/fpga", "1")]), &[])
            .unwrap(),
        0
    );
    // Asking zero of an unknown resource is no constraint.
    assert_eq!(
        m.max_replicas(&requests(&[("example.com/fpga", "0"), ("cpu", "2")]), &[])
            .unwrap(),
        2 + 2
    );
}

#[test]
fn assumed_workloads_are_placed_first() {
    let mut m = member(&format!(
        "{}{}",
        node("a", "4", "16Gi", 110, ""),
        node("b", "4", "16Gi", 110, ""),
    ));
    let r = requests(&[("cpu", "1")]);
    let assumed = [Part {
        requirements: requests(&[("cpu", "3")]),
        replicas: 2,
    }];
    // Each node keeps 1 cpu after the assumed replicas.
    assert_eq!(m.max_replicas(&r, &assumed).unwrap(), 2);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 8, "nothing stays placed");
}

#[test]
fn taints_unschedulable_nodes_and_selectors() {
    let mut m = member(&format!(
        "{}{}{}",
        node(
            "a",
            "4",
            "16Gi",
            110,
            "spec:\n  taints: [{key: gpu, value: \"yes\", effect: NoSchedule}]\n"
        ),
        node("b", "4", "16Gi", 110, "spec:\n  unschedulable: true\n"),
        node("c", "2", "16Gi", 110, ""),
    ));
    let r = requests(&[("cpu", "1")]);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 2, "only c");
    let mut tolerating = r.clone();
    tolerating.tolerations = vec![
        serde_json::json!({"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}),
    ];
    assert_eq!(m.max_replicas(&tolerating, &[]).unwrap(), 6, "a and c");
    let mut selecting = tolerating.clone();
    selecting.node_selector = BTreeMap::from([("kubernetes.io/hostname".into(), "a".into())]);
    assert_eq!(m.max_replicas(&selecting, &[]).unwrap(), 4);
    let mut affinity = tolerating.clone();
    affinity.node_affinity = Some(serde_json::json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}]}));
    assert_eq!(m.max_replicas(&affinity, &[]).unwrap(), 2);
}

/// The DRA proposal's worked example: two 80Gi A100s on one node, one already claimed; a
/// template asking one device with memory >= 40Gi fits once.
#[test]
fn dra_proposal_example_one_of_two_claimed() {
    let claimed = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: taken, namespace: ml}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.example.com}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {request: gpu, driver: gpu.example.com, pool: n1-gpu.example.com, device: gpu-0}\n    nodeSelector:\n      nodeSelectorTerms:\n      - matchFields:\n        - {key: metadata.name, operator: In, values: [n1]}\n---\n";
    let mut m = member(&format!(
        "{}{GPU_CLASS}{}{}{claimed}",
        node("n1", "64", "256Gi", 110, ""),
        slice(
            "n1",
            "gpu.example.com",
            &[gpu("gpu-0", "r0", "80Gi"), gpu("gpu-1", "r0", "80Gi")]
        ),
        template(
            "big",
            "      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: gpu.example.com\n          selectors:\n          - cel: {expression: 'device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0'}\n"
        ),
    ));
    let r = with_claims(vec![ClaimRef::Template("big".into())]);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 1);
    // The same shape again (the snapshot is reused): the device counted is free again.
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 1);
    // Another shape in between, then the first again.
    assert_eq!(m.max_replicas(&requests(&[("cpu", "16")]), &[]).unwrap(), 4);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 1);
}

/// Two GPUs on different PCIe roots; a claim of two with matchAttribute pcieRoot fits
/// nowhere (an estimate that ignores constraints says 1).
#[test]
fn match_attribute_is_honoured() {
    let body = "      requests:\n      - name: gpus\n        exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 2}\n      constraints:\n      - requests: [gpus]\n        matchAttribute: gpu.example.com/pcieRoot\n";
    let mut m = member(&format!(
        "{}{GPU_CLASS}{}{}",
        node("n1", "64", "256Gi", 110, ""),
        slice(
            "n1",
            "gpu.example.com",
            &[gpu("gpu-0", "r0", "80Gi"), gpu("gpu-1", "r1", "80Gi")]
        ),
        template("pair", body),
    ));
    let r = with_claims(vec![ClaimRef::Template("pair".into())]);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 0);
    // The same claim on one root fits once.
    let mut m = member(&format!(
        "{}{GPU_CLASS}{}{}",
        node("n1", "64", "256Gi", 110, ""),
        slice(
            "n1",
            "gpu.example.com",
            &[gpu("gpu-0", "r0", "80Gi"), gpu("gpu-1", "r0", "80Gi")]
        ),
        template("pair", body),
    ));
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 1);
}

/// 1 GPU + 1 FPGA per replica; node A has 4 GPUs, node B 4 FPGAs: no node has both.
#[test]
fn devices_of_one_replica_are_on_one_node() {
    let fpga_class = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: fpga.example.com}\nspec:\n  selectors:\n  - cel: {expression: device.driver == \"fpga.example.com\"}\n---\n";
    let fpgas: Vec<String> = (0..4).map(|i| format!("  - name: fpga-{i}\n")).collect();
    let gpus: Vec<String> = (0..4)
        .map(|i| gpu(&format!("gpu-{i}"), "r0", "80Gi"))
        .collect();
    let both = "      requests:\n      - name: gpu\n        exactly: {deviceClassName: gpu.example.com}\n      - name: fpga\n        exactly: {deviceClassName: fpga.example.com}\n";
    let text = format!(
        "{}{}{GPU_CLASS}{fpga_class}{}{}{}",
        node("a", "64", "256Gi", 110, ""),
        node("b", "64", "256Gi", 110, ""),
        slice("a", "gpu.example.com", &gpus),
        slice("b", "fpga.example.com", &fpgas),
        template("both", both),
    );
    let mut m = member(&text);
    assert_eq!(
        m.max_replicas(&with_claims(vec![ClaimRef::Template("both".into())]), &[])
            .unwrap(),
        0
    );
    // One GPU per replica: node a's four.
    let one_gpu = template(
        "one",
        "      requests:\n      - name: gpu\n        exactly: {deviceClassName: gpu.example.com}\n",
    );
    let mut m = member(&format!("{text}{one_gpu}"));
    assert_eq!(
        m.max_replicas(&with_claims(vec![ClaimRef::Template("one".into())]), &[])
            .unwrap(),
        4
    );
}

#[test]
fn a_missing_template_or_claim_gives_zero() {
    let mut m = member(&format!(
        "{}{GPU_CLASS}{}",
        node("n1", "64", "256Gi", 110, ""),
        slice("n1", "gpu.example.com", &[gpu("gpu-0", "r0", "80Gi")]),
    ));
    assert_eq!(
        m.max_replicas(&with_claims(vec![ClaimRef::Template("nope".into())]), &[])
            .unwrap(),
        0
    );
    assert_eq!(
        m.max_replicas(&with_claims(vec![ClaimRef::Shared("nope".into())]), &[])
            .unwrap(),
        0
    );
}

#[test]
fn a_shared_claim_is_allocated_once_for_every_replica() {
    let shared = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: team, namespace: ml}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.example.com}\n---\n";
    let mut m = member(&format!(
        "{}{}{GPU_CLASS}{}{shared}",
        node("a", "4", "16Gi", 110, ""),
        node("b", "4", "16Gi", 110, ""),
        slice("b", "gpu.example.com", &[gpu("gpu-0", "r0", "80Gi")]),
    ));
    // Only b reaches a device for the shared claim; its replicas share it: 4 cpu -> 4.
    let mut r = with_claims(vec![ClaimRef::Shared("team".into())]);
    r.requests.insert("cpu".into(), "1".into());
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 4);
}

#[test]
fn component_sets_are_placed_whole() {
    let mut m = member(&format!(
        "{}{}",
        node("a", "8", "16Gi", 110, ""),
        node("b", "3", "16Gi", 110, ""),
    ));
    // A set: 1 x 4 cpu (leader) + 2 x 1 cpu (workers) = 6 cpu, leader needs 4 on one node.
    let parts = [
        Part {
            requirements: requests(&[("cpu", "4")]),
            replicas: 1,
        },
        Part {
            requirements: requests(&[("cpu", "1")]),
            replicas: 2,
        },
    ];
    // Set 1: leader a (4 left), workers a (2 left). Set 2: leader needs 4: a has 2, b 3 -> stop.
    assert_eq!(m.max_sets(&parts, &[]).unwrap(), 1);
    let small = [
        Part {
            requirements: requests(&[("cpu", "1")]),
            replicas: 1,
        },
        Part {
            requirements: requests(&[("cpu", "2")]),
            replicas: 1,
        },
    ];
    // 11 cpu, 3 per set, b holds one set (1+2), a two sets (6) plus 2 cpu left.
    assert_eq!(m.max_sets(&small, &[]).unwrap(), 3);
}

#[test]
fn bad_requirements_are_invalid_arguments() {
    let mut m = member(&node("a", "8", "16Gi", 110, ""));
    // Requirements built past the decoder: the manifest conversion still refuses them.
    let r = requests(&[("cpu", "lots")]);
    let e = m.max_replicas(&r, &[]).unwrap_err();
    assert!(
        matches!(e, lockstep_estimator::member::EstimateError::Request(_)),
        "{e}"
    );
    // The message starts with the request field the shape came from.
    assert!(
        e.to_string().starts_with("replicaRequirements (as a Pod)"),
        "{e}"
    );
    let component = Requirements {
        place: "components[1] (\"w\").replicaRequirements".into(),
        ..r.clone()
    };
    let sets = [
        Part {
            requirements: requests(&[("cpu", "1")]),
            replicas: 1,
        },
        Part {
            requirements: component,
            replicas: 1,
        },
    ];
    let e = m.max_sets(&sets, &[]).unwrap_err().to_string();
    assert!(
        e.starts_with("components[1] (\"w\").replicaRequirements (as a Pod)"),
        "{e}"
    );
    assert!(
        e.contains("spec.containers[0].resources.requests.cpu"),
        "{e}"
    );
}

fn pool_node(name: &str, pool: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{pool: {pool}}}\nstatus:\n  allocatable: {{cpu: \"8\", memory: 64Gi, pods: \"110\"}}\n---\n"
    )
}

fn bound_pod(name: &str, node: &str, cpu: &str, binding: Option<&str>) -> String {
    let labels = binding.map_or(String::new(), |b| {
        format!("  labels: {{resourcebinding.karmada.io/permanent-id: {b}}}\n")
    });
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n{labels}spec:\n  nodeName: {node}\n  containers:\n  - name: c\n    image: i\n    resources: {{requests: {{cpu: \"{cpu}\"}}}}\n---\n"
    )
}

/// The binding preemption proposal's example: an 8-unit cluster full with two batch
/// bindings of 2 x 2; the preemptor needs 2 x 2. Either batch binding alone frees enough;
/// the first candidate (the one to keep first) is reprieved, the second is the victim.
#[test]
fn select_victims_reprieves_in_order() {
    let mut m = member(&format!(
        "{}{}{}{}{}",
        node("n1", "8", "64Gi", 110, ""),
        bound_pod("b1-0", "n1", "2", Some("id-1")),
        bound_pod("b1-1", "n1", "2", Some("id-1")),
        bound_pod("b2-0", "n1", "2", Some("id-2")),
        bound_pod("b2-1", "n1", "2", Some("id-2")),
    ));
    let r = requests(&[("cpu", "2")]);
    let ids = ["id-1".to_string(), "id-2".to_string()];
    assert_eq!(
        m.select_victims(&r, 2, &ids).unwrap(),
        (true, vec!["id-2".to_string()])
    );
    let reversed = ["id-2".to_string(), "id-1".to_string()];
    assert_eq!(
        m.select_victims(&r, 2, &reversed).unwrap(),
        (true, vec!["id-1".to_string()])
    );
    // 3 x 2 needs both gone.
    assert_eq!(m.select_victims(&r, 3, &ids).unwrap(), (true, ids.to_vec()));
    // 5 x 2 does not fit even with both gone.
    assert_eq!(m.select_victims(&r, 5, &ids).unwrap(), (false, vec![]));
    // Nothing stays removed: the cluster is still full.
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 0);
}

/// Freed room that the preemptor cannot use (another node pool) does not make it fit.
#[test]
fn select_victims_sees_nodes_not_sums() {
    let mut m = member(&format!(
        "{}{}{}{}{}{}",
        pool_node("gpu-1", "gpu"),
        pool_node("cpu-1", "cpu"),
        bound_pod("a", "gpu-1", "4", Some("victim-a")),
        bound_pod("other", "gpu-1", "4", None),
        bound_pod("b", "cpu-1", "4", Some("victim-b")),
        bound_pod("other2", "cpu-1", "4", None),
    ));
    let mut r = requests(&[("cpu", "8")]);
    r.node_selector = BTreeMap::from([("pool".into(), "gpu".into())]);
    let ids = ["victim-a".to_string(), "victim-b".to_string()];
    assert_eq!(m.select_victims(&r, 1, &ids).unwrap(), (false, vec![]));
    r.requests.insert("cpu".into(), "4".into());
    assert_eq!(
        m.select_victims(&r, 1, &ids).unwrap(),
        (true, vec!["victim-a".to_string()])
    );
}

/// Network-attached devices (a slice for all nodes) are taken by the replicas placed
/// before, whichever node those run on: two devices give 2 replicas over two nodes, where
/// summing per-node answers would say 4.
#[test]
fn shared_devices_are_counted_once_across_nodes() {
    let shared_slice = format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: fabric}}\nspec:\n  driver: gpu.example.com\n  allNodes: true\n  pool: {{name: fabric, generation: 1, resourceSliceCount: 1}}\n  devices:\n{}{}---\n",
        gpu("gpu-0", "r0", "80Gi"),
        gpu("gpu-1", "r0", "80Gi")
    );
    let text = format!(
        "{}{}{GPU_CLASS}{shared_slice}{}",
        node("a", "8", "16Gi", 110, ""),
        node("b", "8", "16Gi", 110, ""),
        template(
            "one",
            "      requests:\n      - name: gpu\n        exactly: {deviceClassName: gpu.example.com}\n"
        ),
    );
    let mut m = member(&text);
    let r = with_claims(vec![ClaimRef::Template("one".into())]);
    assert_eq!(m.max_replicas(&r, &[]).unwrap(), 2);
    // The engine's per-node estimate counts each node as if it had both devices.
    let cluster = lockstep_manifests::load_str(
        "member.yaml",
        &format!(
            "{text}apiVersion: v1\nkind: Pod\nmetadata: {{name: shape, namespace: ml}}\nspec:\n  resourceClaims: [{{name: gpu, resourceClaimTemplateName: one}}]\n  containers: [{{name: c, image: i, resources: {{claims: [{{name: gpu}}]}}}}]\n"
        ),
    )
    .unwrap()
    .cluster;
    let id = lockstep_model::PodId((cluster.pods.len() - 1) as u32);
    let per_node = lockstep_engine::estimate(&cluster, lockstep_engine::Options::default(), id)
        .unwrap()
        .total;
    assert_eq!(per_node, 4);
}

#[test]
fn extended_resources_are_counted() {
    let mut m = member(
        "apiVersion: v1\nkind: Node\nmetadata: {name: g}\nstatus:\n  allocatable: {cpu: \"32\", memory: 64Gi, pods: \"110\", nvidia.com/gpu: \"4\"}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: h}\nstatus:\n  allocatable: {cpu: \"32\", memory: 64Gi, pods: \"110\"}\n",
    );
    assert_eq!(
        m.max_replicas(&requests(&[("nvidia.com/gpu", "1")]), &[])
            .unwrap(),
        4
    );
    assert_eq!(
        m.max_replicas(&requests(&[("nvidia.com/gpu", "2"), ("cpu", "20")]), &[])
            .unwrap(),
        1
    );
}
