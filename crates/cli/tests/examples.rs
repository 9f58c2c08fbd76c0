//! Every example shipped in the repository loads with unknown fields treated as errors
//! (`--strict`), and `--strict` turns the warning about an unknown field into exit 2.

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

fn check(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stderr}");
    assert!(
        !stderr.contains("unknown field"),
        "{what} has unknown fields: {stderr}"
    );
}

#[test]
fn every_manifest_example_loads_strictly() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.ends_with("scheduler-config"))
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "{dirs:?}");
    for dir in dirs {
        let dir = dir.to_string_lossy().into_owned();
        check(
            &lockstep(&["schedule", "--strict", "-f", &dir, "-o", "json"]),
            &dir,
        );
    }
}

#[test]
fn every_simulation_example_loads_strictly() {
    let dir = root().join("crates/sim/data/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("crates/sim/data/examples")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let file = file.to_string_lossy().into_owned();
        check(
            &lockstep(&[
                "simulate",
                "--strict",
                "-f",
                &file,
                "--quiet",
                "--no-report",
            ]),
            &file,
        );
        check(&lockstep(&["schedule", "--strict", "-f", &file]), &file);
    }
}

#[test]
fn every_scheduler_config_example_loads() {
    // KubeSchedulerConfiguration files reject unknown fields themselves.
    let dir = root().join("examples/scheduler-config");
    for entry in std::fs::read_dir(dir).expect("examples/scheduler-config") {
        let file = entry.unwrap().path().to_string_lossy().into_owned();
        check(
            &lockstep(&["schedule", "-f", "examples/quickstart", "--config", &file]),
            &file,
        );
    }
}

#[test]
fn an_unknown_field_warns_and_strict_makes_it_an_error() {
    let file = "tests/bad-input/core-unknown-field-strict/input.yaml";
    let out = lockstep(&["schedule", "-f", file]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: ")
            && stderr.contains("Pod default/web: spec.containers[0].resource: unknown field"),
        "{stderr}"
    );
    for args in [
        vec!["schedule", "--strict", "-f", file],
        vec!["simulate", "--strict", "-f", file, "--quiet", "--no-report"],
    ] {
        let out = lockstep(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("spec.containers[0].resource: unknown field"),
            "{stderr}"
        );
    }
}

#[test]
fn the_table_sums_up_workload_objects() {
    let out = lockstep(&["schedule", "-f", "examples/ray"]);
    check(&out, "examples/ray");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("WORKLOADS\n  RayCluster ml/llm: 6/6 pods bound\n"),
        "{table}"
    );
    let out = lockstep(&[
        "schedule",
        "-f",
        "tests/scenarios/ray-per-group-gangs/input.yaml",
    ]);
    check(&out, "ray-per-group-gangs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("  RayCluster ml/rc: 3/5 pods bound\n"),
        "{table}"
    );
    // The JSON contract is unchanged: no field for it.
    let out = lockstep(&["schedule", "-f", "examples/ray", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(json.get("owners").is_none());
}
