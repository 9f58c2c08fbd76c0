//! Loading manifests: formats, sources, conversion to the model, and the messages of bad input.

mod common;
use common::{assert_contains, err, ok};

use std::fs;
use std::path::PathBuf;

use lockstep_manifests::{LoadError, Loaded, Source, load, load_str, load_with_stdin};
use lockstep_model::{
    HostPort, InclusionPolicy, IntOrPercent, Operator, Pod, PodPhase, PreemptionPolicy,
    Requirement, ResourceId, TaintEffect, TolerationOperator, WhenUnsatisfiable,
};

const MI: i64 = 1024 * 1024;
const GI: i64 = 1024 * MI;

fn pod<'a>(loaded: &'a Loaded, name: &str) -> &'a Pod {
    loaded
        .cluster
        .pods
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn request(loaded: &Loaded, pod_name: &str, resource: &str) -> i64 {
    let id = loaded
        .cluster
        .resources
        .get(resource)
        .expect("resource interned");
    pod(loaded, pod_name).requests.get(id)
}

const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: node-b
  labels: {zone: b}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110", example.com/gpu: "2"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {zone: a}
spec:
  unschedulable: true
  taints:
  - {key: dedicated, value: gpu, effect: NoSchedule}
  - {key: maintenance, effect: NoExecute}
status:
  allocatable: {cpu: 3500m, memory: "16000000000", pods: 10, ephemeral-storage: 100Gi}
"#;

// ---------------------------------------------------------------------------------------
// Formats and sources
// ---------------------------------------------------------------------------------------

#[test]
fn multi_document_yaml_with_empty_documents() {
    let text = format!(
        "---\n---\n{NODES}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p1}}\n\
         spec: {{containers: [{{name: c}}]}}\n---\n"
    );
    let loaded = ok(&text);
    let names: Vec<&str> = loaded
        .cluster
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["node-a", "node-b"], "nodes are sorted by name");
    assert_eq!(loaded.cluster.pods.len(), 1);
    assert_eq!(loaded.cluster.pods[0].key(), "default/p1");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn nodes_convert_with_taints_and_allocatable() {
    let loaded = ok(NODES);
    let r = &loaded.cluster.resources;
    // The four fixed ids, then the other names in name order.
    assert_eq!(r.get("example.com/gpu"), Some(ResourceId(4)));
    let a = &loaded.cluster.nodes[0];
    assert_eq!(a.name, "node-a");
    assert!(a.unschedulable);
    assert_eq!(a.labels.get("zone").map(String::as_str), Some("a"));
    assert_eq!(a.taints.len(), 2);
    assert_eq!(a.taints[0].key, "dedicated");
    assert_eq!(a.taints[0].value, "gpu");
    assert_eq!(a.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(a.taints[1].value, "");
    assert_eq!(a.taints[1].effect, TaintEffect::NoExecute);
    assert_eq!(a.allocatable.get(ResourceId::CPU), 3500);
    assert_eq!(a.allocatable.get(ResourceId::MEMORY), 16_000_000_000);
    assert_eq!(a.allocatable.get(ResourceId::PODS), 10);
    assert_eq!(a.allocatable.get(ResourceId::EPHEMERAL_STORAGE), 100 * GI);
    let b = &loaded.cluster.nodes[1];
    assert!(!b.unschedulable);
    assert_eq!(b.allocatable.get(ResourceId::CPU), 4000);
    assert_eq!(b.allocatable.get(ResourceId::MEMORY), 8 * GI);
    assert_eq!(b.allocatable.get(ResourceId(4)), 2);
}

#[test]
fn resource_ids_do_not_depend_on_input_order() {
    let node = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n\
             status: {{allocatable: {{cpu: 1, {extra}: 1}}}}\n"
        )
    };
    let one = ok(&format!(
        "{}---\n{}",
        node("a", "z.io/x"),
        node("b", "a.io/y")
    ));
    let two = ok(&format!(
        "{}---\n{}",
        node("b", "a.io/y"),
        node("a", "z.io/x")
    ));
    for loaded in [&one, &two] {
        assert_eq!(loaded.cluster.resources.get("a.io/y"), Some(ResourceId(4)));
        assert_eq!(loaded.cluster.resources.get("z.io/x"), Some(ResourceId(5)));
    }
}

#[test]
fn json_files_and_json_streams() {
    let json = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                   "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": 110}}}
                  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": 0.5}}}]}}"#;
    let loaded = load_str("cluster.json", json).unwrap();
    assert_eq!(loaded.cluster.nodes[0].name, "n1");
    assert_eq!(
        loaded.cluster.nodes[0].allocatable.get(ResourceId::PODS),
        110
    );
    assert_eq!(request(&loaded, "p", "cpu"), 500);
    assert_eq!(loaded.cluster.pods[0].namespace, "ns");

    // A JSON object is also valid YAML.
    let loaded = load_str("cluster.yaml", json.split_once('\n').unwrap().0.trim_end()).err();
    assert!(
        loaded.is_some(),
        "the first line alone is an unterminated object"
    );
    let one = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"allocatable": {"cpu": "2"}}}"#;
    assert_eq!(load_str("n.yaml", one).unwrap().cluster.nodes.len(), 1);
}

#[test]
fn json_syntax_error_names_file_document_and_line() {
    let text = "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}\n\
                {\"apiVersion\": \"v1\",\n \"kind\": }";
    let e = load_str("c.json", text).err().unwrap().to_string();
    assert_contains(
        &e,
        &[
            "c.json (document 2): invalid JSON at line 3, column",
            "fix the syntax",
        ],
    );
}

