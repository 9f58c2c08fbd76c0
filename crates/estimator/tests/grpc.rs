//! The service over loopback with a real tonic client: answers, bad requests, health and
//! metrics.

use std::sync::Arc;
use std::time::Duration;

use lockstep_estimator::member::Member;
use lockstep_estimator::proto::k8s;
use lockstep_estimator::proto::pb;
use lockstep_estimator::proto::quantity::Quantity;
use lockstep_estimator::proto::service::estimator_client::EstimatorClient;
use lockstep_estimator::service::State;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MEMBER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: a, labels: {zone: z1}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: b, labels: {zone: z2}}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status: {allocatable: {cpu: "4", memory: 32Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: a-gpus}
spec:
  driver: gpu.example.com
  nodeName: a
  pool: {name: a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    capacity: {memory: {value: 80Gi}}
  - name: gpu-1
    capacity: {memory: {value: 80Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
---
apiVersion: v1
kind: Pod
metadata:
  name: low-0
  namespace: ml
  labels: {resourcebinding.karmada.io/permanent-id: low}
spec:
  nodeName: a
  containers:
  - {name: c, image: i, resources: {requests: {cpu: "6"}}}
"#;

struct Server {
    address: std::net::SocketAddr,
    metrics: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

async fn start() -> Server {
    let loaded = lockstep_manifests::load_str("member.yaml", MEMBER).unwrap();
    let state = Arc::new(State::new(
        "member1",
        Some(Member::new(loaded.cluster).unwrap()),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let metrics_address = metrics.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(lockstep_estimator::server::serve(
        state,
        listener,
        Some(metrics),
        async {
            let _ = stopped.await;
        },
    ));
    Server {
        address,
        metrics: metrics_address,
        stop: Some(stop),
        task,
    }
}

impl Server {
    async fn client(&self) -> EstimatorClient<tonic::transport::Channel> {
        let url = format!("http://{}", self.address);
        tokio::time::timeout(Duration::from_secs(10), EstimatorClient::connect(url))
            .await
            .expect("connected within 10 s")
            .expect("connects")
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("stopped within 10 s")
            .unwrap()
            .unwrap();
    }
}

fn quantity(text: &str) -> Vec<u8> {
    Quantity {
        string: Some(text.to_string()),
    }
    .encode_to_vec()
}

fn requirements(pairs: &[(&str, &str)]) -> pb::ReplicaRequirements {
    pb::ReplicaRequirements {
        namespace: "ml".into(),
        resource_request_bytes: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), quantity(v)))
            .collect(),
        ..Default::default()
    }
}

async fn max(
    c: &mut EstimatorClient<tonic::transport::Channel>,
    r: pb::ReplicaRequirements,
) -> Result<i32, tonic::Status> {
    c.max_available_replicas(pb::MaxAvailableReplicasRequest {
        cluster: "member1".into(),
        replica_requirements: Some(r),
        assumed_workloads: vec![],
    })
    .await
    .map(|r| r.into_inner().max_replicas)
}

#[tokio::test]
async fn answers_over_grpc() {
    let server = start().await;
    let mut c = server.client().await;
    // a has 2 cpu free (6 taken), b is tainted.
    assert_eq!(max(&mut c, requirements(&[("cpu", "1")])).await.unwrap(), 2);
    let mut tolerating = requirements(&[("cpu", "1")]);
    tolerating.node_claim = Some(pb::NodeClaim {
        tolerations_bytes: vec![
            k8s::Toleration {
                key: Some("dedicated".into()),
                operator: Some("Equal".into()),
                value: Some("gpu".into()),
                effect: Some("NoSchedule".into()),
                toleration_seconds: None,
            }
            .encode_to_vec(),
        ],
        ..Default::default()
    });
    assert_eq!(max(&mut c, tolerating.clone()).await.unwrap(), 6);
    let mut zoned = tolerating.clone();
    zoned.node_claim.as_mut().unwrap().node_affinity_bytes = k8s::NodeSelector {
        node_selector_terms: vec![k8s::NodeSelectorTerm {
            match_expressions: vec![k8s::NodeSelectorRequirement {
                key: Some("zone".into()),
                operator: Some("In".into()),
                values: vec!["z2".into()],
            }],
            match_fields: vec![],
        }],
    }
    .encode_to_vec();
    assert_eq!(max(&mut c, zoned).await.unwrap(), 4);
    // DRA: two 80Gi GPUs on a, each replica one GPU with >= 40Gi; 2 cpu free on a.
    let mut gpu = requirements(&[("cpu", "500m")]);
    gpu.resource_claim_refs = vec![pb::ResourceClaimReference {
        resource_claim_template_name: "one-gpu".into(),
        resource_claim_name: String::new(),
    }];
    assert_eq!(max(&mut c, gpu).await.unwrap(), 2);
    // Assumed workloads are placed first: 1 cpu of a's 2.
    let assumed = pb::AssumedWorkload {
        namespace: "ml".into(),
        components: vec![pb::Component {
            name: "main".into(),
            replica_requirements: Some(pb::ComponentReplicaRequirements {
                resource_request_bytes: [("cpu".to_string(), quantity("1"))].into(),
                ..Default::default()
            }),
            replicas: 1,
        }],
    };
    let n = c
        .max_available_replicas(pb::MaxAvailableReplicasRequest {
            cluster: "member1".into(),
            replica_requirements: Some(requirements(&[("cpu", "1")])),
            assumed_workloads: vec![assumed],
        })
        .await
        .unwrap()
        .into_inner()
        .max_replicas;
    assert_eq!(n, 1);
    // Sets of 1 x 1 cpu + 1 x 500m, tolerating b; a set's replicas may be on different
    // nodes: set 1 on a (500m left), set 2's leader on b and its worker in a's 500m, sets
    // 3 and 4 on b (3 cpu).
    let component = |name: &str, cpu: &str| pb::Component {
        name: name.into(),
        replica_requirements: Some(pb::ComponentReplicaRequirements {
            node_claim: tolerating.node_claim.clone(),
            resource_request_bytes: [("cpu".to_string(), quantity(cpu))].into(),
            ..Default::default()
        }),
        replicas: 1,
    };
    let sets = c
        .max_available_component_sets(pb::MaxAvailableComponentSetsRequest {
            cluster: "member1".into(),
            components: vec![component("leader", "1"), component("worker", "500m")],
            namespace: "ml".into(),
            assumed_workloads: vec![],
        })
        .await
        .unwrap()
        .into_inner()
        .max_sets;
    assert_eq!(sets, 4);
    // SelectVictims: 4 cpu on a needs binding "low" gone.
    let v = c
        .select_victims(pb::SelectVictimsRequest {
            cluster: "member1".into(),
            preemptor_replica_requirements: Some(requirements(&[("cpu", "4")])),
            preemptor_replicas: 1,
            candidates: vec![pb::VictimCandidate {
                binding_permanent_id: "low".into(),
            }],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(v.feasible);
    assert_eq!(v.selected_victims.len(), 1);
    assert_eq!(v.selected_victims[0].binding_permanent_id, "low");
    server.stop().await;
}

#[tokio::test]
async fn bad_requests_are_invalid_arguments() {
    let server = start().await;
    let mut c = server.client().await;
    let e = c
        .max_available_replicas(pb::MaxAvailableReplicasRequest {
            cluster: "elsewhere".into(),
            replica_requirements: Some(requirements(&[("cpu", "1")])),
            assumed_workloads: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("\"elsewhere\""), "{}", e.message());
    assert!(e.message().contains("\"member1\""), "{}", e.message());

    let mut r = requirements(&[]);
    r.resource_request_bytes
        .insert("memory".into(), vec![0x0a, 0x09, b'1']);
    let e = max(&mut c, r).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message()
            .contains("replicaRequirements.resourceRequestBytes[\"memory\"]"),
        "{}",
        e.message()
    );
    let e = max(&mut c, requirements(&[("cpu", "a lot")]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);

    let e = c
        .select_victims(pb::SelectVictimsRequest {
            cluster: "member1".into(),
            preemptor_replica_requirements: Some(requirements(&[("cpu", "1")])),
            preemptor_replicas: -3,
            candidates: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("-3"), "{}", e.message());
    let e = c
        .max_available_component_sets(pb::MaxAvailableComponentSetsRequest {
            cluster: "member1".into(),
            components: vec![pb::Component {
                name: "w".into(),
                replica_requirements: None,
                replicas: -1,
            }],
            namespace: "ml".into(),
            assumed_workloads: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("components[0] (\"w\")"),
        "{}",
        e.message()
    );
    let e = c
        .get_unschedulable_replicas(pb::UnschedulableReplicasRequest {
            cluster: "member1".into(),
            resource: Some(pb::ObjectReference::default()),
            unschedulable_threshold: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    // The server still answers.
    assert_eq!(max(&mut c, requirements(&[("cpu", "1")])).await.unwrap(), 2);
    server.stop().await;
}

async fn http_get(address: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(address),
    )
    .await
    .unwrap()
    .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

#[tokio::test]
async fn health_and_metrics() {
    let server = start().await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", server.address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let service = "github.com.karmada_io.karmada.pkg.estimator.service.Estimator";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .map(|r| r.into_inner().status)
            .ok();
        if status == Some(tonic_health::pb::health_check_response::ServingStatus::Serving as i32) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not SERVING: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c = server.client().await;
    max(&mut c, requirements(&[("cpu", "1")])).await.unwrap();
    let _ = max(&mut c, requirements(&[("cpu", "-1")])).await;
    let text = http_get(server.metrics, "/metrics").await;
    assert!(
        text.contains(
            "lockstep_estimator_requests_total{method=\"MaxAvailableReplicas\",result=\"ok\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "lockstep_estimator_requests_total{method=\"MaxAvailableReplicas\",result=\"invalid_argument\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "lockstep_estimator_request_duration_seconds_count{method=\"MaxAvailableReplicas\"} 2"
        ),
        "{text}"
    );
    assert!(
        http_get(server.metrics, "/readyz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    server.stop().await;
}
