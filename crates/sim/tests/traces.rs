//! Trace readers on the data shipped in `crates/sim/data` and on manifests written here.

use std::path::PathBuf;

use lockstep_engine::Profile;
use lockstep_sim::data::Dataset;
use lockstep_sim::policy::{Policy, gpu_aware};
use lockstep_sim::readers::{native, openb, philly, tiresias};
use lockstep_sim::trace::GPU;
use lockstep_sim::{SimOptions, simulate};

fn policy() -> Policy {
    Policy::from_profile(&gpu_aware(Profile::default()))
}

#[test]
fn philly_full_trace_reads() {
    let text = Dataset::Philly.builtin();
    let t = philly::parse_philly("philly.csv", &text, &philly::PhillyOptions::default())
        .expect("the shipped trace reads");
    assert_eq!(t.jobs.len(), 82_247);
    assert_eq!(t.jobs.iter().filter(|j| j.gpus == 128).count(), 3);
    assert_eq!(
        t.jobs.iter().filter(|j| j.gang).count(),
        199 + 7 + 7 + 67 + 6 + 3
    );
    assert_eq!(t.jobs[0].arrival, 0);
}

#[test]
fn philly_window_replays() {
    let opts = philly::PhillyOptions {
        max_jobs: Some(300),
        ..philly::PhillyOptions::default()
    };
    let t = philly::parse_philly("philly.csv", &Dataset::Philly.builtin(), &opts).expect("reads");
    let r = simulate(&t, policy(), SimOptions::default(), &mut |_, _| {}).expect("runs");
    assert_eq!(r.jobs.iter().filter(|o| o.end.is_some()).count(), 300);
}

#[test]
fn tiresias_example_reads_and_replays() {
    let spec = tiresias::parse_cluster_spec("spec.csv", &Dataset::TiresiasCluster.builtin())
        .expect("spec");
    let t = tiresias::parse_tiresias("jobs.csv", &Dataset::TiresiasJobs.builtin(), &spec)
        .expect("jobs");
    assert_eq!(t.jobs.len(), 60);
    assert_eq!(t.capacity(GPU), 64);
    let r = simulate(&t, policy(), SimOptions::default(), &mut |_, _| {}).expect("runs");
    assert!(r.jobs.iter().all(|o| o.end.is_some()));
}