#[test]
fn lists_are_expanded() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: team, labels: {tier: gold}}
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: team}
  spec: {containers: [{name: c}]}
---
apiVersion: v1
kind: PodList
metadata: {resourceVersion: "1"}
items:
- metadata: {name: b}
  spec: {containers: [{name: c}]}
- metadata: {name: c}
  spec: {containers: [{name: c}]}
"#;
    let loaded = ok(text);
    let keys: Vec<String> = loaded.cluster.pods.iter().map(Pod::key).collect();
    assert_eq!(keys, ["team/a", "default/b", "default/c"]);
    assert_eq!(loaded.cluster.namespaces["team"]["tier"], "gold");
}

#[test]
fn errors_inside_a_list_name_the_item() {
    let text = r#"
apiVersion: v1
kind: PodList
items:
- metadata: {name: fine}
  spec: {containers: [{name: c}]}
- metadata: {name: broken}
  spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}
"#;
    let e = err(text);
    assert_contains(
        &e,
        &[
            "test.yaml (document 1, items[1])",
            "Pod default/broken",
            "spec.containers[0].resources.requests.cpu",
            "\"lots\"",
        ],
    );
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("manifests-{name}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn write(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn pod_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{containers: [{{name: c}}]}}\n"
    )
}

#[test]
fn directories_are_read_recursively_in_path_order() {
    let dir = TempDir::new("recursion");
    dir.write("b/z.yaml", &pod_yaml("p3"));
    dir.write("b/a/deep.yml", &pod_yaml("p2"));
    dir.write("a.json", r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[{"name":"c"}]}}"#);
    dir.write("c/notes.txt", "not a manifest: {{{");
    dir.write(".hidden/x.yaml", &pod_yaml("hidden"));
    dir.write("README.md", "# docs");
    let loaded = load(&[Source::Path(dir.0.clone())]).unwrap();
    let names: Vec<&str> = loaded
        .cluster
        .pods
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["p1", "p2", "p3"]);

    // Files and directories mix, in the order given.
    let loaded = load(&[
        Source::Path(dir.0.join("b/z.yaml")),
        Source::Path(dir.0.join("b/a")),
    ])
    .unwrap();
    let names: Vec<&str> = loaded
        .cluster
        .pods
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["p3", "p2"]);
}

#[test]
fn errors_in_a_directory_name_the_file() {
    let dir = TempDir::new("dir-errors");
    dir.write("ok.yaml", &pod_yaml("p1"));
    dir.write(
        "sub/bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n",
    );
    let e = load(&[Source::Path(dir.0.clone())])
        .err()
        .unwrap()
        .to_string();
    assert_contains(&e, &["bad.yaml (document 1): invalid YAML at line"]);

    let dir = TempDir::new("dir-duplicate");
    dir.write("one.yaml", &pod_yaml("same"));
    dir.write(
        "two/two.yaml",
        &format!("---\n{}---\n{}", pod_yaml("other"), pod_yaml("same")),
    );
    let e = load(&[Source::Path(dir.0.clone())])
        .err()
        .unwrap()
        .to_string();
    assert_contains(
        &e,
        &[
            "Pod default/same is defined twice",
            "one.yaml (document 1)",
            "two.yaml (document 2)",
            "remove one of them",
        ],
    );
}

#[test]
fn missing_paths_and_empty_directories() {
    let e = load(&[Source::Path("/nonexistent/lockstep/x.yaml".into())])
        .err()
        .unwrap();
    assert!(matches!(e, LoadError::Read { .. }));
    assert_contains(
        &e.to_string(),
        &["cannot read /nonexistent/lockstep/x.yaml"],
    );

    let dir = TempDir::new("empty");
    let loaded = load(&[Source::Path(dir.0.clone())]).unwrap();
    assert!(loaded.cluster.pods.is_empty());
    assert_eq!(loaded.warnings.len(), 1);
    assert_contains(&loaded.warnings[0], &["warning: directory", "holds no"]);
}

#[test]
fn stdin_is_a_source() {
    assert_eq!(Source::from_arg("-"), Source::Stdin);
    assert_eq!(Source::from_arg("x.yaml"), Source::Path("x.yaml".into()));
    let mut input = pod_yaml("from-stdin").into_bytes();
    input.extend_from_slice(b"---\nkind: Pod\n");
    let e = load_with_stdin(&[Source::Stdin], &mut input.as_slice())
        .err()
        .unwrap();
    assert_contains(
        &e.to_string(),
        &["<stdin> (document 2): Pod has no apiVersion"],
    );

    let input = pod_yaml("from-stdin");
    let loaded = load_with_stdin(&[Source::Stdin], &mut input.as_bytes()).unwrap();
    assert_eq!(loaded.cluster.pods[0].name, "from-stdin");
}

