//! `schedule --estimate POD_FILE`: the shipped example, a pod file that is also part of the
//! -f set, PriorityClasses from the cluster or the pod file, and several pods in one file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run lockstep")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// A directory of files for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("lockstep-estimate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CLUSTER: &str = "apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: '4', memory: 32Gi, pods: '110'}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

fn pod(name: &str, cpu: &str, class: Option<&str>) -> String {
    let class = class.map_or(String::new(), |c| format!("  priorityClassName: {c}\n"));
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
{class}  containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]
"
    )
}

#[test]
fn the_shipped_example_estimates() {
    let out = lockstep(&[
        "schedule",
        "-f",
        "examples/dra",
        "--estimate",
        "examples/estimate/small-inference.yaml",
        "-o",
        "json",
    ]);
    let v = json(&out);
    assert_eq!(v["pod"], "ml/small-inference");
    assert!(v["total"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn a_pod_file_in_the_f_set_is_one_object() {
    let dir = Dir::new("twice");
    let cluster = dir.write("cluster.yaml", CLUSTER);
    let shape = dir.write("shape.yaml", &pod("web", "2", Some("high")));
    let alone = json(&lockstep(&[
        "schedule",
        "-f",
        &cluster,
        "--estimate",
        &shape,
        "-o",
        "json",
    ]));
    assert_eq!(alone["total"], 6, "4 on n1, 2 on n2: {alone}");
    let twice = json(&lockstep(&[
        "schedule",
        "-f",
        &cluster,
        "-f",
        &shape,
        "--estimate",
        &shape,
        "-o",
        "json",
    ]));
    assert_eq!(alone, twice);
    // The same in a directory holding both files.
    let dir_arg = dir.0.to_string_lossy().into_owned();
    let in_dir = json(&lockstep(&[
        "schedule",
        "-f",
        &dir_arg,
        "--estimate",
        &shape,
        "-o",
        "json",
    ]));
    assert_eq!(alone, in_dir);
}

#[test]
fn a_different_pod_of_the_same_name_is_an_error_naming_both() {
    let dir = Dir::new("differs");
    let cluster = dir.write(
        "cluster.yaml",
        &format!("{CLUSTER}---\n{}", pod("web", "1", None)),
    );
    let shape = dir.write("shape.yaml", &pod("web", "2", None));
    let out = lockstep(&["schedule", "-f", &cluster, "--estimate", &shape]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Pod default/web is defined twice"),
        "{stderr}"
    );
    assert!(stderr.contains("cluster.yaml (document 4)"), "{stderr}");
    assert!(stderr.contains("shape.yaml (document 1)"), "{stderr}");
}

#[test]
fn priority_classes_from_the_cluster_or_the_pod_file() {
    let dir = Dir::new("classes");
    let cluster = dir.write("cluster.yaml", CLUSTER);
    // The cluster's class.
    let shape = dir.write("shape.yaml", &pod("web", "2", Some("high")));
    json(&lockstep(&[
        "schedule",
        "-f",
        &cluster,
        "--estimate",
        &shape,
        "-o",
        "json",
    ]));
    // A class of the pod file's own, and the cluster's class repeated identically.
    let own = dir.write(
        "own.yaml",
        &format!(
            "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: batch}}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: high}}
value: 1000
---
{}",
            pod("web", "2", Some("batch"))
        ),
    );
    let v = json(&lockstep(&[
        "schedule",
        "-f",
        &cluster,
        "--estimate",
        &own,
        "-o",
        "json",
    ]));
    assert_eq!(v["total"], 6);
    // The same class name with another value is two objects of one name.
    let clash = dir.write(
        "clash.yaml",
        &format!(
            "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: high}}
value: 5
---
{}",
            pod("web", "2", Some("high"))
        ),
    );
    let out = lockstep(&["schedule", "-f", &cluster, "--estimate", &clash]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("PriorityClass high is defined twice"),
        "{stderr}"
    );
}

#[test]
fn several_pods_get_one_answer_each() {
    let dir = Dir::new("several");
    let cluster = dir.write("cluster.yaml", CLUSTER);
    let shapes = dir.write(
        "shapes.yaml",
        &format!("{}---\n{}", pod("small", "1", None), pod("big", "4", None)),
    );
    let v = json(&lockstep(&[
        "schedule",
        "-f",
        &cluster,
        "--estimate",
        &shapes,
        "-o",
        "json",
    ]));
    let list = v.as_array().expect("a list, one per pod");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["pod"], "default/small");
    assert_eq!(list[0]["total"], 12);
    assert_eq!(list[1]["pod"], "default/big");
    assert_eq!(list[1]["total"], 3);
    let table = lockstep(&["schedule", "-f", &cluster, "--estimate", &shapes]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("Replicas of default/small") && text.contains("Replicas of default/big"),
        "{text}"
    );
}

#[test]
fn a_running_pod_is_no_shape() {
    let dir = Dir::new("running");
    let cluster = dir.write("cluster.yaml", CLUSTER);
    let shape = dir.write(
        "shape.yaml",
        &pod("web", "2", None).replace("spec:\n", "spec:\n  nodeName: n1\n"),
    );
    let out = lockstep(&["schedule", "-f", &cluster, "--estimate", &shape]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("default/web is not pending"), "{stderr}");
}
