#![allow(dead_code)] // each user reads only part of it
//! `lockstep estimator` started as a process on a free loopback port, stopped on drop.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The running estimator and the address it listens on.
pub struct Estimator(pub std::process::Child, pub String);

impl Drop for Estimator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The example GPU member's nodes, devices and claim templates (none of its pods): two
/// nodes with four DRA GPUs each.
pub fn gpu_member_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/federation/members/gpu-cluster");
    vec![dir.join("nodes.yaml"), dir.join("claims.yaml")]
}

/// Starts `lockstep estimator --cluster CLUSTER -f FILE...` and waits (30 s at most) for it
/// to say where it listens.
pub fn start(cluster: &str, files: &[PathBuf]) -> Estimator {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockstep"));
    cmd.args(["estimator", "--cluster", cluster]);
    for f in files {
        cmd.arg("-f").arg(f);
    }
    let child = cmd
        .args([
            "--address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockstep estimator");
    // Owned at once, so the process is stopped whatever happens next.
    let mut estimator = Estimator(child, String::new());
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = estimator.0.stderr.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let prefix = format!("lockstep estimator: cluster {cluster} on ");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("the estimator says where it listens within 30 s");
        if let Some(rest) = line.strip_prefix(&prefix) {
            estimator.1 = rest
                .split_whitespace()
                .next()
                .expect("an address")
                .to_string();
            return estimator;
        }
    }
}