#[test]
fn unsupported_kinds_are_warnings() {
    let text = format!(
        "{}---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: web}}\nspec: {{}}\n\
         ---\napiVersion: ray.io/v1alpha1\nkind: RayCluster\nmetadata: {{name: old}}\n\
         ---\napiVersion: v2\nkind: Pod\nmetadata: {{name: future}}\n\
         ---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
        pod_yaml("p")
    );
    let loaded = ok(&text);
    assert_eq!(loaded.cluster.pods.len(), 1);
    assert_eq!(
        loaded.warnings,
        [
            "warning: ignoring unsupported kind DaemonSet \"web\" in test.yaml (document 2)",
            "warning: ignoring unsupported kind RayCluster \"old\" (apiVersion ray.io/v1alpha1; \
             lockstep reads ray.io/v1) in test.yaml (document 3)",
            "warning: ignoring unsupported kind Pod \"future\" (apiVersion v2) in test.yaml (document 4)",
            "warning: ignoring unsupported kind Kustomization in test.yaml (document 5)",
        ]
    );
}

#[test]
fn dra_kinds_and_workload_kinds_are_converted() {
    let text = r#"
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: pg}
spec: {schedulingPolicy: {gang: {minCount: 4}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: claim}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
---
apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaim
metadata: {name: old}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
"#;
    let loaded = ok(text);
    let cluster = &loaded.cluster;
    assert_eq!(cluster.pod_groups.len(), 1);
    assert_eq!(cluster.pod_groups[0].namespace, "default");
    assert_eq!(cluster.device_classes.len(), 1);
    assert_eq!(cluster.device_classes[0].name, "gpu.example.com");
    assert_eq!(cluster.resource_claims.len(), 1);
    assert_eq!(cluster.resource_claims[0].key(), "default/claim");
    assert_eq!(
        loaded.warnings,
        [
            "warning: ignoring unsupported kind ResourceClaim \"old\" (apiVersion \
          resource.k8s.io/v1beta2; lockstep reads resource.k8s.io/v1) in test.yaml (document 4)"
        ]
    );

    // resource.k8s.io/v1 objects are read as the API type.
    let bad = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n\
               spec: {devices: {requests: [{name: 7}]}}\n";
    assert_contains(
        &err(bad),
        &[
            "ResourceClaim default/c",
            "field spec.devices.requests[0].name",
            "expected a string",
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------

#[test]
fn yaml_syntax_error() {
    let text = format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n",
        pod_yaml("a")
    );
    let e = err(&text);
    assert_contains(
        &e,
        &[
            "test.yaml (document 2): invalid YAML at line",
            "fix the syntax",
        ],
    );
}

#[test]
fn wrong_field_types_name_the_field_path() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n\
                spec: {priority: high, containers: [{name: c}]}\n";
    assert_contains(
        &err(text),
        &[
            "test.yaml (document 1): Pod default/p: field spec.priority:",
            "invalid type",
        ],
    );
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n\
                \x20   resources: {requests: {cpu: [1]}}\n";
    assert_contains(
        &err(text),
        &["field spec.containers[0].resources.requests.cpu:"],
    );
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {version: 1.5}}\n";
    assert_contains(
        &err(text),
        &[
            "Node n: field metadata.labels.version:",
            "expected a string",
        ],
    );
}

#[test]
fn bad_quantities_name_the_field() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: ns}
spec:
  containers:
  - name: a
    resources: {requests: {memory: 1Gi}}
  - name: b
    resources: {requests: {memory: 1Gb}}
"#;
    let e = err(text);
    assert_contains(
        &e,
        &[
            "test.yaml (document 1): Pod ns/q: field spec.containers[1].resources.requests.memory",
            "\"1Gb\" is not a valid Kubernetes quantity",
        ],
    );
    let negative = text.replace("1Gb", "\"-1\"");
    assert_contains(
        &err(&negative),
        &["spec.containers[1].resources.requests.memory", "negative"],
    );
    let node =
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: 2x}}\n";
    assert_contains(
        &err(node),
        &["Node n: field status.allocatable.cpu", "\"2x\""],
    );
    let huge =
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: 100Ei}}\n";
    assert_contains(&err(huge), &["status.allocatable.cpu", "too large"]);
}

#[test]
fn missing_identity_fields() {
    assert_contains(
        &err("kind: Pod\nmetadata: {name: p}\n"),
        &[
            "test.yaml (document 1): Pod has no apiVersion",
            "every object needs apiVersion, kind and metadata.name",
        ],
    );
    assert_contains(
        &err("apiVersion: v1\nmetadata: {name: p}\n"),
        &["test.yaml (document 1): object has no kind"],
    );
    assert_contains(
        &err("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n"),
        &["Pod has no metadata.name"],
    );
    assert_contains(
        &err("apiVersion: v1\nkind: Node\nmetadata: {generateName: n-}\n"),
        &["Node has no metadata.name"],
    );
    assert_contains(
        &err("- a\n- b\n"),
        &["expected a Kubernetes object", "found a list"],
    );
}

#[test]
fn node_without_allocatable_has_its_capacity() {
    let loaded = ok(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: 2, pods: 4}}\n",
    );
    let node = &loaded.cluster.nodes[0];
    let cpu = loaded.cluster.resources.get("cpu").unwrap();
    assert_eq!(node.allocatable.get(cpu), 2000);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    // Allocatable wins over capacity when both are given.
    let loaded = ok("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n\
                     status: {capacity: {cpu: 4, pods: 4}, allocatable: {cpu: 3, pods: 4}}\n");
    assert_eq!(loaded.cluster.nodes[0].allocatable.get(cpu), 3000);
    let e = err("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {}\n");
    assert_eq!(
        e,
        "node n1 in test.yaml (document 1) has neither status.allocatable nor status.capacity; \
         add status.allocatable (cpu, memory, pods)"
    );
}

