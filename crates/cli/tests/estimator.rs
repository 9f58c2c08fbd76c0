//! `lockstep estimator` as a process: served over loopback to a real gRPC client, stopped by
//! SIGTERM; bad flags and manifests exit 2 with a message.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockstep_estimator::proto::pb;
use lockstep_estimator::proto::quantity::Quantity;
use lockstep_estimator::proto::service::estimator_client::EstimatorClient;
use prost::Message;

fn lockstep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
}

/// Stops the child on drop, whatever the test did.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serves_the_example_cluster_until_sigterm() {
    let mut child = Child(
        lockstep()
            .args([
                "estimator",
                "--cluster",
                "gpu-cluster",
                "-f",
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../examples/dra/cluster.yaml"
                ),
                "--address",
                "127.0.0.1:0",
                "--metrics-address",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The first stderr line names the address it listens on.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let address = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("the estimator says where it listens");
        if let Some(rest) = line.strip_prefix("lockstep estimator: cluster gpu-cluster on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let replicas = runtime.block_on(async {
        let mut c = tokio::time::timeout(
            Duration::from_secs(10),
            EstimatorClient::connect(format!("http://{address}")),
        )
        .await
        .unwrap()
        .unwrap();
        let cpu = Quantity {
            string: Some("8".into()),
        }
        .encode_to_vec();
        c.max_available_replicas(pb::MaxAvailableReplicasRequest {
            cluster: "gpu-cluster".into(),
            replica_requirements: Some(pb::ReplicaRequirements {
                namespace: "default".into(),
                resource_request_bytes: [("cpu".to_string(), cpu)].into(),
                ..Default::default()
            }),
            assumed_workloads: vec![],
        })
        .await
        .unwrap()
        .into_inner()
        .max_replicas
    });
    // Three nodes of 32 cpu, nothing running in cluster.yaml.
    assert_eq!(replicas, 12);
    let pid = child.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let out = lockstep()
        .args([
            "estimator",
            "--cluster",
            "c",
            "-f",
            "/nonexistent/member.yaml",
            "--address",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/member.yaml"), "{err}");
    // Neither -f nor --kubeconfig.
    let out = lockstep()
        .args(["estimator", "--cluster", "c"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A taken address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let out = lockstep()
        .args([
            "estimator",
            "--cluster",
            "c",
            "-f",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../examples/dra/cluster.yaml"
            ),
            "--address",
            &address,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--address {address}")), "{err}");
}