#[test]
fn openb_default_reads_every_pod_with_dra_gpus() {
    let t = openb::parse_openb(
        "nodes.csv",
        &Dataset::OpenbNodes.builtin(),
        "pods.csv",
        &Dataset::OpenbPods.builtin(),
    )
    .expect("reads");
    assert_eq!(t.cluster.nodes.len(), 1523);
    assert_eq!(t.jobs.len(), 8152);
    assert!(t.skipped.is_empty());
    assert_eq!(t.gpus(), 6212);
    assert_eq!(
        t.capacity(GPU),
        0,
        "GPUs are DRA devices, not an extended resource"
    );
    let fractional = t
        .pod_gpu_milli
        .iter()
        .filter(|m| **m > 0 && **m % 1000 != 0)
        .count();
    assert_eq!(fractional, 3078);
    assert_eq!(t.cluster.device_classes.len(), 1);
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

const CLUSTER: &str = "apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: '16', memory: 64Gi, pods: '110', nvidia.com/gpu: '4'}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status:
  allocatable: {cpu: '16', memory: 64Gi, pods: '110', nvidia.com/gpu: '4'}
";

fn gpu_pod(name: &str, group: Option<&str>, annotations: &str) -> String {
    let group = group.map_or(String::new(), |g| {
        format!("  schedulingGroup: {{podGroupName: {g}}}\n")
    });
    format!(
        "---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
{group}  containers:
  - name: c
    image: x
    resources:
      requests: {{cpu: '1', nvidia.com/gpu: '4'}}
      limits: {{nvidia.com/gpu: '4'}}
"
    )
}

#[test]
fn manifests_with_annotations_replay() {
    let dir = temp_dir("native");
    let mut text = CLUSTER.to_string();
    text.push_str(&gpu_pod(
        "a",
        None,
        "lockstep.dev/arrival: '0', lockstep.dev/duration: 100s",
    ));
    text.push_str(
        "---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: train
  annotations: {lockstep.dev/arrival: '10', lockstep.dev/duration: '50'}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
",
    );
    text.push_str(&gpu_pod("train-0", Some("train"), ""));
    text.push_str(&gpu_pod("train-1", Some("train"), ""));
    std::fs::write(dir.join("trace.yaml"), text).expect("write");
    let t = native::read_manifests(std::slice::from_ref(&dir)).expect("loads");
    let jobs: Vec<(&str, u64, Option<u64>, usize, bool)> = t
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.arrival, j.duration, j.min_pods, j.gang))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("default/a", 0, Some(100), 1, false),
            ("default/train", 10, Some(50), 2, true)
        ]
    );
    let r = simulate(&t, policy(), SimOptions::default(), &mut |_, _| {}).expect("runs");
    // The gang needs both nodes: it starts when `a` completes.
    assert_eq!(r.jobs[1].first_start, Some(100));
    assert_eq!(r.jobs[1].end, Some(150));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn workload_objects_time_their_pods_with_their_own_annotations() {
    let dir = temp_dir("native-workloads");
    let mut text = CLUSTER.to_string();
    text.push_str(&gpu_pod(
        "a",
        None,
        "lockstep.dev/arrival: '0', lockstep.dev/duration: 100s",
    ));
    // One group of 2 pods of 4 GPUs: a gang that needs both nodes.
    text.push_str(
        "---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: infer
  annotations: {lockstep.dev/arrival: '10', lockstep.dev/duration: '50'}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: c
          image: x
          resources:
            requests: {cpu: '1', nvidia.com/gpu: '4'}
            limits: {nvidia.com/gpu: '4'}
",
    );
    std::fs::write(dir.join("trace.yaml"), text).expect("write");
    let t = native::read_manifests(std::slice::from_ref(&dir)).expect("loads");
    let jobs: Vec<(&str, u64, Option<u64>, usize, bool)> = t
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.arrival, j.duration, j.min_pods, j.gang))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("default/a", 0, Some(100), 1, false),
            ("default/infer-0", 10, Some(50), 2, true)
        ]
    );
    let r = simulate(&t, policy(), SimOptions::default(), &mut |_, _| {}).expect("runs");
    assert_eq!(r.jobs[1].first_start, Some(100));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_annotation_names_file_and_document() {
    let dir = temp_dir("native-bad");
    let mut text = CLUSTER.to_string();
    text.push_str(&gpu_pod("a", None, "lockstep.dev/arrival: soon"));
    let file = dir.join("trace.yaml");
    std::fs::write(&file, text).expect("write");
    let err = native::read_manifests(std::slice::from_ref(&file)).expect_err("bad annotation");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: document 3 (Pod default/a): annotation lockstep.dev/arrival: \"soon\" is not a \
             number of seconds (write e.g. \"90\", \"15m\", \"2h\")",
            file.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_csv_rows_name_file_and_line() {
    let dir = temp_dir("csv-bad");
    let file = dir.join("philly.csv");
    std::fs::write(
        &file,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,a\n\n2017-10-09 07:01:55,66.0,1.5,66.0,a\n",
    )
    .expect("write");
    let err = philly::read_philly(&file, &philly::PhillyOptions::default()).expect_err("bad row");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:4: num_gpus: \"1.5\" is not a whole number of GPUs",
            file.display()
        )
    );
    let missing = dir.join("nope.csv");
    let err =
        philly::read_philly(&missing, &philly::PhillyOptions::default()).expect_err("missing file");
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read: ", missing.display()))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shipped_manifest_example_behaves_as_its_comment_says() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/examples/gang-waits.yaml");
    let t = native::read_manifests(&[path]).expect("loads");
    let r = simulate(&t, policy(), SimOptions::default(), &mut |_, _| {}).expect("runs");
    let train = t
        .jobs
        .iter()
        .position(|j| j.name == "default/train")
        .expect("the gang is a job");
    assert_eq!(r.jobs[train].first_start, Some(100));
    assert_eq!(r.jobs[train].end, Some(150));
    assert_eq!(r.jobs[train].waited, 90);
}