#[test]
fn a_file_without_objects_is_a_warning_naming_it() {
    for text in ["", "# nothing yet\n", "---\n---\n"] {
        let loaded = ok(text);
        assert_eq!(loaded.warnings.len(), 1, "{text:?}");
        assert_contains(
            &loaded.warnings[0],
            &["warning: test.yaml holds no Kubernetes objects"],
        );
    }
}

#[test]
fn node_without_pods_allocatable_is_a_warning() {
    let loaded =
        ok("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 1}}\n");
    assert_eq!(loaded.warnings.len(), 1);
    assert_contains(
        &loaded.warnings[0],
        &["node n1", "no pods in status.allocatable"],
    );
}

#[test]
fn duplicate_objects_name_both_places() {
    let e = err(&format!(
        "{NODES}---\n{}",
        NODES.split("---").next().unwrap()
    ));
    assert_contains(
        &e,
        &["Node node-b is defined twice, in test.yaml (document 1) and in test.yaml (document 3)"],
    );
    // The same name in two namespaces is fine.
    let two = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nspec: {containers: [{name: c}]}\n\
               ---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: b}\nspec: {containers: [{name: c}]}\n";
    assert_eq!(ok(two).cluster.pods.len(), 2);
}

#[test]
fn invalid_selector_operators() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: Equals, values: [a]}
"#;
    assert_contains(
        &err(text),
        &[
            "Pod default/p: field spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
            "invalid operator \"Equals\"; use one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
        ],
    );
    let text = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec:
  minAvailable: 1
  selector:
    matchExpressions: [{key: app, operator: Gt, values: ["1"]}]
"#;
    assert_contains(
        &err(text),
        &[
            "PodDisruptionBudget default/b: field spec.selector.matchExpressions[0].operator",
            "use one of In, NotIn, Exists, DoesNotExist",
        ],
    );
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchExpressions: [{key: app, operator: In}]
"#;
    assert_contains(
        &err(text),
        &[
            "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values",
            "needs at least one value",
        ],
    );
}

#[test]
fn other_invalid_values() {
    let pod_with = |spec_extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: c}}]\n{spec_extra}"
        )
    };
    assert_contains(
        &err(&pod_with("  tolerations: [{key: k, operator: Equals}]\n")),
        &["field spec.tolerations[0].operator", "use Equal or Exists"],
    );
    assert_contains(
        &err(&pod_with("  tolerations: [{key: k, effect: NoRun}]\n")),
        &[
            "field spec.tolerations[0].effect",
            "NoSchedule, PreferNoSchedule or NoExecute",
        ],
    );
    assert_contains(
        &err(&pod_with("  preemptionPolicy: Sometimes\n")),
        &[
            "field spec.preemptionPolicy",
            "PreemptLowerPriority or Never",
        ],
    );
    assert_contains(
        &err(&pod_with(
            "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Maybe}]\n",
        )),
        &[
            "field spec.topologySpreadConstraints[0].whenUnsatisfiable",
            "DoNotSchedule or ScheduleAnyway",
        ],
    );
    assert_contains(
        &err(&pod_with("  resources: {requests: {example.com/gpu: 1}}\n")),
        &[
            "field spec.resources.requests.example.com/gpu",
            "only cpu, memory and hugepages-*",
        ],
    );
    assert_contains(
        &err("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"),
        &["field spec", "add a spec"],
    );
    assert_contains(
        &err("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: x}\n"),
        &["PriorityClass x: field value", "add value"],
    );
}

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

#[test]
fn quantities_in_every_notation() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: q}
spec:
  containers:
  - name: a
    resources:
      requests: {cpu: 250m, memory: 1Gi, example.com/gpu: 1, ephemeral-storage: 1e3}
  - name: b
    resources:
      requests: {cpu: 1.5, memory: 500M, example.com/gpu: "2"}
  - name: c
    resources:
      requests: {cpu: 2, memory: 128974848, hugepages-2Mi: 4Mi}
  - name: d
    resources:
      requests: {cpu: 0.1, memory: 1.5Ki}
"#;
    let loaded = ok(text);
    assert_eq!(request(&loaded, "q", "cpu"), 250 + 1500 + 2000 + 100);
    assert_eq!(
        request(&loaded, "q", "memory"),
        GI + 500_000_000 + 128_974_848 + 1536
    );
    assert_eq!(request(&loaded, "q", "example.com/gpu"), 3);
    assert_eq!(request(&loaded, "q", "ephemeral-storage"), 1000);
    assert_eq!(request(&loaded, "q", "hugepages-2Mi"), 4 * MI);
    // Pod count is not a request.
    assert_eq!(pod(&loaded, "q").requests.get(ResourceId::PODS), 0);
}

#[test]
fn init_containers_raise_requests_to_their_peak() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - name: migrate
    resources: {requests: {cpu: "2", memory: 64Mi}}
  - name: warm
    resources: {requests: {memory: 1Gi}}
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 256Mi}}
  - name: log
    resources: {requests: {cpu: 100m, memory: 64Mi}}
"#;
    let loaded = ok(text);
    assert_eq!(request(&loaded, "p", "cpu"), 2000);
    assert_eq!(request(&loaded, "p", "memory"), GI);
}

