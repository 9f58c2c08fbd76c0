//! `lockstep simulate` through the binary: the report is written, the same seed prints the
//! same metrics, and a bad trace row is bad input.

use std::process::Command;

fn lockstep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-cli-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn embedded_scenario_writes_the_report_and_is_deterministic() {
    let out = temp_dir("report");
    let run = |dir: &std::path::Path| {
        lockstep()
            .args(["simulate", "--jobs", "40", "--quiet", "-o", "json", "--out"])
            .arg(dir)
            .output()
            .expect("run lockstep simulate")
    };
    let first = run(&out);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let metrics: serde_json::Value = serde_json::from_slice(&first.stdout).expect("json on stdout");
    assert_eq!(metrics["trace"]["jobs"], 40);
    for file in ["index.html", "metrics.json", "timing.json"] {
        assert!(out.join(file).is_file(), "{file} not written");
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<svg"), "the report has charts");
    let second = run(&out);
    assert_eq!(first.stdout, second.stdout, "same seed, same metrics");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bad_trace_row_is_bad_input_naming_file_and_line() {
    let dir = temp_dir("bad-row");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("philly.csv");
    std::fs::write(
        &csv,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,abc,1,66.0,x\n",
    )
    .unwrap();
    let out = lockstep()
        .args(["simulate", "--quiet", "--no-report", "--philly"])
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("philly.csv:2"), "{stderr}");
    assert!(stderr.contains("duration"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary copied to a directory of its own, run there with nothing but PATH set.
fn copied_binary(name: &str) -> (std::path::PathBuf, impl Fn(&[&str]) -> std::process::Output) {
    let dir = temp_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("lockstep");
    std::fs::copy(env!("CARGO_BIN_EXE_lockstep"), &bin).expect("copy the binary");
    let cwd = dir.clone();
    let run = move |args: &[&str]| {
        Command::new(&bin)
            .args(args)
            .current_dir(&cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .expect("run the copied binary")
    };
    (dir, run)
}

#[test]
fn a_copied_binary_carries_its_trace_data() {
    // The data must be inside the binary, not found through a path into the source tree.
    let sim_data = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sim/data")
        .canonicalize()
        .expect("the source tree's data");
    let binary = std::fs::read(env!("CARGO_BIN_EXE_lockstep")).unwrap();
    let needle = sim_data.to_string_lossy().into_owned().into_bytes();
    assert!(
        !binary.windows(needle.len()).any(|w| w == needle.as_slice()),
        "the binary names {}",
        sim_data.display()
    );

    let (dir, run) = copied_binary("copied");
    let ok = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        )
    };
    ok(&run(&[
        "simulate",
        "--quiet",
        "--no-report",
        "--jobs",
        "30",
    ]));
    let out = run(&[
        "simulate",
        "--openb",
        "--fragmentation",
        "0.2",
        "--no-report",
        "-o",
        "json",
    ]);
    ok(&out);
    let metrics: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        metrics["trace"]["name"],
        "openb_pod_list_default.csv on openb_node_list_gpu_node.csv"
    );
    assert!(
        metrics["fgdReference"].is_object(),
        "the paper's curves are built in too: {}",
        metrics["fgdReference"]
    );
    let out = run(&["simulate", "--tiresias", "--no-report", "--quiet"]);
    ok(&out);
    let out = run(&[
        "simulate",
        "--philly",
        "--max-jobs",
        "50",
        "--no-report",
        "--quiet",
    ]);
    ok(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn data_dir_replaces_the_built_in_data() {
    let (dir, run) = copied_binary("data-dir");
    let data = dir.join("data");
    std::fs::create_dir_all(data.join("tiresias")).unwrap();
    std::fs::write(
        data.join("tiresias/60_job.csv"),
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n1,2,0,1,m,100,1\n",
    )
    .unwrap();
    std::fs::write(
        data.join("tiresias/cluster_spec.csv"),
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,2,4,32,128\n",
    )
    .unwrap();
    let data_arg = data.to_string_lossy().into_owned();
    let out = run(&[
        "simulate",
        "--tiresias",
        "--data-dir",
        &data_arg,
        "--no-report",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metrics: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        metrics["trace"]["jobs"], 1,
        "the directory's trace, not the built-in one"
    );
    // A data directory without the file asked for names the path it looked at.
    let out = run(&[
        "simulate",
        "--openb",
        "--data-dir",
        &data_arg,
        "--no-report",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("openb/openb_node_list_all_node.csv: cannot read"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sim/data/examples")
        .join(name)
}

fn with_stdin(args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = lockstep()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lockstep");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn manifests_on_stdin_replay_as_from_a_file() {
    let file = example("gang-waits.yaml");
    let from_file = lockstep()
        .args(["simulate", "--no-report", "-o", "json", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        from_file.status.success(),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    let text = std::fs::read(&file).unwrap();
    let from_stdin = with_stdin(&["simulate", "--no-report", "-o", "json", "-f", "-"], &text);
    assert!(
        from_stdin.status.success(),
        "{}",
        String::from_utf8_lossy(&from_stdin.stderr)
    );
    let a: serde_json::Value = serde_json::from_slice(&from_file.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&from_stdin.stdout).unwrap();
    assert_eq!(
        a["runs"], b["runs"],
        "the same jobs, arrivals and durations"
    );
    assert_eq!(b["trace"]["name"], "manifests <stdin>");
}

#[test]
fn metrics_print_as_yaml_too() {
    let run = |format: &str| {
        let out = lockstep()
            .args([
                "simulate",
                "--jobs",
                "20",
                "--quiet",
                "--no-report",
                "-o",
                format,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let json: serde_json::Value = serde_json::from_slice(&run("json")).unwrap();
    let yaml: serde_json::Value = serde_norway::from_slice(&run("yaml")).expect("YAML");
    assert_eq!(json, yaml);
}

#[test]
fn manifests_without_arrivals_say_what_to_add() {
    let text = b"apiVersion: v1
kind: Node
metadata: {name: n}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, resources: {requests: {cpu: '1'}}}]
";
    let out = with_stdin(&["simulate", "--quiet", "--no-report", "-f", "-"], text);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("0 simulated seconds"), "{stderr}");
    assert!(stderr.contains("lockstep.dev/arrival"), "{stderr}");
    // With annotations there is nothing to say.
    let out = lockstep()
        .args(["simulate", "--quiet", "--no-report", "-f"])
        .arg(example("gang-waits.yaml"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("simulated seconds"));
}

/// Runs `lockstep simulate` on files written to a fresh directory (`$DIR` in an argument is
/// that directory), expects bad input (exit 2, nothing on stdout, one error line) and returns
/// stderr.
fn rejected(name: &str, files: &[(&str, &str)], args: &[&str]) -> String {
    let dir = temp_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    let out = lockstep()
        .args(["simulate", "--quiet", "--no-report"])
        .args(
            args.iter()
                .map(|a| a.replace("$DIR", &dir.display().to_string())),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
    assert!(out.stdout.is_empty(), "{name}: printed to stdout");
    assert_eq!(stderr.matches("error:").count(), 1, "{name}: {stderr}");
    stderr
}

const TIRESIAS_SPEC: &str =
    "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n";
const TIRESIAS_JOBS: &str = "job_id,num_gpu,submit_time,duration\n";
const OPENB_NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\n";
const OPENB_PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";
const PHILLY: &str = "timestamp,duration,num_gpus,gpu_time,cluster\n";

/// Sizes that turn into memory are bounded and checked before anything is allocated.
#[test]
fn sizes_beyond_the_limits_are_bad_input_before_allocating() {
    let tiresias = |spec: &str, jobs: &str| {
        rejected(
            "tiresias-size",
            &[
                ("spec.csv", &format!("{TIRESIAS_SPEC}{spec}\n")),
                ("jobs.csv", &format!("{TIRESIAS_JOBS}{jobs}\n")),
            ],
            &[
                "--tiresias",
                "$DIR/jobs.csv",
                "--cluster-spec",
                "$DIR/spec.csv",
            ],
        )
    };
    let e = tiresias("1,100000000,4,40,256", "0,1,0,10");
    assert!(
        e.contains("spec.csv:2: num_node_p_switch: 100000000 is more than 100000"),
        "{e}"
    );
    let e = tiresias("10000,10000,4,40,256", "0,1,0,10");
    assert!(
        e.contains("spec.csv:2: 10000 switches x 10000 nodes"),
        "{e}"
    );
    let e = tiresias("1,4,4,40,256", "0,4294967297,0,10");
    assert!(
        e.contains("jobs.csv:2: num_gpu: 4294967297 is more than 40000"),
        "{e}"
    );

    let e = rejected(
        "philly-nodes",
        &[(
            "philly.csv",
            &format!("{PHILLY}2017-10-09 07:01:55,66,1,66,x\n"),
        )],
        &["--philly", "$DIR/philly.csv", "--gpu-nodes", "4294967296"],
    );
    assert!(
        e.contains("--gpu-nodes 4294967296: more than 100000"),
        "{e}"
    );
    let e = rejected(
        "philly-job",
        &[(
            "philly.csv",
            &format!("{PHILLY}2017-10-09 07:01:55,66,1000000000,66,x\n"),
        )],
        &["--philly", "$DIR/philly.csv"],
    );
    assert!(
        e.contains("philly.csv:2: num_gpus: 1000000000 is more than 80000"),
        "{e}"
    );

    let e = rejected(
        "openb-node",
        &[
            (
                "nodes.csv",
                &format!("{OPENB_NODES}n0,32000,262144,4294967297,V100\n"),
            ),
            (
                "pods.csv",
                &format!("{OPENB_PODS}p0,1000,1024,1,1000,,LS,Running,0,10,0\n"),
            ),
        ],
        &[
            "--openb",
            "$DIR/pods.csv",
            "--openb-nodes",
            "$DIR/nodes.csv",
        ],
    );
    assert!(
        e.contains("nodes.csv:2: gpu: 4294967297 is more than 128"),
        "{e}"
    );

    let e = rejected("jobs", &[], &["--jobs", "1000000000000"]);
    assert!(e.contains("--jobs 1000000000000: more than 100000"), "{e}");
}

/// Numbers too large for the type they end up in are errors, not wrapped values.
#[test]
fn numbers_that_would_wrap_are_bad_input() {
    let openb_pod = |name: &str, num_gpu: &str| {
        rejected(
            name,
            &[
                (
                    "nodes.csv",
                    &format!("{OPENB_NODES}n0,32000,262144,8,V100\n"),
                ),
                (
                    "pods.csv",
                    &format!("{OPENB_PODS}p0,1000,1024,{num_gpu},1000,,LS,Running,0,10,0\n"),
                ),
            ],
            &[
                "--openb",
                "$DIR/pods.csv",
                "--openb-nodes",
                "$DIR/nodes.csv",
            ],
        )
    };
    // 2^32 + 1 used to become a claim for 1 GPU, 2^32 one for none.
    for n in ["4294967297", "4294967296", "18446744073709551617"] {
        let e = openb_pod("openb-num-gpu", n);
        assert!(
            e.contains(&format!("pods.csv:2: num_gpu: {n} is more than 128")),
            "{e}"
        );
    }
    let e = rejected(
        "philly-duration",
        &[(
            "philly.csv",
            &format!("{PHILLY}2017-10-09 07:01:55,18446744073709551615,1,66,x\n"),
        )],
        &["--philly", "$DIR/philly.csv"],
    );
    assert!(
        e.contains("philly.csv:2: duration: 18446744073709551615 is more than 3153600000"),
        "{e}"
    );
    let e = rejected(
        "tiresias-duration",
        &[(
            "jobs.csv",
            &format!("{TIRESIAS_JOBS}0,1,0,9223372036854775807\n"),
        )],
        &["--tiresias", "$DIR/jobs.csv"],
    );
    assert!(
        e.contains("jobs.csv:2: duration: 9223372036854775807 is more than 3153600000"),
        "{e}"
    );
    let e = rejected(
        "manifest-duration",
        &[(
            "pods.yaml",
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: \"1\", memory: 1Gi, pods: \"10\"}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {lockstep.dev/duration: \"18446744073709551615\"}\n\
             spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n",
        )],
        &["-f", "$DIR/pods.yaml"],
    );
    assert!(
        e.contains("annotation lockstep.dev/duration: \"18446744073709551615\" is more than 3153600000 seconds"),
        "{e}"
    );
}

#[test]
fn from_later_than_to_is_bad_input() {
    let e = rejected(
        "from-to",
        &[(
            "philly.csv",
            &format!("{PHILLY}2017-10-09 07:01:55,66,1,66,x\n"),
        )],
        &[
            "--philly",
            "$DIR/philly.csv",
            "--from",
            "2017-10-10",
            "--to",
            "2017-10-09",
        ],
    );
    assert!(
        e.contains("--from \"2017-10-10\" is not before --to \"2017-10-09\""),
        "{e}"
    );
}

/// A report directory that cannot be written is reported before the simulation runs.
#[test]
fn an_unwritable_report_directory_is_reported_before_the_run() {
    let dir = temp_dir("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    // A regular file where the directory should be: no permissions needed to make it fail.
    let blocker = dir.join("file");
    std::fs::write(&blocker, "").unwrap();
    let started = std::time::Instant::now();
    let out = lockstep()
        .args(["simulate", "--quiet", "--out"])
        .arg(blocker.join("report"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot write the report to"), "{stderr}");
    assert!(stderr.contains("--no-report"), "{stderr}");
    // The embedded scenario takes seconds even in a release build; the check comes first.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    let missing = dir.join("new").join("report");
    let out = lockstep()
        .args([
            "simulate",
            "--quiet",
            "--jobs",
            "1",
            "--philly",
            "/nonexistent.csv",
            "--out",
        ])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !dir.join("new").exists(),
        "the probe leaves no directory behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An object the engine refuses when it starts is reported once, with its file and document.
#[test]
fn an_invalid_object_in_a_manifest_trace_is_located_and_reported_once() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/bad-input/dra-invalid-cel-device-class/input.yaml");
    let out = lockstep()
        .args(["simulate", "--quiet", "--no-report", "-f"])
        .arg(&fixture)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("input.yaml (document 2): DeviceClass broken.example.com"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("invalid CEL expression").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_deeply_nested_config_is_refused_before_parsing() {
    let config = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let started = std::time::Instant::now();
    let e = rejected(
        "deep-config",
        &[("config.yaml", &config)],
        &["--config", "$DIR/config.yaml"],
    );
    assert!(
        e.contains("config.yaml (document 1): nested more than 100 levels deep"),
        "{e}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// A manifest trace is held to the same GPU limits as the trace files: a node of 10^18 GPUs
/// used to overflow the milli-GPU accounting.
#[test]
fn manifest_traces_are_held_to_the_gpu_limits() {
    let node = |gpus: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: gpu-node}}\n\
             status: {{allocatable: {{cpu: \"8\", memory: 8Gi, pods: \"10\", nvidia.com/gpu: \"{gpus}\"}}}}\n---\n"
        )
    };
    let pod = |gpus: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  \
             - {{name: c, resources: {{limits: {{nvidia.com/gpu: \"{gpus}\"}}}}}}\n"
        )
    };
    let e = rejected(
        "native-node-gpus",
        &[("t.yaml", &(node("1000000000000000000") + &pod("1")))],
        &["-f", "$DIR/t.yaml"],
    );
    assert!(
        e.contains(
            "t.yaml (document 1): Node gpu-node: nvidia.com/gpu 1000000000000000000: more than 128"
        ),
        "{e}"
    );
    let e = rejected(
        "native-pod-gpus",
        &[("t.yaml", &(node("8") + &pod("4294967297")))],
        &["-f", "$DIR/t.yaml"],
    );
    assert!(
        e.contains("t.yaml (document 2): Pod default/p: nvidia.com/gpu 4294967297: more than 128"),
        "{e}"
    );
}
