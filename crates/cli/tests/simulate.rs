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