#[test]
fn sidecars_run_beside_later_init_containers_and_the_app() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - name: before
    resources: {requests: {cpu: 300m}}
  - name: proxy
    restartPolicy: Always
    resources: {requests: {cpu: 200m, memory: 100Mi}}
  - name: after
    resources: {requests: {cpu: 900m}}
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 100Mi}}
"#;
    let loaded = ok(text);
    // max(app 500 + proxy 200, before 300, after 900 + proxy 200) = 1100
    assert_eq!(request(&loaded, "p", "cpu"), 1100);
    // memory: app 100Mi + proxy 100Mi
    assert_eq!(request(&loaded, "p", "memory"), 200 * MI);
}

#[test]
fn overhead_is_added() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  overhead: {cpu: 250m, memory: 120Mi}
  initContainers:
  - name: init
    resources: {requests: {cpu: "1"}}
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 1Gi}}
"#;
    let loaded = ok(text);
    assert_eq!(request(&loaded, "p", "cpu"), 1250);
    assert_eq!(request(&loaded, "p", "memory"), GI + 120 * MI);
    let p = pod(&loaded, "p");
    assert_eq!(p.non_zero_cpu, 1250);
    assert_eq!(p.non_zero_memory, GI + 120 * MI);
}

#[test]
fn non_zero_requests_default_per_container() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: a
  - name: b
    resources: {requests: {cpu: 300m}}
  - name: c
    resources: {requests: {memory: "0"}}
---
apiVersion: v1
kind: Pod
metadata: {name: empty}
spec:
  containers: [{name: a}]
"#;
    let loaded = ok(text);
    let p = pod(&loaded, "p");
    assert_eq!(request(&loaded, "p", "cpu"), 300);
    assert_eq!(request(&loaded, "p", "memory"), 0);
    // a: 100m + 200Mi, b: 300m + 200Mi, c: 100m + 0 (explicit zero is not missing)
    assert_eq!(p.non_zero_cpu, 500);
    assert_eq!(p.non_zero_memory, 400 * MI);
    let e = pod(&loaded, "empty");
    assert!(e.requests.is_empty());
    assert_eq!((e.non_zero_cpu, e.non_zero_memory), (100, 200 * MI));
}

#[test]
fn limits_default_requests() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - name: init
    resources: {limits: {cpu: "3"}}
  containers:
  - name: a
    resources:
      requests: {cpu: 200m}
      limits: {cpu: "1", memory: 512Mi, example.com/gpu: 1}
"#;
    let loaded = ok(text);
    assert_eq!(request(&loaded, "p", "cpu"), 3000);
    assert_eq!(request(&loaded, "p", "memory"), 512 * MI);
    assert_eq!(request(&loaded, "p", "example.com/gpu"), 1);
    // The init container's memory is missing: 200Mi for scoring.
    assert_eq!(pod(&loaded, "p").non_zero_memory, 512 * MI);
}

// ---------------------------------------------------------------------------------------
// Priority
// ---------------------------------------------------------------------------------------

const CLASSES: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: normal}
value: 10
globalDefault: true
"#;

fn pod_with_priority(name: &str, fields: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\n\
         spec:\n  containers: [{{name: c}}]\n{fields}"
    )
}

#[test]
fn priority_resolution() {
    let text = [
        CLASSES.to_string(),
        pod_with_priority("explicit", "  priority: 7\n"),
        pod_with_priority("by-class", "  priorityClassName: high\n"),
        pod_with_priority(
            "by-class-own-policy",
            "  priorityClassName: high\n  preemptionPolicy: PreemptLowerPriority\n",
        ),
        pod_with_priority("default", ""),
        pod_with_priority("system", "  priorityClassName: system-node-critical\n"),
    ]
    .concat();
    let loaded = ok(&text);
    let p = pod(&loaded, "explicit");
    assert_eq!((p.priority, p.priority_class_name.as_deref()), (7, None));
    let p = pod(&loaded, "by-class");
    assert_eq!(
        (p.priority, p.priority_class_name.as_deref()),
        (1000, Some("high"))
    );
    assert_eq!(p.preemption_policy, PreemptionPolicy::Never);
    let p = pod(&loaded, "by-class-own-policy");
    assert_eq!(p.preemption_policy, PreemptionPolicy::PreemptLowerPriority);
    let p = pod(&loaded, "default");
    assert_eq!(
        (p.priority, p.priority_class_name.as_deref()),
        (10, Some("normal"))
    );
    assert_eq!(pod(&loaded, "system").priority, 2_000_001_000);

    let classes = &loaded.cluster.priority_classes;
    assert_eq!(classes.len(), 2);
    assert_eq!(classes[0].name, "high");
    assert_eq!(classes[0].preemption_policy, PreemptionPolicy::Never);
    assert!(classes[1].global_default);

    // Without a global default the priority is 0.
    let loaded = ok(&pod_with_priority("plain", ""));
    assert_eq!(loaded.cluster.pods[0].priority, 0);
    assert_eq!(
        loaded.cluster.pods[0].preemption_policy,
        PreemptionPolicy::PreemptLowerPriority
    );
}

#[test]
fn undefined_priority_class_is_an_error() {
    let e = err(&pod_with_priority("p", "  priorityClassName: urgent\n"));
    assert_eq!(
        e,
        "pod default/p in test.yaml (document 1) names priorityClassName urgent, which is not \
         defined; add the PriorityClass or remove the field"
    );
}

