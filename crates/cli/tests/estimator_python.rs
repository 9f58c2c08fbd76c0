//! `lockstep estimator` asked by a client from outside the project: Python's grpcio, with
//! stubs compiled by grpcio-tools from `crates/estimator/proto` and requests encoded by
//! Python's protobuf runtime (`support/estimator_client.py`). Karmada's own Go client
//! cannot be had here (the Go module proxy refuses github.com/karmada-io/karmada).
//!
//! The test makes what it needs: a virtual environment under the target directory with
//! grpcio, grpcio-tools and protobuf at pinned versions from PyPI (once; later runs reuse
//! it). It needs `python3` with the `venv` module (Debian: python3-venv).

#[path = "support/estimator_process.rs"]
mod estimator_process;

use std::path::{Path, PathBuf};
use std::process::Command;

const PACKAGES: [&str; 3] = ["grpcio==1.85.3", "grpcio-tools==1.85.1", "protobuf==7.36.2"];

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The virtual environment's python, made and filled on first use.
fn python() -> PathBuf {
    let env = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-grpc");
    let python = env.join("bin/python");
    let ready = env.join(PACKAGES.join(" ").replace(['=', ' '], "_"));
    if !ready.exists() {
        let _ = std::fs::remove_dir_all(&env);
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&env),
            "python3 -m venv (install python3 and python3-venv)",
        );
        run(
            Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--timeout", "60"])
                .args(PACKAGES),
            "pip install from PyPI",
        );
        std::fs::write(&ready, "").unwrap();
    }
    python
}

#[test]
fn a_python_grpc_client_gets_exact_answers() {
    let python = python();
    let stubs =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stubs-{}", std::process::id()));
    std::fs::create_dir_all(&stubs).unwrap();
    let protos = Path::new(env!("CARGO_MANIFEST_DIR")).join("../estimator/proto");
    let files = [
        "k8s/core.proto",
        "k8s/quantity.proto",
        "pkg/estimator/pb/estimator.proto",
        "pkg/estimator/service/service.proto",
    ];
    run(
        Command::new(&python)
            .args(["-m", "grpc_tools.protoc"])
            .arg(format!("-I{}", protos.display()))
            .arg(format!("--python_out={}", stubs.display()))
            .arg(format!("--grpc_python_out={}", stubs.display()))
            .args(files),
        "grpc_tools.protoc on crates/estimator/proto",
    );

    let estimator = estimator_process::start("gpu-cluster", &estimator_process::gpu_member_files());
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/estimator_client.py");
    let out = run(
        Command::new(&python)
            .arg(client)
            .arg(&estimator.1)
            .arg(&stubs),
        "the Python client",
    );
    drop(estimator);
    let _ = std::fs::remove_dir_all(&stubs);

    let answers: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    // Two nodes with four GPUs each; CPU and memory would allow 32.
    assert_eq!(answers["gpu_replicas"], 8, "{answers}");
    assert_eq!(answers["gpu_replicas_again"], 8, "{answers}");
    assert_eq!(answers["nowhere_replicas"], 0, "{answers}");
    // 64 CPUs a node (110 pod slots), two nodes.
    assert_eq!(answers["tolerating_replicas"], 128, "{answers}");
    assert_eq!(answers["bad"], "INVALID_ARGUMENT", "{answers}");
    assert!(
        answers["bad_message"]
            .as_str()
            .is_some_and(|m| m.contains("cpu")),
        "the message names the resource: {answers}"
    );
    assert_eq!(answers["other"], "INVALID_ARGUMENT", "{answers}");
}