/// Pods are converted as they are read, before the PriorityClasses after them and before
/// the resource names of the whole input are known; what they end with, and which error a
/// bad input gets, are those of converting them once everything is read.
#[test]
fn pods_read_before_their_classes_and_errors_in_check_order() {
    // A class defined after the pod that names it; a global default after a pod without one.
    let text = [
        pod_with_priority(
            "early",
            "  priorityClassName: high
",
        ),
        pod_with_priority("plain", ""),
        format!("---{CLASSES}"),
    ]
    .concat();
    let loaded = ok(&text);
    let p = pod(&loaded, "early");
    assert_eq!(
        (p.priority, p.preemption_policy),
        (1000, PreemptionPolicy::Never)
    );
    assert_eq!(pod(&loaded, "plain").priority, 10);

    // A pod without containers: that, before its undefined class.
    let e = err("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n\
                 spec: {containers: [], priorityClassName: urgent}\n");
    assert_contains(&e, &["spec.containers", "at least one container"]);
    // An undefined class before a bad phase or a bad preemption policy.
    for fields in [
        "  priorityClassName: urgent\nstatus: {phase: Sleeping}\n",
        "  priorityClassName: urgent\n  preemptionPolicy: Sometimes\n",
    ] {
        let e = err(&pod_with_priority("p", fields));
        assert_contains(&e, &["urgent", "not defined"]);
    }
    // The preemption policy before the phase, once the class exists.
    let e = err(&[
        CLASSES.to_string(),
        pod_with_priority(
            "p",
            "  preemptionPolicy: Sometimes\nstatus: {phase: Sleeping}\n",
        ),
    ]
    .concat());
    assert_contains(&e, &["spec.preemptionPolicy", "Sometimes"]);

    // Many pods, converted on every core: the first bad one in input order is named, and a
    // pod whose fields do not deserialize comes before any conversion error.
    let many = |bad: &[(usize, &str)]| {
        (0..1200)
            .map(|i| {
                let fields = bad.iter().find(|(at, _)| *at == i).map_or("", |(_, f)| *f);
                pod_with_priority(&format!("p{i}"), fields)
            })
            .collect::<String>()
    };
    let e = err(&many(&[
        (300, "status: {phase: Sleeping}\n"),
        (900, "  priorityClassName: urgent\n"),
    ]));
    assert_contains(&e, &["p300", "Sleeping"]);
    let e = err(&many(&[
        (300, "status: {phase: Sleeping}\n"),
        (900, "  priority: high\n"),
    ]));
    assert_contains(&e, &["document 901", "spec.priority"]);
}

#[test]
fn two_global_defaults_are_an_error() {
    let text = CLASSES.replace("preemptionPolicy: Never", "globalDefault: true");
    assert_contains(
        &err(&text),
        &[
            "PriorityClasses high (test.yaml (document 1)) and normal (test.yaml (document 2)) both have globalDefault: true",
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Constraints
// ---------------------------------------------------------------------------------------

#[test]
fn affinity_terms_merge_match_label_keys() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {app: web, rev: "42"}
spec:
  containers: [{name: c}]
  nodeSelector: {disk: ssd, arch: amd64}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: zone, operator: In, values: [a, b]}]
          matchFields: [{key: metadata.name, operator: NotIn, values: [n9]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 5
        preference:
          matchExpressions: [{key: gen, operator: Gt, values: ["3"]}]
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: zone
        labelSelector: {matchLabels: {app: db}}
        matchLabelKeys: [rev, missing]
        mismatchLabelKeys: [app]
        namespaces: [data]
      - topologyKey: zone
        matchLabelKeys: [rev]
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {}
          namespaceSelector: {matchLabels: {team: x}}
"#;
    let loaded = ok(text);
    let p = pod(&loaded, "p");
    assert_eq!(
        p.node_selector,
        [
            ("arch".to_string(), "amd64".to_string()),
            ("disk".to_string(), "ssd".to_string())
        ]
    );
    let required = p.node_affinity.required.as_ref().unwrap();
    assert_eq!(required.len(), 1);
    assert_eq!(required[0].match_expressions[0].operator, Operator::In);
    assert_eq!(required[0].match_fields[0].operator, Operator::NotIn);
    assert_eq!(p.node_affinity.preferred[0].0, 5);
    assert_eq!(
        p.node_affinity.preferred[0].1.match_expressions[0].operator,
        Operator::Gt
    );

    let term = &p.pod_affinity.required[0];
    let selector = term.selector.as_ref().unwrap();
    assert_eq!(
        selector.match_labels,
        [("app".to_string(), "db".to_string())]
    );
    assert_eq!(
        selector.match_expressions,
        [
            Requirement {
                key: "rev".into(),
                operator: Operator::In,
                values: vec!["42".into()]
            },
            Requirement {
                key: "app".into(),
                operator: Operator::NotIn,
                values: vec!["web".into()]
            },
        ]
    );
    assert_eq!(term.namespaces, ["data"]);
    assert_eq!(term.namespace_selector, None);
    // A term without a labelSelector matches no pod, even with matchLabelKeys.
    assert_eq!(p.pod_affinity.required[1].selector, None);

    let (weight, anti) = &p.pod_anti_affinity.preferred[0];
    assert_eq!(*weight, 50);
    assert!(anti.selector.as_ref().unwrap().is_empty());
    assert_eq!(
        anti.namespace_selector.as_ref().unwrap().match_labels.len(),
        1
    );
}

#[test]
fn topology_spread_defaults_and_match_label_keys() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {app: web, pod-template-hash: abc}
spec:
  containers: [{name: c}]
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    minDomains: 3
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [pod-template-hash]
  - maxSkew: 2
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    nodeAffinityPolicy: Ignore
    nodeTaintsPolicy: Honor
"#;
    let loaded = ok(text);
    let c = &pod(&loaded, "p").topology_spread;
    assert_eq!(c[0].max_skew, 1);
    assert_eq!(c[0].when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    assert_eq!(c[0].min_domains, Some(3));
    assert_eq!(c[0].node_affinity_policy, InclusionPolicy::Honor);
    assert_eq!(c[0].node_taints_policy, InclusionPolicy::Ignore);
    assert_eq!(
        c[0].selector.as_ref().unwrap().match_expressions,
        [Requirement {
            key: "pod-template-hash".into(),
            operator: Operator::In,
            values: vec!["abc".into()]
        }]
    );
    assert_eq!(c[1].when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert_eq!(c[1].selector, None);
    assert_eq!(c[1].node_affinity_policy, InclusionPolicy::Ignore);
    assert_eq!(c[1].node_taints_policy, InclusionPolicy::Honor);
}

#[test]
fn tolerations_ports_and_identity() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: jobs
  creationTimestamp: "2024-01-02T03:04:05Z"
  deletionTimestamp: "2024-01-02T04:00:00Z"
spec:
  nodeName: node-a
  schedulerName: lockstep
  schedulingGroup: {podGroupName: trainers}
  tolerations:
  - {key: dedicated, value: gpu}
  - {operator: Exists}
  - {key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  initContainers:
  - name: sidecar
    restartPolicy: Always
    ports: [{containerPort: 9000, hostPort: 9000, protocol: UDP}]
  - name: init
    ports: [{containerPort: 9100, hostPort: 9100}]
  containers:
  - name: c
    ports:
    - {containerPort: 80, hostPort: 8080, hostIP: 10.0.0.1}
    - {containerPort: 81}
status:
  phase: Running
  startTime: "2024-01-02T03:05:05Z"
"#;
    let loaded = ok(text);
    let p = pod(&loaded, "p");
    assert_eq!(p.key(), "jobs/p");
    assert_eq!(p.creation_timestamp, Some(1_704_164_645));
    assert_eq!(p.start_time, Some(1_704_164_705));
    assert!(p.terminating);
    assert_eq!(p.node_name.as_deref(), Some("node-a"));
    assert_eq!(p.scheduler_name, "lockstep");
    assert_eq!(p.pod_group.as_deref(), Some("trainers"));
    assert_eq!(p.phase, PodPhase::Running);
    assert!(p.is_bound());

    assert_eq!(p.tolerations[0].operator, TolerationOperator::Equal);
    assert_eq!(p.tolerations[0].effect, None);
    assert_eq!(p.tolerations[1].operator, TolerationOperator::Exists);
    assert_eq!(p.tolerations[1].key, "");
    assert_eq!(p.tolerations[2].effect, Some(TaintEffect::NoExecute));

    // Regular containers and sidecars hold host ports; a plain init container does not.
    assert_eq!(
        p.host_ports,
        [
            HostPort {
                protocol: "TCP".into(),
                host_ip: "10.0.0.1".into(),
                port: 8080
            },
            HostPort {
                protocol: "UDP".into(),
                host_ip: String::new(),
                port: 9000
            },
        ]
    );
}

#[test]
fn pending_pod_keeps_its_nominated_node() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n\
                status: {phase: Pending, nominatedNodeName: node-b}\n";
    let loaded = ok(text);
    let p = pod(&loaded, "p");
    assert!(p.is_pending());
    assert_eq!(p.nominated_node_name.as_deref(), Some("node-b"));
}

#[test]
fn pod_defaults() {
    let loaded = ok(&pod_yaml("p"));
    let p = &loaded.cluster.pods[0];
    assert_eq!(p.namespace, "default");
    assert_eq!(p.scheduler_name, "default-scheduler");
    assert_eq!(p.phase, PodPhase::Pending);
    assert!(p.is_pending());
    assert!(!p.terminating);
    assert_eq!(p.creation_timestamp, None);
    assert_eq!(p.start_time, None);
    assert_eq!(p.nominated_node_name, None);
    assert_eq!(p.pod_group, None);
    assert!(p.host_ports.is_empty());
    assert_eq!(p.node_affinity.required, None);
}

#[test]
fn host_network_makes_container_ports_host_ports() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: true\n\
                \x20 containers: [{name: c, ports: [{containerPort: 53, protocol: UDP}]}]\n";
    let loaded = ok(text);
    assert_eq!(
        loaded.cluster.pods[0].host_ports,
        [HostPort {
            protocol: "UDP".into(),
            host_ip: String::new(),
            port: 53
        }]
    );
}

#[test]
fn pod_disruption_budgets() {
    let text = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: a, namespace: web}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
status:
  disruptionsAllowed: 1
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec:
  maxUnavailable: 25%
"#;
    let loaded = ok(text);
    let b = &loaded.cluster.pod_disruption_budgets;
    assert_eq!((b[0].namespace.as_str(), b[0].name.as_str()), ("web", "a"));
    assert_eq!(b[0].min_available, Some(IntOrPercent::Int(2)));
    assert_eq!(b[0].disruptions_allowed, Some(1));
    assert_eq!(b[0].selector.as_ref().unwrap().match_labels.len(), 1);
    assert_eq!(b[1].max_unavailable, Some(IntOrPercent::Percent(25)));
    assert_eq!(b[1].selector, None);
    assert_eq!(b[1].disruptions_allowed, None);

    let bad = text.replace("25%", "lots");
    assert_contains(
        &err(&bad),
        &[
            "PodDisruptionBudget default/b: field spec.maxUnavailable",
            "\"lots\"",
        ],
    );
}

#[test]
fn namespaces_get_their_name_label() {
    let text = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: team, labels: {{tier: gold}}}}\n---\n{}",
        pod_yaml("p")
    );
    let loaded = ok(&text);
    let ns = &loaded.cluster.namespaces;
    assert_eq!(ns["team"]["tier"], "gold");
    assert_eq!(ns["team"]["kubernetes.io/metadata.name"], "team");
    // "default" is not defined in the input but a pod lives there.
    assert_eq!(ns["default"]["kubernetes.io/metadata.name"], "default");
    assert_eq!(ns.len(), 2);
}

#[test]
fn the_kubernetes_api_version_is_the_k8s_openapi_feature() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"))
            .expect("workspace Cargo.toml");
    let feature = format!(
        "features = [\"v{}\"]",
        lockstep_manifests::KUBERNETES_API_VERSION.replace('.', "_")
    );
    assert!(
        manifest
            .lines()
            .any(|l| l.starts_with("k8s-openapi") && l.contains(&feature)),
        "the workspace's k8s-openapi dependency has {feature}"
    );
}

/// A long input of nodes and pods with unknown fields, unsupported kinds and namespaces among
/// them (runs of hundreds of nodes and pods, which are deserialized together on every core):
/// the warnings come in input order, and of two bad objects the first is the one reported.
#[test]
fn long_inputs_keep_input_order_in_warnings_and_errors() {
    let mut text = String::new();
    let mut expected = Vec::new();
    for i in 0..1500 {
        match i % 600 {
            7 => {
                text.push_str(&format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm{i}}}\n---\n"
                ));
                expected.push(format!("unsupported kind ConfigMap \"cm{i}\""));
            }
            450 => text.push_str(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns{i}}}\n---\n"
            )),
            _ if i % 2 == 0 => {
                let typo = i % 13 == 0;
                text.push_str(&format!(
                    "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\nstatus:\n  \
                     allocatable: {{cpu: '4', pods: '110'}}\n{}---\n",
                    if typo {
                        "  alocatable: {cpu: '1'}\n"
                    } else {
                        ""
                    }
                ));
                if typo {
                    expected.push(format!("Node n{i}: status.alocatable"));
                }
            }
            _ => {
                let typo = i % 11 == 0;
                text.push_str(&format!(
                    "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  containers:\n  \
                     - name: c\n    image: i\n{}---\n",
                    if typo { "    resource: {}\n" } else { "" }
                ));
                if typo {
                    expected.push(format!("Pod default/p{i}: spec.containers[0].resource"));
                }
            }
        }
    }
    let loaded = ok(&text);
    assert_eq!(
        loaded.cluster.pods.len() + loaded.cluster.nodes.len(),
        1500 - 5
    );
    assert_eq!(
        loaded.warnings.len(),
        expected.len(),
        "{:#?}",
        loaded.warnings
    );
    for (warning, part) in loaded.warnings.iter().zip(&expected) {
        assert_contains(warning, &[part]);
    }
    // The pods keep their input order.
    let names: Vec<u32> = loaded
        .cluster
        .pods
        .iter()
        .map(|p| p.name[1..].parse().unwrap())
        .collect();
    assert!(names.is_sorted(), "{names:?}");

    // Two bad pods far apart: the first is reported, whichever thread reads it.
    for (first, second) in [(301, 999), (1003, 1103), (3, 1491)] {
        let bad = text
            .replace(
                &format!("name: p{first}}}\nspec:\n  containers:\n  - name: c\n    image: i\n"),
                &format!("name: p{first}}}\nspec:\n  containers: 7\n"),
            )
            .replace(
                &format!("name: p{second}}}\nspec:\n  containers:\n"),
                &format!("name: p{second}}}\nspec:\n  priority: high\n  containers:\n"),
            );
        assert_contains(
            &err(&bad),
            &[&format!("Pod default/p{first}"), "spec.containers"],
        );
        // A duplicate after a bad pod: the bad pod is reported.
        let dup = bad.replace(&format!("name: p{second}}}"), "name: p5}");
        assert_contains(&err(&dup), &[&format!("Pod default/p{first}")]);
    }
}

/// In a large file (parsed in pieces on every core), a syntax error anywhere is reported
/// before an object's error, as the file is parsed before its objects are read; otherwise
/// the first object's error in input order.
#[test]
fn a_syntax_error_late_in_a_large_file_is_reported_before_an_early_bad_object() {
    let pod = |i: usize| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  containers:\n  \
             - name: c\n    image: i\n"
        )
    };
    let mut docs: Vec<String> = (0..9000).map(pod).collect();
    // An early object without a name.
    docs[10] = "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {}\n".to_string();
    let bad_object = docs.join("---\n");
    let e = lockstep_manifests::load_str("big.yaml", &bad_object).unwrap_err();
    assert!(e.to_string().contains("document 11"), "{e}");
    assert!(e.to_string().contains("metadata.name"), "{e}");
    // And a syntax error in a document of a later run.
    docs[8500] = "apiVersion: v1\nkind: [Pod\n".to_string();
    let both = docs.join("---\n");
    let e = lockstep_manifests::load_str("big.yaml", &both).unwrap_err();
    assert!(e.to_string().contains("document 8501"), "{e}");
}
